"""A sweep's stop on a failure its workload says every config would share (``Objective.futile``:
a server that cannot start for any config), asked after each launched trial of the run.

Example:
    >>> from autotune.objectives.base import Objective
    >>> class Never(Objective):
    ...     def evaluate(self, config, report=None): ...
    ...     @classmethod
    ...     def futile(cls, problem, outcomes, served_before):
    ...         return "no luck" if len(outcomes) >= 2 else None
    >>> watch = FutileWatch(Never, {}, served_before=False)
    >>> watch.told("crashed", "x"), watch.told("crashed", "x"), watch.line
    (None, 'no luck', 'no luck')
"""

from __future__ import annotations

from typing import Any

#: how a sweep stopped by it says it stopped (``SweepSummary.stopped_by``)
FUTILE = "a failure every config would share"
#: outcomes kept: a workload's rule reads a run's first trials
KEPT = 64


class FutileWatch:
    """This run's launched trials' outcomes, and the line that stopped it (None: not)."""

    def __init__(self, objective: Any, problem: dict[str, Any], served_before: bool) -> None:
        self.rule = getattr(objective, "futile", None)
        self.problem = problem
        self.served_before = served_before
        self.outcomes: list[tuple[str, str]] = []
        self.line: str | None = None

    @classmethod
    def for_settings(cls, settings: Any, served_before: bool) -> FutileWatch:
        """The watch of a sweep's workload (one that cannot be loaded here never stops it)."""
        from autotune.objectives import get_objective

        try:
            objective = get_objective(settings.workload)
        except Exception:  # noqa: BLE001 - its trials say what is wrong with it
            objective = None
        return cls(objective, settings.problem, served_before)

    def told(self, status: str, reason: str) -> str | None:
        """Record a launched trial's outcome; the line to stop the sweep with, or None."""
        if self.line is not None or self.rule is None or len(self.outcomes) >= KEPT:
            return self.line
        self.outcomes.append((status, reason))
        line = self.rule(self.problem, list(self.outcomes), self.served_before)
        self.line = line if isinstance(line, str) and line else None
        return self.line
