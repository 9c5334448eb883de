"""Why a sweep launches no further trial: a stop signal, its trials or time budget spent (time
held back for the finish), a sampler or space with no config left, too many rejections in a
row, or no slot left; the study's file is checked and stale trials reaped on the way.

Example:
    >>> from autotune.driver import Sweep, SweepSettings
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, n_trials=4, seed=0, storage="memory",
    ...     executor="inline", device={"type": "cpu"})
    >>> Sweep(settings).run().stopped_by
    'trials'
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from autotune.driver.finish_costs import TrialTimes, finish_reserve_s
from autotune.driver.futile import FUTILE, FutileWatch
from autotune.driver.liveness import reap_stale_trials
from autotune.driver.samplers import is_exhausted
from autotune.driver.settings import SweepSettings

if TYPE_CHECKING:
    import optuna

    from autotune.driver.storage_watch import StorageWatch
    from autotune.driver.trial_book import TrialBook
    from autotune.executors.base import Executor

REAP_EVERY_S = 30.0


class StopRules:
    """The stop rules of the sweep's run (``_SweepRun``, which keeps the state below and gives
    :meth:`launched`)."""

    settings: SweepSettings
    study: optuna.Study
    storage: optuna.storages.BaseStorage
    executor: Executor
    watch: StorageWatch | None
    book: TrialBook
    stop_requested: threading.Event
    times: TrialTimes
    budget_start: float
    last_reap: float
    rejected: int
    max_rejected: int
    futile: FutileWatch

    def stop_reason(self) -> str | None:
        """Why no further trial may launch now, or None to go on."""
        if self.stop_requested.is_set():
            return "interrupted"  # a signal came (see stop_on_signals)
        if self.futile.line is not None:
            return FUTILE  # the workload said every config would fail alike
        if self.watch is not None:
            self.watch.check()  # the study's file deleted: stop (StorageLost), saving it
        s = self.settings
        if time.monotonic() - self.last_reap > REAP_EVERY_S:
            # trials left RUNNING by a driver that died meanwhile stop counting as launched
            self.last_reap = time.monotonic()
            reap_stale_trials(self.study, self.storage)
        if s.n_trials is not None and self.launched() >= s.n_trials:
            return "trials"
        budget = s.time_budget_s
        if budget is not None and (
            time.monotonic() - self.budget_start >= budget - self.finish_reserve()
        ):
            return "time"
        if is_exhausted(self.study.sampler, self.study):
            return "every config tried"
        if self.book.exhausted:
            return "no unvisited config left"
        if self.rejected >= self.max_rejected:
            return f"constraints rejected {self.rejected} configs in a row"
        if self.executor.capacity < 1:
            return "no capacity left: every worker was lost"
        return None

    def finish_reserve(self) -> float:
        """Seconds of a time budget held back for the finish (:func:`finish_reserve_s`)."""
        s = self.settings
        return finish_reserve_s(s.finish_top, s.finish_rounds, self.times, s.time_budget_s)
