"""What a runner returns for one trial, and the interface every runner has.

Example:
    >>> from autotune.failures import TrialStatus
    >>> TrialResult(TrialStatus.TIMEOUT, "no result after 5.0 s").ok
    False
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.failures import TrialStatus
from autotune.measurement import Measurement

#: Called by the runner with each value an objective reports (step, value); returns True when
#: the trial should stop (the driver's pruner decided so).
PruneCheck = Callable[[int, float], bool]


def never_prune(step: int, value: float) -> bool:
    return False


@dataclass
class TrialResult:
    """How one trial ended: a status, a readable reason, and the measurement when ok."""

    status: TrialStatus
    reason: str = ""
    measurement: Measurement | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is TrialStatus.OK


class Runner(ABC):
    """Where trials run. ``evaluate`` never raises for a failing trial: it returns the failure."""

    @abstractmethod
    def evaluate(
        self, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> TrialResult:
        """Run one trial of the runner's workload with ``config``."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Stop whatever the runner started."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
