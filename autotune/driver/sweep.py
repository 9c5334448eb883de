"""The search driver: ask -> check constraints -> submit -> wait for any -> tell, over an
Optuna study, with up to the executor's capacity of trials in flight.

The sampler is asked for a config while others run; configs in flight are RUNNING trials of
the study, so the sampler knows them (``bo`` never proposes one and believes them at their
predicted value, TPE lies about them) and no config runs twice at once. When every slot is
busy, the next config is asked for ahead, and starts the moment a slot frees; the trials that
finished are told while it runs.

Example:
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, n_trials=4, seed=0, storage="memory",
    ...     executor="inline", device={"type": "cpu"})
    >>> summary = Sweep(settings).run()
    >>> summary.trials_run
    4
"""

from __future__ import annotations

import random
import signal
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

import optuna

from autotune.driver.compile_ahead import compile_ahead_pool
from autotune.driver.constraint_repair import ConstraintRepair
from autotune.driver.executor_choice import make_executor
from autotune.driver.finish import FinishRow, finish
from autotune.driver.finish_costs import TrialTimes, finish_reserve_s
from autotune.driver.liveness import HEARTBEAT_S, DriverIdentity, Heartbeat, reap_stale_trials
from autotune.driver.memory_guard import MemoryGuard
from autotune.driver.novelty import config_key
from autotune.driver.pruning import prune_check
from autotune.driver.read_snapshot import SnapshotStorage, batched_writes, snapshot_reads
from autotune.driver.results import best_trials
from autotune.driver.samplers import is_exhausted, untried_configs
from autotune.driver.settings import SweepObserver, SweepSettings, SweepSummary, TrialRecord
from autotune.driver.signals import (
    interrupt_deferred,
    raise_if_stopped,
    signals_held,
    stop_on_signals,
)
from autotune.driver.storage_watch import StorageLost, StorageWatch
from autotune.driver.study_peers import StudyPeers
from autotune.driver.study_setup import StudyMismatch, open_study, requeue_stopped_default
from autotune.driver.trial_attrs import (
    DRIVER,
    FINISH,
    FINISH_ASKED,
    FINISH_DONE,
    FINISH_OFF,
    FINISHED_STATES,
    IN_DRIVER,
    INFEASIBLE,
    LAST_RUN,
    REFUSED,
    REPEATED,
    WORKER,
    is_repeat,
    mark_finish,
    stored_finish,
    trial_status,
)
from autotune.driver.trial_book import Asked, TrialBook
from autotune.driver.write_batch import WriteConflict
from autotune.executors.base import Executor, Finished
from autotune.failures import TrialStatus
from autotune.runners.base import TrialResult
from autotune.storage import open_storage

# Consecutive static-constraint rejections allowed per trial of budget before the sweep stops.
MAX_REJECTIONS_PER_TRIAL = 50
REAP_EVERY_S = 30.0
#: While configs are rejected in a row, trials that finished are told this often
POLL_EVERY_S = 0.05
#: Writing an asked config found the trial another driver's (see ``_SweepRun.ask``)
_TAKEN_ELSEWHERE = (WriteConflict, optuna.exceptions.UpdateFinishedTrialError)

__all__ = ["StudyMismatch", "Sweep", "SweepObserver", "SweepSettings", "SweepSummary"]


