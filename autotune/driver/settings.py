"""What a sweep is told (:class:`SweepSettings`) and what it reports (records, summary,
observer), passed explicitly: no global configuration.

Example:
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, executor="local", workers=2)
    >>> settings.executor, settings.workers
    ('local', 2)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune.driver.finish_costs import TrialTimes
from autotune.driver.trial_attrs import INTERRUPTED
from autotune.redact import secrets_in, secrets_of_values
from autotune.space import Space
from autotune.storage import DEFAULT_STORAGE

EXECUTORS = ("local", "inline", "ray")


@dataclass
class SweepSettings:
    """Everything one sweep needs.

    Attributes:
        objectives: metric name -> "maximize" | "minimize"; one entry, or several for a
            multi-objective sweep with a Pareto front.
        n_trials: launched trials the study should reach (earlier runs and other drivers of
            the same study count; configs rejected by a static constraint do not).
        time_budget_s: wall time this invocation may spend, None for no limit.
        budget_from: the ``time.monotonic()`` the budget counts from (the CLI: its command's
            start, so set-up counts too); None: the sweep's own start.
        planned_budget_s: a group's planned share of a search by group's time budget (the
            budget over the groups): what the tuning cache asks for, and what the run
            records it was asked for at least, where ``time_budget_s`` (the share of the
            time left) differs by what the groups before it left or overran; None: no group.
        executor: where trials run: "local" (worker processes, one per GPU by default),
            "inline" (in the driver's process on a simulated clock: replay, tests) or "ray".
        workers: trials in flight; None for the executor's default (local: one per visible
            GPU, one on a CPU; inline: 1; ray: as many as the cluster's resources allow).
        ray_address: ``auto``, ``HOST:PORT`` or None (start a local Ray on demand).
        gpus_per_trial: GPUs a Ray trial asks for; None: 1 on a GPU device, else 0.
        finish_top, finish_rounds: the noise-aware finish that follows the sweep; a time
            budget holds back the time it is estimated to take, so that it bounds both.
        compile_ahead: processes compiling the configs asked for ahead while others measure
            (0: none, each trial compiles its own); None: several for a compiling workload
            on local GPUs, else 0.
    """

    workload: str
    problem: dict[str, Any]
    space: Space
    objectives: dict[str, str]
    sampler: str = "auto"
    seed: int | None = None
    n_trials: int | None = 50
    time_budget_s: float | None = None
    budget_from: float | None = None
    planned_budget_s: float | None = None
    #: the name a search by group's studies share (``<group>.<prefix>``) where this sweep is
    #: one of its groups (:mod:`autotune.grouped_sweep`); its study records it, so that the
    #: commands that read the latest study tell one group from the search's answer
    group: str | None = None
    storage: str = DEFAULT_STORAGE
    study_name: str | None = None
    trial_timeout_s: float = 300.0
    executor: str = "local"
    workers: int | None = None
    ray_address: str | None = None
    gpus_per_trial: float | None = None
    compile_ahead: int | None = None
    finish_top: int = 0  # configs the noise-aware finish re-measures after the sweep (0: none)
    finish_rounds: int = 3
    device: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    label: str = ""  # shown with every progress line, e.g. "REPLAY of grid.csv"
    baseline: dict[str, Any] | None = None  # the untuned config, measured as trial 0
    #: the untuned default's knobs the space does not tune, which every trial runs as they
    #: are (kept where the default itself lies outside the space and has no trial 0)
    untuned: dict[str, Any] = field(default_factory=dict)
    warm_start: str = "auto"  # "auto" (most similar stored sweep), a study name, or "off"
    fingerprint: dict[str, Any] | None = None  # the tuning cache's key (autotune.tuning_cache)
    #: limits on measured metrics (``--slo ttft_p99_ms=500``): a trial over one is
    #: ``slo_violated``, told to the sampler as infeasible, its measurement kept
    slo: dict[str, float] = field(default_factory=dict)
    #: what setting up found worth saying before the sweep (the CLI prints them), e.g. that the
    #: untuned default lies outside the space
    notes: list[str] = field(default_factory=list)
    #: what opening the study found worth saying (the sweep's display prints them before its
    #: header): a warm start that holds no config of the space, or one a resume does not take
    study_notes: list[str] = field(default_factory=list)
    #: the objective's class name, which the summary names for the configs it refused
    objective_name: str = ""
    #: the files of the modules the sweep runs (module name -> path), found while setting up
    #: the tuning cache's key (:func:`~autotune.tuning_cache.source_modules`); None where set-up
    #: did not look (a replay, a resume)
    source_files: dict[str, str] | None = None

    @property
    def secrets(self) -> frozenset[str]:
        """The passwords a trial's reason may echo outside a URL (a server printing its
        command line): those of the problem's values and of the storage URL, blanked wherever
        a reason stands (:func:`~autotune.redact.redact`'s ``known``).

        Example:
            >>> SweepSettings(workload="w", problem={"command": "srv postgresql://u:hunter2@h/d"},
            ...               space=None, objectives={}).secrets
            frozenset({'hunter2'})
        """
        return secrets_of_values(self.problem or {}) | secrets_in(self.storage or "",
                                                                  whole_url=True)  # fmt: skip

    @property
    def cache_ask_s(self) -> float | None:
        """The time budget the tuning cache is asked for: a group's planned share, else the
        sweep's own (a group the ones before it left more time asks for no more)."""
        return self.planned_budget_s if self.planned_budget_s is not None else self.time_budget_s

    @property
    def asked_budget_s(self) -> float | None:
        """The time budget a run records it was asked for (what the tuning cache answers
        up to): its own, or a group's planned share where that is longer (the groups before
        it overran theirs by a little).

        Example:
            >>> SweepSettings(workload="w", problem={}, space=None, objectives={},
            ...               time_budget_s=5.9, planned_budget_s=6.0).asked_budget_s
            6.0
        """
        if self.time_budget_s is None or self.planned_budget_s is None:
            return self.time_budget_s
        return max(self.time_budget_s, self.planned_budget_s)


@dataclass
class TrialRecord:
    """One finished trial as the progress display sees it."""

    number: int
    status: str
    reason: str
    config: dict[str, Any]
    values: list[float] | None
    duration_s: float
    launched: bool = True  # False for a static-constraint rejection or a repeat
    worker: str = ""
    origin: str = ""  # "untuned default" or "warm start from STUDY" where the trial was queued


@dataclass
class SweepSummary:
    study: optuna.Study
    study_name: str
    trials_run: int
    trials_total: int  # the study's launched trials, by any driver (not interrupted ones)
    failures: Counter  # this run's, by kind (rejected and refused configs among them)
    best: list[optuna.trial.FrozenTrial]
    stopped_by: str
    elapsed_s: float
    evaluate_s: float = 0.0  # slot-seconds spent in trials (summed over the slots)
    sampler_s: float = 0.0  # of elapsed_s, asking the sampler for configs (rejections included)
    in_flight: int = 1  # the executor's capacity at the start
    #: trials that ran at the same time in wall time, where fewer than ``in_flight`` (the inline
    #: executor's are simulated: 1); the slots whose time the shares below divide
    side_by_side: int | None = None
    compile_jobs: int = 0  # processes of the compile-ahead pool (0: none)
    trial_compile_s: float = 0.0  # slot-seconds trials spent compiling (their first launch)
    compile_wait_s: float = 0.0  # seconds a free slot waited for the compile-ahead pool
    memory: dict[str, Any] = field(default_factory=dict)  # the memory model's record, if any
    times: TrialTimes = field(default_factory=TrialTimes)  # what trials took (the finish's cost)
    #: this run's reasons for the configs it did not launch (rejected or refused), by count
    refusals: Counter = field(default_factory=Counter)
    #: the study's failures by kind as it stands at the end, as ``trials_total`` counts its
    #: trials: the earlier runs', this run's and (``shared``) other drivers' meanwhile
    study_failures: Counter = field(default_factory=Counter)
    trials_stored: int = 0  # the study's launched trials when this run began (0: a first run)
    #: the study's trials stopped as they ran when this run began (an earlier run's Ctrl-C),
    #: not among ``trials_stored``: earlier runs' too
    interrupted_stored: int = 0
    shared: bool = False  # another driver ran trials of the study while this run did
    #: False where the objective measures nothing (a replay looks its figures up): its trials
    #: take no time, so no share of the slots' time says anything; the line gives
    #: :attr:`ms_per_trial` instead
    measured: bool = True
    #: the line a workload stopped the sweep with, a failure every config would share
    #: (:mod:`~autotune.driver.futile`), or None
    futile: str | None = None
    #: the study's trials stopped as they ran (a signal, the time budget's end, a lost
    #: cluster): launched, though not among ``trials_total`` nor ``study_failures`` (their
    #: configs are run again by a resume)
    trials_interrupted: int = 0

    @property
    def launched_in_study(self) -> int:
        """The study's launched trials, those stopped as they ran included."""
        return self.trials_total + self.trials_interrupted

    @property
    def study_outcomes(self) -> Counter:
        """:attr:`study_failures` with the trials stopped as they ran (``interrupted``), as a
        run counts its own (:attr:`failures`).

        Example:
            >>> summary = SweepSummary(None, "s", 2, 1, Counter(), [], "interrupted", 1.0,
            ...                        study_failures=Counter(oom=1), trials_interrupted=1)
            >>> summary.launched_in_study, dict(summary.study_outcomes)
            (2, {'oom': 1, 'interrupted': 1})
        """
        return self.study_failures + Counter({INTERRUPTED: self.trials_interrupted})

    @property
    def slots_s(self) -> float:
        """The slots' wall time: elapsed x the trials that ran side by side (capacity, or
        :attr:`side_by_side`).

        Example:
            >>> summary = SweepSummary(None, "s", 8, 8, Counter(), [], "trials", 2.0,
            ...                        in_flight=4, side_by_side=1)  # inline, 4 simulated
            >>> summary.slots_s
            2.0
        """
        slots = self.side_by_side if self.side_by_side is not None else self.in_flight
        return self.elapsed_s * max(1, slots)

    @property
    def search_overhead(self) -> float:
        """Share of the slots' wall time (:attr:`slots_s`) not spent in a trial: the
        sampler, the storage and the display when they hold a slot up, and idle slots."""
        total = self.slots_s
        return max(0.0, 1.0 - self.evaluate_s / total) if total else 0.0

    @property
    def compile_share(self) -> float:
        """Share of the slots' wall time spent compiling where it held a slot: in the trials'
        first launches, and waiting for the compile-ahead pool with a slot free."""
        total = self.slots_s
        return (self.trial_compile_s + self.compile_wait_s) / total if total else 0.0

    @property
    def ms_per_trial(self) -> float:
        """Milliseconds of the sweep's wall time per trial run: for a replay, whose trials take
        no time, what the search itself costs (sampler, storage, bookkeeping; with local
        workers, their start and each lookup's round trip too).

        Example:
            >>> SweepSummary(None, "s", 40, 40, Counter(), [], "trials", 0.5).ms_per_trial
            12.5
        """
        return 1000.0 * self.elapsed_s / self.trials_run if self.trials_run else 0.0

    @property
    def sampler_ms_per_trial(self) -> float:
        """Of :attr:`ms_per_trial`, the milliseconds the sampler took to propose."""
        return 1000.0 * self.sampler_s / self.trials_run if self.trials_run else 0.0

    @property
    def sampler_share(self) -> float:
        """Share of the sweep's wall time the sampler took to propose configs."""
        return self.sampler_s / self.elapsed_s if self.elapsed_s else 0.0


class SweepObserver:
    """Receives progress; the CLI's display subclasses it. The default prints nothing."""

    def on_start(
        self,
        settings: SweepSettings,
        study: optuna.Study,
        done: int,
        capacity: int = 1,
        untried: int | None = None,
        interrupted: int = 0,
    ) -> None:
        """The sweep starts: ``done`` trials stored, ``capacity`` trials at once (what the
        executor holds: a Ray cluster may hold fewer than ``--workers`` asked), ``untried``
        configs of the space left to try, where the sampler can tell (None where not), and
        ``interrupted`` trials stored that a stop cut as they ran (launched, yet not among
        ``done``: ``--trials`` leaves them out)."""

    def on_trial(self, record: TrialRecord, study: optuna.Study, counts: Counter) -> None: ...

    def on_end(self, summary: SweepSummary) -> None: ...
