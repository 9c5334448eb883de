"""The ``autotune`` command: parses, prints, exits; the work happens in the layers below.

Example:
    $ autotune tune matmul --problem M=4096,N=4096,K=4096 --trials 60 --output best.json
    $ autotune export --to triton --output matmul_configs.py
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from autotune.cli_errors import err, one_line_errors
from autotune.cli_parsing import (  # noqa: F401 - parse_* re-exported for callers
    UsageError,
    _parse_rename,
    parse_duration,
    parse_problem,
    parse_slo,
    writable_output,
)
from autotune.redact import STORAGE_ENV, redact
from autotune.serving_export import TARGETS as SERVING_TARGETS
from autotune.train_export import TARGETS as TRAIN_TARGETS
from autotune.units import named, readable

#: When this command started (the module is imported first thing, after typer and rich):
#: ``--time-budget`` counts from here, so the heavy imports, the space's enumeration and the
#: storage's set-up are inside it.
COMMAND_STARTED = time.monotonic()

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Find the fastest configuration for LLM workloads on GPUs.",
    pretty_exceptions_enable=False,
)
out = Console()


def _quiet_libraries() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def _select_device(device: str) -> dict[str, Any]:
    from autotune.device import detect_device

    if device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # workers inherit it: trials run on the CPU
    try:
        return detect_device(device).as_dict()
    except RuntimeError as exc:
        raise UsageError(f"--device {device}: {exc}") from None


def _command_line() -> str:
    """The command that reproduces this run, as stored in the study and its exports: with a
    storage URL's password as ``***``."""
    return redact("autotune " + shlex.join(sys.argv[1:]))


# Options shared by several commands.
SpaceOption = Annotated[
    str | None, typer.Option("--space", help="Search space YAML (default: the workload's).")
]
ProblemOption = Annotated[
    list[str], typer.Option("--problem", help="Problem values, e.g. M=64,N=4096,K=4096.")
]
StorageOption = Annotated[
    str,
    typer.Option(
        "--storage",
        envvar=STORAGE_ENV,
        show_envvar=True,
        help="Optuna storage URL (or from $AUTOTUNE_STORAGE, so that a database password "
        "need not be on the command line).",
    ),
]
StudyOption = Annotated[
    str | None, typer.Option("--study", help="Study name (default: the latest).")
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--trial-timeout",
        min=0.001,
        help="Seconds one trial may take (default 300, or a quarter of --time-budget when "
        "that is shorter, 30 at least).",
    ),
]
DeviceOption = Annotated[str, typer.Option("--device", help="auto, cuda or cpu.")]
DEFAULT_STORAGE = "sqlite:///autotune.db"


