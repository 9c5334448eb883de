"""The ``autotune`` command: parses, prints, exits; the work happens in the layers below.

Example:
    $ autotune tune matmul --problem M=4096,N=4096,K=4096 --trials 60 --output best.json
    $ autotune export --to triton --output matmul_configs.py
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from autotune import cli_results
from autotune.cli_errors import err, one_line_errors
from autotune.cli_help import summarize_commands
from autotune.cli_options import (
    DEFAULT_STORAGE,
    DeviceOption,
    ProblemOption,
    SpaceOption,
    StorageOption,
    TimeoutOption,
    label_option_values,
    out,
    output_file,
    quiet_libraries,
)
from autotune.cli_parsing import (  # noqa: F401 - parse_* re-exported for callers
    UsageError,
    _parse_rename,
    parse_duration,
    parse_problem,
    parse_slo,
    problem_reads,
    workload_name,
    writable_output,
)
from autotune.cli_stdout import result_only
from autotune.process_end import end_process, process_started
from autotune.redact import redact, redact_url
from autotune.units import counted, readable

#: When this command's process started (:func:`process_started`): ``--time-budget`` counts
#: from here, so the interpreter's start, the heavy imports, the space's enumeration and the
#: storage's set-up are inside it.
COMMAND_STARTED = process_started()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find the fastest configuration for LLM workloads on GPUs.",
    pretty_exceptions_enable=False,
    # Click's plain layout: two columns that wrap every word at 80 columns; Typer's rich one
    # gave tune's help column 20 characters there and cut what did not fit with an ellipsis
    # ('tokens_per_s,peak_m…', '[default: sqlite:///autotune.…')
    rich_markup_mode=None,
)


def _select_device(device: str) -> dict[str, Any]:
    from autotune.device import detect_device

    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"--device: {device!r} is not one of auto, cuda, cpu")
    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # workers inherit it: trials run on the CPU
    try:
        return detect_device(device).as_dict()
    except RuntimeError as exc:
        raise UsageError(f"--device {device}: {exc}") from None


def _command_line(workload: str | None = None) -> str:
    """The command that reproduces this run, as stored in the study and its exports: with a
    storage URL's password as ``***``, and a workload file (``workload``, as typed) by its
    absolute path, so the line runs from any folder (the rest as typed)."""
    args = sys.argv[1:]
    if workload and workload.endswith(".py"):
        args = with_absolute_workload(args, workload, _options_taking_values())
    return redact("autotune " + shlex.join(redact_url(arg) for arg in args))


def _options_taking_values() -> frozenset[str]:
    """The option names of the running command that take a value (``--space``, not
    ``--no-cache``); none outside a command."""
    import click

    context = click.get_current_context(silent=True)
    if context is None:
        return frozenset()
    return frozenset(
        name
        for param in context.command.params
        if isinstance(param, click.Option) and not param.is_flag and not param.count
        for name in (*param.opts, *param.secondary_opts)
    )


def with_absolute_workload(args: list[str], workload: str, valued: frozenset[str]) -> list[str]:
    """``args`` (a command's, its name first) with the positional argument ``workload`` (a
    file as typed) by its absolute path; an option's value that reads the same is left.

    Example:
        >>> args = with_absolute_workload(["tune", "--space", "x.py", "./x.py", "--trials", "2"],
        ...                               "./x.py", frozenset({"--space", "--trials"}))
        >>> args[:3], args[3] == str(Path.cwd() / "x.py"), args[4:]
        (['tune', '--space', 'x.py'], True, ['--trials', '2'])
    """
    out, i = list(args), 1  # args[0]: the command's name
    while i < len(out):
        arg = out[i]
        if arg == "--":
            i += 1
            break
        if arg in valued:  # its value is the next argument
            i += 2
            continue
        if arg == workload and not arg.startswith("-"):
            out[i] = str(Path(workload).resolve())
            return out
        i += 1
    if i < len(out) and workload in out[i:]:  # after --
        j = out.index(workload, i)
        out[j] = str(Path(workload).resolve())
    return out


# ---------------------------------------------------------------------------------------------
@app.command()
@one_line_errors
@result_only
def tune(
    workload: Annotated[
        str | None,
        typer.Argument(
            help="A workload of `autotune workloads` (default: train-step), or a .py file "
            "that defines OBJECTIVE."
        ),
    ] = None,
    space: SpaceOption = None,
    problem: ProblemOption = [],  # noqa: B006
    objective: Annotated[
        str | None,
        typer.Option(help="Metric(s) to optimise, e.g. tokens_per_s,peak_memory_gb:min."),
    ] = None,
    sampler: Annotated[
        str,
        typer.Option(
            help="auto (bo over a discrete space of one objective, bo-pareto of several, "
            "else tpe) or a registered sampler: bo, gp-ei, bo-pareto, tpe, tpe-univariate, "
            "random, gp, cmaes, nsga2, grid."
        ),
    ] = "auto",
    trials: Annotated[
        int | None,
        typer.Option(
            help="Launched trials the study should reach (earlier runs count); a "
            "space searched by group: each group's study."
        ),
    ] = None,
    time_budget: Annotated[
        str | None,
        typer.Option(
            help="Wall time for this run: 90s, 10m, 1h30m, 2d; searched by group, each group "
            "as it starts gets an equal share of the time left."
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(min=0, max=2**32 - 1, help="Seed of the sampler.")
    ] = None,
    storage: StorageOption = DEFAULT_STORAGE,
    study: Annotated[str | None, typer.Option(help="Study name; an existing one resumes.")] = None,
    trial_timeout: TimeoutOption = None,
    output: Annotated[
        Path | None,
        typer.Option(parser=output_file, help="Write the best config here (JSON/YAML)."),
    ] = None,
    device: DeviceOption = "auto",
    replay: Annotated[
        Path | None, typer.Option(help="Replay a recorded CSV instead of measuring.")
    ] = None,
    params: Annotated[
        str | None, typer.Option(help="With --replay: the parameter columns.")
    ] = None,
    metric: Annotated[str | None, typer.Option(help="With --replay: the metric column.")] = None,
    maximize: Annotated[
        bool,
        typer.Option(
            "--maximize/--minimize",
            help="With --replay: whether the --metric column is better larger (--maximize) or "
            "smaller (--minimize, e.g. a latency).",
        ),
    ] = True,
    finish_top: Annotated[
        int,
        typer.Option(min=0, help="Re-measure this many best configs in a fresh process (0: off)."),
    ] = 3,
    finish_rounds: Annotated[
        int,
        typer.Option(
            min=1,
            help="Interleaved rounds of the finish (one: single readings, which never replace "
            "the untuned default).",
        ),
    ] = 3,
    warm_start: Annotated[
        str,
        typer.Option(help="Start from the best configs of a stored sweep: auto, a study, off."),
    ] = "auto",
    executor: Annotated[
        str,
        typer.Option(
            help="Where trials run: local (worker processes, one per GPU), ray, or inline "
            "(in this process on a simulated clock: replay)."
        ),
    ] = "local",
    workers: Annotated[
        int | None,
        typer.Option(help="Trials in flight (default: one per GPU; ray: what the cluster holds)."),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(help="With --executor ray: auto or HOST:PORT (default: start a local Ray)."),
    ] = None,
    gpus_per_trial: Annotated[
        float | None,
        typer.Option(help="With --executor ray: GPUs per trial (default 1 on a GPU, else 0)."),
    ] = None,
    compile_ahead: Annotated[
        int | None,
        typer.Option(
            help="Processes compiling upcoming configs while others measure (0: off; "
            "default: up to 16 for a Triton workload on local GPUs, else 0)."
        ),
    ] = None,
    slo: Annotated[
        list[str] | None,
        typer.Option(
            help="Limits on measured metrics, e.g. ttft_p99_ms=500,tpot_p99_ms=50 (or one "
            "--slo each): a trial over one is slo_violated and told to the sampler as "
            "infeasible. A serving "
            "workload's goodput counts the requests within the same TTFT and TPOT limits "
            "(unless --problem sets slo_ttft_ms / slo_tpot_ms)."
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache/--no-cache",
            help="Answer from a stored sweep of the same kernel source, problem, device and "
            "toolchain, if there is one.",
        ),
    ] = True,
) -> None:
    """Run a tuning sweep and report the best config found. A --space composed of prefixed
    includes of the workload's space is searched by group: a sweep and study per distinct
    (include, problem), then each prefix's winner."""
    quiet_libraries()
    from autotune.cli_sweep import run_settings
    from autotune.group_resume import declared_workload, resumed_workload
    from autotune.grouped_sweep import searched_by_group, tune_by_group
    from autotune.sweep_setup import build_settings

    limits = parse_slo(slo)
    problem_values = parse_problem(problem)
    reads = {
        "--replay": replay,
        "--space": space,
        "the workload's file": workload if workload and workload.endswith(".py") else None,
        # a trace: written over, its requests were lost (read only where there is an output)
        **(problem_reads(problem_values) if output else {}),
    }
    # before the sweep spends its time, not after; a resumed study reads what it stored too
    writable_output(output, storage=storage, inputs=reads, studies=[study] if study else [])
    budget_s = parse_duration(time_budget)
    from autotune.objectives.external import before_budget_ends

    # a workload's own set-up code (its import, default_config, ...) stops at the budget's end
    before_budget_ends(None if budget_s is None else COMMAND_STARTED + budget_s)
    asked = dict(
        workload=workload_name(workload),
        space=space,
        problem=problem_values,
        objective=objective,
        sampler=sampler,
        trials=trials,
        time_budget_s=budget_s,
        seed=seed,
        storage=storage,
        study=study,
        trial_timeout_s=trial_timeout,
        device=_select_device(device),
        replay=replay,
        params=params,
        metric=metric,
        maximize=maximize,
        command=_command_line(workload),
        warm_start=warm_start,
        executor=executor,
        workers=workers,
        ray_address=address,
        gpus_per_trial=gpus_per_trial,
        compile_ahead=compile_ahead,
        slo=limits,
    )
    ending = {"cache": cache, "finish_top": finish_top, "finish_rounds": finish_rounds}
    asked["workload"] = resumed_workload(asked)  # a search by group's, resumed by --study
    asked["workload"] = declared_workload(asked)  # else the --space file's own
    parts = searched_by_group(asked)
    if parts:
        tune_by_group(parts, asked, output, started=COMMAND_STARTED, **ending)
    else:
        run_settings(build_settings(**asked), output, budget_from=COMMAND_STARTED, **ending)


