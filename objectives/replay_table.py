"""A recorded table of measurements, read for replay: a CSV with a column per parameter,
metric columns and, optionally, a ``status`` column (``ok`` or a failure state); without one
every row is ``ok``. Its cells keep their words as written (``None``, ``NA``), whole numbers
past 64 bits stay numbers, and codes with leading zeros (``007``) are kept as written too
(:data:`CODED`). A process reads a file once, whatever path names it.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "grid.csv")
    >>> pd.DataFrame({"BM": [64, 128], "mode": ["None", "tiled"],
    ...               "tflops": [400.0, 610.0]}).to_csv(path, index=False)
    >>> table = load_table(path)  # pandas alone would read the word "None" as a blank
    >>> list(table["mode"]), list(table["status"]), cell(table["BM"][1])
    (['None', 'tiled'], ['ok', 'ok'], 128)
    >>> text_keys(path, ("BM", "mode"))
    [('64', 'None'), ('128', 'tiled')]
"""

from __future__ import annotations

import csv
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from autotune.failures import TrialStatus
from autotune.space import SpaceError

#: set in a table's attrs when it had no status column (every row taken as ok)
NO_STATUS = "autotune_no_status_column"


def load_table(path: str) -> pd.DataFrame:
    """Read a recorded table; without a ``status`` column every row is ``ok``. A process
    reads a file once while it stays as it was, whatever path names it: the set-up's
    ``grid.csv`` and the whole path the study stores (which the replay's objective reads) are
    one read; a file written again since (another recording) is read again.

    Raises:
        SpaceError: the table cannot be read or replayed, naming ``path`` as given.
    """
    whole = str(Path(path).resolve())
    try:
        return _read_table(whole, _stamp(whole))
    except _Unreadable as exc:
        raise SpaceError(f"{path}: {exc}") from None


class _Unreadable(Exception):
    """What keeps a table from being read, without its path: :func:`load_table` puts the
    path first as its caller named it (the read is shared under the file's whole path)."""


def _stamp(path: str) -> tuple[int, int] | None:
    """When the file at ``path`` was last written, and its size: a read kept under an older
    stamp is of another content (None: no such file, which the read says).

    Example:
        >>> _stamp("/no/such/table.csv") is None
        True
    """
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=8)
def _read_table(path: str, stamp: tuple[int, int] | None) -> pd.DataFrame:
    """:func:`load_table` of the file at ``path`` (a whole path: one entry a file and
    ``stamp``, :func:`_stamp`'s, so that a file written again is read again).

    Raises:
        _Unreadable: saying why.
    """
    try:
        _check_header(path)
        table = pd.read_csv(path, index_col=False)  # rows that end in a comma have no index
    except FileNotFoundError:
        raise _Unreadable("replay table not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, csv.Error) as exc:
        first = str(exc).strip().splitlines()[0]
        raise _Unreadable(f"not a readable CSV table: {first}") from None
    _keep_words(table, _read_text(path, stamp))
    table = table.copy()  # one block again: a column added to 300 set one by one warned
    if "status" not in table.columns:
        table["status"] = TrialStatus.OK.value
        table.attrs[NO_STATUS] = True
    states = {s.value for s in TrialStatus}
    for line, state in enumerate(table["status"], start=2):
        if cell(state) is None:
            raise _Unreadable(f"line {line}: column 'status' is blank (a state such as 'ok' or "
                              "'oom' is needed)")  # fmt: skip
        if str(state) not in states:
            raise _Unreadable(f"line {line}: column 'status': unknown state {state!r}")
    return table


def _check_header(path: str) -> None:
    """A column is named once in the header (pandas renamed a second ``a`` to ``a.1`` and
    replayed the first alone), and no row holds a value past the header's columns (pandas
    dropped the extra field of a first row without a word, and refused one on a later row).

    Raises:
        _Unreadable: naming the column.
    """
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as file:
        rows = csv.reader(file)
        header = next(rows, [])
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise _Unreadable(f"column {name!r} is named twice in the header")
            seen.add(name)
        for row in rows:  # a spreadsheet's trailing comma is one blank field more: allowed
            if any(field.strip() for field in row[len(header) :]):
                raise _Unreadable(f"line {rows.line_num}: {len(row)} fields, the header names "
                                  f"{len(header)}")  # fmt: skip


@lru_cache(maxsize=8)
def _read_text(path: str, stamp: tuple[int, int] | None) -> _Text:
    """The file at ``path`` (a whole path, as it was at ``stamp``) read once more as written,
    every cell a string (:class:`_Text`): the one read of its text that the words, the codes
    and the keys as written (:func:`text_keys`) share."""
    raw = pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False)
    return _Text(raw, {c: [v.strip() for v in raw[c].tolist()] for c in raw.columns})


