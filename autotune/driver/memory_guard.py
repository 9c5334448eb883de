"""Reject configs that would run out of memory before launching them: the workload's memory
model (``Objective.predict_memory``), corrected by what the sweep's own trials measured.

The correction is the median of measured / predicted peak over the study's trials that ran
(two or more; 1 before); a config that ran out of memory caps what any later config may be
predicted at. A config predicted over the device's memory (times ``HEADROOM``, for the CUDA
context and the allocator's fragments) is told to the study as infeasible, never launched,
and costs no trial.

Example:
    >>> import optuna
    >>> guard = MemoryGuard(lambda config: config["gb"] * 1e9, budget_bytes=80e9)
    >>> study = optuna.create_study()
    >>> guard.check({"gb": 40}, study) is None, guard.check({"gb": 90}, study)[:30]
    (True, 'predicted peak memory 90.0 GB ')
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import optuna

from autotune.driver.trial_attrs import METRICS, STATUS

#: Share of the device's memory a trial may plan to use.
HEADROOM = 0.95


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


class MemoryGuard:
    """See the module docstring. ``predict`` maps a config to bytes (None: not modelled)."""

    def __init__(self, predict: Callable[[dict[str, Any]], float | None], budget_bytes: float):
        self.predict = predict
        self.budget = budget_bytes * HEADROOM
        self.rejected = 0

    @classmethod
    def for_settings(cls, settings: Any) -> MemoryGuard | None:
        """A guard for a sweep whose workload has a memory model, on a device whose memory is
        known; else None."""
        from autotune.objectives import get_objective

        objective = get_objective(settings.workload)
        budget = device_memory_bytes(settings.device)
        probe = settings.baseline or {}
        if budget is None or objective.predict_memory(settings.problem, probe) is None:
            return None
        return cls(lambda config: objective.predict_memory(settings.problem, config), budget)

    def _observed(self, study: optuna.Study) -> tuple[list[float], float | None]:
        """(measured / predicted of the trials that ran, the smallest corrected prediction
        of a trial that ran out of memory)."""
        ratios, oom_at = [], None
        for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            metrics = t.user_attrs.get(METRICS, {})
            predicted, measured = (
                metrics.get("predicted_memory_gb"),
                metrics.get("measured_memory_gb"),
            )
            if t.user_attrs.get(STATUS) == "ok" and predicted and measured:
                ratios.append(float(measured) / float(predicted))
            elif t.user_attrs.get(STATUS) == "oom":
                p = self.predict(dict(t.params))
                if p is not None:
                    oom_at = p if oom_at is None else min(oom_at, p)
        return ratios, oom_at

    def correction(self, study: optuna.Study) -> tuple[float, int]:
        """(measured / predicted, median over the trials that ran; how many)."""
        ratios, _ = self._observed(study)
        return (statistics.median(ratios) if len(ratios) >= 2 else 1.0), len(ratios)

    def check(self, config: dict[str, Any], study: optuna.Study) -> str | None:
        """Why ``config`` must not launch (a reason to record), or None."""
        predicted = self.predict(config)
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
