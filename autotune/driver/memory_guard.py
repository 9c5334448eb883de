"""Reject configs that would run out of memory before launching them: the workload's memory
model (``Objective.predict_memory``), corrected by what the sweep's own trials measured.

The correction is the median of measured / predicted peak over the study's trials that ran
(two or more; 1 before); a config that ran out of memory caps what any later config may be
predicted at. A config predicted over the device's memory (times ``HEADROOM``, for the CUDA
context and the allocator's fragments) is told to the study as infeasible, never launched,
and costs no trial.

A model that fails on a config (it raises, or returns no number of bytes) keeps that config
from launching, its failure the reason; one that fails on ``MAX_MODEL_FAILURES`` configs in a
row is broken, not the configs, and stops the sweep (:class:`WorkloadError`: one line, the
trials that finished stored).

Example:
    >>> import optuna
    >>> guard = MemoryGuard(lambda config: config["gb"] * 1e9, budget_bytes=80e9)
    >>> study = optuna.create_study()
    >>> guard.check({"gb": 40}, study) is None, guard.check({"gb": 90}, study)[:30]
    (True, 'predicted peak memory 90.0 GB ')
"""

from __future__ import annotations

import math
import numbers
import statistics
from collections.abc import Callable
from typing import Any

import optuna

from autotune.driver.trial_attrs import STATUS, trial_metrics
from autotune.objectives.external import WorkloadError, setup_call

#: Share of the device's memory a trial may plan to use.
HEADROOM = 0.95
#: Configs in a row a workload's memory model may fail on before the sweep stops.
MAX_MODEL_FAILURES = 50


def device_memory_bytes(device: dict[str, Any]) -> float | None:
    """Memory a trial may use: the GPU's, or on a CPU what the OS says is available now."""
    if device.get("type") == "cuda" and device.get("total_memory"):
        return float(device["total_memory"])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def model_of(
    workload: str, objective: type[Any], problem: dict[str, Any]
) -> Callable[[dict[str, Any]], float | None]:
    """``objective.predict_memory`` at ``problem``, as the guard calls it: a model that returns
    something else than a number of bytes or None, or (a workload file's or a plugin's, see
    :func:`~autotune.objectives.external.setup_call`) raises, raises a one-line
    :class:`WorkloadError` naming the workload and the method.

    Example:
        >>> from autotune.objectives.base import Objective
        >>> class Mine(Objective):
        ...     def evaluate(self, config, report=None): ...
        ...     @classmethod
        ...     def predict_memory(cls, problem, config):
        ...         return {1: 2e9, 2: "4 GB"}[config["x"]]
        >>> predict = model_of("mine.py", Mine, {})
        >>> predict({"x": 1})
        2000000000.0
        >>> for config in ({"x": 2}, {"x": 3}):
        ...     try:
        ...         predict(config)
        ...     except WorkloadError as exc:
        ...         print(exc)
        mine.py: Mine.predict_memory returned str, not a number of bytes or None
        mine.py: Mine.predict_memory raised KeyError: 3
    """

    def predict(config: dict[str, Any]) -> float | None:
        with setup_call(workload, objective, "predict_memory"):
            predicted = objective.predict_memory(problem, config)
        if predicted is None:
            return None
        if not isinstance(predicted, numbers.Real) or isinstance(predicted, bool):
            what = type(predicted).__name__
        elif not (math.isfinite(predicted) and predicted >= 0):
            what = repr(predicted)
        else:
            return float(predicted)
        raise WorkloadError(f"{workload}: {objective.__name__}.predict_memory returned {what},"
                            " not a number of bytes or None")  # fmt: skip

    return predict


def _unbound(method: Any) -> Any:
    """The function behind a classmethod as a class reads it (to tell an override)."""
    return getattr(method, "__func__", method)


