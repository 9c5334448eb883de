"""The search driver: ask -> check constraints -> evaluate -> tell, over an Optuna study.

Example:
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, n_trials=4, seed=0, storage="memory",
    ...     isolation="inline", device={"type": "cpu"})
    >>> summary = Sweep(settings).run()
    >>> summary.trials_run
    4
"""

from __future__ import annotations

import math
import random
import time
import warnings
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import optuna

from autotune.driver.finish import FinishRow, finish
from autotune.driver.novelty import config_key, unvisited_config
from autotune.driver.pruning import DivergencePruner
from autotune.driver.results import REPEAT_ATTR, STUDY_ATTR, best_trials, trial_status
from autotune.driver.samplers import (
    STATUS_ATTR,
    make_sampler,
    mark_feasibility,
    resolve_sampler,
)
from autotune.driver.warm_start import (
    WARM_START_ATTR,
    most_similar_study,
    similarity,
    top_configs,
)
from autotune.failures import TrialStatus
from autotune.runners.base import Runner, TrialResult
from autotune.runners.inprocess import InProcessRunner
from autotune.runners.worker import IsolatedRunner
from autotune.space import Space
from autotune.storage import DEFAULT_STORAGE, open_storage

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
INFEASIBLE = TrialStatus.INFEASIBLE.value
REPEATED = "repeated"  # a config proposed again: answered from the study, not launched
# Consecutive static-constraint rejections allowed per trial of budget before the sweep stops.
MAX_REJECTIONS_PER_TRIAL = 50
# How many of a related sweep's best configs a warm start queues first.
WARM_START_CONFIGS = 5


class StudyMismatch(ValueError):
    """A stored study of another workload or objective was named for resuming."""


@dataclass
class SweepSettings:
    """Everything one sweep needs, passed explicitly (no global configuration).

    Attributes:
        objectives: metric name -> "maximize" | "minimize"; one entry, or several for a
            multi-objective sweep with a Pareto front.
        n_trials: launched trials the study should reach (earlier runs count; configs
            rejected by a static constraint are recorded but not counted).
        time_budget_s: wall time this invocation may spend, None for no limit.
        isolation: "process" (a worker process per sweep, restarted after crashes) or
            "inline" (in the driver's process: replay, tests).
    """

    workload: str
    problem: dict[str, Any]
    space: Space
    objectives: dict[str, str]
    sampler: str = "auto"
    seed: int | None = None
    n_trials: int | None = 50
    time_budget_s: float | None = None
    storage: str = DEFAULT_STORAGE
    study_name: str | None = None
    trial_timeout_s: float = 300.0
    isolation: str = "process"
    device: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    label: str = ""  # shown with every progress line, e.g. "REPLAY of grid.csv"
    baseline: dict[str, Any] | None = None  # the untuned config, measured as trial 0
    warm_start: str = "auto"  # "auto" (most similar stored sweep), a study name, or "off"


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


@dataclass
class Prepared:
    """A trial asked of the sampler, with its config, not launched yet."""

    trial: optuna.Trial
    config: dict[str, Any]


@dataclass
class InFlight:
    """A launched trial; ``future`` gives (result, seconds spent evaluating)."""

    trial: optuna.Trial
    config: dict[str, Any]
    future: Future


@dataclass(frozen=True)
class Outcome:
    """What a config measured, kept to answer repeats of it."""

    number: int
    status: str
    values: list[float] | None


@dataclass
class SweepSummary:
    study: optuna.Study
    study_name: str
    trials_run: int
    trials_total: int
    failures: Counter
    best: list[optuna.trial.FrozenTrial]
    stopped_by: str
    elapsed_s: float
    evaluate_s: float = 0.0  # of elapsed_s, the time spent evaluating trials
    sampler_s: float = 0.0  # of elapsed_s, asking the sampler for configs (rejections included)

    @property
    def search_overhead(self) -> float:
        """Share of the sweep's wall time spent outside trials (sampler, storage, display)."""
        return 1.0 - self.evaluate_s / self.elapsed_s if self.elapsed_s else 0.0

    @property
    def sampler_share(self) -> float:
        """Share of the sweep's wall time the sampler took to propose configs."""
        return self.sampler_s / self.elapsed_s if self.elapsed_s else 0.0


