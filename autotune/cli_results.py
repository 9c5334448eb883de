"""The commands that read a stored sweep: ``autotune best``, ``trials``, ``export`` and
``studies``; :func:`register` adds them to the CLI's app.

Example (a shell):
    autotune trials --study mm-4096 --format csv --output trials.csv
    autotune export --to vllm --output serve.yaml
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from autotune.cli_errors import err, one_line_errors
from autotune.cli_options import (
    DEFAULT_STORAGE,
    StorageOption,
    StudyOption,
    out,
    output_file,
    quiet_libraries,
)
from autotune.cli_parsing import UsageError, _parse_rename, is_device, writable_output
from autotune.cli_stdout import names_stdout, result_stream, say_written, write_result
from autotune.export_text import shown as one_line
from autotune.serving_export import TARGETS as SERVING_TARGETS
from autotune.train_export import TARGETS as TRAIN_TARGETS
from autotune.units import counted, named, readable

if TYPE_CHECKING:
    import pandas as pd


def register(app: typer.Typer) -> None:
    """Add ``best``, ``trials``, ``export`` and ``studies`` to ``app`` (the CLI's)."""
    for command in (best, trials, export, studies):
        app.command()(one_line_errors(command))


def print_best(
    storage_url: str, study_name: str | None, output: Path | None, study: Any = None
) -> None:
    """Print the best config and write ``output``; from ``study`` when the sweep just ran (an
    in-memory storage is gone once reopened), else from the storage."""
    from autotune.export import best_record, export_text, write_atomic
    from autotune.reference_verdict import describe
    from autotune.storage import load_study, open_storage

    if study is None:
        study = load_study(open_storage(storage_url, existing=True), study_name)
    record = best_record(study, storage_url)
    values = ", ".join(named(k, v) for k, v in record["values"].items())
    finish = record.get("finish") or {}
    rows = finish.get("rows") or []
    if rows and rows[0].get("trial") == record["trial"] and len(record["values"]) == 1:
        metric = finish.get("metric") or next(iter(record["values"]))
        values += f" in the sweep, {named(metric, rows[0]['median'])} the finish's median"
    label = f" [{record['label']}]" if record.get("label") else ""
    # stdout: the config's JSON alone (`autotune tune ... > best.json`); what it is, on stderr
    err.print(f"best config (trial {record['trial']}: {values}){label}:", highlight=False,
              markup=False)  # fmt: skip
    stream = result_stream()
    if output is not None and names_stdout(output):
        pass  # stdout holds one document: the export record asked for, the config in it
    elif stream.isatty():
        Console(file=stream).print_json(data=record["config"])
    else:
        write_result(json.dumps(record["config"], indent=2))
    if record.get("reference_faster"):
        err.print(f"note: {describe(record['reference_faster'])}", highlight=False,
                  markup=False)  # fmt: skip
    for member in record.get("pareto_front", [])[1:]:
        vals = ", ".join(named(k, v) for k, v in member["values"].items())
        config = json.dumps(member["config"])  # as the best config is printed: no None
        err.print(f"  Pareto front: trial {member['trial']}: {vals} {config}",
                  highlight=False, markup=False)  # fmt: skip
    if output is not None:
        fmt = "yaml" if output.suffix in (".yaml", ".yml") else "json"
        try:
            if names_stdout(output):  # the command's stdout, not the stderr it now has
                write_result(export_text(study, fmt, storage=storage_url).rstrip("\n"))
            else:
                write_atomic(output, export_text(study, fmt, storage=storage_url))
        except OSError as exc:
            stored = "" if storage_url == "memory" else f"; study '{study.study_name}' is stored"
            raise UsageError(f"--output {output}: cannot write there ({exc.strerror}){stored}"
                             ) from None  # fmt: skip
        say_written(output)


def best(
    storage: StorageOption = DEFAULT_STORAGE,
    study: StudyOption = None,
) -> None:
    """Print the best config of a stored sweep."""
    quiet_libraries()
    print_best(storage, study, None)


def trials(
    storage: StorageOption = DEFAULT_STORAGE,
    study: StudyOption = None,
    format: Annotated[str, typer.Option(help="table, csv, parquet or html.")] = "table",  # noqa: A002
    output: Annotated[
        Path | None,
        typer.Option(
            parser=output_file,
            help="File for csv, parquet or html (default: stdout; parquet needs one).",
        ),
    ] = None,
    all_trials: Annotated[
        bool, typer.Option("--all", help="Table: include configs rejected by constraints.")
    ] = False,
) -> None:
    """List a sweep's trials: status, reason, values, parameters."""
    quiet_libraries()
    from autotune.driver import trials_frame
    from autotune.driver.trial_attrs import INFEASIBLE, WORKER, trial_origin
    from autotune.replay_info import study_label
    from autotune.storage import load_study, open_storage

    if output is not None and format == "table":
        raise UsageError("--output needs --format csv, parquet or html (a table prints)")
    writable_output(output, storage=storage, studies=[study])
    loaded = load_study(open_storage(storage, existing=True), study)
    frame = trials_frame(loaded)
    # a replay's figures were looked up, not measured: its label heads the table and the page
    label = study_label(loaded)  # (an old replay's completed with its device)
    if "status" not in frame.columns:  # no trial yet: the listing's columns, no rows
        frame = frame.reindex(columns=["trial", "status", "reason", "duration_s"])
    # why a trial ran before the sampler proposed it, beside its number in table and page
    origins = {t.number: trial_origin(t.user_attrs) for t in loaded.get_trials(deepcopy=False)}
    if format == "table":
        shown = frame if all_trials else frame[frame["status"] != INFEASIBLE]
        hidden = set(frame["trial"]) - set(shown["trial"])
        # one a worker ran and the objective refused (its own check) is no constraint's
        refused = sum(bool(t.user_attrs.get(WORKER)) for t in loaded.get_trials(deepcopy=False)
                      if t.number in hidden)  # fmt: skip
        columns = [c for c in frame.columns if not c.startswith("m.")]
        caption = None
        if hidden:
            caption = hidden_caption(len(hidden) - refused, refused)
        elif frame.empty:  # `autotune best` sends the user here: say why there is no row
            caption = f"study {one_line(loaded.study_name)} has no trials yet"
        table = Table(caption=caption)
        for column in columns:
            table.add_column(  # a parameter's name is text, not markup
                Text(one_line(column)), overflow="ellipsis",
                max_width={"reason": 60, "trial": 40}.get(column, 16),
            )  # fmt: skip
        for row in shown[columns].itertuples(index=False):
            cells = ["" if _missing(v) else _cell(v, c) for c, v in zip(columns, row, strict=True)]
            origin = origins.get(int(cells[0])) if cells[0].isdigit() else None
            if origin:
                cells[0] = f"{cells[0]} ({origin})"
            table.add_row(*(Text(cell) for cell in cells))  # stored text: no markup
        console = Console(width=None if out.is_terminal else 240)
        if label:
            console.print(Text(label))  # stored text: no markup
        console.print(table)
    elif format == "csv":
        _write_listing(frame.to_csv(index=False), output)
    elif format == "parquet":
        if output is None:
            raise UsageError("--format parquet needs --output FILE")
        buffer = io.BytesIO()
        _one_kind_a_column(frame).to_parquet(buffer, index=False)
        _write_listing(buffer.getvalue(), output)
    elif format == "html":  # the report's table alone
        from autotune.driver.trial_attrs import stored_info
        from autotune.trials_html import trials_page

        shown = frame if all_trials else frame[frame["status"] != INFEASIBLE]
        info = stored_info(loaded.user_attrs)
        page = trials_page(shown, loaded.study_name, info, label, origins)
        _write_listing(page + "\n", output)
    else:
        raise UsageError(f"--format: {format!r} is not one of table, csv, parquet, html")


#: the problem values a per-shape table's shape is made of unless --key says otherwise
TABLE_KEY = "M,N,K"


def _one_kind_a_column(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each column that mixes kinds (a categorical parameter of 1 and "x") as
    text, as Parquet stores a column of one type.

    Example:
        >>> import pandas as pd
        >>> _one_kind_a_column(pd.DataFrame({"b": [1, "x"], "n": [1, 2]}))["b"].tolist()
        ['1', 'x']
    """
    mixed = [c for c in frame.columns if frame[c].dtype == object
             and len({type(v) for v in frame[c] if v is not None and v == v}) > 1]  # fmt: skip
    if not mixed:
        return frame
    frame = frame.copy()
    for column in mixed:
        frame[column] = [None if v is None or v != v else str(v) for v in frame[column]]
    return frame


def _write_listing(content: str | bytes, output: Path | None) -> None:
    """A listing to stdout, or whole to ``output`` (and said); bytes (parquet) need a file."""
    if output is None:
        sys.stdout.write(str(content))
        return
    _write_output(output, content)
    say_written(output)


def hidden_caption(rejected: int, refused: int) -> str:
    """The trials table's caption for the infeasible configs it leaves out: those the space's
    constraints rejected unlaunched, and those the objective refused as they ran (the sweep's
    'refused by MyObjective'), named apart (both were 'rejected by constraints').

    Example:
        >>> hidden_caption(3, 0), hidden_caption(1, 0)
        ('3 configs rejected by constraints not shown (--all)', '1 config rejected by constraints not shown (--all)')
        >>> hidden_caption(0, 1), hidden_caption(2, 2)
        ('1 config refused by the objective not shown (--all)', '2 configs rejected by constraints and 2 refused by the objective not shown (--all)')
    """  # noqa: E501
    parts = []
    if rejected:
        parts.append(f"{counted(rejected, 'config')} rejected by constraints")
    if refused:
        parts.append(f"{refused} refused by the objective")
    if parts and not rejected:
        parts = [f"{counted(refused, 'config')} refused by the objective"]
    return " and ".join(parts) + " not shown (--all)"


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA (an integer parameter a trial lacks)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pandas' NA has no truth value
        return True


#: the characters of a stored text a table cell shows; a longer one is cut, and says so
CELL_CHARS = 80


def _cell(value: Any, column: str = "") -> str:
    """A stored value as a table cell: one printable line (a control character in a reason
    is shown escaped, never sent to the terminal), at most :data:`CELL_CHARS` characters, a
    longer one cut with '…' (the csv, parquet and html listings hold it whole).

    Example:
        >>> _cell("x" * 100).endswith("x…"), len(_cell("x" * 100)), _cell("short")
        (True, 80, 'short')
    """
    if isinstance(value, float):
        return readable(column, value)
    text = one_line(value)
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1].rstrip() + "…"


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
    output: Annotated[
        Path | None, typer.Option(parser=output_file, help="File to write (default: stdout).")
    ] = None,
    top: Annotated[
        int | None, typer.Option(min=1, help="With --to triton: how many configs (default 5).")
    ] = None,
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
    ] = TABLE_KEY,
) -> None:
    """Export the best config for the stack that will run it."""
    quiet_libraries()
    from autotune.export import FORMATS, export_text
    from autotune.storage import load_study, open_storage

    listed = None if studies is None else studies.split(",")
    if listed is not None and not all(listed):  # '' or 'a,,b': passed over, or "'' twice"
        raise UsageError(f"--studies {studies!r}: an empty study name; name them A,B,...")
    # a table reads the --studies, or stored sweeps of the workload: any might be among them
    read = [study] if not table else listed
    writable_output(output, storage=storage, studies=read)
    targets = (*FORMATS, *TRAIN_TARGETS, *SERVING_TARGETS)
    if to not in targets:
        raise UsageError(f"--to {to}: unknown target; choose one of {', '.join(targets)}")
    names = _parse_rename(rename)
    if names and to != "triton":
        raise UsageError(f"--rename applies to --to triton, not --to {to}")
    if top is not None and to != "triton":
        raise UsageError(f"--top applies to --to triton, not --to {to}")
    top = top or 5
    side: Path | None = None  # the notes file this export writes, if any
    if not table and (studies is not None or key != TABLE_KEY):
        # "--key: ": "--key X" reads as a secret's option and shows X as *** (autotune.redact)
        raise UsageError("--studies applies to --table" if studies is not None
                         else "--key: applies to --table")  # fmt: skip
    if table:
        if to != "triton":
            raise UsageError("--table needs --to triton")
        from autotune.triton_table import table_studies, triton_table_export

        chosen = table_studies(
            open_storage(storage, existing=True),
            listed,
            anchor=study,
        )
        keys = [k.strip() for k in key.split(",") if k.strip()]
        text = triton_table_export(chosen, keys, top, names)
    elif to in TRAIN_TARGETS or to in SERVING_TARGETS:  # a training stack or a server
        from autotune.export import best_record, pareto_pick
        from autotune.serving_export import serving_export
        from autotune.train_export import training_export

        record = best_record(load_study(open_storage(storage, existing=True), study), storage)
        make = training_export if to in TRAIN_TARGETS else serving_export
        exported = make(record, to)
        picked = pareto_pick(record)
        if picked is not None:  # one config of several: which, and by what rule
            err.print(f"note: {picked}", markup=False, highlight=False, soft_wrap=True)
        text = exported.text
        notes = exported.not_expressed and not exported.notes_inline  # else in the text
        side = _side_file(output, storage, read) if notes else None  # before anything is said
        for knob, note in exported.not_expressed.items():
            err.print(f"not expressed in {to}: {knob}: {note}", markup=False, highlight=False,
                      soft_wrap=True)  # fmt: skip
        if side is not None:
            text_of_notes = json.dumps(exported.not_expressed, indent=2) + "\n"
            _write_output(side, text_of_notes, f"--output {output}: its notes file")
    else:
        loaded = load_study(open_storage(storage, existing=True), study)
        text = export_text(loaded, to, top, names, storage)
    if output is None:
        sys.stdout.write(text)
    else:
        _write_output(output, text)
        say_written(output)
        if side is None:
            _remove_stale_notes(output, storage, read)


def _write_output(path: Path, content: str | bytes, option: str = "--output") -> None:
    """Write ``path`` whole (:func:`autotune.export.write_atomic`).

    Raises:
        UsageError: one line naming ``path`` where it cannot be written or replaced.
    """
    from autotune.export import write_atomic

    try:
        write_atomic(path, content)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror or exc})") from None


def _remove_stale_notes(output: Path, storage: str, read: list[str | None] | None) -> None:
    """Remove the notes file an earlier export left beside ``output`` (this one has none, so
    those notes are not the new file's): that exact name, a file; never a folder, a device's,
    nor one that :func:`writable_output` refuses to write (a storage's own, a study's input)."""
    if is_device(output):
        return
    old = output.with_name(f"{output.name}.not_expressed.json")
    if not old.is_file():
        return
    try:
        writable_output(old, f"--output {output}: its notes file", storage, studies=read)
    except UsageError:
        return
    old.unlink(missing_ok=True)


def _side_file(output: Path | None, storage: str, read: list[str | None] | None) -> Path | None:
    """Where an export's ``not_expressed`` notes go beside ``output``: none without an output
    or beside a device (``/dev/null``, ``/dev/stdout``: no file belongs next to it); else a
    path shown to be writable (:func:`writable_output`) before anything is written.

    Raises:
        UsageError: a folder (or a file a stored study reads) sits where the notes would go.

    Example:
        >>> _side_file(None, "memory", []), _side_file(Path("/dev/null"), "memory", [])
        (None, None)
        >>> _side_file(Path("ds.json"), "memory", [])
        PosixPath('ds.json.not_expressed.json')
    """
    if output is None or is_device(output):
        return None
    side = output.with_name(f"{output.name}.not_expressed.json")
    writable_output(side, f"--output {output}: its notes file", storage, studies=read)
    return side


def studies(
    storage: StorageOption = DEFAULT_STORAGE,
) -> None:
    """List the studies in a storage."""
    quiet_libraries()
    from autotune.redact import redact_url
    from autotune.storage import open_storage, study_names

    names = study_names(open_storage(storage, existing=True))
    for name in names:  # as stored: no markup, a control character shown escaped
        sys.stdout.write((name if name.isprintable() else repr(name)) + "\n")
    if not names:
        err.print(
            f"no studies in {redact_url(storage)}", highlight=False, markup=False, soft_wrap=True
        )
