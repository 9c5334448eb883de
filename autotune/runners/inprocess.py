"""Run trials in the driver's own process: for replay and objectives that cannot crash.

Example:
    >>> runner = InProcessRunner("faults", {})
    >>> runner.evaluate({"fault": "none"}).status.value
    'ok'
"""

from __future__ import annotations

import time
from typing import Any

from autotune.failures import Diverged, TrialStatus, classify
from autotune.objectives import get_objective
from autotune.runners.base import (
    PruneCheck,
    Runner,
    TrialResult,
    checked_measurement,
    never_prune,
)


class InProcessRunner(Runner):
    """Evaluate the objective directly; exceptions become failures, but a crash is fatal."""

    def __init__(self, workload: str, problem: dict[str, Any]) -> None:
        self.objective = get_objective(workload)(problem)

    def evaluate(
        self, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> TrialResult:
        def report(step: int, value: float) -> None:
            if should_prune(step, value):
                raise Diverged(f"pruned at step {step}: value {value:.4g}")

        start = time.perf_counter()
        try:
            measurement = checked_measurement(self.objective.evaluate(config, report))
        except Exception as exc:  # noqa: BLE001 - every failure is data, not an exit
            failure = classify(exc)
            return TrialResult(failure.status, str(failure), None, time.perf_counter() - start)
        return TrialResult(TrialStatus.OK, "", measurement, time.perf_counter() - start)

    def close(self) -> None:
        self.objective.close()