# the commands that read a stored sweep, listed after tune
cli_results.register(app)


@app.command()
@one_line_errors
def record(
    workload: Annotated[str, typer.Argument(help="A workload (autotune workloads) or a FILE.py.")],
    output: Annotated[
        Path, typer.Option(parser=output_file, help="CSV to write (resumes if it exists).")
    ],
    space: SpaceOption = None,
    problem: ProblemOption = [],  # noqa: B006
    limit: Annotated[
        int | None, typer.Option(min=1, help="Measure this many configs of the grid.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed for --limit's choice.")] = 0,
    jobs: Annotated[
        int, typer.Option(min=1, help="Processes that compile kernels ahead of timing.")
    ] = 1,
    trial_timeout: Annotated[
        float, typer.Option(min=0.001, help="Seconds one config may take.")
    ] = 300.0,
    device: DeviceOption = "auto",
) -> None:
    """Measure every config of a small grid on this device and write a replayable CSV."""
    quiet_libraries()
    writable_output(output, inputs={"--space": space})
    from autotune.problem_text import problem_text
    from autotune.record import RecordStopped, check_recordable, record_grid, resumed_rows
    from autotune.workload_checks import check_objective_hooks
    from autotune.workload_setup import built_objective, resolve_workload

    device_info = _select_device(device)
    workload = workload_name(workload)
    typed = parse_problem(problem)
    objective_cls, space_obj, problem_values = resolve_workload(
        workload, space, dict(typed), device_info
    )
    check_recordable(space_obj)  # a float parameter has no grid to count: one line, not a crash
    # as a sweep checks them: a problem value the objective refuses (lr=-1), a server command
    # whose program is not there, would crash every config of the grid, one by one
    objective_obj, _ = built_objective(workload, objective_cls, problem_values, typed)
    check_objective_hooks(objective_obj, objective_cls, workload, space_obj, None, trial_timeout,
                          typed)  # fmt: skip
    # an --output it cannot resume from is refused before a word is said (one line)
    resumed_rows(Path(output), workload, problem_values, space_obj, device_info)
    at = problem_text(problem_values)  # as a sweep's header: 'M=16, N=64', not a dict
    err.print(
        f"recording {workload}{f' {at}' if at else ''} on {device_info['name']} "
        f"({counted(space_obj.grid_size(), 'config')} before constraints) -> {output}",
        markup=False,  # a value's "[/models/m]" is text, not a closing tag (a MarkupError)
        highlight=False,
        soft_wrap=True,
    )

    written: list[int] = []  # the rows this run measured (a resume skips those it holds)

    def on_row(i: int, n: int, row: dict[str, Any]) -> None:
        written.append(i)
        metric = next(iter(objective_cls.directions))
        value = row.get(metric)
        # named: a bare share ("0.0%") read as the recording's progress
        shown = f"{metric} {readable(metric, value)}" if isinstance(value, float) else row["status"]
        err.print(f"[{i}/{n}] {shown}", highlight=False)

    try:
        table = record_grid(
            workload,
            problem_values,
            space_obj,
            device_info,
            output,
            limit=limit,
            seed=seed,
            jobs=jobs,
            timeout_s=trial_timeout,
            on_row=on_row,
        )
    except KeyboardInterrupt:  # a recording's rows are in its table, not in a study
        err.print(f"interrupted; each config measured is in {output}: the same command "
                  "resumes the recording", highlight=False, soft_wrap=True)  # fmt: skip
        raise typer.Exit(130) from None
    except RecordStopped as stop:  # as a sweep stops: every config would fail alike
        err.print(f"error: {stop}; {output} holds the {counted(len(written), 'row')} it "
                  "measured", highlight=False, markup=False, soft_wrap=True)  # fmt: skip
        raise typer.Exit(1) from None
    out.print(recorded_line(len(written), output, table["status"].value_counts().to_dict()))