class _Text(NamedTuple):
    """A table's cells as written: the frame pandas read (every cell a string, a blank ``""``)
    and each column's cells stripped, as Python lists (read a cell at a time, pandas' strings
    took 40 ms of a 1,000-row table's 80-ms load)."""

    raw: pd.DataFrame
    stripped: dict[str, list[str]]


def _keep_words(table: pd.DataFrame, text: _Text) -> None:
    """Columns of words keep them as written: pandas reads "None", "NA" or "null" as missing,
    so a categorical choice ``"None"`` (a recompute mode, a quantization off) became a blank.
    Only a blank is missing there; a column of numbers keeps its NaN spellings. A column of
    whole numbers that pandas left as text (one past 64 bits) is read as Python's ints."""
    raw, stripped = text
    # a number written with a leading zero (007: a tag, a code): the table's own space offers
    # the cells as written (pandas read 010 as 10, which the export wrote); a --space of
    # numbers still finds the row by its number
    table.attrs[CODED] = {c: [v or None for v in cells] for c, cells in stripped.items()
                          if any(LEADING_ZERO.match(v) for v in cells)}  # fmt: skip
    words = [c for c in table.columns if pd.api.types.is_string_dtype(table[c])
             or pd.api.types.is_object_dtype(table[c])]  # fmt: skip
    for column in words:
        cells = raw[column].str.strip().tolist()  # pandas' strip, a column at once
        if all(_WHOLE.fullmatch(v) for v in cells if v):
            table[column] = [int(v) if v else None for v in cells]
        else:
            table[column] = raw[column].where(raw[column] != "", None)


_WHOLE = re.compile(r"[+-]?\d+")
LEADING_ZERO = re.compile(r"[+-]?0\d")
#: table attrs: column -> its cells as written, for a column of numbers with leading zeros
CODED = "autotune_coded_columns"


def plain(value: Any) -> Any:
    """numpy scalars -> Python values, integral floats -> int, so keys compare equal."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def cell(value: Any) -> Any:
    """A parameter's cell as a config value: None where it is blank (the parameter is
    inactive in that row), else :func:`plain`.

    Example:
        >>> cell(float("nan")), cell(8.0), cell("tiled")
        (None, 8, 'tiled')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return plain(value)


def number(value: Any) -> float | None:
    """A table cell as a float, or None when it holds no number (a word, a blank)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def text_keys(path: str, params: tuple[str, ...]) -> list[tuple]:
    """Each row's ``params`` cells as written (stripped), in the table's row order: from the
    read of the text :func:`load_table` made of the file, whatever path names it."""
    whole = str(Path(path).resolve())
    return _text_keys(whole, _stamp(whole), params)


@lru_cache(maxsize=8)
def _text_keys(path: str, stamp: tuple[int, int] | None, params: tuple[str, ...]) -> list[tuple]:
    """:func:`text_keys` of the file at ``path`` (whole) as it was at ``stamp``."""
    stripped = _read_text(path, stamp).stripped
    columns = [stripped[p] for p in params]
    return list(zip(*columns, strict=True)) if columns else []
