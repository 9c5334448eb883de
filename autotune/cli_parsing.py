"""Parsing the command line's compound values: ``--problem M=64,dtype=bf16``, ``--slo
ttft_p99_ms=500``, ``--time-budget 5m``, ``--rename BLOCK_M=BLOCK_SIZE_M``. Each raises
:class:`UsageError` with one line naming the option.

Example:
    >>> parse_problem(["M=64,N=4096", "dtype=bf16"]), parse_duration("5m")
    ({'M': 64, 'N': 4096, 'dtype': 'bf16'}, 300.0)
"""

from __future__ import annotations

import math
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autotune.in_memory import in_memory
from autotune.std_paths import descriptor_of
from autotune.units import never_negative


class UsageError(ValueError):
    """Bad input from the command line."""


def parse_slo(given: str | Sequence[str] | None) -> dict[str, float]:
    """``--slo ttft_p99_ms=500,tpot_p99_ms=50`` as ``{metric: limit}``; ``--slo`` given more
    than once (``given``: each one's text) adds each one's limits, a metric limited in two of
    them refused as in one.

    Example:
        >>> parse_slo("ttft_p99_ms=500,tpot_p99_ms=50")
        {'ttft_p99_ms': 500.0, 'tpot_p99_ms': 50.0}
        >>> parse_slo(["ttft_p99_ms=500", "tpot_p99_ms=50"])
        {'ttft_p99_ms': 500.0, 'tpot_p99_ms': 50.0}
    """
    texts = [given] if given is None or isinstance(given, str) else list(given)
    limits: dict[str, float] = {}
    for text in texts:
        for name, limit in _slo_limits(text).items():
            if name in limits:
                raise UsageError(f"--slo: {name} is limited twice")
            limits[name] = limit
    return limits


def _slo_limits(text: str | None) -> dict[str, float]:
    """One ``--slo``'s text as ``{metric: limit}`` (see :func:`parse_slo`)."""
    limits: dict[str, float] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            limit = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise UsageError(f"--slo: {item.strip()!r} is not METRIC=LIMIT (e.g. ttft_p99_ms=500)")
        if not math.isfinite(limit):
            raise UsageError(f"--slo: {item.strip()!r}: the limit must be a finite number")
        if limit <= 0 and never_negative(name):
            raise UsageError(f"--slo: {item.strip()!r}: {name} is never 0 or below, so every "
                             "trial would be over this limit")  # fmt: skip
        if name in limits:
            raise UsageError(f"--slo: {name} is limited twice")
        limits[name] = limit
    if text is not None and text.strip() and not limits:
        raise UsageError(f"--slo: {text!r} names no limit (e.g. ttft_p99_ms=500)")
    return limits


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            continue
    return {"true": True, "false": False}.get(text.lower(), text)


def parse_problem(items: list[str]) -> dict[str, Any]:
    """``["M=64,N=4096", "dtype=bf16"]`` -> ``{"M": 64, "N": 4096, "dtype": "bf16"}``; a
    value that holds a comma writes it ``\\,`` (a server's ``--cuda-graph-sizes 1\\,2\\,4``).

    Example:
        >>> parse_problem([r"command=srv --sizes 1\\,2 {port},rate=4"])
        {'command': 'srv --sizes 1,2 {port}', 'rate': 4}
    """
    problem: dict[str, Any] = {}
    for item in items:
        parts = (p.replace("\\,", ",").strip() for p in re.split(r"(?<!\\),", item))
        for part in filter(None, parts):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--problem: {part!r} is not KEY=VALUE")
            if key.strip() in problem:
                raise UsageError(f"--problem: {key.strip()} is given twice")
            parsed = _parse_value(value.strip())
            if isinstance(parsed, float) and not math.isfinite(parsed):
                raise UsageError(f"--problem: {part!r}: {key.strip()} must be a finite number")
            problem[key.strip()] = parsed
    return problem