def recorded_line(written: int, output: Path, states: dict[str, int]) -> str:
    """The closing line of ``autotune record``: the rows this run wrote, then what the table
    holds by state (a resume said 'wrote 12 rows' of the table's 12, 2 of them its own).

    Example:
        >>> recorded_line(2, Path("g.csv"), {"ok": 11, "crashed": 1})
        'wrote 2 rows to g.csv; it holds 12: ok 11, crashed 1'
        >>> recorded_line(0, Path("g.csv"), {"ok": 4})
        'wrote no row to g.csv: it holds every config asked already (4: ok 4)'
    """
    held = f"{sum(states.values())}: " + ", ".join(f"{k} {v}" for k, v in states.items())
    if not written:
        return f"wrote no row to {output}: it holds every config asked already ({held})"
    return f"wrote {written} row{'s' * (written != 1)} to {output}; it holds {held}"


@app.command()
@one_line_errors
def workloads() -> None:
    """List the workloads a sweep can tune (and those installed packages register)."""
    from autotune.objectives import WORKLOADS
    from autotune.objectives.external import plugin_help, plugin_workloads

    for entry in WORKLOADS.values():
        out.print(f"{entry.name:<12} {entry.help}", highlight=False, soft_wrap=True)
    for name, module in sorted(plugin_workloads().items()):
        shadowed = "; not used: a built-in workload has its name" if name in WORKLOADS else ""
        said = plugin_help(module)
        out.print(f"{name:<12} {said + ' ' if said else ''}(plugin: {module}{shadowed})",
                  highlight=False, markup=False, soft_wrap=True)  # fmt: skip
    out.print("or a .py file that defines OBJECTIVE: autotune tune ./my_objective.py",
              highlight=False, soft_wrap=True)  # fmt: skip


