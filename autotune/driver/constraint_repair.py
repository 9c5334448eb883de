"""Steering out of a run of rejections: after :data:`REPAIR_AFTER` proposals in a row broke a
static constraint, the last one, with each constraint group it broke drawn again until that
group holds (:func:`~autotune.space.feasibility.repair`), is the next trial.

A sampler proposes whole configs, and a composed space's constraints hold for all of them at
once only by chance: 32 matmul groups that each pass 15% of the time pass together once in
1e26, and a thin band of floats (``abs(a + b - 1) < 0.002``) is hit once in hundreds. The
feasibility check proved each group can hold; group by group, a few draws each find one. The
repaired config is told like any other, so the sampler learns where the feasible configs are.

Example:
    >>> import optuna
    >>> from autotune.space import Constraint, Expression, Param, Space
    >>> space = Space("s", [Param("a", "int", low=1, high=1000), Param("b", "int", low=1,
    ...     high=1000)], [Constraint("band", Expression("a + b == 1001"))])
    >>> steer, study = ConstraintRepair(space, {}, {}, seed=0), optuna.create_study()
    >>> steer.after_rejection(study, {"a": 3, "b": 4}, rejected_in_a_row=REPAIR_AFTER)
    True
    >>> fixed = space.sample(study.ask(), {}, {})  # the enqueued config: feasible
    >>> fixed["a"] + fixed["b"]
    1001
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import optuna

from autotune.space import Space
from autotune.space.feasibility import independent_groups, repair

#: proposals rejected in a row before a repaired one is enqueued (then again every as many)
REPAIR_AFTER = 50


class ConstraintRepair:
    """Enqueues a repaired config after every :data:`REPAIR_AFTER` rejections in a row."""

    def __init__(
        self,
        space: Space,
        problem: Mapping[str, Any],
        device: Mapping[str, Any],
        seed: int | None = None,
    ) -> None:
        self.space, self.problem, self.device = space, problem, device
        self.rng = random.Random(None if seed is None else seed + 104729)
        self._groups: list[Space] | None = None

    def after_rejection(
        self, study: optuna.Study, config: Mapping[str, Any], rejected_in_a_row: int
    ) -> bool:
        """Enqueue ``config`` repaired when ``rejected_in_a_row`` is a multiple of
        :data:`REPAIR_AFTER` and it breaks a static constraint (a memory-model rejection has
        nothing to draw again); True when a config was enqueued."""
        if rejected_in_a_row <= 0 or rejected_in_a_row % REPAIR_AFTER:
            return False
        if not self.space.violations(config, self.problem, self.device):
            return False
        if self._groups is None:
            self._groups = independent_groups(self.space)
        fixed = repair(self._groups, config, self.problem, self.device, self.rng)
        if fixed is None:
            return False
        study.enqueue_trial(fixed, skip_if_exists=False)
        return True
