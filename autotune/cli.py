"""The ``autotune`` command: parses, prints, exits; the work happens in the layers below.

Example:
    $ autotune tune matmul --problem M=4096,N=4096,K=4096 --trials 60 --output best.json
    $ autotune export --to triton --output matmul_configs.py
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from autotune import cli_results
from autotune.cli_errors import err, one_line_errors
from autotune.cli_options import (
    DEFAULT_STORAGE,
    DeviceOption,
    ProblemOption,
    SpaceOption,
    StorageOption,
    TimeoutOption,
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
    workload_name,
    writable_output,
)
from autotune.cli_results import print_best
from autotune.cli_stdout import result_only
from autotune.process_end import end_process, process_started
from autotune.redact import redact, redact_url
from autotune.units import readable

if TYPE_CHECKING:
    from autotune.driver import SweepSettings

#: When this command's process started (:func:`process_started`): ``--time-budget`` counts
#: from here, so the interpreter's start, the heavy imports, the space's enumeration and the
#: storage's set-up are inside it.
COMMAND_STARTED = process_started()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find the fastest configuration for LLM workloads on GPUs.",
    pretty_exceptions_enable=False,
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
        typer.Option(help="Launched trials the study should reach (earlier runs count)."),
    ] = None,
    time_budget: Annotated[
        str | None, typer.Option(help="Wall time for this run: 90s, 10m, 1h.")
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
    maximize: Annotated[bool, typer.Option("--maximize/--minimize", help="With --replay.")] = True,
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
        str | None,
        typer.Option(
            help="Limits on measured metrics, e.g. ttft_p99_ms=500,tpot_p99_ms=50: a trial "
            "over one is slo_violated and told to the sampler as infeasible. A serving "
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
    """Run a tuning sweep and report the best config found."""
    quiet_libraries()
    from autotune.driver import Sweep
    from autotune.progress import ProgressDisplay
    from autotune.sweep_setup import build_settings

    limits = parse_slo(slo)
    reads = {
        "--replay": replay,
        "--space": space,
        "the workload's file": workload if workload and workload.endswith(".py") else None,
    }
    # before the sweep spends its time, not after; a resumed study reads what it stored too
    writable_output(output, storage=storage, inputs=reads, studies=[study] if study else [])
    budget_s = parse_duration(time_budget)
    from autotune.objectives.external import before_budget_ends

    # a workload's own set-up code (its import, default_config, ...) stops at the budget's end
    before_budget_ends(None if budget_s is None else COMMAND_STARTED + budget_s)
    settings = build_settings(
        workload=workload_name(workload),
        space=space,
        problem=parse_problem(problem),
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
    # the space a workload's class names (beside its file) is known only now, as are the
    # modules the sweep runs (a kernel file beside the workload's, a built-in kernel)
    writable_output(output, inputs={"the space file the sweep reads": settings.space.source,
                                    **{f"the space file {f} the sweep's space includes": f
                                       for f in settings.space.includes},
                                    **_modules_run(settings)})  # fmt: skip
    for note in settings.notes:
        err.print(f"note: {note}", highlight=False, soft_wrap=True)
    from autotune.objectives import get_objective

    measures = get_objective(settings.workload).measures
    finishing = measures and len(settings.objectives) == 1
    if cache and settings.fingerprint and settings.study_name is None:
        from autotune.storage import open_storage
        from autotune.tuning_cache import cached_study

        unfinished: list = []  # a matching sweep stopped in its finish: said, not used
        wants_finish = bool(finish_top) and finishing
        hit = cached_study(open_storage(settings.storage), settings.fingerprint["key"],
                           settings.sampler, settings.n_trials,
                           settings.time_budget_s, unfinished, wants_finish)  # fmt: skip
        if hit is None and unfinished:
            _note_unfinished(unfinished[0])
        if hit is not None:
            err.print(
                f"cached: study {hit.study_name} tuned this workload's source, problem, device "
                "and toolchain already; answering from it (--no-cache sweeps again)",
                highlight=False,
            )
            print_best(settings.storage, hit.study_name, output)
            return
    if measures and finish_top and not finishing:  # said, not skipped in silence
        err.print("note: no finish: a sweep of several objectives ends in a Pareto front, not "
                  "one winner to re-measure; its figures are the sweep's own readings",
                  highlight=False, soft_wrap=True)  # fmt: skip
    # the time budget holds the finish's estimated time back: it bounds the whole run
    settings.finish_top = finish_top if finishing else 0
    settings.finish_rounds = finish_rounds
    from autotune.driver.executor_choice import command_session

    with command_session(settings) as teardown_s:  # one Ray for the sweep and its finish
        # the budget bounds the whole command: the executor's teardown at its end included
        settings.budget_from = COMMAND_STARTED - teardown_s
        _sweep_and_finish(Sweep(settings, ProgressDisplay(err)), output)


def _note_unfinished(study: Any) -> None:
    """Say that ``study`` matched the cache but was stopped in its finish, and how to run
    only its finish instead of the new sweep (a resume to the trials it launched)."""
    from autotune.tuning_cache import launched_trials

    name = study.study_name
    err.print(f"note: study {name} swept this already but was stopped in its finish, so it is "
              f"no answer; sweeping again (`autotune tune --study {name} --trials "
              f"{launched_trials(study)}` would run only its finish)", highlight=False,
              markup=False, soft_wrap=True)  # fmt: skip


def _sweep_and_finish(sweep: Any, output: str | None) -> None:
    """The sweep, its finish within the time budget left, and the best config printed."""
    settings = sweep.settings
    budget_ends = (
        settings.budget_from + settings.time_budget_s
        if settings.time_budget_s is not None
        else None
    )
    summary = sweep.run()
    if not summary.best and summary.stopped_by == "interrupted":
        err.print("interrupted before any trial succeeded; finished trials are stored")
        raise typer.Exit(130)
    if not summary.best:
        from optuna.trial import TrialState

        running = summary.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
        others = len(running)
        if others:  # this driver's trials are told by now: the running ones are others'
            err.print(f"no trial has succeeded yet: the {others} trial(s) still running are "
                      "another driver's, which reports them (`autotune best --study "
                      f"{summary.study_name}` once they end)")  # fmt: skip
            return
        if summary.trials_run == 0 and summary.refusals:  # why, without digging for it
            reason, times = summary.refusals.most_common(1)[0]
            which = "every config was" if summary.trials_total == 0 else "this run's configs were"
            err.print(f"no trial succeeded: {which} refused: {reason} ({times} of "
                      f"{summary.refusals.total()}; `autotune trials --all` lists them)",
                      highlight=False, markup=False, soft_wrap=True)  # fmt: skip
            raise typer.Exit(1)
        err.print("no trial succeeded: nothing to report (see `autotune trials`)")
        raise typer.Exit(1)
    if settings.finish_top and summary.stopped_by != "interrupted":
        _finish_within_budget(sweep, summary, budget_ends)
    print_best(settings.storage, summary.study_name, output, summary.study)
    if summary.stopped_by == "interrupted":
        raise typer.Exit(130)


def _finish_within_budget(sweep: Any, summary: Any, budget_ends: float | None) -> None:
    """The finish, its top cut to what two rounds (one if asked) can measure in the budget's
    time left (a time budget bounds the whole run); none when not even the best and the
    default fit."""
    from autotune.driver.finish_costs import stored_times, top_that_fits
    from autotune.driver.trial_attrs import FINISH_SKIPPED, mark_finish, stored_finish

    top = sweep.settings.finish_top
    if budget_ends is not None:
        left = budget_ends - time.monotonic()
        rounds = min(2, sweep.settings.finish_rounds)  # one reading cannot replace the default
        times = summary.times
        if not times.durations:  # a resume that ran none: the stored trials' times
            times = stored_times(summary.study)
        top = top_that_fits(top, times, left, rounds)
        if top == 0:
            twice = " twice" if rounds == 2 else ""
            err.print(f"finish skipped: {max(0.0, left):.0f} s of the time budget left, too "
                      f"little to re-measure the best config beside the untuned default{twice}; "
                      "the best config is the sweep's own reading")  # fmt: skip
            mark_finish(summary.study, FINISH_SKIPPED)
            return
    metric, direction = next(iter(sweep.settings.objectives.items()))
    rows = sweep.finish(summary.study, top=top, deadline=budget_ends)
    _print_finish(rows, metric, maximize=direction == "maximize",
                  asked=sweep.settings.finish_rounds,
                  record=stored_finish(summary.study.user_attrs))  # fmt: skip


def _print_finish(rows: list, metric: str = "", maximize: bool = True, asked: int = 0,
                  record: dict | None = None) -> None:  # fmt: skip
    """The finish's rows, winner first, and the rounds it ran (``record``: the finish's stored
    record, which also names the measurements that failed)."""
    from rich.markup import escape

    from autotune.driver.finish import spread_text
    from autotune.driver.trial_attrs import finish_faulted

    record = record or {}
    done = max((len(r.samples) for r in rows), default=0)
    ran = record.get("rounds", done)
    rounds = f"{ran} round{'' if ran == 1 else 's'}"
    if ran < asked:
        rounds += f" of {asked}: the time budget left no more"
    if ran:  # the untuned default where the sweep measured one (a space may rule it out)
        default = " and the untuned default" if any(r.baseline for r in rows) else ""
        err.print(f"finish: the top configs{default} re-measured in a fresh process, "
                  f"interleaved ({rounds})")  # fmt: skip
    else:  # a round that started but measured nothing is no round
        err.print("finish: nothing re-measured in the fresh process (every measurement failed "
                  "or the time budget ended first); the sweep's own readings stand")  # fmt: skip
    failed = record.get("failed") or {}
    for trial, reason in sorted(failed.items(), key=lambda f: int(f[0])):
        err.print(f"  trial {trial} failed in the finish: {escape(str(reason))}", highlight=False)
    # a config that failed a round itself (not stopped by the budget) is no candidate
    faulted = finish_faulted(record)
    if rows and rows[0].baseline and len(rows) > 1:
        why = ("one round cannot show a config measurably better (2 or more rounds can)"
               if done == 1 else "no config measurably beat it")  # fmt: skip
        if done > 1 and any(r.trial in faulted for r in rows):
            why += " and ran every round"
        err.print(f"  the untuned default stays: {why}")
    winner = rows[0] if rows else None
    for row in rows:
        if row.trial in faulted and row is not winner:
            err.print(f"         trial {row.trial}: median {readable(metric, row.median)} of "
                      "the rounds it ran (failed in another: not a candidate)",
                      highlight=False)  # fmt: skip
            continue
        # one reading has no noise to be within (the row's or the winner's)
        told_apart = len(row.samples) > 1 and winner is not None and len(winner.samples) > 1
        noise = (" (within noise of the winner)"
                 if row.within_noise and row is not winner and told_apart else "")  # fmt: skip
        noise += " (the untuned default)" if row.baseline else ""
        if row.over_slo:
            ratio = winner.median / row.median if row.median else float("inf")
            if not maximize:
                ratio = 1 / ratio if ratio else float("inf")
            noise += (f": over the SLO in the sweep, so not a candidate; the winner is "
                      f"{ratio:.2f}x it")  # fmt: skip
        better = row.median > winner.median if maximize else row.median < winner.median
        if better and not row.baseline:
            noise += " (a better median, but not measurably better than the untuned default)"
        mark = "winner" if row is rows[0] else "      "
        err.print(
            f"  {mark} trial {row.trial}: median {readable(metric, row.median)}, "
            f"{spread_text(row.spread, len(row.samples)).removesuffix(f' over {done} rounds')}"
            f"{noise}",
            highlight=False,
        )


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
    from autotune.record import check_recordable, record_grid
    from autotune.sweep_setup import resolve_workload

    device_info = _select_device(device)
    workload = workload_name(workload)
    objective_cls, space_obj, problem_values = resolve_workload(
        workload, space, parse_problem(problem), device_info
    )
    check_recordable(space_obj)  # a float parameter has no grid to count: one line, not a crash
    err.print(
        f"recording {workload} {problem_values} on {device_info['name']} "
        f"({space_obj.grid_size()} configs before constraints) -> {output}"
    )

    def on_row(i: int, n: int, row: dict[str, Any]) -> None:
        metric = next(iter(objective_cls.directions))
        value = row.get(metric)
        # named: a bare share ("0.0%") read as the recording's progress
        shown = f"{metric} {readable(metric, value)}" if isinstance(value, float) else row["status"]
        err.print(f"[{i}/{n}] {shown}", highlight=False)

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
    counts = table["status"].value_counts().to_dict()
    out.print(f"wrote {len(table)} rows to {output}: {counts}")


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


def _modules_run(settings: SweepSettings) -> dict[str, str]:
    """The source files of the modules a sweep runs (its objective and the kernels it
    imports: :func:`~autotune.tuning_cache.source_modules`), each under a line that says so,
    for ``--output`` to refuse: those its set-up found for the tuning cache's key
    (``settings.source_files``), else found here."""
    files = settings.source_files
    if files is None:  # set-up made no key (a replay, a resume): not walked yet
        from autotune.tuning_cache import module_files, source_modules

        try:
            files = module_files(source_modules(settings.workload))
        except Exception:  # noqa: BLE001 - a workload that cannot be read: its set-up says why
            return {}
    return {f"the module {name}, which the sweep runs": path for name, path in files.items()}


def main() -> None:
    """The ``autotune`` command: a usage error the option parser finds (a value out of range,
    an unknown option) is one line naming the option, exit code 2, as every other bad input."""
    try:  # Typer >= 0.22 carries its own Click
        from typer._click.exceptions import NoArgsIsHelpError
        from typer._click.exceptions import UsageError as ClickUsageError
    except ImportError:  # pragma: no cover - an older Typer on Click
        from click.exceptions import NoArgsIsHelpError
        from click.exceptions import UsageError as ClickUsageError

    _stop_signals_interrupt()
    try:
        code = app(standalone_mode=False)  # an exit code is returned, not raised
    except typer.Abort:
        err.print("interrupted")
        end_process(130)
    except NoArgsIsHelpError as exc:  # `autotune` alone: the help
        exc.show()
        end_process(exc.exit_code)
    except ClickUsageError as exc:
        where = f"{exc.ctx.command_path}: " if exc.ctx is not None else ""
        err.print(f"error: {where}{exc.format_message()}", markup=False, highlight=False,
                  soft_wrap=True)  # fmt: skip
        end_process(2)
    end_process(code if isinstance(code, int) else 0)


def _stop_signals_interrupt() -> None:
    """SIGTERM and SIGHUP end any command as Ctrl-C does (each command's KeyboardInterrupt
    path: "interrupted", exit 130, workers closed), also outside the sweep's own handling
    (the finish, an export); a sweep sets its own while it runs and puts these back."""
    import signal

    from autotune.driver.signals import taken_signals

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in taken_signals():  # not one the process was started ignoring (nohup's SIGHUP)
        if sig != signal.SIGINT:  # Python's own handler raises KeyboardInterrupt already
            signal.signal(sig, interrupt)


if __name__ == "__main__":
    main()