def _parse_rename(text: str | None) -> dict[str, str]:
    """``"BLOCK_M=BLOCK_SIZE_M,GROUP_M=GROUP_SIZE_M"`` -> a name map."""
    names: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        old, sep, new = part.partition("=")
        if not sep or not old.strip():
            raise UsageError(f"--rename: {part!r} is not OLD=NEW (or OLD= to drop it)")
        if old.strip() in names:
            raise UsageError(f"--rename: {old.strip()} is renamed twice")
        names[old.strip()] = new.strip()
    return names


def workload_name(text: str | None) -> str | None:
    """A workload as the sweep stores it: a ``.py`` file by its absolute path (the workers and
    a later resume find it from any folder), any other name as given.

    Raises:
        UsageError: a ``.py`` file that does not exist.
    """
    from autotune.objectives.external import is_file_workload

    if text is None or not is_file_workload(text):
        return text
    path = Path(text).expanduser().resolve()
    if not path.is_file():
        raise UsageError(f"{text}: workload file not found")
    return str(path)


#: a duration's units, largest first, in seconds
DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
#: several units, each at most once and largest first: ``1h30m``, ``2d12h``, ``1m30.5s``
_COMPOUND = re.compile("".join(rf"(?:(\d+(?:\.\d*)?|\.\d+){u})?" for u in DURATION_UNITS))


def parse_duration(text: str | None) -> float | None:
    """``"90s"``, ``"5m"``, ``"1.5h"``, ``"2d"``, several units largest first (``"1h30m"``)
    or plain seconds -> seconds.

    Example:
        >>> parse_duration("1h30m"), parse_duration("2d"), parse_duration("90")
        (5400.0, 172800.0, 90.0)
    """
    if text is None:
        return None
    spelled = re.sub(r"\s+", "", text).lower()
    number, unit = (spelled[:-1], spelled[-1]) if spelled[-1:] in DURATION_UNITS else (spelled, "s")
    try:
        seconds = float(number) * DURATION_UNITS[unit]
    except ValueError:
        seconds = _compound_seconds(spelled, text)
    if not math.isfinite(seconds) or seconds <= 0:  # nan compares false with everything
        raise UsageError(f"--time-budget: {text!r} must be a positive, finite duration")
    return seconds


def _compound_seconds(spelled: str, text: str) -> float:
    """The seconds of ``spelled``, a duration of several units (``1h30m``), as given in
    ``text``.

    Raises:
        UsageError: not a duration of the units d, h, m and s, each once, largest first.
    """
    found = _COMPOUND.fullmatch(spelled) if spelled else None
    if found is None or not any(found.groups()):
        raise UsageError(f"--time-budget: {text!r} is not a duration like 90s, 5m, 1h30m or 2d "
                         "(units d, h, m, s, largest first; a bare number is seconds)")  # fmt: skip
    units = zip(found.groups(), DURATION_UNITS.values(), strict=True)
    return sum(float(number) * seconds for number, seconds in units if number)


