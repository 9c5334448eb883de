"""The closing summary of a sweep's run and its record in the study (``last_run``,
:data:`LAST_RUN`), and the study's outcomes counted as a run counts its own.

Example:
    >>> from autotune.driver import Sweep, SweepSettings
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, n_trials=4, seed=0, storage="memory",
    ...     executor="inline", device={"type": "cpu"})
    >>> sweep = Sweep(settings)
    >>> summary = sweep.run()
    >>> summary.study.user_attrs["last_run"]["stopped_by"], summary.trials_total
    ('trials', 4)
    >>> sum(study_counts(sweep.study).values())
    4
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import optuna

from autotune.driver.read_snapshot import SnapshotStorage
from autotune.driver.results import best_trials
from autotune.driver.settings import SweepSettings, SweepSummary
from autotune.driver.trial_attrs import (
    DURATION,
    FINISH_ASKED,
    FINISH_OFF,
    FINISHED_STATES,
    INFEASIBLE,
    INTERRUPTED,
    LAST_RUN,
    REFUSED,
    REPEATED,
    WORKER,
    is_repeat,
    trial_status,
)

if TYPE_CHECKING:
    from autotune.driver.compile_ahead import CompileAhead
    from autotune.driver.finish_costs import TrialTimes
    from autotune.driver.futile import FutileWatch
    from autotune.driver.memory_guard import MemoryGuard
    from autotune.driver.study_peers import StudyPeers
    from autotune.executors.base import Executor


class RunSummary:
    """The summary of the sweep's run (``_SweepRun``, which keeps the state below and gives
    :meth:`launched` and :meth:`finish_reserve`)."""

    settings: SweepSettings
    study: optuna.Study
    storage: optuna.storages.BaseStorage
    executor: Executor
    compiler: CompileAhead | None
    memory_guard: MemoryGuard | None
    peers: StudyPeers
    times: TrialTimes
    run_counts: Counter
    refusals: Counter
    ran: int
    trials_stored: int
    interrupted_stored: int
    start: float
    end: float
    busy_s: float
    sampler_s: float
    compile_wait_s: float
    trial_compile_s: float
    measures: bool
    futile: FutileWatch

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
            interrupted_stored=self.interrupted_stored,
            shared=self.peers.others_active,
            measured=self.measures,
            trials_interrupted=stopped_as_they_ran(self.study),
            futile=self.futile.line,
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


def stopped_as_they_ran(study: optuna.Study) -> int:
    """``study``'s trials (every driver's) stopped from outside as they ran: interrupted (told
    FAIL, so not among :func:`study_counts`) with the seconds they ran, which one closed before
    it launched (asked for ahead) lacks."""
    return sum(
        1
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
        if trial_status(t) == INTERRUPTED
        and t.user_attrs.get(DURATION) is not None
        and not is_repeat(t)
    )


def _failures(counts: Counter) -> Counter:
    """The failures of ``counts`` by kind: every outcome but a success and a repeat."""
    return Counter({k: v for k, v in counts.items() if k not in ("ok", REPEATED)})


def workload_measures(workload: str) -> bool:
    """Whether ``workload``'s objective measures (False: a replay looks its figures up); one
    this process cannot import (it runs in Ray actors only) counts as measuring."""
    from autotune.objectives import get_objective

    try:
        return get_objective(workload).measures
    except (ImportError, KeyError):
        return True
