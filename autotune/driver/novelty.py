"""Spend every trial on a config not measured before.

Samplers over discrete spaces re-propose configs they have already seen (TPE did so for about
a third of 100 trials on a recorded tile-size landscape). A repeat is answered from the
study without launching anything, and the next trial is steered to an unvisited config: a
neighbour of the best one found (one parameter moved one step in its ordered values), or, when
all neighbours are known, a random unvisited config (a float without a step at a fresh value:
such a parameter, where active, always has one); where random draws miss the few configs
the constraints allow, one found depth first (:meth:`~autotune.space.Space.nearest`).

Example:
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=16, high=128), Param("y", "bool")])
    >>> visited = {config_key({"x": 32, "y": True})}
    >>> neighbour = unvisited_config(space, {"x": 32, "y": True}, visited, random.Random(0))
    >>> config_key(neighbour) in visited, abs(neighbour["x"] - 32) <= 32
    (False, True)
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any

from autotune.space import Param, Space

_RANDOM_ATTEMPTS = 200


def config_key(config: Mapping[str, Any]) -> tuple:
    """A hashable identity of a config (values compared by their repr)."""
    return tuple(sorted((k, repr(v)) for k, v in config.items()))


def _complete(
    space: Space,
    partial: Mapping[str, Any],
    rng: random.Random,
    problem: Mapping[str, Any],
    device: Mapping[str, Any],
) -> dict[str, Any]:
    """Fill in the parameters ``partial`` lacks (randomly: a float without a step at a fresh
    value of its range), dropping inactive ones."""
    config: dict[str, Any] = {}
    for param in space.params:
        if not space.is_active(param, config, problem, device):
            continue
        if param.discrete:
            config[param.name] = partial.get(param.name, rng.choice(param.values()))
        elif param.name in partial:
            config[param.name] = partial[param.name]
        else:
            config[param.name] = draw_float(param, rng)
    return config


def draw_float(param: Param, rng: random.Random) -> float:
    """A value of a float parameter without a step, uniform over its range (in log space for
    a log one); its one value where ``low == high``.

    Example:
        >>> x = Param("x", "float", low=0.001, high=0.1, log=True)
        >>> 0.001 <= draw_float(x, random.Random(0)) <= 0.1
        True
        >>> draw_float(Param("y", "float", low=0.5, high=0.5), random.Random(0))
        0.5
    """
    low, high = float(param.low), float(param.high)
    if low >= high:
        return low
    if param.log:
        value = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        value = rng.uniform(low, high)
    return min(max(value, low), high)  # exp(log(x)) may step past a bound


def unvisited_config(
    space: Space,
    best: Mapping[str, Any] | None,
    visited: set[tuple],
    rng: random.Random,
    problem: Mapping[str, Any] | None = None,
    device: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """An unvisited config that passes the constraints: a neighbour of ``best`` if one is
    left, else a random one; None if none was found."""
    problem, device = problem or {}, device or {}

    def fresh(config: dict[str, Any] | None) -> bool:
        return (
            config is not None
            and config_key(config) not in visited
            and not space.violations(config, problem, device)
        )

    if best:
        moves = []
        for param in space.params:
            if param.name not in best:
                continue
            if not param.discrete:  # a float moves to a fresh value (the constraints may
                moves.append((param.name, draw_float(param, rng)))  # forbid every neighbour)
                continue
            values = param.values()
            if best[param.name] not in values:
                continue
            index = values.index(best[param.name])
            moves += [
                (param.name, values[i]) for i in (index - 1, index + 1) if 0 <= i < len(values)
            ]
        rng.shuffle(moves)
        for name, value in moves:
            candidate = _complete(space, {**best, name: value}, rng, problem, device)
            if fresh(candidate):
                return candidate
    for _ in range(_RANDOM_ATTEMPTS):
        candidate = _complete(space, {}, rng, problem, device)
        if fresh(candidate):
            return candidate
    from autotune.driver.enumeration import is_enumerable  # (it imports this module)

    if is_enumerable(space):
        # few configs of the product pass (a sparse replay table's rows): draws miss them all,
        # and the space was taken as measured completely after 2 trials of 40
        left = [c for c in space.grid(problem, device) if config_key(c) not in visited]
        return rng.choice(left) if left else None
    # too many to list (a replay table of 60,000 rows of 10**8): one found depth first, its
    # constraints cutting each branch they rule out (None for a space with floats); without
    # it, the sampler's proposals went on missing the rows, ~50 rejected per trial launched
    return space.nearest({}, rng, problem, device, lambda c: config_key(c) not in visited)
