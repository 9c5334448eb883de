"""Whether a space's constraints admit any config, checked before a sweep spends its time.

The constraints fall into independent groups (those that read, directly or through a
parameter's ``when``, parameters in common); each group is checked on its own parameters, so
a space of hundreds of parameters made of small per-kernel groups is checked group by group.
A group of up to :data:`ENUMERATION_LIMIT` configs is enumerated: an empty one is proven
empty. A group with a float parameter without a step, or more configs than that, is drawn
from instead (:data:`DRAWS` configs, each parameter at its bounds as often as inside them):
when no draw satisfies its constraints, the sweep's sampler would be rejected as often, so the
space is refused, naming the constraint that no draw met.

Example:
    >>> import os, tempfile, textwrap
    >>> from autotune.space import load_space
    >>> path = os.path.join(tempfile.mkdtemp(), "s.yaml")
    >>> _ = open(path, "w").write("parameters:\\n  x: {type: float, low: 0.0, high: 1.0}\\n"
    ...                           "constraints:\\n  - x > 2\\n")
    >>> try:
    ...     check_satisfiable(load_space(path), {}, {})
    ... except SpaceError as exc:
    ...     print(textwrap.fill(str(exc).split(": ", 1)[1], 80))
    constraints.constraint_0: 'x > 2' held for none of 20000 configs drawn from the
    space (its bounds included): a sweep's proposals would almost surely be rejected
    too (widen the space)
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from typing import Any

from autotune.space.params import Constraint, Param, problem_read
from autotune.space.space import Space, SpaceError

#: Spaces up to this many configs are enumerated to prove that some config is feasible.
ENUMERATION_LIMIT = 200_000
#: Configs drawn from a space that cannot be enumerated before it is taken as empty.
DRAWS = 20_000


def check_satisfiable(space: Space, problem: Mapping[str, Any], device: Mapping[str, Any]) -> None:
    """Refuse a space whose constraints admit no config for this problem and device.

    Raises:
        SpaceError: naming the space file and, where one alone admits nothing, the constraint.
    """
    for group in independent_groups(space):
        finite = all(p.discrete for p in group.params)
        if finite and group.grid_size() <= ENUMERATION_LIMIT:
            _check_by_enumeration(group, problem, device)
        else:
            _check_by_drawing(group, problem, device)


def independent_groups(space: Space) -> list[Space]:
    """The space's constraints in groups that share no parameter, each with the parameters
    it reads (and those their conditions read), in the space's order.

    Example:
        >>> from autotune.space import Constraint, Expression, Param
        >>> a, b = Param("a", "int", low=1, high=4), Param("b", "int", low=1, high=4)
        >>> c = Param("c", "int", low=1, high=4, condition=Expression("b > 1"))
        >>> rules = [Constraint("ab", Expression("a < 3")), Constraint("c", Expression("c > 1"))]
        >>> [[p.name for p in g.params] for g in independent_groups(Space("s", [a, b, c], rules))]
        [['a'], ['b', 'c']]
    """
    names = set(space.names)
    parent = {name: name for name in names}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    def join(group: set[str]) -> None:
        first, *rest = group
        for other in rest:
            parent[root(other)] = root(first)

    def reads(expression: Any, prefix: str) -> set[str]:
        return {prefix + n for n in expression.names if prefix + n in names}

    for param in space.params:
        if param.condition is not None:
            join({param.name} | reads(param.condition, param.prefix))
    constraint_reads = [(c, reads(c.expression, c.prefix)) for c in space.constraints]
    for _, group in constraint_reads:
        if group:
            join(group)
    grouped: dict[str | None, list[Constraint]] = {}
    for constraint, group in constraint_reads:
        grouped.setdefault(root(next(iter(group))) if group else None, []).append(constraint)
    return [
        dataclasses.replace(
            space,
            params=[p for p in space.params if key is not None and root(p.name) == key],
            constraints=constraints,
        )  # fmt: skip
        for key, constraints in grouped.items()
    ]


def _check_by_enumeration(
    space: Space, problem: Mapping[str, Any], device: Mapping[str, Any]
) -> None:
    if next(space.grid(problem, device), None) is not None:
        return
    for constraint in space.constraints:  # one that no config passes on its own: name it
        alone = dataclasses.replace(space, constraints=[constraint])
        if next(alone.grid(problem, device), None) is None:
            free = next(dataclasses.replace(space, constraints=[]).grid(problem, device), None)
            space.check_defined(constraint, free or {}, problem, device)
            raise SpaceError(f"{constraint.where}: {constraint.expression.source.strip()!r} "
                             f"admits no config{constraint.problem_read(problem)}")  # fmt: skip
    names = ", ".join(c.name for c in space.constraints)
    read = problem_read(space.constraints, problem) or " for this problem and device"
    raise SpaceError(f"{space.source}: the constraints ({names}) admit no config{read}")


def _check_by_drawing(space: Space, problem: Mapping[str, Any], device: Mapping[str, Any]) -> None:
    rng = random.Random(0)
    never_met = {c.name: c for c in space.constraints}
    for _ in range(DRAWS):
        values: dict[str, Any] = {}
        for param in space.params:
            if space.is_active(param, values, problem, device):
                values[param.name] = _draw(param, rng)
        broken = set(space.violations(values, problem, device))
        if not broken:
            return
        for name in [n for n in never_met if n not in broken]:
            del never_met[name]
    drawn = f"held for none of {DRAWS} configs drawn from the space (its bounds included)"
    rejected = "a sweep's proposals would almost surely be rejected too (widen the space)"
    if never_met:
        constraint = next(iter(never_met.values()))
        space.check_defined(constraint, values, problem, device)
        raise SpaceError(f"{constraint.where}: {constraint.expression.source.strip()!r} {drawn}"
                         f"{constraint.problem_read(problem)}: {rejected}")  # fmt: skip
    names = ", ".join(c.name for c in space.constraints)
    read = problem_read(space.constraints, problem)
    raise SpaceError(f"{space.source}: the constraints ({names}) together {drawn}{read}: "
                     f"{rejected}")  # fmt: skip


def repair(
    groups: list[Space],
    config: Mapping[str, Any],
    problem: Mapping[str, Any],
    device: Mapping[str, Any],
    rng: random.Random,
) -> dict[str, Any] | None:
    """``config`` with the parameters of each constraint group it breaks drawn again until the
    group holds (:data:`DRAWS` tries a group), the rest kept; None where a group found no
    config. ``groups``: :func:`independent_groups` of the space. A sampler that proposes whole
    configs almost never meets 32 kernels' constraints at once (15% each: 1e-26), nor a thin
    band of floats; group by group, a few draws each do.

    Example:
        >>> from autotune.space import Constraint, Expression, Param
        >>> a, b = Param("a", "int", low=1, high=100), Param("b", "int", low=1, high=100)
        >>> band = Constraint("band", Expression("a + b == 101"))
        >>> fixed = repair(independent_groups(Space("s", [a, b], [band])), {"a": 5, "b": 5}, {},
        ...                {}, random.Random(0))
        >>> fixed["a"] + fixed["b"]
        101
    """
    fixed = dict(config)
    for group in groups:
        if not group.constraints or not group.violations(fixed, problem, device):
            continue
        values = _nearby(group, fixed, problem, device, rng) or _anew(group, problem, device, rng)
        if values is None:
            return None
        for param in group.params:
            fixed.pop(param.name, None)
        fixed.update(values)
    return fixed


#: draws of one parameter of a broken group, the others kept, before the whole group is drawn
NEARBY_DRAWS = 200


def _nearby(
    group: Space,
    config: Mapping[str, Any],
    problem: Mapping[str, Any],
    device: Mapping[str, Any],
    rng: random.Random,
) -> dict[str, Any] | None:
    """The group's values of ``config`` with one parameter drawn again (each in turn, in a
    random order) until the group holds: the sampler's proposal kept as far as it can be."""
    mine = {p.name: config[p.name] for p in group.params if p.name in config}
    for param in rng.sample(group.params, len(group.params)):
        for _ in range(NEARBY_DRAWS):
            values: dict[str, Any] = {}
            for other in group.params:
                if not group.is_active(other, values, problem, device):
                    continue
                keep = other is not param and other.name in mine
                values[other.name] = mine[other.name] if keep else _draw(other, rng)
            if not group.violations(values, problem, device):
                return values
            if param.kind not in ("float", "int") and param.count() <= 1:
                break
    return None


