"""Stop diverging trials early, through Optuna's pruning API; and the check a runner calls
with each value it reports (:func:`prune_check`).

Example:
    >>> DivergencePruner.diverged([10.2, 9.8, 31.0])
    True
    >>> DivergencePruner.diverged([10.2, 9.8, 9.1])
    False
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import optuna

from autotune.runners.base import PruneCheck


class DivergencePruner(optuna.pruners.BasePruner):
    """Prune a trial whose reported loss is NaN/inf or has grown past ``blowup`` x its first.

    Args:
        blowup: how many times the first reported value a later value may reach.
        warmup_steps: steps reported before the blow-up rule applies (NaN/inf always prunes).
    """

    def __init__(self, blowup: float = 2.0, warmup_steps: int = 0) -> None:
        self.blowup = blowup
        self.warmup_steps = warmup_steps

    @staticmethod
    def diverged(values: Sequence[float], blowup: float = 2.0, warmup_steps: int = 0) -> bool:
        if not values:
            return False
        if not math.isfinite(values[-1]):
            return True
        if len(values) <= warmup_steps + 1:
            return False
        first = values[0]
        return math.isfinite(first) and abs(values[-1]) > blowup * abs(first)

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        steps = sorted(trial.intermediate_values)
        values = [trial.intermediate_values[s] for s in steps]
        return self.diverged(values, self.blowup, self.warmup_steps)


def prune_check(trial: optuna.Trial, n_objectives: int) -> PruneCheck:
    """Each value an objective reports goes to Optuna's pruner (one objective), or straight
    to the divergence rule (several: Optuna's report() is single-objective).

    Example:
        >>> study = optuna.create_study(pruner=DivergencePruner())
        >>> should_prune = prune_check(study.ask(), n_objectives=2)
        >>> should_prune(0, 10.0), should_prune(1, float("nan"))
        (False, True)
    """
    history: list[float] = []

    def should_prune(step: int, value: float) -> bool:
        history.append(value)
        if n_objectives > 1 or not math.isfinite(value):
            return DivergencePruner.diverged(history)
        trial.report(value, step)
        return trial.should_prune()

    return should_prune