class Sweep:
    """Run one sweep; resumable by study name, survives every trial failure.

    Args:
        executor_factory: builds the executor (default :func:`make_executor`); it is also
            called with ``workers=1`` for the finish.
    """

    def __init__(
        self,
        settings: SweepSettings,
        observer: SweepObserver | None = None,
        executor_factory: Callable[..., Executor] | None = None,
    ) -> None:
        self.settings = settings
        self.observer = observer or SweepObserver()
        self.executor_factory = executor_factory or make_executor
        self.watch: StorageWatch | None = None  # the study's file, once run() opened it
        self.study: optuna.Study | None = None  # the study, once run() opened it

    def run(self) -> SweepSummary:
        storage = snapshot_reads(open_storage(self.settings.storage, heartbeat_s=HEARTBEAT_S))
        self.watch = StorageWatch(self.settings.storage, storage)
        executor = self.executor_factory(self.settings)
        try:
            study = self.study = open_study(self.settings, storage, executor.capacity)
            reap_stale_trials(study, storage)
            requeue_stopped_default(study)  # (after the reaping: a killed driver's too)
            raise_if_stopped()  # a Ctrl-C in the set-up whose KeyboardInterrupt was dropped
        except BaseException:
            executor.close()
            raise
        try:
            return _SweepRun(self, study, storage, executor, self.watch).run()
        except StorageLost:
            self.watch.let_go()
            raise

    def finish(
        self,
        study: optuna.Study,
        *,
        top: int | None = None,
        rounds: int | None = None,
        deadline: float | None = None,
    ) -> list[FinishRow]:
        """The noise-aware finish (see :mod:`autotune.driver.finish`) on a fresh executor of
        one slot; ``top`` and ``rounds`` default to the settings' (or 3 and 3); no round
        starts after ``deadline`` but the first, and a measurement (or a worker's start)
        still running at it is stopped."""
        s = self.settings
        metric, direction = next(iter(s.objectives.items()))
        executor = self.executor_factory(s, workers=1)
        executor.end_at(deadline)  # a measurement running when the budget ends is stopped
        top = top if top is not None else (s.finish_top or 3)
        rounds = rounds if rounds is not None else s.finish_rounds
        rows = finish(study, metric, direction, executor, top=top, rounds=rounds,
                      deadline=deadline, secrets=s.secrets)  # fmt: skip
        raise_if_stopped()  # a signal as its record was written: stopped in it, not done
        mark_finish(study, FINISH_DONE)  # (a run stopped in it stays asked: no cache answer)
        if self.watch is not None:
            self.watch.check()  # the finish's record went where the study is, not nowhere
        return rows


