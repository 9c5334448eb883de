"""Tell the study how each trial ended, and remember what each config measured.

The book writes every trial's status, reason, duration, metrics and telemetry (the names are
:mod:`autotune.driver.trial_attrs`'), tells Optuna the values (a failure: the worst value so
far plus a violated constraint, so the sampler leaves the region), answers a config measured
before from the study, and steers the next trial to an unvisited config after a repeat.

Every reason enters the study and the observer through the book, so it is redacted here
(:func:`autotune.redact.redact`): a URL's password, and the passwords of the problem's
command template and of the storage URL wherever they stand, show as ``***``, whichever
executor ran the trial (an exception's message, a server's last lines).

Example:
    >>> import optuna, random
    >>> from autotune.space import load_space
    >>> from autotune.driver.settings import SweepSettings
    >>> from autotune.failures import TrialStatus
    >>> from autotune.runners.base import TrialResult
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"})
    >>> study = optuna.create_study(direction="maximize")
    >>> book = TrialBook(study, settings, random.Random(0))
    >>> trial = study.ask()
    >>> oom = TrialResult(TrialStatus.OOM, "no room")
    >>> record = book.tell_result(Asked(trial, {"fault": "oom"}), oom)
    >>> record.status, study.trials[0].user_attrs["reason"]
    ('oom', 'no room')
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Any

import optuna

from autotune.driver.enumeration import is_enumerable
from autotune.driver.novelty import config_key, unvisited_config
from autotune.driver.read_snapshot import batched_writes
from autotune.driver.results import best_trials
from autotune.driver.settings import SweepSettings, TrialRecord
from autotune.driver.trial_attrs import (
    DURATION,
    FINISHED_STATES,
    INFEASIBLE,
    INTERRUPTED,
    METRICS,
    REASON,
    REPEAT_OF,
    REPEATED,
    STATUS,
    TELEMETRY,
    WORKER,
    failure_penalty,
    is_repeat,
    mark_feasibility,
    trial_origin,
    trial_status,
)
from autotune.failures import TrialStatus
from autotune.redact import redact
from autotune.runners.base import TrialResult


@dataclass
class Asked:
    """A trial asked of the sampler, with its config."""

    trial: optuna.Trial
    config: dict[str, Any]

    @property
    def key(self) -> tuple:
        return config_key(self.config)


@dataclass(frozen=True)
class Outcome:
    """What a config measured, kept to answer repeats of it."""

    number: int
    status: str
    values: list[float] | None


#: repeats in a row for which no unvisited config was found (each after the draws of
#: :func:`~autotune.driver.novelty.unvisited_config`, a fresh value for every active float
#: among them) before a space with floats counts as measured completely: its floats are fixed
#: (low == high), or active only where the constraints forbid them
UNSTEERED_IN_A_ROW = 5

# What Optuna raises when a trial was already finished (another driver found it stale).
_ALREADY_FINISHED = (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError)


class TrialBook:
    """The study's clerk for one sweep; see the module docstring."""

    def __init__(self, study: optuna.Study, settings: SweepSettings, rng: random.Random) -> None:
        self.study = study
        self.settings = settings
        self.directions = list(settings.objectives.values())
        self.rng = rng
        self.visited: dict[tuple, Outcome] = {}
        self._known: set[int] = set()
        self.running: set[tuple] = set()  # configs in flight: steering must not pick them
        self.exhausted = False  # a space known to be measured completely
        self.unsteered = 0  # repeats in a row with no unvisited config found
        # the passwords a reason may echo outside a URL (a server printing its command line)
        self.secrets = settings.secrets
        self.refresh()

    def redact(self, reason: str) -> str:
        """``reason`` as the study stores and the observer shows it: every password ``***``."""
        return redact(reason, self.secrets)

    def refresh(self) -> None:
        """Learn the configs measured since (by this driver or another on the same study)."""
        for t in self.study.get_trials(deepcopy=False, states=FINISHED_STATES):
            if t.number in self._known:
                continue
            self._known.add(t.number)
            status = trial_status(t)
            # a static rejection is not remembered (the constraints answer it again at once);
            # a config found infeasible when it ran (it has a worker) is
            if is_repeat(t) or (status == INFEASIBLE and WORKER not in t.user_attrs):
                continue
            values = list(t.values) if status == "ok" and t.values else None
            self.visited.setdefault(config_key(t.params), Outcome(t.number, status, values))

    def previous(self, config: dict[str, Any]) -> Outcome | None:
        return self.visited.get(config_key(config))

    def penalty(self) -> list[float]:
        """Value told for a failed trial: the worst successful value so far (0 if none)."""
        return failure_penalty(self.study)

    # -- telling ------------------------------------------------------------------------
    def tell_result(self, asked: Asked, result: TrialResult, worker: str = "") -> TrialRecord:
        """Record how a trial ended (a constraint rejection included) and tell the study."""
        trial = asked.trial
        result = replace(result, reason=self.redact(result.reason))  # before it is kept anywhere
        values: list[float] | None = None
        over: list[str] = []
        if result.ok and result.measurement is not None:
            m = result.measurement
            missing = [k for k in self.settings.objectives if k not in m.values]
            unmeasured = m.not_finite(self.settings.objectives)
            if missing:
                result = TrialResult(
                    TrialStatus.CRASHED, f"objective did not measure {', '.join(missing)}"
                )
            elif unmeasured:
                result = TrialResult(
                    TrialStatus.CRASHED, f"objective measured {', '.join(unmeasured)}"
                )
            else:
                values = [float(m.values[k]) for k in self.settings.objectives]
                over = slo_violations(self.settings.slo, {**m.all_metrics(), **m.values})
                if over:
                    reason = "over the SLO: " + "; ".join(over)
                    result = TrialResult(TrialStatus.SLO_VIOLATED, reason, m, result.duration_s)
                    values = None
        launched = result.status is not TrialStatus.INFEASIBLE
        record = TrialRecord(
            trial.number,
            result.status.value,
            result.reason,
            asked.config,
            values,
            result.duration_s,
            launched=launched,
            worker=worker,
            origin=trial_origin(trial.user_attrs),
        )
        try:
            with batched_writes(self.study):  # the record in one transaction, then the tell
                trial.set_user_attr(STATUS, result.status.value)
                trial.set_user_attr(REASON, result.reason)
                trial.set_user_attr(DURATION, round(result.duration_s, 4))
                if worker:
                    trial.set_user_attr(WORKER, worker)
                if result.measurement is not None and (values is not None or over):
                    trial.set_user_attr(METRICS, _jsonable(result.measurement.all_metrics()))
                    trial.set_user_attr(TELEMETRY, _jsonable(result.measurement.telemetry))
                mark_feasibility(trial, values is not None)
            if values is not None:
                self.study.tell(trial, values)
            elif result.status is TrialStatus.DIVERGED and len(self.directions) == 1:
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            elif result.status is TrialStatus.INTERRUPTED:
                # stopped from outside (the budget's end): says nothing about the config
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                # complete with a penalty + violated constraint: the sampler learns the region
                self.study.tell(trial, self.penalty())
        except _ALREADY_FINISHED:
            record.status, record.reason = INTERRUPTED, "found stale and closed by another driver"
            return record
        self._known.add(trial.number)
        # remembered, so a repeat is answered from the study: every result that ran (a config
        # found infeasible only when it ran included), never one stopped from outside
        ran = launched or bool(worker)
        if ran and result.status is not TrialStatus.INTERRUPTED:
            self.visited[asked.key] = Outcome(trial.number, result.status.value, values)
            self.unsteered = 0
        return record

    def tell_repeat(self, asked: Asked, previous: Outcome) -> TrialRecord:
        """Answer a repeated config from the study, then steer the next trial elsewhere."""
        trial = asked.trial
        reason = f"repeat of trial {previous.number}: answered from the study, not launched"
        trial.set_user_attr(STATUS, previous.status)
        trial.set_user_attr(REASON, reason)
        trial.set_user_attr(REPEAT_OF, previous.number)
        trial.set_user_attr(DURATION, 0.0)
        mark_feasibility(trial, previous.values is not None)
        self.study.tell(trial, previous.values or self.penalty())
        self._known.add(trial.number)
        self._steer()
        return TrialRecord(
            trial.number, previous.status, reason, asked.config, previous.values, 0.0, False
        )

    def tell_claimed(self, asked: Asked, twin: int) -> TrialRecord:
        """Stand back from a config another driver's trial ``twin`` is running: recorded as
        a repeat of it, told FAIL (samplers ignore it), never launched."""
        trial = asked.trial
        reason = f"trial {twin} of another driver runs this config: not launched"
        try:
            trial.set_user_attr(STATUS, REPEATED)
            trial.set_user_attr(REASON, reason)
            trial.set_user_attr(REPEAT_OF, twin)
            trial.set_user_attr(DURATION, 0.0)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        except _ALREADY_FINISHED:
            pass
        return TrialRecord(trial.number, REPEATED, reason, asked.config, None, 0.0, False)

    def _steer(self) -> None:
        s = self.settings
        best = best_trials(self.study)
        steer = unvisited_config(
            s.space,
            best[0].params if best else None,
            set(self.visited) | self.running,
            self.rng,
            s.problem,
            s.device,
        )
        if steer is None:
            self.unsteered += 1
            self.exhausted = self._measured_completely()
        else:
            self.unsteered = 0
            self.study.enqueue_trial(steer, skip_if_exists=True)

    def _measured_completely(self) -> bool:
        """Whether a steer that found no unvisited config proves the space measured.

        A discrete space listed whole (:func:`~autotune.driver.enumeration.is_enumerable`):
        every config the constraints allow has been measured. One too large to list is not
        known to be: its draws miss a sparse feasible set (1,000 configs of 1,000,000, the rows
        of a 60,000-row replay table), and it stopped after a handful of trials; the sampler's
        proposals go on (a rejection or a repeat costs no trial) until --trials, the time
        budget, or the sweep's limit on configs not launched in a row. In a space with floats,
        draws of fresh float values that find only visited or forbidden configs, repeat after
        repeat, mean its floats cannot vary (repeats were stored forever, never reaching
        --trials).
        """
        space = self.settings.space
        if all(p.discrete for p in space.params):
            return is_enumerable(space)
        return self.unsteered >= UNSTEERED_IN_A_ROW

    def mark_interrupted(
        self,
        trial: optuna.Trial | int,
        reason: str,
        *,
        worker: str = "",
        duration_s: float | None = None,
    ) -> None:
        """Close a trial of this driver (or its number) that will not be told a result; one
        stopped as it ran keeps where it ran (``worker``) and for how long (``duration_s``),
        as a finished trial does."""
        attrs: dict[str, Any] = {STATUS: INTERRUPTED, REASON: self.redact(reason)}
        if duration_s is not None:
            attrs[DURATION] = round(duration_s, 4)
        if worker:
            attrs[WORKER] = worker
        try:
            if isinstance(trial, int):
                storage, study_id = self.study._storage, self.study._study_id
                trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial)
                if storage.get_trial(trial_id).state.is_finished():
                    return
                for key, value in attrs.items():
                    storage.set_trial_user_attr(trial_id, key, value)
            else:
                with batched_writes(self.study):
                    for key, value in attrs.items():
                        trial.set_user_attr(key, value)
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        except _ALREADY_FINISHED:
            pass


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


def slo_violations(slo: dict[str, float], measured: dict[str, Any]) -> list[str]:
    """The limits of ``slo`` that ``measured`` breaks, as ``"name value > limit"`` (a metric
    the trial did not measure breaks its limit too).

    Example:
        >>> slo_violations({"ttft_p99_ms": 500.0}, {"ttft_p99_ms": 612.4})
        ['ttft_p99_ms 612.4 > 500']
        >>> slo_violations({"ttft_p99_ms": 500.0}, {"ttft_p99_ms": 80.0})
        []
    """
    over = []
    for name, limit in slo.items():
        value = measured.get(name)
        if value is None:
            over.append(f"{name} not measured (limit {limit:g})")
        elif float(value) > limit:
            over.append(f"{name} {float(value):.4g} > {limit:g}")
    return over
