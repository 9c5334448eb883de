"""Tell the study each trial that finished, and count its outcome: the part of a sweep's run
(:class:`~autotune.driver.sweep.Sweep`) that takes a result from the executor to the study.

A trial's result is told (and its twins waiting on the same config answered) before anything
else happens, with a stop signal deferred until it is stored; :meth:`TrialTelling.account`
counts each record as the progress line and the closing summary show it.

Example:
    >>> from autotune.driver import Sweep, SweepSettings
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, n_trials=4, seed=0, storage="memory",
    ...     executor="inline", device={"type": "cpu"})
    >>> summary = Sweep(settings).run()
    >>> summary.trials_run, all("status" in t.user_attrs for t in summary.study.trials)
    (4, True)
"""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING

from autotune.driver.settings import SweepObserver, TrialRecord
from autotune.driver.signals import interrupt_deferred
from autotune.driver.trial_attrs import FINISH, INFEASIBLE, REFUSED, REPEATED
from autotune.executors.base import Executor, Finished
from autotune.failures import TrialStatus
from autotune.runners.base import TrialResult

if TYPE_CHECKING:
    import optuna

    from autotune.driver.finish_costs import TrialTimes
    from autotune.driver.futile import FutileWatch
    from autotune.driver.liveness import Heartbeat
    from autotune.driver.trial_book import Asked, TrialBook

#: While configs are rejected in a row, trials that finished are told this often
POLL_EVERY_S = 0.05


class TrialTelling:
    """Telling finished trials and counting them, for the sweep's run (``_SweepRun``, which
    keeps the state below and gives :meth:`is_default`)."""

    study: optuna.Study
    executor: Executor
    observer: SweepObserver
    book: TrialBook
    heartbeat: Heartbeat
    in_flight: dict[int, Asked]
    launched_at: dict[int, float]
    waiting: dict[tuple, list[Asked]]
    counts: Counter
    run_counts: Counter
    refusals: Counter
    ran: int
    rejected: int
    busy_s: float
    trial_compile_s: float
    futile: FutileWatch
    times: TrialTimes
    stale_finish: bool
    last_poll: float

    def tell_at_stop(self) -> None:
        """Tell the trials measured but not told when the sweep stopped (the inline executor's
        evaluated trials waiting on its simulated clock, a worker's result that came in while
        a config was asked for): they are kept, not marked interrupted. An executor that cannot
        answer then (a cluster gone) leaves its trials to be marked interrupted."""
        try:
            finished = self.executor.finished_at_stop()
        except Exception:  # noqa: BLE001 - the stop goes on: its trials are marked interrupted
            return
        for one in finished:
            if one.ticket in self.in_flight:  # not told yet
                self._tell_finished(one)

    def tell_polled(self) -> None:
        """Tell the trials that finished by now, without waiting for one (at most every
        :data:`POLL_EVERY_S`: a rejection takes milliseconds, asking Ray may take one)."""
        now = time.monotonic()
        if not self.executor.in_flight or now - self.last_poll < POLL_EVERY_S:
            return
        self.last_poll = now
        for one in self.executor.poll():
            self.tell_finished(one)

    def tell_finished(self, finished: Finished) -> None:
        with interrupt_deferred():  # a signal now stops the sweep after this trial is told
            self._tell_finished(finished)

    def _tell_finished(self, finished: Finished) -> None:
        asked = self.in_flight.pop(finished.ticket)
        self.launched_at.pop(finished.ticket, None)
        self.book.running.discard(asked.key)
        self.busy_s += finished.seconds
        measurement = finished.result.measurement
        compile_s = 0.0
        # a replayed figure (recorded_duration_s set) compiled nothing here: its compile_s is
        # its table's column, seconds of the recording's device, not of this sweep's slots
        if measurement is not None and measurement.recorded_duration_s is None:
            compile_s = float(measurement.metrics.get("compile_s", 0.0) or 0.0)
            self.trial_compile_s += compile_s
        # the finish re-measures compiled configs: their compile (cached by then) is not its cost
        self.times.add(max(0.0, finished.seconds - compile_s), ok=finished.result.ok,
                       default=self.is_default(asked.config))  # fmt: skip
        self.times.worker_start_s = self.executor.worker_start_s()
        self.account(self.book.tell_result(asked, finished.result, finished.worker))
        if self.stale_finish:
            self.study.set_user_attr(FINISH, None)  # the next finish writes its own
            self.stale_finish = False
        self.heartbeat.discard(asked.trial.number)
        for twin in self.waiting.pop(asked.key, []):
            previous = self.book.previous(twin.config)
            if previous is not None:
                self.account(self.book.tell_repeat(twin, previous))
            else:  # it turned out infeasible when it ran: so is its twin
                reason = f"same config as trial {asked.trial.number}: {finished.result.reason}"
                result = TrialResult(TrialStatus.INFEASIBLE, reason)
                # its worker's: the study counts it refused, as this run does
                record = self.book.tell_result(twin, result, finished.worker)
                self.account(record, refused=True)
            self.heartbeat.discard(twin.trial.number)

    def account(self, record: TrialRecord, refused: bool = False) -> None:
        """Count ``record``'s outcome; ``refused``: an infeasible one the objective told (as
        one told by a worker is), not the space's constraints."""
        counted = record.launched or record.status == INFEASIBLE
        status = record.status if counted else REPEATED
        if status == INFEASIBLE:
            self.refusals[record.reason] += 1
            status = REFUSED if refused or record.worker else INFEASIBLE
        self.counts[status] += 1
        self.run_counts[status] += 1
        if record.launched:
            self.ran += 1
            self.futile.told(record.status, record.reason)
            self.rejected = 0
        else:
            self.rejected += 1
        self.observer.on_trial(record, self.study, self.counts)