class MemoryGuard:
    """See the module docstring. ``predict`` maps a config to bytes (None: not modelled)."""

    def __init__(
        self,
        predict: Callable[[dict[str, Any]], float | None],
        budget_bytes: float,
        workload: str = "",
    ) -> None:
        self.predict = predict
        self.workload = workload  # what a failure of the model's names, left off its trials
        self.budget = budget_bytes * HEADROOM
        self.rejected = 0
        self.failed_in_a_row = 0  # configs the model failed on since it last predicted one

    @classmethod
    def for_settings(cls, settings: Any) -> MemoryGuard | None:
        """A guard for a sweep whose workload has a memory model (one that predicts the
        untuned default, where there is one), on a device whose memory is known; else None.

        Raises:
            WorkloadError: a workload file's or plugin's model raises on the untuned default,
                or returns something else than a number of bytes or None.
        """
        from autotune.objectives import Objective, get_objective

        objective = get_objective(settings.workload)
        budget = device_memory_bytes(settings.device)
        modelled = _unbound(objective.predict_memory) is not _unbound(Objective.predict_memory)
        if budget is None or not modelled:
            return None
        predict = model_of(settings.workload, objective, settings.problem)
        # the untuned default is a config the model must read; none is made up to probe it
        if settings.baseline and predict(settings.baseline) is None:
            return None
        return cls(predict, budget, settings.workload)

    def _observed(self, study: optuna.Study) -> tuple[list[float], float | None]:
        """(measured / predicted of the trials that ran, the smallest corrected prediction
        of a trial that ran out of memory)."""
        ratios, oom_at = [], None
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            metrics = trial_metrics(t)
            predicted, measured = (
                metrics.get("predicted_memory_gb"),
                metrics.get("measured_memory_gb"),
            )
            if t.user_attrs.get(STATUS) == "ok" and predicted and measured:
                ratios.append(float(measured) / float(predicted))
            elif t.user_attrs.get(STATUS) == "oom":
                try:
                    p = self.predict(dict(t.params))
                except WorkloadError:  # told as infeasible when asked; no cap of its own
                    p = None
                if p is not None:
                    oom_at = p if oom_at is None else min(oom_at, p)
        return ratios, oom_at

    def correction(self, study: optuna.Study) -> tuple[float, int]:
        """(measured / predicted, median over the trials that ran; how many)."""
        ratios, _ = self._observed(study)
        return (statistics.median(ratios) if len(ratios) >= 2 else 1.0), len(ratios)

    def check(self, config: dict[str, Any], study: optuna.Study) -> str | None:
        """Why ``config`` must not launch (a reason to record), or None; a model that fails on
        ``config`` keeps it from launching, its failure the reason.

        Raises:
            WorkloadError: the model failed on ``MAX_MODEL_FAILURES`` configs in a row.
        """
        try:
            predicted = self.predict(config)
        except WorkloadError as exc:
            self.failed_in_a_row += 1
            if self.failed_in_a_row >= MAX_MODEL_FAILURES:
                in_a_row = f"on {self.failed_in_a_row} configs in a row (the last {config})"
                stored = "the trials that finished are stored"
                raise WorkloadError(f"{exc}, {in_a_row}; {stored}") from None
            self.rejected += 1
            return f"{str(exc).removeprefix(f'{self.workload}: ')} (not launched)"
        self.failed_in_a_row = 0
        if predicted is None:
            return None
        ratios, oom_at = self._observed(study)
        factor = statistics.median(ratios) if len(ratios) >= 2 else 1.0
        corrected = predicted * factor
        how = (
            f"memory model x{factor:.2f} from {len(ratios)} trials"
            if len(ratios) >= 2
            else ("memory model")
        )
        if corrected > self.budget:
            self.rejected += 1
            return (f"predicted peak memory {corrected / 1e9:.1f} GB ({how}) > "
                    f"{self.budget / 1e9:.1f} GB available (not launched)")  # fmt: skip
        if oom_at is not None and predicted >= oom_at:
            self.rejected += 1
            return (f"predicted peak memory {corrected / 1e9:.1f} GB is at least that of a config"
                    " that ran out of memory in this sweep (not launched)")  # fmt: skip
        return None

    def error(self, study: optuna.Study) -> float | None:
        """Median |measured / predicted - 1| of the trials that ran: the raw model's error."""
        ratios, _ = self._observed(study)
        return statistics.median(abs(r - 1) for r in ratios) if ratios else None
