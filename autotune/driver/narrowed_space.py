"""The note of a resume whose space narrowed a numeric range (allowed: Optuna samples the
narrower one) so that the study's best config lies outside it: the study's best stays its
answer (the sweep's, ``autotune best``'s, the exports'), which said nothing of it.

Example:
    >>> from autotune.space import Param, Space
    >>> narrow = Space("n", [Param("x", "int", low=1, high=2)], source="n.yaml")
    >>> study = optuna.create_study()
    >>> study.add_trial(optuna.trial.create_trial(params={"x": 3}, value=1.0,
    ...     distributions={"x": optuna.distributions.IntDistribution(1, 3)}))
    >>> best = study.best_trial
    >>> outside_note("r", [best], narrow)
    ["n.yaml: study 'r''s best config (trial 0: x=3) lies outside this space (parameters.x: 1 to 2); it stays the study's best, which the sweep, `autotune best` and the exports answer: start another --study to tune within this space alone"]
    >>> outside_note("r", [best], Space("w", [Param("x", "int", low=1, high=3)]))
    []
"""  # noqa: E501

from __future__ import annotations

from typing import Any

import optuna

from autotune.space import Space
from autotune.space.space import shown


def outside_note(name: str, best: list[optuna.trial.FrozenTrial], space: Space) -> list[str]:
    """The note (none, or one) for study ``name`` resumed with ``space`` where a trial of
    ``best`` (the study's best, or its Pareto front) holds a value ``space`` leaves out."""
    for trial in best:
        for param in space.params:
            value = trial.params.get(param.name)
            if value is None or param.contains(value):
                continue
            allowed = (f"{param.low:g} to {param.high:g}" if param.low is not None
                       else f"choices {param.values()}")  # fmt: skip
            return [f"{space.source}: study {name!r}'s best config (trial {trial.number}: "
                    f"{param.name}={_value(value)}) lies outside this space (parameters."
                    f"{param.name}: {allowed}); it stays the study's best, which the sweep, "
                    "`autotune best` and the exports answer: start another --study to tune "
                    "within this space alone"]  # fmt: skip
    return []


def _value(value: Any) -> str:
    """A stored value as the note shows it: a float to four figures.

    Example:
        >>> _value(8.462978127087124), _value(3), _value("a")
        ('8.463', '3', "'a'")
    """
    return f"{value:.4g}" if isinstance(value, float) else shown(value)
