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
from pathlib import Path
from typing import Any

from autotune.units import never_negative


class UsageError(ValueError):
    """Bad input from the command line."""


def parse_slo(text: str | None) -> dict[str, float]:
    """``--slo ttft_p99_ms=500,tpot_p99_ms=50`` as ``{metric: limit}``.

    Example:
        >>> parse_slo("ttft_p99_ms=500,tpot_p99_ms=50")
        {'ttft_p99_ms': 500.0, 'tpot_p99_ms': 50.0}
    """
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


def parse_duration(text: str | None) -> float | None:
    """``"90s"``, ``"5m"``, ``"1.5h"`` or plain seconds -> seconds."""
    if text is None:
        return None
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text[-1:] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise UsageError(f"--time-budget: {text!r} is not a duration like 90s, 5m or 1h") from None
    if not math.isfinite(seconds) or seconds <= 0:  # nan compares false with everything
        raise UsageError(f"--time-budget: {text!r} must be a positive, finite duration")
    return seconds


def writable_output(
    path: Path | None,
    option: str = "--output",
    storage: str | None = None,
    inputs: dict[str, str | Path | None] | None = None,
) -> Path | None:
    """``path`` once a file is shown to be writable there (a probe file created and removed
    in its folder, or in the nearest folder above that exists: the missing ones are made
    when the file is written), before a sweep or a recording spends its time; never one of
    the ``storage`` URL's own files, nor a file the command reads (``inputs``: option ->
    path, e.g. ``{"--replay": "grid.csv"}``).

    Raises:
        UsageError: the path is a folder, the storage's database, or no file can be created
            where it points.

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
    """
    if path is None:
        return None
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; name a file")
    for source, read in (inputs or {}).items():
        if read is not None and _same_file(path, Path(read)):
            raise UsageError(f"{option} {path}: is the file {source} reads (writing it would "
                             "destroy it); name another file")  # fmt: skip
    if storage is not None and _is_storage_file(path, storage):
        raise UsageError(f"{option} {path}: is the storage's own file (writing it would "
                         "destroy the stored sweeps); name another file")  # fmt: skip
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