# ---------------------------------------------------------------------------------------------
@app.command()
@one_line_errors
def tune(
    workload: Annotated[
        str | None,
        typer.Argument(help="A workload of `autotune workloads` (default: train-step)."),
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
        Path | None, typer.Option(help="Write the best config here (JSON/YAML).")
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
        int, typer.Option(min=1, help="Interleaved rounds of the finish.")
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
    _quiet_libraries()
    from autotune.driver import Sweep
    from autotune.progress import ProgressDisplay
    from autotune.sweep_setup import build_settings

    limits = parse_slo(slo)
    writable_output(output)  # before the sweep spends its time, not after
    settings = build_settings(
        workload=workload,
        space=space,
        problem=parse_problem(problem),
        objective=objective,
        sampler=sampler,
        trials=trials,
        time_budget_s=parse_duration(time_budget),
        seed=seed,
        storage=storage,
        study=study,
        trial_timeout_s=trial_timeout,
        device=_select_device(device),
        replay=replay,
        params=params,
        metric=metric,
        maximize=maximize,
        command=_command_line(),
        warm_start=warm_start,
        executor=executor,
        workers=workers,
        ray_address=address,
        gpus_per_trial=gpus_per_trial,
        compile_ahead=compile_ahead,
        slo=limits,
    )
    for note in settings.notes:
        err.print(f"note: {note}", highlight=False, soft_wrap=True)
    if cache and settings.fingerprint and settings.study_name is None:
        from autotune.storage import open_storage
        from autotune.tuning_cache import cached_study

        hit = cached_study(open_storage(settings.storage), settings.fingerprint["key"])
        if hit is not None:
            err.print(
                f"cached: study {hit.study_name} tuned this kernel source, problem, device and "
                "toolchain already; answering from it (--no-cache sweeps again)",
                highlight=False,
            )
            _print_best(settings.storage, hit.study_name, output)
            return
    from autotune.objectives import get_objective

    finishing = get_objective(settings.workload).measures and len(settings.objectives) == 1
    # the time budget holds the finish's estimated time back: it bounds the whole run
    settings.finish_top = finish_top if finishing and finish_top > 1 else 0
    settings.slo = limits
    settings.finish_rounds = finish_rounds
    settings.budget_from = COMMAND_STARTED
    sweep = Sweep(settings, ProgressDisplay(err))
    budget_ends = (
        COMMAND_STARTED + settings.time_budget_s if settings.time_budget_s is not None else None
    )
    summary = sweep.run()
    if not summary.best:
        err.print("no trial succeeded: nothing to report (see `autotune trials`)")
        raise typer.Exit(1)
    if settings.finish_top and summary.stopped_by != "interrupted":
        _finish_within_budget(sweep, summary, budget_ends)
    _print_best(settings.storage, summary.study_name, output, summary.study)
    if summary.stopped_by == "interrupted":
        raise typer.Exit(130)


def _finish_within_budget(sweep: Any, summary: Any, budget_ends: float | None) -> None:
    """The finish, its top cut to what one round can measure in the budget's time left (a
    time budget bounds the whole run); none when not even the best and the default fit."""
    from autotune.driver.finish import top_that_fits

    top = sweep.settings.finish_top
    if budget_ends is not None:
        left = budget_ends - time.monotonic()
        top = top_that_fits(top, summary.durations, left)
        if top == 0:
            err.print(f"finish skipped: {max(0.0, left):.0f} s of the time budget left, too "
                      "little to re-measure the best config beside the untuned default; the "
                      "best config is the sweep's own reading")  # fmt: skip
            return
    metric, direction = next(iter(sweep.settings.objectives.items()))
    rows = sweep.finish(summary.study, top=top, deadline=budget_ends)
    _print_finish(rows, metric, maximize=direction == "maximize")


def _print_finish(rows: list, metric: str = "", maximize: bool = True) -> None:
    err.print(
        f"finish: the top configs and the untuned default re-measured in a fresh process, "
        f"interleaved ({len(rows[0].samples) if rows else 0} rounds)"
    )
    if rows and rows[0].baseline and len(rows) > 1:
        err.print("  the untuned default stays: no config measurably beat it")
    winner = rows[0] if rows else None
    for row in rows:
        noise = " (within noise of the winner)" if row.within_noise and row is not winner else ""
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
            f"  {mark} trial {row.trial}: median {readable(metric, row.median)}, spread "
            f"{row.spread:.1%}{noise}",
            highlight=False,
        )


def _print_best(
    storage_url: str, study_name: str | None, output: Path | None, study: Any = None
) -> None:
    """Print the best config and write ``output``; from ``study`` when the sweep just ran (an
    in-memory storage is gone once reopened), else from the storage."""
    from autotune.export import best_record, export_text, write_atomic
    from autotune.storage import load_study, open_storage

    if study is None:
        study = load_study(open_storage(storage_url, existing=True), study_name)
    record = best_record(study)
    values = ", ".join(named(k, v) for k, v in record["values"].items())
    label = f" [{record['label']}]" if record.get("label") else ""
    out.print(f"best config (trial {record['trial']}: {values}){label}:", highlight=False)
    out.print_json(data=record["config"])
    for member in record.get("pareto_front", [])[1:]:
        vals = ", ".join(named(k, v) for k, v in member["values"].items())
        out.print(f"  Pareto front: trial {member['trial']}: {vals} {member['config']}")
    if output is not None:
        fmt = "yaml" if output.suffix in (".yaml", ".yml") else "json"
        write_atomic(output, export_text(study, fmt))
        out.print(f"wrote {output}")


@app.command()
@one_line_errors
def best(
    storage: StorageOption = DEFAULT_STORAGE,
    study: StudyOption = None,
) -> None:
    """Print the best config of a stored sweep."""
    _quiet_libraries()
    _print_best(storage, study, None)


@app.command()
@one_line_errors
def trials(
    storage: StorageOption = DEFAULT_STORAGE,
    study: StudyOption = None,
    format: Annotated[str, typer.Option(help="table, csv, parquet or html.")] = "table",  # noqa: A002
    output: Annotated[
        Path | None, typer.Option(help="File for csv/parquet/html (csv, html: stdout).")
    ] = None,
    all_trials: Annotated[
        bool, typer.Option("--all", help="Table: include configs rejected by constraints.")
    ] = False,
) -> None:
    """List a sweep's trials: status, reason, values, parameters."""
    _quiet_libraries()
    from autotune.driver import trials_frame
    from autotune.driver.trial_attrs import INFEASIBLE
    from autotune.storage import load_study, open_storage

    writable_output(output)
    frame = trials_frame(load_study(open_storage(storage, existing=True), study))
    if format == "table":
        shown = frame if all_trials else frame[frame["status"] != INFEASIBLE]
        rejected = len(frame) - len(shown)
        columns = [c for c in frame.columns if not c.startswith("m.")]
        table = Table(
            caption=f"{rejected} configs rejected by constraints not shown (--all)"
            if rejected
            else None
        )
        for column in columns:
            table.add_column(
                column, overflow="ellipsis", max_width=60 if column == "reason" else 16
            )
        for row in shown[columns].itertuples(index=False):
            cells = ["" if _missing(v) else _cell(v, c) for c, v in zip(columns, row, strict=True)]
            if cells[0] == "0":
                cells[0] = "0 (untuned default)"
            table.add_row(*cells)
        Console(width=None if out.is_terminal else 240).print(table)
    elif format == "csv":
        text = frame.to_csv(index=False)
        if output is None:
            sys.stdout.write(text)
        else:
            from autotune.export import write_atomic

            write_atomic(output, text)
    elif format == "parquet":
        if output is None:
            raise UsageError("--format parquet needs --output FILE")
        frame.to_parquet(output, index=False)
    elif format == "html":  # the report's table alone
        shown = frame if all_trials else frame[frame["status"] != INFEASIBLE]
        text = shown.to_html(index=False, na_rep="", border=1)
        page = f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{text}</body></html>"
        if output is None:
            sys.stdout.write(page + "\n")
        else:
            from autotune.export import write_atomic

            write_atomic(output, page + "\n")
    else:
        raise UsageError(f"--format: {format!r} is not one of table, csv, parquet, html")


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA (an integer parameter a trial lacks)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pandas' NA has no truth value
        return True


def _cell(value: Any, column: str = "") -> str:
    return readable(column, value) if isinstance(value, float) else str(value)[:80]


@app.command()
@one_line_errors
def export(
    to: Annotated[
        str,
        typer.Option(
            help="json, yaml, triton, or a training stack: hf (TrainingArguments), accelerate, "
            "deepspeed, torchtitan (TOML sections); or a server: vllm (serve --config YAML), "
            "sglang (launch_server command)."
        ),
    ] = "json",
    storage: StorageOption = DEFAULT_STORAGE,
    study: StudyOption = None,
    output: Annotated[Path | None, typer.Option(help="File to write (default: stdout).")] = None,
    top: Annotated[int, typer.Option(min=1, help="With --to triton: how many configs.")] = 5,
    rename: Annotated[
        str | None,
        typer.Option(
            help="With --to triton: rename parameters, e.g. BLOCK_M=BLOCK_SIZE_M,...; "
            "NAME= drops one the kernel does not have."
        ),
    ] = None,
    table: Annotated[
        bool,
        typer.Option(
            "--table",
            help="With --to triton: a module with a per-shape table of every stored sweep of "
            "the workload (or of --studies), for @triton.autotune or @triton.heuristics.",
        ),
    ] = False,
    studies: Annotated[
        str | None, typer.Option(help="With --table: the studies to tabulate, A,B,...")
    ] = None,
    key: Annotated[
        str, typer.Option(help="With --table: the problem values a shape is made of.")
    ] = "M,N,K",
) -> None:
    """Export the best config for the stack that will run it."""
    _quiet_libraries()
    from autotune.export import FORMATS, export_text, write_atomic
    from autotune.storage import load_study, open_storage

    writable_output(output)
    targets = (*FORMATS, *TRAIN_TARGETS, *SERVING_TARGETS)
    if to not in targets:
        raise UsageError(f"--to {to}: unknown target; choose one of {', '.join(targets)}")
    names = _parse_rename(rename)
    if names and to != "triton":
        raise UsageError(f"--rename applies to --to triton, not --to {to}")
    if table:
        if to != "triton":
            raise UsageError("--table needs --to triton")
        from autotune.triton_export import table_studies, triton_table_export

        chosen = table_studies(
            open_storage(storage, existing=True), studies.split(",") if studies else None
        )
        keys = [k.strip() for k in key.split(",") if k.strip()]
        text = triton_table_export(chosen, keys, top, names)
    elif to in TRAIN_TARGETS or to in SERVING_TARGETS:  # a training stack or a server
        from autotune.export import best_record
        from autotune.serving_export import serving_export
        from autotune.train_export import training_export

        record = best_record(load_study(open_storage(storage, existing=True), study))
        make = training_export if to in TRAIN_TARGETS else serving_export
        exported = make(record, to)
        text = exported.text
        for knob, note in exported.not_expressed.items():
            err.print(f"not expressed in {to}: {knob}: {note}", highlight=False, soft_wrap=True)
        if output is not None and exported.not_expressed and not exported.notes_inline:
            write_atomic(f"{output}.not_expressed.json", json.dumps(exported.not_expressed,
                                                                    indent=2) + "\n")  # fmt: skip
    else:
        text = export_text(load_study(open_storage(storage, existing=True), study), to, top, names)
    if output is None:
        sys.stdout.write(text)
    else:
        write_atomic(output, text)
        err.print(f"wrote {output}")


@app.command()
@one_line_errors
def record(
    workload: Annotated[str, typer.Argument(help="matmul or train-step.")],
    output: Annotated[Path, typer.Option(help="CSV to write (resumes if it exists).")],
    space: SpaceOption = None,
    problem: ProblemOption = [],  # noqa: B006
    limit: Annotated[
        int | None, typer.Option(help="Measure this many configs of the grid.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0, help="Seed for --limit's choice.")] = 0,
    jobs: Annotated[int, typer.Option(help="Processes that compile kernels ahead of timing.")] = 1,
    trial_timeout: Annotated[float, typer.Option(help="Seconds one config may take.")] = 300.0,
    device: DeviceOption = "auto",
) -> None:
    """Measure every config of a small grid on this device and write a replayable CSV."""
    _quiet_libraries()
    writable_output(output)
    from autotune.record import record_grid
    from autotune.sweep_setup import resolve_workload

    device_info = _select_device(device)
    objective_cls, space_obj, problem_values = resolve_workload(
        workload, space, parse_problem(problem), device_info
    )
    err.print(
        f"recording {workload} {problem_values} on {device_info['name']} "
        f"({space_obj.grid_size()} configs before constraints) -> {output}"
    )

    def on_row(i: int, n: int, row: dict[str, Any]) -> None:
        metric = next(iter(objective_cls.directions))
        value = row.get(metric)
        shown = readable(metric, value) if isinstance(value, float) else row["status"]
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
    """List the workloads a sweep can tune."""
    from autotune.objectives import WORKLOADS

    for entry in WORKLOADS.values():
        out.print(f"{entry.name:<12} {entry.help}", highlight=False, soft_wrap=True)


@app.command()
@one_line_errors
def devices() -> None:
    """Show the device trials would run on, with its software fingerprint."""
    from autotune.device import detect_device, read_telemetry

    out.print_json(data={**detect_device().as_dict(), "telemetry": read_telemetry()})


@app.command()
@one_line_errors
def studies(
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """List the studies in a storage."""
    _quiet_libraries()
    from autotune.storage import open_storage, study_names

    for name in study_names(open_storage(storage, existing=True)):
        out.print(name)


# commands that live in modules of their own, added to this app (also when run as __main__)
from autotune import cli_reports  # noqa: E402

cli_reports.register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
