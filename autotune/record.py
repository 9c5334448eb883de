"""Measure every config of a (small) discrete space and write a replayable table.

The table has a column per parameter, ``status`` and ``reason``, every metric the objective
measured, and the workload and problem it was recorded at (``workload``, ``problem.M``, ...);
``autotune tune --replay`` searches it without a GPU. Rows are written after every config, so
an interrupted recording keeps what it measured and resumes from there (at the same problem).

Example:
    >>> from autotune.space import Param, Space
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "faults.csv")
    >>> space = Space("f", [Param("fault", "categorical", choices=["none", "wrong_result"])])
    >>> table = record_grid("faults", {}, space, {}, out, executor="inline")
    >>> sorted(table["status"])
    ['ok', 'wrong_result']
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.driver.executor_choice import build_executor
from autotune.driver.futile import FutileWatch
from autotune.export import write_atomic
from autotune.failures import TrialStatus, classify, first_line
from autotune.file_lock import sole_writer
from autotune.objectives import get_objective
from autotune.redact import redact, redact_values, secrets_of_values
from autotune.runners.base import TrialResult
from autotune.space import Space
from autotune.std_paths import descriptor_of

# pandas (about 0.3 s) is imported in the functions that read or build a table: every CLI
# command imports this module for RecordError alone, to tell a refusal from a crash
if TYPE_CHECKING:
    import pandas as pd

_PREPARED: dict[str, Any] = {}


def _prepare(workload: str, problem: dict[str, Any], config: dict[str, Any]) -> tuple[str, str]:
    """In a pool process: compile ``config`` only (fills the on-disk kernel cache)."""
    key = repr((workload, sorted(problem.items())))
    if key not in _PREPARED:
        _PREPARED[key] = get_objective(workload)(problem)
    try:
        _PREPARED[key].prepare(config)
    except Exception as exc:  # noqa: BLE001 - a failure to compile is a result
        failure = classify(exc)
        return failure.status.value, str(failure)
    return TrialStatus.OK.value, ""


def precompile(
    workload: str, problem: dict[str, Any], configs: list[dict[str, Any]], jobs: int
) -> list[tuple[str, str]]:
    """Compile ``configs`` in ``jobs`` processes; returns (status, reason) per config. A stop
    (Ctrl-C, SIGTERM) ends the pool at once: the compiles still queued are not waited for."""
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"))
    try:
        futures = [pool.submit(_prepare, workload, problem, c) for c in configs]
        results = []
        for future in futures:
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 - a pool worker died: time it normally
                results.append(("unknown", f"precompile failed: {exc}"))
    except BaseException:
        running = list((getattr(pool, "_processes", None) or {}).values())  # no public way
        for process in running:
            with contextlib.suppress(Exception):
                process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return results


def _key(config: dict[str, Any], names: list[str]) -> tuple:
    """A config as a resumed recording compares it: a value read back from the CSV equals the
    one proposed (2.0 is 2; a blank, an inactive parameter, is None).

    Example:
        >>> _key({"a": 2.0, "b": float("nan")}, ["a", "b"]) == _key({"a": 2, "b": None}, ["a", "b"])
        True
    """
    return tuple(_comparable(config.get(n)) for n in names)


def _comparable(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool, str)):
        return str(value)
    try:
        return repr(float(value))
    except (TypeError, ValueError, OverflowError):
        return str(value)


def _same(recorded: Any, value: Any) -> bool:
    """A value read back from the CSV against the problem's (64.0 is 64; a blank, from rows
    recorded before the stamps, matches anything)."""
    import pandas as pd

    if pd.isna(recorded):
        return True
    try:
        return float(recorded) == float(value)
    except (TypeError, ValueError):
        return str(recorded) == str(value)


class RecordError(ValueError):
    """An ``--output`` that a recording cannot resume from: one line naming it and why."""


class RecordStopped(RuntimeError):
    """A recording its workload stopped on a failure every config would share (a server that
    never starts: ``Objective.futile``, as a sweep stops); ``str`` is its line, and the rows
    measured so far are in the table, as after every config."""


def resumed_rows(
    output: Path, workload: str, problem: dict[str, Any], space: Space,
    device: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:  # fmt: skip
    """The rows an earlier recording of the same workload, problem, space (and ``device``,
    where given) left in ``output`` (none if it does not exist).

    Raises:
        RecordError: ``output`` is not a regular file (``/dev/full`` reads zeros forever), not
            a table, or a recording of another workload, problem or space: resuming would mix
            them, or skip configs as measured that never were at this problem.

    Example:
        >>> import tempfile
        >>> from autotune.space import Param
        >>> out = Path(tempfile.mkdtemp()) / "m.csv"
        >>> _ = out.write_text("BLOCK_M,status,workload,problem.M\\n16,ok,matmul,64\\n")
        >>> space = Space("m", [Param("BLOCK_M", "pow2", low=16, high=32)])
        >>> len(resumed_rows(out, "matmul", {"M": 64}, space))
        1
        >>> resumed_rows(out, "matmul", {"M": 128}, space)
        Traceback (most recent call last):
        ...
        autotune.record.RecordError: .../m.csv holds a recording at M=64, not M=128: ...
    """
    import pandas as pd

    if not output.exists():
        return []
    _check_regular(output)
    try:
        table = pd.read_csv(output, index_col=False)  # a trailing comma is no index
        # a choice is read back as written: "None" or "NA" is no blank, "1" no number, and
        # 1 beside "a" no "1"
        chosen = {p.name: p for p in space.params
                  if p.name in table.columns and p.kind == "categorical"}  # fmt: skip
        if chosen:
            raw = pd.read_csv(output, usecols=list(chosen), dtype=str, keep_default_na=False,
                              index_col=False)  # fmt: skip
            for name, param in chosen.items():
                table[name] = [_as_choice(text, param.choices) for text in raw[name]]
    except (ValueError, UnicodeDecodeError) as exc:  # pandas' parser and empty-data errors
        first = first_line(exc)
        raise RecordError(f"{output}: exists and is not a recorded table ({first}); name "
                          "another --output or remove it") from None  # fmt: skip
    missing = [n for n in [*space.names, "status"] if n not in table.columns]
    if missing:
        raise RecordError(f"{output}: exists and is not a recording of this space (no column "
                          f"{missing[0]!r}); name another --output or remove it")  # fmt: skip
    recorded = _recorded_params(list(table.columns))
    if not recorded:  # a recording writes the config first
        raise RecordError(f"{output}: exists, and no parameter column comes before its "
                          f"{table.columns[0]!r} column (a recording writes the config's "
                          "columns first); name another --output or remove it")  # fmt: skip
    if set(recorded) != set(space.names):
        raise RecordError(f"{output}: exists and is a recording of {', '.join(recorded)}, not "
                          f"of this space's {', '.join(space.names)}; name another --output "
                          "or remove it")  # fmt: skip
    _check_states(output, table["status"])
    stamps = {"workload": workload, **problem_stamps(problem), **device_stamps(device or {})}
    if "workload" in table.columns:  # stamped: its problem columns are the whole problem
        _check_problem_keys(output, table, problem)
    for column, value in stamps.items():
        if column not in table.columns:
            continue  # a table recorded before the stamps, or by hand
        other = next((x for x in table[column] if not _same(x, value)), None)
        if other is not None:
            what = column.removeprefix("problem.")
            raise RecordError(f"{output} holds a recording at {what}={other}, not {what}="
                              f"{value}: name another --output for this one")  # fmt: skip
    rows = table.to_dict(orient="records")
    _check_values_in_space(output, rows, space)
    return rows


def _check_states(output: Path, states: pd.Series) -> None:
    """Refuse a row whose status is blank or no trial state (a row edited by hand): resuming
    counted it as measured, and the replay of the table refused it.

    Example:
        >>> import pandas as pd
        >>> _check_states(Path("g.csv"), pd.Series(["ok", "oom", "weird"]))
        Traceback (most recent call last):
        ...
        autotune.record.RecordError: g.csv: line 4: status 'weird' is no trial state (ok, ...
    """
    known = [s.value for s in TrialStatus]
    for line, state in enumerate(states, start=2):
        if not isinstance(state, str) or state not in known:
            what = "is blank" if not isinstance(state, str) else f"{state!r} is no trial state"
            raise RecordError(f"{output}: line {line}: status {what} ({', '.join(known)}); "
                              "correct or remove the row, or name another --output")  # fmt: skip


def _check_values_in_space(output: Path, rows: list[dict[str, Any]], space: Space) -> None:
    """Refuse rows holding a value this space's parameter does not have: a recording of
    another space of the same names (``X`` from 1 to 4, or ``fast``/``slow``), which resuming
    would mix with this one's rows.

    Example:
        >>> from autotune.space import Param
        >>> space = Space("s", [Param("X", "int", low=1, high=4)])
        >>> _check_values_in_space(Path("g.csv"), [{"X": 2}, {"X": "fast"}], space)
        Traceback (most recent call last):
        ...
        autotune.record.RecordError: g.csv holds X='fast', which this space's X does not ...
    """
    for param in space.params:
        if not param.discrete:
            continue
        values = param.values()
        for row in rows:
            cell = row.get(param.name)
            if cell is None or (isinstance(cell, float) and math.isnan(cell)):
                continue  # inactive there
            if not any(_same(cell, v) for v in values):
                raise RecordError(f"{output} holds {param.name}={cell!r}, which this space's "
                                  f"{param.name} does not have: a recording of another space; "
                                  "name another --output for this one")  # fmt: skip


def _check_problem_keys(output: Path, table: pd.DataFrame, problem: dict[str, Any]) -> None:
    """Refuse a stamped table recorded at a problem of other keys (a workload file takes any):
    its rows say nothing of this problem, whose values no column of theirs stands for.

    Example:
        >>> import pandas as pd
        >>> table = pd.DataFrame({"x": [1], "workload": ["w.py"], "problem.N": [3]})
        >>> _check_problem_keys(Path("g.csv"), table, {"M": 5})
        Traceback (most recent call last):
        ...
        autotune.record.RecordError: g.csv holds a recording at N=3, not M=5: name another ...
    """
    recorded = [c.removeprefix("problem.") for c in table.columns if c.startswith("problem.")]
    if sorted(recorded) == sorted(problem):
        return
    at = ",".join(f"{k}={next(iter(table[f'problem.{k}']), '')}" for k in recorded)
    this = ",".join(f"{k.removeprefix('problem.')}={v}" for k, v in problem_stamps(problem).items())
    raise RecordError(f"{output} holds a recording at {at or 'no problem values'}, not "
                      f"{this or 'at no problem values'}: name another --output for this one"
                      )  # fmt: skip


def _as_choice(text: str, choices: list[Any]) -> Any:
    """The choice a CSV cell holds, as the table wrote it (``str`` of the choice); a blank is
    an inactive parameter, and text that is no choice stays as it is.

    Example:
        >>> [_as_choice(t, [1, "a", "NA", True]) for t in ("1", "a", "NA", "True", "", "x")]
        [1, 'a', 'NA', True, None, 'x']
    """
    if text == "":
        return None
    return next((c for c in choices if str(c) == text), text)


def _check_regular(output: Path) -> None:
    # a descriptor (/dev/stdout) is refused whatever the shell opened it on: the table is
    # rewritten whole after every config, and read back to resume
    if descriptor_of(output) is not None or (output.exists() and not output.is_file()):
        raise RecordError(f"{output}: not a regular file (record resumes from the CSV it writes)")


def problem_stamps(problem: dict[str, Any]) -> dict[str, Any]:
    """The columns a recording stamps each row with for its problem, a password in a value
    (a server command's database URL) blanked: the table is a file, shared as one.

    Example:
        >>> problem_stamps({"M": 64, "command": "serve --db postgresql://u:pw@h/db"})
        {'problem.M': 64, 'problem.command': 'serve --db postgresql://u:***@h/db'}
    """
    return {f"problem.{k}": v for k, v in redact_values(problem).items()}


def device_stamps(device: dict[str, Any]) -> dict[str, Any]:
    """The columns a recording stamps each row with for the device that measured it (a
    replay of the table names it; a resumed recording on another device is refused).

    Example:
        >>> device_stamps({"type": "cuda", "name": "NVIDIA H200", "count": 1})
        {'device.name': 'NVIDIA H200', 'device.type': 'cuda'}
    """
    return {f"device.{k}": device[k] for k in ("name", "type") if device.get(k) is not None}


def _recorded_params(columns: list[str]) -> list[str]:
    """The parameter columns of a recorded table: those before its stamps and status (a
    recording writes the config first).

    Example:
        >>> _recorded_params(["BLOCK_M", "BLOCK_N", "workload", "problem.M", "status", "ms"])
        ['BLOCK_M', 'BLOCK_N']
    """
    params = []
    for column in columns:
        if column in ("workload", "status") or column.startswith(("problem.", "device.")):
            break
        params.append(column)
    return params


#: the most configs a grid to record may hold before its constraints (a million measurements
#: is weeks of a GPU; a bigger grid is a space meant for search, not for recording)
MAX_GRID = 1_000_000


#: the columns of a row that say how its measurement went, beside the config and the stamps
_RESULT_COLUMNS = ("status", "reason", "duration_s")


def recordable(result: TrialResult, directions: dict[str, str], columns: list[str]
               ) -> TrialResult:  # fmt: skip
    """``result`` as a row can hold it: an ``ok`` one whose tuned figure is NaN or infinite
    failed (``crashed``, as a sweep judges it: replay then counts it a failure), and so did
    one reporting a figure under a column's name (a metric ``status`` or ``X`` wrote over
    the row's own, and the recording could neither resume nor replay).

    Example:
        >>> from autotune.measurement import Measurement
        >>> ok = TrialResult(TrialStatus.OK, measurement=Measurement(values={"v": math.nan}))
        >>> recordable(ok, {"v": "maximize"}, ["X", "status"]).reason
        'objective measured v = nan'
        >>> odd = TrialResult(TrialStatus.OK, measurement=Measurement({"v": 1.0}, {"X": 99}))
        >>> recordable(odd, {"v": "maximize"}, ["X"]).reason
        "objective reported a figure named 'X', a column of the recording (a parameter or stamp)"
    """
    m = result.measurement
    if not result.ok or m is None:
        return result
    odd = m.not_finite(directions)
    if odd:
        return TrialResult(TrialStatus.CRASHED, f"objective measured {', '.join(odd)}",
                           duration_s=result.duration_s)  # fmt: skip
    taken = next((k for k in m.all_metrics() if k in columns or k.startswith("telemetry.")),
                 None)  # fmt: skip
    if taken is not None:
        return TrialResult(TrialStatus.CRASHED, f"objective reported a figure named {taken!r}, "
                           "a column of the recording (a parameter or stamp)",
                           duration_s=result.duration_s)  # fmt: skip
    return result


def check_recordable(space: Space) -> None:
    """A space whose grid can be listed: no float parameter, at most :data:`MAX_GRID` configs.

    Raises:
        RecordError: naming the parameter, or the grid's size.

    Example:
        >>> from autotune.space import Param
        >>> check_recordable(Space("s", [Param("x", "float", low=0, high=1)], source="s.yaml"))
        Traceback (most recent call last):
        ...
        autotune.record.RecordError: s.yaml: parameters.x is a float without a step: ...
    """
    floats = [p.name for p in space.params if not p.discrete]
    if floats:
        raise RecordError(f"{space.source}: parameters.{floats[0]} is a float without a step: "
                          "it has no grid to record (give it a step or choices)")  # fmt: skip
    size = math.prod(p.count() for p in space.params)
    if size > MAX_GRID:
        raise RecordError(f"{space.source}: the grid holds up to {size:,} configs, more than "
                          f"record lists ({MAX_GRID:,}); narrow the space")  # fmt: skip


def record_grid(
    workload: str,
    problem: dict[str, Any],
    space: Space,
    device: dict[str, Any],
    output: str | Path,
    *,
    limit: int | None = None,
    seed: int = 0,
    jobs: int = 1,
    timeout_s: float = 300.0,
    executor: str = "local",
    on_row: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """Measure the grid of ``space`` (or ``limit`` configs of it, drawn with ``seed``).

    Raises:
        RecordError: a space with no finite grid (a float parameter) or one too large to
            list, or an ``output`` that cannot be resumed (:func:`resumed_rows`).
        WriterBusy: another recording is writing ``output`` (each would rewrite the table
            without the other's rows).
        RecordStopped: the workload says every config would fail as the first ones measured
            did (a server that never starts), as a sweep stops on it.
    """
    check_recordable(space)
    configs = list(space.grid(problem, device))
    if limit is not None and limit < len(configs):
        chosen = set(random.Random(seed).sample(range(len(configs)), limit))
        configs = [c for i, c in enumerate(configs) if i in chosen]
    output = Path(output)
    _check_regular(output)  # before a lock file is made beside it
    try:
        output.parent.mkdir(parents=True, exist_ok=True)  # as tune's --output does
    except OSError as exc:
        raise RecordError(f"--output {output}: cannot write there ({exc.strerror})") from None
    with sole_writer(output):
        return _record(workload, problem, space, device, output, configs, seed, jobs,
                       timeout_s, executor, on_row)  # fmt: skip


def _record(
    workload: str, problem: dict[str, Any], space: Space, device: dict[str, Any], output: Path,
    configs: list[dict[str, Any]], seed: int, jobs: int, timeout_s: float, executor: str,
    on_row: Callable[[int, int, dict[str, Any]], None] | None,
) -> pd.DataFrame:  # fmt: skip
    """:func:`record_grid` once ``output`` is this process's alone."""
    import pandas as pd

    rows = resumed_rows(output, workload, problem, space, device)
    done = {_key(r, space.names) for r in rows}
    todo = [c for c in configs if _key(c, space.names) not in done]
    # measured in random order: the card's drift over the recording (power cap, heat) falls on
    # every region of the grid alike instead of on the configs recorded last
    random.Random(seed).shuffle(todo)

    compiled: list[tuple[str, str]] = [("unknown", "")] * len(todo)
    objective_cls = get_objective(workload)
    if jobs > 1 and objective_cls.compiles and todo:  # a workload that compiles nothing: none
        compiled = precompile(workload, problem, todo, jobs)

    slot = build_executor(
        executor, workload, problem, device=device, workers=1, timeout_s=timeout_s
    )
    secrets = secrets_of_values(problem)  # blanked wherever a reason repeats one
    served = any(r.get("status") == TrialStatus.OK.value for r in rows)  # a resumed row did
    watch = FutileWatch(objective_cls, problem, served_before=served)
    with slot:
        for i, (config, (status, reason)) in enumerate(zip(todo, compiled, strict=True)):
            if status not in ("ok", "unknown"):
                result = TrialResult(TrialStatus(status), reason)
            else:
                slot.submit(i, config)
                result = slot.wait_any()[0].result
            row: dict[str, Any] = {n: config.get(n) for n in space.names}
            row["workload"] = workload  # what a resumed recording must match
            row.update(problem_stamps(problem))
            row.update(device_stamps(device))  # where it was measured: a replay says so
            result = recordable(result, objective_cls.directions, [*row, *_RESULT_COLUMNS])
            row["status"] = result.status.value
            row["reason"] = redact(result.reason, secrets)
            row["duration_s"] = round(result.duration_s, 4)  # replay's simulated clock reads it
            if result.measurement is not None:
                row.update(result.measurement.all_metrics())
                row.update({f"telemetry.{k}": v for k, v in result.measurement.telemetry.items()})
            rows.append(row)
            write_atomic(output, pd.DataFrame(rows).to_csv(index=False))
            if on_row is not None:
                on_row(i + 1, len(todo), row)
            launched = status in ("ok", "unknown")  # a config that failed to compile was not
            if launched and watch.told(result.status.value, result.reason) is not None:
                raise RecordStopped(watch.line)
    return pd.DataFrame(rows)
