"""Replay: evaluate a config by looking it up in a table of recorded measurements.

The table is a CSV with a column per parameter, metric columns and, optionally, a ``status``
column (``ok`` or a failure state, optionally with a ``reason`` column). Without one, as in a
table measured by hand, every row is a measurement, and a row whose metric is blank or not a
number is a config that did not run. A config absent from the table is infeasible. Every
figure it returns is a replayed recording, not a new measurement.

A blank parameter cell is a parameter inactive in its row (a conditional one, such as the
epilogue subtile of a schedule that has none, which ``autotune record`` leaves blank): the
space derived from the table makes that parameter conditional on the parameter whose values
say where it is blank, and a config without it replays that row.

Each replayed measurement carries the trial's recorded duration, which the inline executor's
simulated clock uses to replay N trials in flight in the order they would finish. It is the
first column of :data:`DURATION_COLUMNS` the table has: ``duration_s`` (written by
``autotune record``), else a stand-in that grows with the trial's cost: ``warmup_s`` (a
training step's first step, compile included) or ``ms`` (a kernel's time). Without any, every
trial takes one simulated second (trials finish in the order they started).

Example:
    >>> import pandas as pd, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "grid.csv")
    >>> pd.DataFrame({"BM": [64, 128], "tflops": [400.0, 610.0],
    ...               "status": ["ok", "ok"]}).to_csv(path, index=False)
    >>> objective = ReplayObjective({"table": path, "params": ["BM"], "metric": "tflops"})
    >>> objective.evaluate({"BM": 128}).values["tflops"]
    610.0
    >>> space_from_table(load_table(path), ["BM"]).names
    ['BM']
"""

from __future__ import annotations

import csv
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.failures import Crashed, Infeasible, TrialFailure, TrialStatus
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.space import Constraint, Expression, ExpressionError, Param, Space, SpaceError
from autotune.space.expr import NAMESPACES
from autotune.space.loader import check_name

_FAILURES = {cls.status.value: cls for cls in TrialFailure.__subclasses__()}
#: column -> seconds per unit, in order of preference, for a trial's recorded duration
DURATION_COLUMNS = {"duration_s": 1.0, "warmup_s": 1.0, "ms": 1e-3}
#: set in a table's attrs when it had no status column (every row taken as ok)
_NO_STATUS = "autotune_no_status_column"


def load_table(path: str) -> pd.DataFrame:
    """Read a recorded table; without a ``status`` column every row is ``ok``. A process
    reads a file once, whatever path names it: the set-up's ``grid.csv`` and the whole path
    the study stores (which the replay's objective reads) are one read.

    Raises:
        SpaceError: the table cannot be read or replayed, naming ``path`` as given.
    """
    try:
        return _read_table(str(Path(path).resolve()))
    except _Unreadable as exc:
        raise SpaceError(f"{path}: {exc}") from None


class _Unreadable(Exception):
    """What keeps a table from being read, without its path: :func:`load_table` puts the
    path first as its caller named it (the read is shared under the file's whole path)."""


@lru_cache(maxsize=8)
def _read_table(path: str) -> pd.DataFrame:
    """:func:`load_table` of the file at ``path`` (a whole path: one entry a file).

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
    _keep_words(table, path)
    table = table.copy()  # one block again: a column added to 300 set one by one warned
    if "status" not in table.columns:
        table["status"] = TrialStatus.OK.value
        table.attrs[_NO_STATUS] = True
    states = {s.value for s in TrialStatus}
    for line, state in enumerate(table["status"], start=2):
        if _cell(state) is None:
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
            if any(cell.strip() for cell in row[len(header) :]):
                raise _Unreadable(f"line {rows.line_num}: {len(row)} fields, the header names "
                                  f"{len(header)}")  # fmt: skip


def _keep_words(table: pd.DataFrame, path: str) -> None:
    """Columns of words keep them as written: pandas reads "None", "NA" or "null" as missing,
    so a categorical choice ``"None"`` (a recompute mode, a quantization off) became a blank.
    Only a blank is missing there; a column of numbers keeps its NaN spellings. A column of
    whole numbers that pandas left as text (one past 64 bits) is read as Python's ints."""
    raw = pd.read_csv(path, dtype=str, keep_default_na=False, index_col=False)
    # a number written with a leading zero (007: a tag, a code): the table's own space offers
    # the cells as written (pandas read 010 as 10, which the export wrote); a --space of
    # numbers still finds the row by its number
    table.attrs[CODED] = {c: [v.strip() or None for v in raw[c]] for c in raw.columns
                          if any(_LEADING_ZERO.match(v.strip()) for v in raw[c])}  # fmt: skip
    words = [c for c in table.columns if pd.api.types.is_string_dtype(table[c])
             or pd.api.types.is_object_dtype(table[c])]  # fmt: skip
    for column in words:
        text = raw[column].str.strip()
        if all(_WHOLE.fullmatch(v) for v in text if v):
            table[column] = [int(v) if v else None for v in text]
        else:
            table[column] = raw[column].where(raw[column] != "", None)