def writable_output(
    path: Path | None,
    option: str = "--output",
    storage: str | None = None,
    inputs: dict[str, str | Path | None] | None = None,
    studies: Sequence[str | None] | None = (),
) -> Path | None:
    """``path`` once a file is shown to be writable there (a probe file created and removed
    in its folder, or in the nearest folder above that exists: the missing ones are made
    when the file is written), before a sweep or a recording spends its time; never one of
    the ``storage`` URL's own files, nor a file the command reads (``inputs``: option or
    description -> path, e.g. ``{"--replay": "grid.csv"}``), nor a file any study stored in
    ``storage`` reads (:func:`stored_reads`: its replay table, space file, ...: writing it
    would break that study's resume and exports, whichever study the command reads; the
    ``studies`` it reads, ``None`` for the newest, are named first where several studies
    read the file). A device (``/dev/null``, :func:`is_device`) is written in place: it
    needs only to be writable.

    Raises:
        UsageError: the path is a folder, the storage's database, a file that cannot be
            written, or no file can be created where it points.

    Example:
        >>> import tempfile
        >>> a_file = Path(tempfile.mkstemp()[1])
        >>> writable_output(a_file / "best.json")
        Traceback (most recent call last):
        ...
        autotune.cli_parsing.UsageError: --output .../best.json: ... is a file, not a folder
        >>> writable_output(Path("runs.db"), storage="sqlite:///runs.db")
        Traceback (most recent call last):
        ...
        autotune.cli_parsing.UsageError: --output runs.db: is the storage's own file ...
        >>> writable_output(Path("grid.csv"), inputs={"--replay": "./grid.csv"})
        Traceback (most recent call last):
        ...
        autotune.cli_parsing.UsageError: --output grid.csv: is the file --replay reads ...
        >>> writable_output(Path("grid.csv"), inputs={"the table study 'd2' replays": "grid.csv"})
        Traceback (most recent call last):
        ...
        autotune.cli_parsing.UsageError: --output grid.csv: is the table study 'd2' replays ...
    """
    if path is None:
        return None
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; name a file")
    if storage is not None:  # every stored study: one it does not read may replay the file
        inputs = {**(inputs or {}), **stored_reads(storage, list(studies or ()), every=True)}
    for source, read in (inputs or {}).items():
        if read is not None and _same_file(path, Path(read)):
            what = f"the file {source} reads" if source.startswith("-") else source
            raise UsageError(f"{option} {path}: is {what} (writing it would destroy it); name "
                             "another file")  # fmt: skip
    if storage is not None and _is_storage_file(path, storage):
        raise UsageError(f"{option} {path}: is the storage's own file (writing it would "
                         "destroy the stored sweeps); name another file")  # fmt: skip
    if is_device(path):  # written in place (export.write_atomic): no file is made beside it
        if not os.access(path, os.W_OK):
            raise UsageError(f"{option} {path}: cannot write there (permission denied)")
        return path
    above = path.absolute().parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UsageError(f"{option} {path}: {above} is a file, not a folder")
    try:
        handle, probe = tempfile.mkstemp(dir=above, prefix=f".{path.name}.", suffix=".probe")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot write there ({exc.strerror})") from None
    # the folder takes a new file, but an existing one may refuse its replacement (chattr +i:
    # a recording measured a config before it found out)
    if path.resolve().is_file() and not os.access(path.resolve(), os.W_OK):
        raise UsageError(f"{option} {path}: cannot write there (it is read-only or immutable)")
    return path


