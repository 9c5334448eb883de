"""What one successful trial measured.

Example:
    >>> m = Measurement(values={"tflops": 612.0}, metrics={"ratio_to_cublas": 0.95})
    >>> m.all_metrics()["tflops"]
    612.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Measurement:
    """Result of one trial.

    Attributes:
        values: the metrics an objective can be optimised on (e.g. ``tflops``, ``tokens_per_s``).
        metrics: further figures worth keeping (ratios, spreads, MFU, loss curve summary).
        telemetry: device state around the measurement (clocks, power, throttle reasons).
        recorded_duration_s: replay only: how long the trial took when it was recorded (the
            inline executor's simulated clock advances by it).
    """

    values: dict[str, float]
    metrics: dict[str, Any] = field(default_factory=dict)
    telemetry: dict[str, Any] = field(default_factory=dict)
    recorded_duration_s: float | None = None

    def all_metrics(self) -> dict[str, Any]:
        return {**self.metrics, **self.values}

    def not_finite(self, names: Iterable[str]) -> list[str]:
        """Of the tuned figures ``names``, those measured NaN or infinite, as ``name = value``:
        no figure to compare (a sweep and a recording call such a trial crashed).

        Example:
            >>> Measurement(values={"v": float("nan"), "w": 2.0}).not_finite(["v", "w", "x"])
            ['v = nan']
        """
        return [f"{k} = {self.values[k]}" for k in names
                if k in self.values and not math.isfinite(self.values[k])]  # fmt: skip