_WHOLE = re.compile(r"[+-]?\d+")
_LEADING_ZERO = re.compile(r"[+-]?0\d")
#: table attrs: column -> its cells as written, for a column of numbers with leading zeros
CODED = "autotune_coded_columns"


def _plain(value: Any) -> Any:
    """numpy scalars -> Python values, integral floats -> int, so keys compare equal."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _cell(value: Any) -> Any:
    """A parameter's cell as a config value: None where it is blank (the parameter is
    inactive in that row), else :func:`_plain`.

    Example:
        >>> _cell(float("nan")), _cell(8.0), _cell("tiled")
        (None, 8, 'tiled')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return _plain(value)


def _number(value: Any) -> float | None:
    """A table cell as a float, or None when it holds no number (a word, a blank)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def rows_by_config(
    table: pd.DataFrame, params: list[str], metric: str, keys: list[tuple] | None = None
) -> dict[tuple, dict[str, Any]]:
    """The table's row for each config (the values of ``params``). A config recorded more than
    once (re-measured, or the same sweep run twice) replays the median of its ok readings of
    ``metric``, with ``replay_readings`` saying how many; one with no ok reading, its first row.
    A blank cell is None in the key: the parameter is inactive there (absent from the config).
    ``keys`` (one a row) stands in for the keys read from ``params``: the cells' text, say.

    Example:
        >>> t = pd.DataFrame({"a": [1, 1, 1, 2], "m": [5.0, 9.0, 6.0, 7.0]})
        >>> rows = rows_by_config(t, ["a"], "m")
        >>> {k: (r["m"], r.get("replay_readings")) for k, r in rows.items()}
        {(1,): (6.0, 3), (2,): (7.0, None)}
    """
    grouped: dict[tuple, list[dict[str, Any]]] = {}
    for at, row in enumerate(table.to_dict(orient="records")):
        key = keys[at] if keys is not None else tuple(_cell(row[p]) for p in params)
        grouped.setdefault(key, []).append(row)
    rows = {}
    for key, group in grouped.items():
        ok = [r for r in group if str(r.get("status", TrialStatus.OK.value)) == "ok"
              and _number(r[metric]) is not None and math.isfinite(_number(r[metric]))]  # fmt: skip
        if len(group) == 1 or not ok:
            rows[key] = group[0]
            continue
        median = statistics.median(_number(r[metric]) for r in ok)
        rows[key] = {**ok[0], metric: median, "replay_readings": len(ok)}
    return rows


@lru_cache(maxsize=8)
def _text_keys(path: str, params: tuple[str, ...]) -> list[tuple]:
    """Each row's ``params`` cells as written (stripped), in the table's row order."""
    raw = pd.read_csv(path, usecols=list(params), dtype=str, keep_default_na=False,
                      index_col=False)  # fmt: skip
    return [tuple(str(row[p]).strip() for p in params) for row in raw.to_dict(orient="records")]


def offered_keys(table: pd.DataFrame, params: list[str]) -> list[tuple]:
    """Each row's config as the table's own space offers it (:func:`space_from_table`), one a
    row: a column of codes with leading zeros (:data:`CODED`) as written, any other by its
    cells' values (:func:`_cell`), so ``1.0`` and ``1`` are one value and ``01`` is not ``1``.

    Example:
        >>> t = pd.DataFrame({"tag": [1, 1], "BM": [64.0, 64.0]})
        >>> t.attrs[CODED] = {"tag": ["01", "1"]}
        >>> offered_keys(t, ["tag", "BM"])
        [('01', 64), ('1', 64)]
    """
    cells = [_offered(table, name) for name in params]
    return list(zip(*cells, strict=True)) if cells else [() for _ in range(len(table))]


def _offered(table: pd.DataFrame, name: str) -> list[Any]:
    """The values the table's own space offers in column ``name``, a row each (None: blank)."""
    coded = table.attrs.get(CODED, {})
    return list(coded[name]) if name in coded else [_cell(v) for v in table[name]]


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
        value = _cell(value)
        if text is None or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        known = spellings.setdefault(value, [])
        if text not in known:
            known.append(text)
    return {
        value: texts
        for value, texts in spellings.items()
        if len(texts) > 1 and any(_LEADING_ZERO.match(t) for t in texts)
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


def space_from_table(table: pd.DataFrame, params: list[str], source: str = "<table>") -> Space:
    """Derive a search space from the values a table holds; ordered numbers stay ordered. A
    parameter blank in some rows is active only where the table sets it: its condition reads
    the parameter whose values say so (placed before it), else the never-blank parameters
    together.

    Raises:
        SpaceError: naming the table and the column: not a column, a name the expression
            language takes (``device``, ``problem``), blank in every row, or blank in rows
            that no other parameter tells apart from those that set it.

    Example:
        >>> t = pd.DataFrame({"SCHEDULE": ["tiled", "persistent", "persistent"],
        ...                   "SUBTILE": [None, 0, 1], "ms": [1.0, 5.0, 6.0]})
        >>> space = space_from_table(t, ["SUBTILE", "SCHEDULE"])
        >>> space.names, space["SUBTILE"].condition.source
        (['SCHEDULE', 'SUBTILE'], "SCHEDULE != 'tiled'")
        >>> for config in space.grid():
        ...     print(config)
        {'SCHEDULE': 'persistent', 'SUBTILE': 0}
        {'SCHEDULE': 'persistent', 'SUBTILE': 1}
        {'SCHEDULE': 'tiled'}
    """
    missing = [p for p in params if p not in table.columns]
    if missing:
        raise SpaceError(f"{source}: --params names {missing[0]!r}, which is not a column")
    # a constraint over the rows reads a parameter by its name, where `device` and `problem`
    # are the namespaces (device.X, problem.X): a sparse table's lookup got the device's dict
    taken = next((p for p in params if p in NAMESPACES), None)
    if taken is not None:
        raise SpaceError(f"{source}: column {taken!r} is taken by the expression language; "
                         "rename the column or leave it out of --params")  # fmt: skip
    cells = {name: _offered(table, name) for name in params}
    choices: dict[str, list[Any]] = {}
    for name in params:
        values = list(dict.fromkeys(v for v in cells[name] if v is not None))
        if not values:
            raise SpaceError(f"{source}: column {name!r} is blank in every row: it holds no value "
                             "to tune")  # fmt: skip
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        choices[name] = sorted(values) if numeric else sorted(values, key=str)
    conditions: dict[str, tuple[list[str], Expression]] = {}
    for name in params:
        if None in cells[name]:
            conditions[name] = _condition(name, cells, choices, params, conditions, source)
    by_name = {
        name: Param(
            name=name,
            kind="categorical",
            choices=choices[name],
            condition=conditions[name][1] if name in conditions else None,
        )
        for name in params
    }
    order = _ordered(params, {name: reads for name, (reads, _) in conditions.items()})
    space = Space(f"replay:{source}", [by_name[n] for n in order], source=source)
    if not conditions:
        recorded = {tuple(cells[n][row] for n in order) for row in range(len(table))}
        if len(recorded) < space.grid_size():  # not the whole product: a sweep keeps to rows
            space.constraints = _recorded_rows(order, recorded, source)
            space.max_configs = len(recorded)
    return space


class _RecordedPrefix:
    """The expression of a constraint that holds where the first parameters' values (in the
    space's order) are those of some row of a table: with one for each prefix, a sparse
    table's space lists its rows alone, cut at the first value no row goes on with.

    Example:
        >>> first = _RecordedPrefix(["a", "b"], {(1, 2), (3, 4)}, "t.csv")
        >>> sorted(first.names), first.evaluate({"a": 1, "b": 2}), first.evaluate({"a": 1, "b": 4})
        (['a', 'b'], True, False)
    """

    def __init__(self, order: list[str], rows: set[tuple], source: str) -> None:
        self.order = list(order)
        self.names = frozenset(order)
        self.prefixes = {row[: len(order)] for row in rows}
        self.source = f"a row of {source} holds ({', '.join(order)})"

    def evaluate(self, env: Mapping[str, Any]) -> bool:
        return tuple(env[name] for name in self.order) in self.prefixes


def _recorded_rows(order: list[str], rows: set[tuple], source: str) -> list[Constraint]:
    """One constraint a prefix of ``order``: a config is one of the table's ``rows``. A table
    measured by hand holds a few configs of its columns' product (40 of 65,536): proposals
    from the product were almost all absent (2,247 rejected in 44 s for one trial)."""
    return [
        Constraint("recorded", _RecordedPrefix(order[:n], rows, source), where=f"{source}: rows")
        for n in range(1, len(order) + 1)
    ]


def _condition(
    name: str,
    cells: dict[str, list[Any]],
    choices: dict[str, list[Any]],
    params: list[str],
    conditions: dict[str, tuple[list[str], Expression]],
    source: str,
) -> tuple[list[str], Expression]:
    """The ``when:`` of a parameter blank in some rows (the parameters it reads, and it): the
    first other parameter whose every value is either always or never recorded with it (a
    never-blank one first, or a conditional one before it), else the tuple of every
    never-blank parameter.

    Example:
        >>> cells = {"S": ["a", "b", "c"], "E": [None, 0, 1]}
        >>> _condition("E", cells, {"S": ["a", "b", "c"]}, ["S", "E"], {}, "t.csv")
        (['S'], Expression("S != 'a'"))
    """
    active = [v is not None for v in cells[name]]
    never_blank = [p for p in params if p != name and None not in cells[p] and _readable(p)]
    earlier = [p for p in params[: params.index(name)] if p in conditions and _readable(p)]
    for other in [*never_blank, *earlier]:
        verdict = _verdict(cells[other], active)
        if verdict is None or verdict.get(None, False):
            continue  # it does not tell the rows apart, or it is blank where `name` is set
        on = [v for v in choices[other] if verdict.get(v)]
        off = [v for v in choices[other] if verdict.get(v) is False]
        texts = [f"{other} in {on!r}", f"{other} not in {off!r}"]
        texts = [f"{other} != {off[0]!r}"] if len(off) == 1 else texts  # as a space file says
        condition = _expression(min(texts, key=len))
        if condition is not None:
            return [other], condition
    if len(never_blank) > 1:
        verdict = _verdict(list(zip(*(cells[p] for p in never_blank), strict=True)), active)
        if verdict is not None:
            on = [key for key, is_on in verdict.items() if is_on]
            condition = _expression(f"({', '.join(never_blank)}) in {on!r}")
            if condition is not None:
                return never_blank, condition
    raise SpaceError(
        f"{source}: column {name!r} is blank in some rows, and no other parameter says in "
        "which: a blank cell is a parameter inactive in its row (fill the cells in, or pass a "
        "--space whose `when:` says where it is active)"
    )


def _expression(text: str) -> Expression | None:
    """``text`` parsed, or None where the expression language refuses it (too long)."""
    try:
        return Expression(text)
    except ExpressionError:
        return None


def _verdict(keys: list[Any], active: list[bool]) -> dict[Any, bool] | None:
    """Each key -> whether its rows are active, or None where one key holds rows of both."""
    verdict: dict[Any, bool] = {}
    for key, on in zip(keys, active, strict=True):
        if verdict.setdefault(key, on) != on:
            return None
    return verdict


def _readable(name: str) -> bool:
    """Whether an expression can read a column by ``name`` (``telemetry.x`` cannot)."""
    try:
        check_name(name, "")
    except SpaceError:
        return False
    return True


def _ordered(params: list[str], reads: dict[str, list[str]]) -> list[str]:
    """``params`` in their order, except that each comes after every parameter it reads.

    Example:
        >>> _ordered(["E", "S", "B"], {"E": ["S"]})
        ['S', 'E', 'B']
    """
    order: list[str] = []
    pending = list(params)
    while pending:
        ready = next(p for p in pending if all(r in order for r in reads.get(p, [])))
        order.append(ready)
        pending.remove(ready)
    return order


class ReplayObjective(Objective):
    """Problem: ``table`` (CSV path), ``params`` (parameter columns), ``metric`` (value column),
    optionally ``absent_costs_a_trial`` (default False).

    Raises the recorded failure for rows whose status is not ok, and Infeasible for configs
    the table does not hold.
    """

    name = "replay"
    space = ""
    directions = {"value": "maximize"}
    measures = False

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        table = load_table(str(problem["table"]))
        self.params = list(problem["params"])
        self.metric = str(problem["metric"])
        # A benchmark over a partly recorded grid counts a config it cannot replay as a spent,
        # failed trial (a real sweep would have launched it), not as a free rejection.
        self.absent_costs_a_trial = bool(problem.get("absent_costs_a_trial", False))
        if self.metric not in table.columns:
            raise SpaceError(f"{problem['table']}: --metric {self.metric!r} is not a column")
        self.no_status = bool(table.attrs.get(_NO_STATUS, False))
        self.duration_column = next((c for c in DURATION_COLUMNS if c in table.columns), None)
        # the configs the table's own space offers: codes as written, other columns by value
        self._rows_offered = rows_by_config(
            table, self.params, self.metric, offered_keys(table, self.params)
        )
        self._rows = rows_by_config(table, self.params, self.metric)
        # the cells as written: a --space whose choices are the words "01", "10" finds its rows,
        # which pandas read as the numbers 1 and 10 (and "01" and "1" as one config)
        self._rows_by_text = rows_by_config(
            table, self.params, self.metric, _text_keys(str(problem["table"]), tuple(self.params))
        )

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        row = self._row(tuple(_cell(config.get(p)) for p in self.params))  # absent: blank
        if row is None:
            if self.absent_costs_a_trial:
                raise Crashed("config not in the recorded table (replay; counted as a trial)")
            raise Infeasible("config not in the recorded table (replay)")
        status = str(row["status"])
        if status != TrialStatus.OK.value:
            reason = row.get("reason")
            text = reason if isinstance(reason, str) and reason else f"recorded {status}"
            raise _FAILURES.get(status, TrialFailure)(f"{text} (replay)")
        value = _number(row[self.metric])
        if value is None or not math.isfinite(value):
            if self.no_status:  # a hand-made table: a blank or a word where a figure belongs
                raise Crashed(f"no {self.metric} recorded: {row[self.metric]!r} (replay)")
            raise Infeasible(f"recorded {self.metric} is {row[self.metric]!r} (replay)")
        extra = {
            k: _plain(v)
            for k, v in row.items()
            if k not in self.params
            and k not in ("status", "reason", self.metric)
            and not (isinstance(v, float) and math.isnan(v))
        }
        return Measurement(
            values={self.metric: value},
            metrics={"replay": True, **extra},
            recorded_duration_s=self._recorded_duration(row),
        )

    def _row(self, key: tuple) -> dict[str, Any] | None:
        """The row that replays the config of ``key`` (its values in ``params`` order), or None."""
        # a config of the table's own space: a code beside a column of floats ("01", 1 where
        # the row reads 01,1.0) is found here, which neither the numbers nor the text found
        row = self._rows_offered.get(key)
        if row is not None:
            return row
        row = self._rows.get(key)
        # a word: the cells as written hold it; so do they a number of a column that holds
        # words too (8, 16, auto: read as text), which the numbers' own key misses
        if row is None or any(isinstance(v, str) for v in key):
            text = tuple("" if v is None else str(v) for v in key)
            row = self._rows_by_text.get(text, row)
        return row

    def _recorded_duration(self, row: dict[str, Any]) -> float:
        if self.duration_column is None:
            return 1.0
        value = row.get(self.duration_column)
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            return 1.0
        return float(value) * DURATION_COLUMNS[self.duration_column]


OBJECTIVE = ReplayObjective
