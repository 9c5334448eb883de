"""Steering out of a run of rejections: after :data:`REPAIR_AFTER` proposals in a row broke a
static constraint, the last one, with each constraint group it broke drawn again until that
group holds (:func:`~autotune.space.feasibility.repair`), is the next trial.

A sampler proposes whole configs, and a composed space's constraints hold for all of them at
once only by chance: 32 matmul groups that each pass 15% of the time pass together once in
1e26, and a thin band of floats (``abs(a + b - 1) < 0.002``) is hit once in hundreds. The
feasibility check proved each group can hold; group by group, a few draws each find one. The
repaired config is told like any other, so the sampler learns where the feasible configs are.

A space known to allow fewer than one config of its product in :data:`REPAIR_AFTER` (a replay
table's rows: :attr:`~autotune.space.Space.max_configs`) is repaired at its first rejection,
to the allowed config nearest the proposal (:meth:`~autotune.space.Space.nearest`): its
sampler, proposing from the product, missed 60,000 rows of 10**8 all but once in 1,700, so
that each trial launched cost ~50 rejections, each a stored trial and a sampler call that
grew slower with them (40 trials: 1,910 rejections, 53 s).

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

import math
import random
from collections.abc import Callable, Mapping
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
        #: the space allows few configs of its product: repaired at once, to the nearest
        self.sparse = sparse(space)

    def after_rejection(
        self,
        study: optuna.Study,
        config: Mapping[str, Any],
        rejected_in_a_row: int,
        fresh: Callable[[dict[str, Any]], bool] | None = None,
    ) -> bool:
        """Enqueue ``config`` repaired when ``rejected_in_a_row`` is a multiple of
        :data:`REPAIR_AFTER` (any, in a :func:`sparse` space) and it breaks a static
        constraint (a memory-model rejection has nothing to draw again); True when a config
        was enqueued. ``fresh``: whether a config of a sparse space is worth proposing (not
        measured yet); its nearest such config is the repair."""
        every = 1 if self.sparse else REPAIR_AFTER
        if rejected_in_a_row <= 0 or rejected_in_a_row % every:
            return False
        if not self.space.violations(config, self.problem, self.device):
            return False
        if self.sparse:
            fixed = self.space.nearest(config, self.rng, self.problem, self.device, fresh)
        else:
            if self._groups is None:
                self._groups = independent_groups(self.space)
            fixed = repair(self._groups, config, self.problem, self.device, self.rng)
        if fixed is None:
            return False
        study.enqueue_trial(fixed, skip_if_exists=False)
        return True


def sparse(space: Space) -> bool:
    """Whether ``space`` is discrete and known to allow fewer than one config of its product
    in :data:`REPAIR_AFTER` (:attr:`~autotune.space.Space.max_configs`: a replay table's
    rows), so that a sampler proposing from the product is rejected ~that often per config it
    finds.

    Example:
        >>> from autotune.space import Param, Space
        >>> space = Space("s", [Param("x", "int", low=0, high=999)], max_configs=10)
        >>> sparse(space), sparse(Space("s", space.params, max_configs=500))
        (True, False)
    """
    if space.max_configs is None or not all(p.discrete for p in space.params):
        return False
    return space.max_configs * REPAIR_AFTER < math.prod(p.count() for p in space.params)