class SweepObserver:
    """Receives progress; the CLI's display subclasses it. The default prints nothing."""

    def on_start(self, settings: SweepSettings, study: optuna.Study, done: int) -> None: ...

    def on_trial(self, record: TrialRecord, study: optuna.Study, counts: Counter) -> None: ...

    def on_end(self, summary: SweepSummary) -> None: ...


def _penalty(study: optuna.Study, directions: list[str]) -> list[float]:
    """Value told for a failed trial: the worst successful value so far (0 if none yet)."""
    penalties = []
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    values = [t.values for t in complete if t.user_attrs.get(STATUS_ATTR) == "ok" and t.values]
    for i, direction in enumerate(directions):
        column = [v[i] for v in values]
        if not column:
            penalties.append(0.0)
        else:
            penalties.append(min(column) if direction == "maximize" else max(column))
    return penalties


class Sweep:
    """Run one sweep; resumable by study name, survives every trial failure."""

    def __init__(
        self,
        settings: SweepSettings,
        observer: SweepObserver | None = None,
        runner_factory: Callable[[SweepSettings], Runner] | None = None,
    ) -> None:
        self.settings = settings
        self.observer = observer or SweepObserver()
        self.runner_factory = runner_factory or self._default_runner

    @staticmethod
    def _default_runner(settings: SweepSettings) -> Runner:
        if settings.isolation == "inline":
            return InProcessRunner(settings.workload, settings.problem)
        return IsolatedRunner(
            settings.workload, settings.problem, timeout_s=settings.trial_timeout_s
        )

    # -- study --------------------------------------------------------------------------
    def open_study(self) -> optuna.Study:
        s = self.settings
        name = s.study_name or f"{s.workload}-{datetime.now():%Y%m%d-%H%M%S}"
        directions = list(s.objectives.values())
        storage = open_storage(s.storage)
        # A resumed study must not replay its first proposals: the seed moves on by the number
        # of trials already stored (still deterministic for a given history).
        stored = _stored_trial_count(storage, name)
        seed = None if s.seed is None else s.seed + stored
        sampler = make_sampler(
            s.sampler,
            seed=seed,
            space=s.space,
            n_objectives=len(directions),
            problem=s.problem,
            device=s.device,
        )
        study = optuna.create_study(
            storage=storage,
            study_name=name,
            directions=directions,
            sampler=sampler,
            pruner=DivergencePruner(),
            load_if_exists=True,
        )
        info = study.user_attrs.get(STUDY_ATTR)
        if info is None and s.baseline:
            # the untuned default runs first: the sweep's answer is never worse than it
            study.enqueue_trial(
                {k: v for k, v in s.baseline.items() if k in s.space.names},
                user_attrs={"baseline": True},
            )
        if info is None:
            self._warm_start(storage, study)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                study.set_metric_names(list(s.objectives))
            study.set_user_attr(
                STUDY_ATTR,
                {
                    "workload": s.workload,
                    "problem": s.problem,
                    "space": s.space.source,
                    "objectives": s.objectives,
                    "sampler": s.sampler,
                    "sampler_used": resolve_sampler(s.sampler, s.space, len(directions)),
                    "seed": s.seed,
                    "n_trials": s.n_trials,
                    "device": s.device,
                    "command": s.command,
                    "label": s.label,
                    "created": datetime.now(UTC).isoformat(timespec="seconds"),
                },
            )
        elif info.get("workload") != s.workload or info.get("objectives") != s.objectives:
            raise StudyMismatch(
                f"study {name!r} holds a {info.get('workload')} sweep of "
                f"{info.get('objectives')}; it cannot resume as {s.workload} of {s.objectives}"
            )
        self._fail_interrupted(study)
        return study

    def _warm_start(self, storage: optuna.storages.BaseStorage, study: optuna.Study) -> None:
        """Queue the best configs of a related stored sweep as the first trials."""
        s = self.settings
        if s.warm_start == "off":
            return
        if s.warm_start == "auto":
            found = most_similar_study(
                storage, s.workload, s.problem, s.device.get("name"), exclude=study.study_name
            )
        else:
            try:
                source = optuna.load_study(study_name=s.warm_start, storage=storage)
            except KeyError:
                raise StudyMismatch(
                    f"--warm-start: no study named {s.warm_start!r} in this storage"
                ) from None
            problem = source.user_attrs.get(STUDY_ATTR, {}).get("problem", {})
            found = (source, similarity(s.problem, problem))
        if found is None:
            return
        source, score = found
        direction = next(iter(s.objectives.values()))
        configs = top_configs(source, direction, WARM_START_CONFIGS)
        for config in configs:
            study.enqueue_trial(
                {k: v for k, v in config.items() if k in s.space.names},
                user_attrs={WARM_START_ATTR: source.study_name},
                skip_if_exists=True,
            )
        study.set_user_attr(
            WARM_START_ATTR,
            {"source": source.study_name, "similarity": score, "configs": len(configs)},
        )

    @staticmethod
    def _fail_interrupted(study: optuna.Study) -> None:
        """A trial left RUNNING by a killed sweep is recorded as interrupted, not re-counted."""
        for trial in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
            study._storage.set_trial_user_attr(trial._trial_id, STATUS_ATTR, "interrupted")
            study._storage.set_trial_user_attr(
                trial._trial_id, "reason", "the sweep was stopped while this trial ran"
            )
            study._storage.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)

    # -- loop ---------------------------------------------------------------------------
    def run(self) -> SweepSummary:
        s = self.settings
        study = self.open_study()
        directions = list(s.objectives.values())
        counts: Counter = Counter(
            REPEATED if REPEAT_ATTR in t.user_attrs else trial_status(t)
            for t in study.get_trials(deepcopy=False, states=FINISHED)
        )
        # The budget counts launched trials: a config rejected by a static constraint is told
        # to the sampler (so it learns the region) but costs no trial.
        done = counts.total() - counts[INFEASIBLE] - counts[REPEATED]
        self._visited = {
            config_key(t.params): Outcome(
                t.number, trial_status(t), t.values if trial_status(t) == "ok" else None
            )
            for t in study.get_trials(deepcopy=False, states=FINISHED)
            if REPEAT_ATTR not in t.user_attrs and trial_status(t) != INFEASIBLE
        }
        # steering draws, like the sampler, move on with the trials already stored
        self._rng = random.Random(None if s.seed is None else s.seed + len(study.trials))
        self._evaluate_s = 0.0  # wall time inside runner.evaluate (worker start included)
        self._sampler_s = 0.0  # wall time in study.ask() and the space's sampling
        self._exhausted = False
        self._in_flight_keys: set[tuple] = set()  # steering must not pick the running config
        self.observer.on_start(s, study, done)
        start = time.monotonic()
        ran = rejected = 0
        max_rejected = MAX_REJECTIONS_PER_TRIAL * max(s.n_trials or 0, 100)
        stopped_by = "trials"
        runner = self.runner_factory(s)
        # One trial runs (in a thread that waits on the runner) while the driver tells the
        # previous one and asks the sampler for the next, so the search's own time hides
        # behind the measurement; the sampler sees every result but the one in flight.
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="autotune-trial")
        in_flight: InFlight | None = None
        finished: InFlight | None = None  # measured, not told yet
        prepared: Prepared | None = None

        def launch(ready: Prepared) -> InFlight:
            return self._launch(pool, runner, ready, len(directions))

        def account(record: TrialRecord) -> None:
            nonlocal done, ran, rejected
            counts[
                record.status if record.launched or record.status == INFEASIBLE else REPEATED
            ] += 1
            if not record.launched:
                rejected += 1
            else:
                done += 1
                ran += 1
                rejected = 0
            self.observer.on_trial(record, study, counts)

        try:
            while True:
                stop = self._stop_reason(
                    study, done + (in_flight is not None), start, rejected, max_rejected
                )
                if stop is not None and in_flight is not None:
                    # decide on the result: a launched config can still turn out infeasible
                    finished, in_flight = in_flight, None
                    account(self._complete(study, finished, directions))
                    finished = None
                    continue
                if stop is not None:
                    stopped_by = stop
                    break
                step = self._prepare(study, directions)
                if isinstance(step, TrialRecord):
                    account(step)  # rejected by a constraint or answered from the study
                    continue
                prepared = step
                key = config_key(prepared.config)
                if in_flight is not None and key in self._in_flight_keys:
                    # the config in flight, proposed again: answered once its result is in
                    finished, in_flight = in_flight, None
                    account(self._complete(study, finished, directions))
                    finished = None
                    previous = self._visited.get(key)
                    if previous is not None:
                        repeat, prepared = prepared, None
                        account(self._tell_repeat(study, repeat, previous, directions))
                        continue
                if in_flight is None:
                    in_flight, prepared = launch(prepared), None
                    continue
                # the next config starts the moment the current one ends; the finished one
                # is told while the next runs
                finished = in_flight
                outcome = finished.future.result()
                in_flight, prepared = launch(prepared), None
                account(self._tell_outcome(study, finished, outcome, directions))
                finished = None
        except KeyboardInterrupt:
            stopped_by = "interrupted"
        finally:
            runner.close()  # ends a worker still measuring: its evaluate returns at once
            for left in (finished, in_flight, prepared):
                if left is not None:
                    if isinstance(left, InFlight):
                        wait([left.future])
                    self._mark_interrupted(study, left.trial)
            pool.shutdown(wait=True)
        summary = SweepSummary(
            study=study,
            study_name=study.study_name,
            trials_run=ran,
            trials_total=done,
            failures=Counter({k: v for k, v in counts.items() if k not in ("ok", REPEATED)}),
            best=best_trials(study),
            stopped_by=stopped_by,
            elapsed_s=time.monotonic() - start,
            evaluate_s=self._evaluate_s,
            sampler_s=self._sampler_s,
        )
        study.set_user_attr(
            "last_run",
            {
                "trials": ran,
                "elapsed_s": round(summary.elapsed_s, 3),
                "evaluate_s": round(self._evaluate_s, 3),
                "sampler_s": round(self._sampler_s, 3),
                "search_overhead": round(summary.search_overhead, 4),
            },
        )
        self.observer.on_end(summary)
        return summary

    def finish(self, study: optuna.Study, *, top: int = 3, rounds: int = 3) -> list[FinishRow]:
        """The noise-aware finish (see :mod:`autotune.driver.finish`) in a fresh runner."""
        metric, direction = next(iter(self.settings.objectives.items()))
        return finish(
            study, metric, direction, self.runner_factory(self.settings), top=top, rounds=rounds
        )

    def _stop_reason(
        self,
        study: optuna.Study,
        launched: int,
        start: float,
        rejected: int,
        max_rejected: int,
    ) -> str | None:
        """Why the sweep stops before launching another trial, or None to go on."""
        s = self.settings
        if s.n_trials is not None and launched >= s.n_trials:
            return "trials"
        if s.time_budget_s is not None and time.monotonic() - start >= s.time_budget_s:
            return "time"
        if s.sampler == "grid" and study.sampler.is_exhausted(study):
            return "grid exhausted"
        if self._exhausted:
            return "no unvisited config left"
        if rejected >= max_rejected:
            return f"constraints rejected {rejected} configs in a row"
        return None

    def _prepare(self, study: optuna.Study, directions: list[str]) -> Prepared | TrialRecord:
        """Ask for the next config: a config to launch, or the record of one that needs no
        launch (it breaks a static constraint, or was measured before)."""
        s = self.settings
        asked_at = time.perf_counter()
        trial = study.ask()
        try:
            config = s.space.sample(trial, s.problem, s.device)
            self._sampler_s += time.perf_counter() - asked_at
            broken = s.space.violations(config, s.problem, s.device)
            if broken:
                reason = "violates " + ", ".join(broken) + " (not launched)"
                result = TrialResult(TrialStatus.INFEASIBLE, reason)
                return self._tell(study, trial, config, result, directions)
            previous = self._visited.get(config_key(config))
            if previous is not None:
                return self._tell_repeat(study, Prepared(trial, config), previous, directions)
        except BaseException:
            self._mark_interrupted(study, trial)
            raise
        return Prepared(trial, config)

    def _launch(
        self, pool: ThreadPoolExecutor, runner: Runner, prepared: Prepared, n_objectives: int
    ) -> InFlight:
        should_prune = self._prune_check(prepared.trial, n_objectives)

        def evaluate() -> tuple[TrialResult, float]:
            launched_at = time.perf_counter()
            result = runner.evaluate(prepared.config, should_prune)
            return result, time.perf_counter() - launched_at

        self._in_flight_keys.add(config_key(prepared.config))
        return InFlight(prepared.trial, prepared.config, pool.submit(evaluate))

    def _complete(
        self, study: optuna.Study, in_flight: InFlight, directions: list[str]
    ) -> TrialRecord:
        """Wait for the trial in flight and tell its result."""
        return self._tell_outcome(study, in_flight, in_flight.future.result(), directions)

    def _tell_outcome(
        self,
        study: optuna.Study,
        in_flight: InFlight,
        outcome: tuple[TrialResult, float],
        directions: list[str],
    ) -> TrialRecord:
        result, seconds = outcome
        self._in_flight_keys.discard(config_key(in_flight.config))
        self._evaluate_s += seconds
        return self._tell(study, in_flight.trial, in_flight.config, result, directions)

    @staticmethod
    def _mark_interrupted(study: optuna.Study, trial: optuna.Trial) -> None:
        frozen = study._storage.get_trial(trial._trial_id)
        if frozen.state == optuna.trial.TrialState.RUNNING:
            trial.set_user_attr(STATUS_ATTR, "interrupted")
            study.tell(trial, state=optuna.trial.TrialState.FAIL)

    def _tell_repeat(
        self,
        study: optuna.Study,
        repeat: Prepared,
        previous: Outcome,
        directions: list[str],
    ) -> TrialRecord:
        """Answer a repeated config from the study, then steer the next trial elsewhere."""
        trial, config = repeat.trial, repeat.config
        reason = f"repeat of trial {previous.number}: answered from the study, not launched"
        trial.set_user_attr(STATUS_ATTR, previous.status)
        trial.set_user_attr("reason", reason)
        trial.set_user_attr(REPEAT_ATTR, previous.number)
        trial.set_user_attr("duration_s", 0.0)
        mark_feasibility(trial, previous.values is not None)
        study.tell(trial, previous.values or _penalty(study, directions))
        best = best_trials(study)
        steer = unvisited_config(
            self.settings.space,
            best[0].params if best else None,
            set(self._visited) | self._in_flight_keys,
            self._rng,
            self.settings.problem,
            self.settings.device,
        )
        if steer is None:
            # in a discrete space: every config the constraints allow has been measured
            self._exhausted = all(p.kind != "float" for p in self.settings.space.params)
        else:
            study.enqueue_trial(steer, skip_if_exists=True)
        return TrialRecord(
            trial.number, previous.status, reason, config, previous.values, 0.0, launched=False
        )

    @staticmethod
    def _prune_check(trial: optuna.Trial, n_objectives: int) -> Callable[[int, float], bool]:
        history: list[float] = []

        def should_prune(step: int, value: float) -> bool:
            history.append(value)
            if n_objectives > 1 or not math.isfinite(value):
                # Optuna's report() is single-objective; the pruner's rule applies directly
                return DivergencePruner.diverged(history)
            trial.report(value, step)
            return trial.should_prune()

        return should_prune

    def _tell(
        self,
        study: optuna.Study,
        trial: optuna.Trial,
        config: dict[str, Any],
        result: TrialResult,
        directions: list[str],
    ) -> TrialRecord:
        trial.set_user_attr(STATUS_ATTR, result.status.value)
        trial.set_user_attr("reason", result.reason)
        trial.set_user_attr("duration_s", round(result.duration_s, 4))
        values: list[float] | None = None
        if result.ok and result.measurement is not None:
            m = result.measurement
            missing = [k for k in self.settings.objectives if k not in m.values]
            if missing:
                result = TrialResult(
                    TrialStatus.CRASHED, f"objective did not measure {', '.join(missing)}"
                )
                trial.set_user_attr(STATUS_ATTR, result.status.value)
                trial.set_user_attr("reason", result.reason)
            else:
                values = [float(m.values[k]) for k in self.settings.objectives]
                trial.set_user_attr("metrics", _jsonable(m.all_metrics()))
                trial.set_user_attr("telemetry", _jsonable(m.telemetry))
        mark_feasibility(trial, values is not None)
        if values is not None:
            study.tell(trial, values)
        elif result.status is TrialStatus.DIVERGED and len(directions) == 1:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            # complete with a penalty + violated constraint: the sampler learns the region
            study.tell(trial, _penalty(study, directions))
        if result.status is not TrialStatus.INFEASIBLE:
            self._visited[config_key(config)] = Outcome(trial.number, result.status.value, values)
        return TrialRecord(
            trial.number,
            result.status.value,
            result.reason,
            config,
            values,
            result.duration_s,
            launched=result.status is not TrialStatus.INFEASIBLE,
        )


def _stored_trial_count(storage: optuna.storages.BaseStorage, name: str) -> int:
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return 0
    return len(storage.get_all_trials(study_id, deepcopy=False))


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, float) and not math.isfinite(value):
            out[key] = str(value)
        elif isinstance(value, int | float | str | bool) or value is None:
            out[key] = value
        elif isinstance(value, dict):
            out[key] = _jsonable(value)
        else:
            out[key] = str(value)
    return out
