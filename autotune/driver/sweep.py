"""The search driver: ask -> check constraints -> submit -> wait for any -> tell, over an
Optuna study, with up to the executor's capacity of trials in flight.

The sampler is asked for a config while others run; configs in flight are RUNNING trials of
the study, so the sampler knows them (``bo`` never proposes one and believes them at their
predicted value, TPE lies about them) and no config runs twice at once. When every slot is
busy, the next config is asked for ahead, and starts the moment a slot frees; the trials that
finished are told while it runs. The loop's parts have owners beside it:
:mod:`~autotune.driver.ask_ahead`, :mod:`~autotune.driver.trial_telling`,
:mod:`~autotune.driver.stop_rules` and :mod:`~autotune.driver.run_summary`.

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
from typing import TYPE_CHECKING, Any

import optuna

from autotune.driver.ask_ahead import AskAhead
from autotune.driver.compile_ahead import compile_ahead_pool
from autotune.driver.constraint_repair import ConstraintRepair
from autotune.driver.executor_choice import make_executor
from autotune.driver.finish import FRESH, KEPT, FinishRound, FinishRow, finish
from autotune.driver.finish_costs import TrialTimes
from autotune.driver.futile import FUTILE, FutileWatch
from autotune.driver.liveness import HEARTBEAT_S, DriverIdentity, Heartbeat, reap_stale_trials
from autotune.driver.memory_guard import MemoryGuard
from autotune.driver.novelty import config_key
from autotune.driver.pruning import prune_check
from autotune.driver.read_snapshot import batched_writes, snapshot_reads
from autotune.driver.run_summary import (
    RunSummary,
    stopped_as_they_ran,
    study_counts,
    workload_measures,
)
from autotune.driver.samplers import untried_configs
from autotune.driver.settings import SweepObserver, SweepSettings, SweepSummary
from autotune.driver.signals import (
    interrupt_deferred,
    raise_if_stopped,
    signals_held,
    stop_on_signals,
)
from autotune.driver.stop_rules import StopRules
from autotune.driver.storage_watch import StorageLost, StorageWatch
from autotune.driver.study_peers import StudyPeers
from autotune.driver.study_setup import StudyMismatch, open_study, requeue_stopped_default
from autotune.driver.trial_attrs import (
    DRIVER,
    FINISH_DONE,
    IN_DRIVER,
    INTERRUPTED,
    mark_finish,
    stored_finish,
)
from autotune.driver.trial_book import Asked, TrialBook
from autotune.driver.trial_telling import TrialTelling
from autotune.driver.write_batch import WriteConflict
from autotune.executors.base import Executor
from autotune.failures import TrialStatus
from autotune.runners.base import TrialResult
from autotune.storage import open_storage

# Consecutive static-constraint rejections allowed per trial of budget before the sweep stops.
MAX_REJECTIONS_PER_TRIAL = 50
#: Writing an asked config found the trial another driver's (see ``_SweepRun.ask``)
_TAKEN_ELSEWHERE = (WriteConflict, optuna.exceptions.UpdateFinishedTrialError)

if TYPE_CHECKING:
    from autotune.driver.kept_processes import KeptProcesses

__all__ = ["StudyMismatch", "Sweep", "SweepObserver", "SweepSettings", "SweepSummary"]


class Sweep:
    """Run one sweep; resumable by study name, survives every trial failure.

    Args:
        executor_factory: builds the executor (default :func:`make_executor`); it is also
            called with ``workers=1`` for the finish.
        kept: the processes a command keeps from one sweep to its next (a search by group's:
            :mod:`autotune.driver.kept_processes`); they stand in for ``executor_factory``'s
            executor and the compile-ahead pool in the sweep, and their finish worker (one of
            its own, apart from the sweep's) the fresh one of the finish.
    """

    def __init__(
        self,
        settings: SweepSettings,
        observer: SweepObserver | None = None,
        executor_factory: Callable[..., Executor] | None = None,
        kept: KeptProcesses | None = None,
    ) -> None:
        self.settings = settings
        self.observer = observer or SweepObserver()
        self.executor_factory = executor_factory or make_executor
        self.kept = kept
        self.watch: StorageWatch | None = None  # the study's file, once run() opened it
        self.study: optuna.Study | None = None  # the study, once run() opened it
        #: the finish's kept worker is up at this problem: the finish starts none (run() sets)
        self.finish_warm = False
        #: where the finish measured, as the output says it (finish.FRESH, finish.KEPT)
        self.finish_process = FRESH

    def run(self) -> SweepSummary:
        storage = snapshot_reads(open_storage(self.settings.storage, heartbeat_s=HEARTBEAT_S))
        self.watch = StorageWatch(self.settings.storage, storage)
        build = self.kept.executor if self.kept is not None else self.executor_factory
        executor = build(self.settings)
        try:
            study = self.study = open_study(self.settings, storage, executor.capacity)
            reap_stale_trials(study, storage)
            requeue_stopped_default(study)  # (after the reaping: a killed driver's too)
            if self.kept is not None and self.settings.finish_top:
                self.finish_warm = self.kept.finish_ready(self.settings)
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
        on_round: Callable[[FinishRound], None] | None = None,
    ) -> list[FinishRow]:
        """The noise-aware finish (see :mod:`autotune.driver.finish`) on a fresh executor of
        one slot; ``top`` and ``rounds`` default to the settings' (or 3 and 3); no round
        starts after ``deadline`` but the first, and a measurement (or a worker's start)
        still running at it is stopped; ``on_round`` is told as it starts and as each round
        ends."""
        s = self.settings
        metric, direction = next(iter(s.objectives.items()))
        if self.kept is not None:  # the finish's own worker, kept from group to group
            executor = self.kept.finish_executor(s)
        else:
            executor = self.executor_factory(s, workers=1)
        self.finish_process = KEPT if getattr(executor, "kept", False) else FRESH
        executor.end_at(deadline)  # a measurement running when the budget ends is stopped
        top = top if top is not None else (s.finish_top or 3)
        rounds = rounds if rounds is not None else s.finish_rounds
        rows = finish(study, metric, direction, executor, top=top, rounds=rounds,
                      deadline=deadline, secrets=s.secrets, on_round=on_round,
                      process=self.finish_process)  # fmt: skip
        raise_if_stopped()  # a signal as its record was written: stopped in it, not done
        mark_finish(study, FINISH_DONE)  # (a run stopped in it stays asked: no cache answer)
        if self.watch is not None:
            self.watch.check()  # the finish's record went where the study is, not nowhere
        return rows


class _SweepRun(AskAhead, TrialTelling, StopRules, RunSummary):
    """The state of one invocation of :meth:`Sweep.run`: the loop, asking for and launching
    configs, and closing the run here; the ask-ahead queue (:class:`AskAhead`), telling
    finished trials (:class:`TrialTelling`), the stop rules (:class:`StopRules`) and the
    closing summary (:class:`RunSummary`) in modules of their own."""

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
        pool = sweep.kept.compile_pool if sweep.kept is not None else compile_ahead_pool
        self.compiler = pool(s, executor.capacity)
        self.memory_guard = MemoryGuard.for_settings(s)
        # configs asked ahead: the compile pool's jobs, or one while every slot is busy
        self.depth = max(1, self.compiler.jobs if self.compiler else 0)
        # the study's (the stored trials' and this run's, as the progress line shows them)
        self.counts: Counter = study_counts(study)
        # a workload's stop on a failure every config would share (a server that never starts)
        self.futile = FutileWatch.for_settings(s, served_before=self.counts["ok"] > 0)
        self.run_counts: Counter = Counter()  # this run's alone
        self.refusals: Counter = Counter()  # why configs were not launched, this run's
        self.ran = self.rejected = self.trials_stored = self.interrupted_stored = 0
        self.busy_s = self.sampler_s = self.compile_wait_s = self.trial_compile_s = 0.0
        self.stop_requested = threading.Event()  # set by SIGINT / SIGTERM
        self.times = TrialTimes(finish_warm=sweep.finish_warm)  # the finish's cost
        # an earlier run's finish judged the trials of then: once this run adds one, it is no
        # answer (the export, best and report would name its winner over a better new trial)
        self.stale_finish = bool(stored_finish(study.user_attrs))
        self.max_rejected = MAX_REJECTIONS_PER_TRIAL * max(s.n_trials or 0, 100)
        self.repair = ConstraintRepair(s.space, s.problem, s.device, s.seed)
        self.last_reap = self.last_poll = time.monotonic()
        self.peers = StudyPeers(study, self.identity)  # the other drivers on this study
        self.measures = workload_measures(s.workload)  # False: a replay (its trials take no time)

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
        self.interrupted_stored = stopped_as_they_ran(self.study)
        untried = untried_configs(self.study.sampler, self.study)
        self.observer.on_start(
            self.settings, self.study, self.trials_stored, capacity, untried,
            interrupted=self.interrupted_stored,
        )  # fmt: skip
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
                # (nor after a failure every config would share)
                can_launch = stop not in ("time", FUTILE) and self.executor.free > 0
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

    # -- the end ------------------------------------------------------------------------
    def _close(self, stopped_by: str) -> None:
        """Stop the executor and close every trial of this driver not told (signals held)."""
        try:
            where = self.executor.running_on()  # asked before the workers end
        except Exception:  # noqa: BLE001 - (a cluster gone) the trials are closed all the same
            where = {}
        self.executor.close()  # ends workers still measuring
        for number, asked in self.in_flight.items():
            reason = f"the sweep stopped ({stopped_by}) while it ran"
            ran_s = self.end - self.launched_at[number] if number in self.launched_at else None
            self.book.mark_interrupted(
                asked.trial, reason, worker=where.get(number, ""), duration_s=ran_s
            )
            # launched, as one the time budget stopped is: the closing line counts it
            self.run_counts[INTERRUPTED] += 1
            self.ran += 1
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
