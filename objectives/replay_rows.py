"""A recorded table's rows by config: the row that replays each config (the median of a
config recorded more than once), keyed by the values the table's own space offers
(:func:`offered_keys`: codes with leading zeros as written), and the configs a table records
more than once or spells two ways.

Example:
    >>> t = pd.DataFrame({"BM": [64, 64, 128], "tflops": [400.0, 420.0, 610.0]})
    >>> rows = rows_by_config(t, ["BM"], "tflops", offered_keys(t, ["BM"]))
    >>> rows[(64,)]["tflops"], rows[(64,)]["replay_readings"], repeated_configs(t, ["BM"])
    (410.0, 2, 1)
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from typing import Any

import pandas as pd

from autotune.failures import TrialStatus
from autotune.objectives.replay_table import CODED, LEADING_ZERO, cell, number


def rows_by_config(
    table: pd.DataFrame,
    params: list[str],
    metric: str,
    keys: list[tuple] | None = None,
    records: list[dict[str, Any]] | None = None,
) -> dict[tuple, dict[str, Any]]:
    """The table's row for each config (the values of ``params``). A config recorded more than
    once (re-measured, or the same sweep run twice) replays the median of its ok readings of
    ``metric``, with ``replay_readings`` saying how many; one with no ok reading, its first row.
    A blank cell is None in the key: the parameter is inactive there (absent from the config).
    ``keys`` (one a row) stands in for the keys read from ``params``: the cells' text, say.
    ``records`` is the table's rows as dicts (``table.to_dict(orient="records")``) where the
    caller has them already (each call made them anew: 25 ms of a 1,000-row table); they are
    read, not changed, and a config's single row is one of them.

    Example:
        >>> t = pd.DataFrame({"a": [1, 1, 1, 2], "m": [5.0, 9.0, 6.0, 7.0]})
        >>> rows = rows_by_config(t, ["a"], "m")
        >>> {k: (r["m"], r.get("replay_readings")) for k, r in rows.items()}
        {(1,): (6.0, 3), (2,): (7.0, None)}
    """
    grouped: dict[tuple, list[dict[str, Any]]] = {}
    if records is None:
        records = table.to_dict(orient="records")
    for at, row in enumerate(records):
        key = keys[at] if keys is not None else tuple(cell(row[p]) for p in params)
        grouped.setdefault(key, []).append(row)
    rows = {}
    for key, group in grouped.items():
        ok = [r for r in group if _reads(r, metric)]
        if len(group) == 1 or not ok:
            rows[key] = group[0]
            continue
        median = statistics.median(number(r[metric]) for r in ok)
        rows[key] = {**ok[0], metric: median, "replay_readings": len(ok)}
    return rows


def _reads(row: dict[str, Any], metric: str) -> bool:
    """Whether ``row`` is an ok reading of ``metric`` (a finite number): one a median takes."""
    value = number(row[metric])
    ok = str(row.get("status", TrialStatus.OK.value)) == "ok"
    return ok and value is not None and math.isfinite(value)


#: the columns that end a table's config columns (``autotune record`` writes the config first,
#: then its stamps, then ``status`` and the figures; a table by hand, the config then figures)
_AFTER_CONFIG = ("workload", "device", "status")


def merged_columns(table: pd.DataFrame, params: list[str], metric: str) -> dict[str, list[Any]]:
    """The config columns left out of ``params`` (those before the stamps, ``status`` and
    ``metric``: :data:`_AFTER_CONFIG`) whose cells differ among the ok readings that one config's
    median merges (:func:`rows_by_config`), each with its values there in the table's order
    (None: blank): the median of different configs, not of one re-measured.

    Example:
        >>> t = pd.DataFrame({"lr": [1, 1, 2], "opt": ["fused", "foreach", "fused"],
        ...                   "ms": [5.0, 9.0, 7.0]})
        >>> merged_columns(t, ["lr"], "ms"), merged_columns(t, ["lr", "opt"], "ms")
        ({'opt': ['fused', 'foreach']}, {})
    """
    columns: list[str] = []
    for column in table.columns:
        name = str(column)
        if name in _AFTER_CONFIG or name == metric or name.startswith(("problem.", "device.")):
            break
        if column not in params:
            columns.append(column)
    if not columns:
        return {}
    cells = {column: offered_cells(table, column) for column in columns}
    first: dict[tuple, int] = {}
    merged: dict[str, list[Any]] = {}
    records = table.to_dict(orient="records")
    for at, key in enumerate(offered_keys(table, params)):
        if not _reads(records[at], metric):
            continue
        was = first.setdefault(key, at)
        for column in columns:
            value, before = cells[column][at], cells[column][was]
            if str(value) != str(before):
                values = merged.setdefault(column, [])
                values += [v for v in dict.fromkeys((before, value)) if v not in values]
    return {column: merged[column] for column in columns if column in merged}


def offered_keys(table: pd.DataFrame, params: list[str]) -> list[tuple]:
    """Each row's config as the table's own space offers it (:func:`space_from_table`), one a
    row: a column of codes with leading zeros (:data:`CODED`) as written, any other by its
    cells' values (:func:`cell`), so ``1.0`` and ``1`` are one value and ``01`` is not ``1``.

    Example:
        >>> t = pd.DataFrame({"tag": [1, 1], "BM": [64.0, 64.0]})
        >>> t.attrs[CODED] = {"tag": ["01", "1"]}
        >>> offered_keys(t, ["tag", "BM"])
        [('01', 64), ('1', 64)]
    """
    cells = [offered_cells(table, name) for name in params]
    return list(zip(*cells, strict=True)) if cells else [() for _ in range(len(table))]


def offered_cells(table: pd.DataFrame, name: str) -> list[Any]:
    """The values the table's own space offers in column ``name``, a row each (None: blank)."""
    coded = table.attrs.get(CODED, {})
    return list(coded[name]) if name in coded else [cell(v) for v in table[name]]


def code_collisions(table: pd.DataFrame, name: str) -> dict[Any, list[str]]:
    """The numbers that column ``name`` spells more than one way, one of them a code with a
    leading zero (``01`` and ``1``), each -> its spellings in the table's order: configs that
    the table's own space tells apart (:func:`offered_keys`) and a number cannot.

    Example:
        >>> t = pd.DataFrame({"tag": [1, 1, 8, 8, 2]})
        >>> t.attrs[CODED] = {"tag": ["01", "1", "08", "08", "2"]}
        >>> code_collisions(t, "tag")
        {1: ['01', '1']}
    """
    coded = table.attrs.get(CODED, {})
    if name not in coded:
        return {}
    spellings: dict[Any, list[str]] = {}
    for text, value in zip(coded[name], table[name], strict=True):
        value = cell(value)
        if text is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        known = spellings.setdefault(value, [])
        if text not in known:
            known.append(text)
    return {
        value: texts
        for value, texts in spellings.items()
        if len(texts) > 1 and any(LEADING_ZERO.match(t) for t in texts)
    }


def repeated_configs(table: pd.DataFrame, params: list[str]) -> int:
    """How many configs the table records more than once, as the replay looks them up
    (:func:`offered_keys`): codes with leading zeros ``01`` and ``1`` are two configs.

    Example:
        >>> repeated_configs(pd.DataFrame({"a": [1, 1, 2, 3, 3, 3]}), ["a"])
        2
    """
    counts = Counter(offered_keys(table, params))
    return sum(1 for count in counts.values() if count > 1)