def _is_storage_file(path: Path, storage: str) -> bool:
    """Whether ``path`` names one of the files the ``storage`` URL keeps its studies in."""
    from autotune.storage import storage_files

    return any(_same_file(path, own) for own in storage_files(storage))


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (however spelled: relative, a link, a hard link)."""
    if a.expanduser().resolve() == b.expanduser().resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def is_device(path: Path) -> bool:
    """Whether ``path`` is something other than a regular file or a folder: a device
    (``/dev/null``, ``/dev/stdout``) or a pipe, which ``export.write_atomic`` writes in
    place, and beside which no side file belongs.

    A path that names one of the process's descriptors (``/dev/stdout``) is one, whatever the
    shell opened it on (``> best.json``).

    Example:
        >>> is_device(Path("/dev/null")), is_device(Path("best.json")), is_device(Path("/"))
        (True, False, False)
    """
    if descriptor_of(path) is not None:
        return True
    return path.exists() and not path.is_file() and not path.is_dir()


def study_reads(name: str, info: dict[str, Any]) -> dict[str, str]:
    """The files stored study ``name`` reads when it resumes or is exported, from its record
    (``info``, :func:`autotune.driver.trial_attrs.stored_info`), as :func:`writable_output`'s
    ``inputs``: its replay table, workload file, space file and each file a problem value
    names (a serving sweep's ``trace``). Only files that exist: a path no file is at loses
    nothing when written.

    Example:
        >>> import tempfile
        >>> table = tempfile.mkstemp(suffix=".csv")[1]
        >>> reads = study_reads("d2", {"workload": "replay", "space": table,
        ...                            "problem": {"table": table, "metric": "tflops"}})
        >>> list(reads), reads["the table study 'd2' replays"] == table
        (["the table study 'd2' replays"], True)
        >>> list(study_reads("s", {"workload": "serving", "problem": {"trace": table}}))
        ["the trace file study 's' reads"]
    """
    problem, workload = info.get("problem") or {}, str(info.get("workload") or "")
    named = {
        f"the table study {name!r} replays": problem.get("table")
        if info.get("workload") == "replay" else None,
        f"the workload file study {name!r} runs": workload if workload.endswith(".py") else None,
        f"the space file study {name!r} reads": info.get("space"),
        **{f"the {key} file study {name!r} reads": value for key, value in problem.items()},
        **command_reads(problem.get("command"), f"study {name!r}'s command"),
    }  # fmt: skip
    from autotune.tuning_cache import names_a_file

    reads: dict[str, str] = {}
    for what, value in named.items():
        if names_a_file(value) and value not in reads.values():
            reads[what] = value
    return reads


def problem_reads(problem: dict[str, Any]) -> dict[str, str]:
    """The files the ``--problem`` values name (a serving sweep's ``trace``, a workload's
    data file), as :func:`writable_output`'s ``inputs``: the sweep reads each one, and each
    trial's worker reads it again. Only files that exist, as :func:`study_reads` has them.

    Example:
        >>> import tempfile
        >>> trace = tempfile.mkstemp(suffix=".jsonl")[1]
        >>> list(problem_reads({"trace": trace, "rate": 4, "model": "1b"}))
        ['the trace file --problem names']
    """
    from autotune.tuning_cache import names_a_file

    reads = {f"the {key} file --problem names": value for key, value in problem.items()
             if names_a_file(value)}  # fmt: skip
    return {**reads, **command_reads(problem.get("command"), "--problem's command")}


def command_reads(command: Any, whose: str) -> dict[str, str]:
    """The files a server's command template runs or reads (its program, a script, a config
    file: :func:`~autotune.objectives.server_program.command_files`), as
    :func:`writable_output`'s ``inputs``: written over, no trial's server would start as it
    did. ``whose``: ``--problem's command``, ``study 's''s command``.

    Example:
        >>> import tempfile
        >>> script = tempfile.mkstemp(suffix=".py")[1]
        >>> list(command_reads(f"python3 {script} --port {{port}}", "--problem's command"))
        ["/.../python3, a file --problem's command names", "/tmp/....py, a file --problem's command names"]
    """  # noqa: E501
    if not isinstance(command, str):
        return {}
    from autotune.objectives.server_program import command_files

    return {f"{name}, a file {whose} names": name for name in command_files(command)}


def stored_reads(
    storage: str, studies: Sequence[str | None] | None, *, every: bool = False
) -> dict[str, str]:
    """The files that stored ``studies`` read (:func:`study_reads`), as
    :func:`writable_output`'s ``inputs``: ``None`` in the list is the newest study (what a
    command without ``--study`` reads), ``studies=None`` every stored study; ``every``: every
    stored study's files, those of ``studies`` first. None from a storage that cannot be
    opened, or a study not stored: the command's own reading of the storage says why, and a
    new study reads nothing yet. One read of the storage (the studies' summaries).

    Example:
        >>> stored_reads("memory", [None]), stored_reads("memory", [], every=True)
        ({}, {})
    """
    import optuna

    from autotune.driver.trial_attrs import stored_info
    from autotune.storage import open_storage

    if in_memory(storage) or (studies is not None and not studies and not every):
        return {}
    try:
        summaries = optuna.study.get_all_study_summaries(
            open_storage(storage, existing=True), include_best_trial=False
        )
    except Exception:  # noqa: BLE001 - a StorageError, a database down: the command's own
        return {}  # reading of the storage says why, in its one line
    names = {s.study_name for s in summaries}
    if studies is not None:
        newest = summaries[-1].study_name if summaries else None
        names = {newest if n is None else n for n in studies} & names
    if every:  # the named studies first: a file several read is told as theirs
        summaries = sorted(summaries, key=lambda s: s.study_name not in names)
    reads: dict[str, str] = {}
    for summary in summaries:
        if not every and summary.study_name not in names:
            continue
        info = stored_info(summary.user_attrs)
        for what, path in study_reads(summary.study_name, info).items():
            if path not in reads.values():
                reads[what] = path
    return reads
