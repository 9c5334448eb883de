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

import math
from typing import Any

from autotune.failures import Crashed, Infeasible, TrialFailure, TrialStatus
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.objectives.replay_rows import (
    code_collisions,
    offered_keys,
    repeated_configs,
    rows_by_config,
)
from autotune.objectives.replay_space import space_from_table
from autotune.objectives.replay_table import (
    CODED,
    NO_STATUS,
    cell,
    load_table,
    number,
    plain,
    text_keys,
)
from autotune.space import SpaceError

#: the names this module gave before its parts had modules of their own, still importable here
__all__ = ["CODED", "DURATION_COLUMNS", "ReplayObjective", "code_collisions", "load_table",
           "offered_keys", "repeated_configs", "rows_by_config", "space_from_table"]  # fmt: skip

_FAILURES = {cls.status.value: cls for cls in TrialFailure.__subclasses__()}
#: column -> seconds per unit, in order of preference, for a trial's recorded duration
DURATION_COLUMNS = {"duration_s": 1.0, "warmup_s": 1.0, "ms": 1e-3}


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
        self.no_status = bool(table.attrs.get(NO_STATUS, False))
        self.duration_column = next((c for c in DURATION_COLUMNS if c in table.columns), None)
        records = table.to_dict(orient="records")  # one list of rows for the three lookups
        # the configs the table's own space offers: codes as written, other columns by value
        offered = offered_keys(table, self.params)
        self._rows_offered = rows_by_config(table, self.params, self.metric, offered, records)
        self._rows = rows_by_config(table, self.params, self.metric, records=records)
        # the cells as written: a --space whose choices are the words "01", "10" finds its rows,
        # which pandas read as the numbers 1 and 10 (and "01" and "1" as one config)
        texts = text_keys(str(problem["table"]), tuple(self.params))
        self._rows_by_text = rows_by_config(table, self.params, self.metric, texts, records)

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        row = self._row(tuple(cell(config.get(p)) for p in self.params))  # absent: blank
        if row is None:
            if self.absent_costs_a_trial:
                raise Crashed("config not in the recorded table (replay; counted as a trial)")
            raise Infeasible("config not in the recorded table (replay)")
        status = str(row["status"])
        if status != TrialStatus.OK.value:
            reason = row.get("reason")
            text = reason if isinstance(reason, str) and reason else f"recorded {status}"
            raise _FAILURES.get(status, TrialFailure)(f"{text} (replay)")
        value = number(row[self.metric])
        if value is None or not math.isfinite(value):
            if self.no_status:  # a hand-made table: a blank or a word where a figure belongs
                raise Crashed(f"no {self.metric} recorded: {row[self.metric]!r} (replay)")
            raise Infeasible(f"recorded {self.metric} is {row[self.metric]!r} (replay)")
        extra = {
            k: plain(v)
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