class _SweepRun:
    """The state of one invocation of :meth:`Sweep.run`."""

    def __init__(
        self,
        sweep: Sweep,
        study: optuna.Study,
        storage: optuna.storages.BaseStorage,
        executor: Executor,
        watch: StorageWatch | None = None,
    ) -> None:
        s = self.settings = sweep.settings
        self.watch = watch
        self.observer = sweep.observer
        self.study, self.storage, self.executor = study, storage, executor
        # steering draws, like the sampler, move on with the trials already stored
        rng = random.Random(None if s.seed is None else s.seed + len(study.trials))
        self.book = TrialBook(study, s, rng)
        self.identity = DriverIdentity.current().as_attr()
        self.heartbeat = Heartbeat(storage, study.study_name)
        self.in_flight: dict[int, Asked] = {}  # trial number -> launched trial
        self.launched_at: dict[int, float] = {}  # trial number -> when it launched
        self.waiting: dict[tuple, list[Asked]] = {}  # repeats of a config in flight
        # asked for ahead, oldest first: compiling in the pool, or waiting for a free slot
        self.ahead: deque[Asked] = deque()
        self.compiler = compile_ahead_pool(s, executor.capacity)
        self.memory_guard = MemoryGuard.for_settings(s)
        # configs asked ahead: the compile pool's jobs, or one while every slot is busy
        self.depth = max(1, self.compiler.jobs if self.compiler else 0)
        # the study's (the stored trials' and this run's, as the progress line shows them)
        self.counts: Counter = study_counts(study)
        self.run_counts: Counter = Counter()  # this run's alone
        self.refusals: Counter = Counter()  # why configs were not launched, this run's
        self.ran = self.rejected = self.trials_stored = 0
        self.busy_s = self.sampler_s = self.compile_wait_s = self.trial_compile_s = 0.0
        self.stop_requested = threading.Event()  # set by SIGINT / SIGTERM
        self.times = TrialTimes()  # what the trials took: the finish's cost
        # an earlier run's finish judged the trials of then: once this run adds one, it is no
        # answer (the export, best and report would name its winner over a better new trial)
        self.stale_finish = bool(stored_finish(study.user_attrs))
        self.max_rejected = MAX_REJECTIONS_PER_TRIAL * max(s.n_trials or 0, 100)
        self.repair = ConstraintRepair(s.space, s.problem, s.device, s.seed)
        self.last_reap = self.last_poll = time.monotonic()
        self.peers = StudyPeers(study, self.identity)  # the other drivers on this study
        self.measures = _measures(s.workload)  # False: a replay (its trials take no time)

    # -- the loop -----------------------------------------------------------------------
    def run(self) -> SweepSummary:
        signal_restore = stop_on_signals(self.stop_requested)
        self.start = time.monotonic()
        if self.settings.budget_from is not None:
            self.budget_start = min(self.settings.budget_from, self.start)
        else:
            self.budget_start = self.start
        if self.settings.time_budget_s is not None:  # a trial never outlasts the budget
            self.executor.end_at(self.budget_start + self.settings.time_budget_s)
        capacity = self.executor.capacity
        self.trials_stored = self.launched()
        untried = untried_configs(self.study.sampler, self.study)
        self.observer.on_start(self.settings, self.study, self.trials_stored, capacity, untried)
        stopped_by = "trials"
        held: list[int] = []  # the stop signals that came while the sweep closed
        ended = False  # the loop ended (or a signal ended it), no error raised
        try:
            while True:
                stop = self.stop_reason()
                if stop == "interrupted":
                    stopped_by = stop
                    break
                # a config asked for ahead launches when a slot frees, unless time is up
                can_launch = stop != "time" and self.executor.free > 0
                ready = self.ready_ahead() if can_launch else None
                if ready is not None:
                    self.launch(ready)
                    continue
                if stop is None and self.wants_ahead():
                    asked = self.ask()
                    self.queue(asked)
                    if asked is None:  # rejected or answered: a long run of those must not
                        self.tell_polled()  # keep a finished trial's slot from the next
                    continue
                if can_launch and self.ahead:
                    self.wait_for_compile()  # a slot is free and only a compile holds it up
                    continue
                if not self.executor.in_flight:
                    stopped_by = stop or "no capacity left"
                    break
                # a measured trial is in the storage before anything else happens (the next
                # launch included): a stop at any moment after this loses none
                for one in self.executor.wait_any():
                    self.tell_finished(one)
            ended = True
        except KeyboardInterrupt:
            stopped_by = "interrupted"
            ended = True
        finally:
            # a second signal must not leave a trial RUNNING or drop a measured one, nor the
            # run's record unwritten (a resume's would leave the last run's: the tuning cache
            # and the finish read it): held until every trial is told or closed and the
            # record is written
            try:
                with signals_held(held):
                    self.stop(stopped_by)
                    summary = self.summarise(stopped_by, capacity) if ended else None
            finally:
                signal_restore()
        assert summary is not None  # (an error raised in the loop went on up)
        self.observer.on_end(summary)
        if held and stopped_by != "interrupted":  # it came as the sweep ended on its own: it
            signal.raise_signal(held[0])  # stops what follows (the finish, the next sweep)
        return summary

    def stop(self, stopped_by: str) -> None:
        """End the run: tell what was measured, count the slots' busy time, close the rest."""
        # the sweep's wall time ends with its last trial: stopping the executor (workers, a
        # Ray started for the sweep), like starting it, is not search overhead
        self.end = time.monotonic()
        self.tell_at_stop()
        # a trial still running when the sweep stops filled its slot until then (a stop by a
        # signal or a lost cluster): without it the overhead read close to 100%
        self.busy_s += sum(self.end - self.launched_at.get(n, self.end) for n in self.in_flight)
        self._close(stopped_by)

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

    def wants_ahead(self) -> bool:
        """True while fewer configs are asked ahead than the lookahead holds and the budget
        leaves room for them."""
        if len(self.ahead) >= self.depth:
            return False
        n_trials = self.settings.n_trials
        return n_trials is None or self.launched() + len(self.ahead) < n_trials

    def queue(self, asked: Asked | None) -> None:
        """Keep a config asked for ahead, and start compiling it."""
        if asked is None:
            return
        self.ahead.append(asked)
        if self.compiler is not None:
            self.compiler.submit(asked.trial.number, asked.config)

    def ready_ahead(self) -> Asked | None:
        """The oldest config asked ahead that may launch now: its compile has ended, or the
        pool has not begun it (still starting, or behind), so that a free slot never waits for
        a compile nobody runs: the trial compiles it itself. One that failed to compile is told
        to the study (it costs no slot) and the next is looked at."""
        for asked in list(self.ahead):
            number = asked.trial.number
            if self.compiler is not None and not self.compiler.done(number):
                if self.compiler.started(number):
                    continue  # being compiled: wait for it rather than compile it twice
                self.compiler.discard(number)
            self.ahead.remove(asked)
            failed = self.compiler.wait(number) if self.compiler is not None else None
            if failed is None:
                return asked
            self.tell_unlaunched(asked, failed)
        return None

    def wait_for_compile(self) -> None:
        """Wait for the oldest config's compile (a free slot waits on it): time counted as
        the compile share the pool did not hide."""
        started = time.perf_counter()
        number = self.ahead[0].trial.number
        failed = (
            self.compiler.wait(number, self.settings.trial_timeout_s) if self.compiler else None
        )
        self.compile_wait_s += time.perf_counter() - started
        if failed is not None:
            self.tell_unlaunched(self.ahead.popleft(), failed)

    def tell_unlaunched(self, asked: Asked, result: TrialResult) -> None:
        """A config that failed in the compile pool: a trial result that took no slot."""
        self.account(self.book.tell_result(asked, result, "compile-ahead pool"))
        self.heartbeat.discard(asked.trial.number)

    def stop_reason(self) -> str | None:
        """Why no further trial may launch now, or None to go on."""
        if self.stop_requested.is_set():
            return "interrupted"  # a signal came (see stop_on_signals)
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

    def is_default(self, config: dict[str, Any]) -> bool:
        """Whether ``config`` is the untuned default (the sweep's trial 0, as enqueued)."""
        s = self.settings
        tuned = {k: v for k, v in (s.baseline or {}).items() if k in s.space.names}
        return bool(tuned) and all(config.get(k) == v for k, v in tuned.items())

    def launched(self) -> int:
        """Trials of the study that ran or run now, by any driver (see
        :meth:`StudyPeers.launched`); this driver's configs asked for but not launched are
        not among them."""
        not_launched = {a.trial.number for group in self.waiting.values() for a in group}
        not_launched |= {a.trial.number for a in self.ahead}
        return self.peers.launched(not_launched)

    # -- one trial ----------------------------------------------------------------------
    def ask(self) -> Asked | None:
        """A config to launch; or None when it needed no launch (it breaks a static
        constraint, or was measured before), which is recorded at once."""
        s = self.settings
        asked_at = time.perf_counter()
        # a signal between the storage creating the trial and the heartbeat knowing it would
        # leave it RUNNING for good (seen under CI load): it stops the sweep after this instead
        with warnings.catch_warnings(), interrupt_deferred():
            warnings.simplefilter("ignore", UserWarning)  # Optuna: heartbeats are for optimize()
            trial = self.study.ask()
            self.heartbeat.add(trial.number)
        try:
            try:
                with batched_writes(self.study):  # the config whole, in one transaction
                    trial.set_user_attr(DRIVER, self.identity)
                    if self.executor.name == "inline":
                        trial.set_user_attr(IN_DRIVER, True)
                    config = s.space.sample(trial, s.problem, s.device)
            except _TAKEN_ELSEWHERE:
                # a waiting trial another driver took too (SQLite lets two take one) and
                # wrote first: it is theirs; ask again
                self.heartbeat.discard(trial.number)
                return None
            self.sampler_s += time.perf_counter() - asked_at
            asked = Asked(trial, config)
            broken = self.broken_constraints(config)
            # Read after this config is written, running trials first and finished ones
            # second (a trial only goes from running to finished): a twin of another driver
            # is seen in one of the two reads, whenever it finishes.
            twin = None if broken else self.running_elsewhere(asked)
            self.book.refresh()
            previous = None if broken or twin is not None else self.book.previous(config)
            if broken:
                result = TrialResult(TrialStatus.INFEASIBLE, broken)
                self.account(self.book.tell_result(asked, result))
                self.repair.after_rejection(self.study, config, self.rejected, self.unmeasured)
            elif twin is not None:
                self.account(self.book.tell_claimed(asked, twin))
            elif previous is not None:
                self.account(self.book.tell_repeat(asked, previous))
        except BaseException:
            self.heartbeat.discard(trial.number)
            self.book.mark_interrupted(trial, "the sweep stopped while asking for it")
            raise
        if broken or previous is not None or twin is not None:
            self.heartbeat.discard(trial.number)
            return None
        return asked

    def unmeasured(self, config: dict) -> bool:
        """Whether ``config`` is neither measured, running, nor asked for ahead."""
        key = config_key(config)
        return (key not in self.book.visited and key not in self.book.running
                and all(a.key != key for a in self.ahead))  # fmt: skip

    def broken_constraints(self, config: dict) -> str:
        """Why ``config`` must not launch (the space's static constraints, then the workload's
        memory model), or "" when it may."""
        s = self.settings
        broken = s.space.violations(config, s.problem, s.device)
        if broken:
            return "violates " + ", ".join(broken) + " (not launched)"
        if self.memory_guard is not None:
            return self.memory_guard.check(config, self.study) or ""
        return ""

    def running_elsewhere(self, asked: Asked) -> int | None:
        """The number of a trial of another driver running the same config, if any (read
        after this trial's config is written: :meth:`StudyPeers.twin`)."""
        mine = set(self.in_flight) | {a.trial.number for g in self.waiting.values() for a in g}
        mine |= {a.trial.number for a in self.ahead} | {asked.trial.number}
        return self.peers.twin(asked.key, mine)

    def launch(self, asked: Asked) -> None:
        if asked.key in self.book.running:
            # the same config is running: answered from the study once its result is in
            self.waiting.setdefault(asked.key, []).append(asked)
            return
        previous = self.book.previous(asked.config)
        if previous is not None:
            # measured while this one waited to launch (asked ahead of that result's telling)
            self.account(self.book.tell_repeat(asked, previous))
            self.heartbeat.discard(asked.trial.number)
            return
        self.book.running.add(asked.key)
        self.in_flight[asked.trial.number] = asked
        prune = prune_check(asked.trial, len(self.settings.objectives))
        self.launched_at[asked.trial.number] = time.monotonic()
        self.executor.submit(asked.trial.number, asked.config, prune)

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
            self.rejected = 0
        else:
            self.rejected += 1
        self.observer.on_trial(record, self.study, self.counts)

    # -- the end ------------------------------------------------------------------------
    def _close(self, stopped_by: str) -> None:
        """Stop the executor and close every trial of this driver not told (signals held)."""
        self.executor.close()  # ends workers still measuring
        for asked in self.in_flight.values():
            reason = f"the sweep stopped ({stopped_by}) while it ran"
            self.book.mark_interrupted(asked.trial, reason)
        if self.compiler is not None:
            self.compiler.close()
        left = [a for group in self.waiting.values() for a in group] + list(self.ahead)
        for asked in left:
            self.book.mark_interrupted(
                asked.trial, f"asked for but never launched: the sweep stopped ({stopped_by})"
            )
        # a stop between asking and queueing, or between a result and its telling, leaves a
        # trial in no list above: the heartbeat's set still knows it
        for number in self.heartbeat.numbers:
            self.book.mark_interrupted(number, f"the sweep stopped ({stopped_by}) before it ran")
        self.heartbeat.close()

    def memory_report(self) -> dict:
        """The memory model's record: configs it rejected, its error on the trials that ran."""
        guard = self.memory_guard
        if guard is None:
            return {}
        error = guard.error(self.study)
        return {"memory_rejected": guard.rejected,
                "memory_model_error": None if error is None else round(error, 4)}  # fmt: skip

    def summarise(self, stopped_by: str, capacity: int) -> SweepSummary:
        """The run's summary, its record (:data:`LAST_RUN`) written to the study."""
        if isinstance(self.storage, SnapshotStorage):
            self.storage.expire()  # the study as every driver left it, read once for both
        trials_total = self.launched()  # (the same read: nothing is written between)
        summary = SweepSummary(
            study=self.study,
            study_name=self.study.study_name,
            trials_run=self.ran,
            trials_total=trials_total,
            failures=_failures(self.run_counts),
            best=best_trials(self.study),
            stopped_by=stopped_by,
            elapsed_s=self.end - self.start,
            evaluate_s=self.busy_s,
            sampler_s=self.sampler_s,
            in_flight=capacity,
            side_by_side=min(capacity, self.executor.side_by_side),
            compile_jobs=self.compiler.jobs if self.compiler is not None else 0,
            trial_compile_s=self.trial_compile_s,
            compile_wait_s=self.compile_wait_s,
            memory=self.memory_report(),
            times=self.times,
            refusals=self.refusals,
            # every driver's, as trials_total counts them: other drivers' trials of this run's
            # time were not told here
            study_failures=_failures(study_counts(self.study)),
            trials_stored=self.trials_stored,
            shared=self.peers.others_active,
            measured=self.measures,
        )
        self.study.set_user_attr(
            LAST_RUN,
            {
                "stopped_by": stopped_by,
                "time_budget_s": self.settings.time_budget_s,  # what "time" stopped it at
                # what the tuning cache reads it was asked for: a group's planned share too
                "asked_budget_s": self.settings.asked_budget_s,
                "trials": self.ran,
                "executor": self.executor.name,
                "in_flight": capacity,
                "elapsed_s": round(summary.elapsed_s, 3),
                "evaluate_s": round(self.busy_s, 3),
                "sampler_s": round(self.sampler_s, 3),
                # a replay's trials take no time: its cost is the search's per trial
                "search_overhead": round(summary.search_overhead, 4) if self.measures else None,
                "ms_per_trial": round(summary.ms_per_trial, 3),
                "compile_jobs": summary.compile_jobs,
                "trial_compile_s": round(self.trial_compile_s, 3),
                "compile_wait_s": round(self.compile_wait_s, 3),
                "compile_share": round(summary.compile_share, 4),
                # what the finish was costed at: a worker's start, the time held back for it
                "worker_start_s": self.times.worker_start_s and round(self.times.worker_start_s, 3),
                "finish_reserve_s": round(self.finish_reserve(), 3),
                # the finish to come (done once it ran): a run stopped in it is no answer
                "finish": FINISH_ASKED if self.settings.finish_top else FINISH_OFF,
                **summary.memory,
            },
        )
        return summary


def study_counts(study: optuna.Study) -> Counter:
    """The outcomes of ``study``'s finished trials (every driver's) by kind, as a run counts
    its own: a repeat as such, a config refused when it ran (it has a worker) apart from one
    the constraints rejected; trials stopped from outside (told FAIL) are not among them, as
    they are not among the launched."""
    counts: Counter = Counter()
    for t in study.get_trials(deepcopy=False, states=FINISHED_STATES):
        status = REPEATED if is_repeat(t) else trial_status(t)
        refused = status == INFEASIBLE and WORKER in t.user_attrs  # told when it ran
        counts[REFUSED if refused else status] += 1
    return counts


def _failures(counts: Counter) -> Counter:
    """The failures of ``counts`` by kind: every outcome but a success and a repeat."""
    return Counter({k: v for k, v in counts.items() if k not in ("ok", REPEATED)})


def _measures(workload: str) -> bool:
    """Whether ``workload``'s objective measures (False: a replay looks its figures up); one
    this process cannot import (it runs in Ray actors only) counts as measuring."""
    from autotune.objectives import get_objective

    try:
        return get_objective(workload).measures
    except (ImportError, KeyError):
        return True