@app.command()
@one_line_errors
def devices() -> None:
    """Show the device trials would run on, with its software fingerprint."""
    from autotune.device import detect_device, read_telemetry

    out.print_json(data={**detect_device().as_dict(), "telemetry": read_telemetry()})


# commands that live in modules of their own, added to this app (also when run as __main__)
from autotune import cli_reports  # noqa: E402

cli_reports.register(app)
label_option_values(app)  # every option's value: PATH, KEY=VALUE, INTEGER, not <list[str]>
summarize_commands(app)  # each command's line in `autotune --help`: its docstring's summary


def run(args: Sequence[str] | None = None) -> int:
    """Run one ``autotune`` command in this process and return its exit code (``args``: the
    command line after ``autotune``; None: ``sys.argv``). A usage error the option parser finds
    (a value out of range, an unknown option) is one line naming the option, exit code 2, as
    every other bad input. :func:`main` ends the process with this code.

    Example:
        >>> run(["export", "--to", "xml", "--storage", "sqlite:///runs.db"])  # doctest: +SKIP
        2
    """
    try:  # Typer >= 0.22 carries its own Click
        from typer._click.exceptions import NoArgsIsHelpError
        from typer._click.exceptions import UsageError as ClickUsageError
    except ImportError:  # pragma: no cover - an older Typer on Click
        from click.exceptions import NoArgsIsHelpError
        from click.exceptions import UsageError as ClickUsageError

    from autotune.driver.signals import stop_signals_recorded

    # Ctrl-C, SIGTERM and SIGHUP end any command alike (each command's KeyboardInterrupt path:
    # "interrupted", exit 130, workers closed), and are recorded: one whose KeyboardInterrupt
    # CPython dropped still stops a sweep's finish or a search by group (a sweep sets its own
    # handlers while it runs and puts these back)
    with stop_signals_recorded():
        try:
            # an exit code is returned, not raised; given args are a command of `autotune`
            named = {} if args is None else {"args": list(args), "prog_name": "autotune"}
            code = app(standalone_mode=False, **named)
        except typer.Abort:
            err.print("interrupted")
            return 130
        except NoArgsIsHelpError as exc:  # `autotune` alone: the help
            exc.show()
            return exc.exit_code
        except ClickUsageError as exc:
            where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
            err.print(f"error: {where}{exc.format_message()}", markup=False, highlight=False,
                      soft_wrap=True)  # fmt: skip
            return 2
    return code if isinstance(code, int) else 0


def main() -> None:
    """The ``autotune`` command: :func:`run`, then the process ends with its exit code."""
    end_process(run())


if __name__ == "__main__":
    main()