def _anew(
    group: Space, problem: Mapping[str, Any], device: Mapping[str, Any], rng: random.Random
) -> dict[str, Any] | None:
    """The group's parameters all drawn again until it holds (:data:`DRAWS` tries)."""
    for _ in range(DRAWS):
        values: dict[str, Any] = {}
        for param in group.params:
            if group.is_active(param, values, problem, device):
                values[param.name] = _draw(param, rng)
        if not group.violations(values, problem, device):
            return values
    return None


def _draw(param: Param, rng: random.Random) -> Any:
    """A value of ``param``: its low or high bound a quarter of the time each, else uniform
    (in log space for a log parameter)."""
    if param.kind not in ("float", "int") or param.kind == "float" and param.step is not None:
        values = param.values()  # a stepped float's grid: its bounds a quarter of the time each
        pick = rng.random()
        if param.kind == "float" and pick < 0.5:
            return values[0] if pick < 0.25 else values[-1]
        return rng.choice(values)
    pick = rng.random()
    low, high = param.low, param.high
    if param.kind == "int":
        step = param.step or 1
        last = int(low) + (int(high) - int(low)) // step * step
        if pick < 0.25 or pick >= 0.5 and param.count() == 1:
            return int(low)
        if pick < 0.5:
            return last
        if param.log:
            return min(
                last, max(int(low), round(math.exp(rng.uniform(math.log(low), math.log(high)))))
            )
        return int(low) + rng.randrange(param.count()) * step
    if pick < 0.25:
        return float(low)
    if pick < 0.5:
        return float(high)
    if param.log:
        return math.exp(rng.uniform(math.log(low), math.log(high)))
    return rng.uniform(low, high)
