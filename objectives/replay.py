"""Replay: evaluate a config by looking it up in a table of recorded measurements.

The table is a CSV with a column per parameter, metric columns and, optionally, a ``status``
column (``ok`` or a failure state, optionally with a ``reason`` column). Without one, as in a
table measured by hand, every row is a measurement, and a row whose metric is blank or not a
number is a config that did not run. A config absent from the table is infeasible. Every
figure it returns is a replayed recording, not a new measurement.

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

import math
import statistics
from functools import lru_cache
from typing import Any

import pandas as pd

from autotune.failures import Crashed, Infeasible, TrialFailure, TrialStatus
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.space import Param, Space, SpaceError

_FAILURES = {cls.status.value: cls for cls in TrialFailure.__subclasses__()}
#: column -> seconds per unit, in order of preference, for a trial's recorded duration
DURATION_COLUMNS = {"duration_s": 1.0, "warmup_s": 1.0, "ms": 1e-3}
#: set in a table's attrs when it had no status column (every row taken as ok)
_NO_STATUS = "autotune_no_status_column"


@lru_cache(maxsize=8)
def load_table(path: str) -> pd.DataFrame:
    """Read a recorded table; without a ``status`` column every row is ``ok``."""
    try:
        table = pd.read_csv(path)
    except FileNotFoundError:
        raise SpaceError(f"{path}: replay table not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise SpaceError(f"{path}: not a readable CSV table: {first}") from None
    if "status" not in table.columns:
        table["status"] = TrialStatus.OK.value
        table.attrs[_NO_STATUS] = True
    bad = set(table["status"].astype(str)) - {s.value for s in TrialStatus}
    if bad:
        raise SpaceError(f"{path}: column 'status': unknown state {sorted(bad)[0]!r}")
    return table


def _plain(value: Any) -> Any:
    """numpy scalars -> Python values, integral floats -> int, so keys compare equal."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _number(value: Any) -> float | None:
    """A table cell as a float, or None when it holds no number (a word, a blank)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def rows_by_config(
    table: pd.DataFrame, params: list[str], metric: str
) -> dict[tuple, dict[str, Any]]:
    """The table's row for each config (the values of ``params``). A config recorded more than
    once (re-measured, or the same sweep run twice) replays the median of its ok readings of
    ``metric``, with ``replay_readings`` saying how many; one with no ok reading, its first row.

    Example:
        >>> t = pd.DataFrame({"a": [1, 1, 1, 2], "m": [5.0, 9.0, 6.0, 7.0]})
        >>> rows = rows_by_config(t, ["a"], "m")
        >>> {k: (r["m"], r.get("replay_readings")) for k, r in rows.items()}
        {(1,): (6.0, 3), (2,): (7.0, None)}
    """
    grouped: dict[tuple, list[dict[str, Any]]] = {}
    for row in table.to_dict(orient="records"):
        grouped.setdefault(tuple(_plain(row[p]) for p in params), []).append(row)
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


def repeated_configs(table: pd.DataFrame, params: list[str]) -> int:
    """How many configs the table records more than once.

    Example:
        >>> repeated_configs(pd.DataFrame({"a": [1, 1, 2, 3, 3, 3]}), ["a"])
        2
    """
    counts = table.groupby(params, dropna=False).size()
    return int((counts > 1).sum())


def space_from_table(table: pd.DataFrame, params: list[str], source: str = "<table>") -> Space:
    """Derive a search space from the values a table holds; ordered numbers stay ordered."""
    missing = [p for p in params if p not in table.columns]
    if missing:
        raise SpaceError(f"{source}: --params names {missing[0]!r}, which is not a column")
    space_params = []
    for name in params:
        values = [_plain(v) for v in table[name].dropna().unique()]
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        choices = sorted(values) if numeric else sorted(values, key=str)
        space_params.append(Param(name=name, kind="categorical", choices=choices))
    return Space(f"replay:{source}", space_params, source=source)


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
        self._rows = rows_by_config(table, self.params, self.metric)

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        key = tuple(_plain(config.get(p)) for p in self.params)
        row = self._rows.get(key)
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

    def _recorded_duration(self, row: dict[str, Any]) -> float:
        if self.duration_column is None:
            return 1.0
        value = row.get(self.duration_column)
        if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            return 1.0
        return float(value) * DURATION_COLUMNS[self.duration_column]


OBJECTIVE = ReplayObjective
