"""Search a composed space by group: when the objective is a sum over parts (every GEMM of a
decoder, each with its own tiles), each part's parameters are tuned by their own search on
their own sub-metric, the parts side by side, and the joint knobs last with every part at its
best. A flat search over the union (100-200 parameters) pays a measurement of every part for
every trial and learns each part through the noise of all the others.

Example:
    >>> from autotune.space import Param, Space
    >>> part = Space("tile", [Param("x", "pow2", low=1, high=64)])
    >>> groups = [Group("a", part, lambda c: -abs(c["x"] - 8)),
    ...           Group("b", part, lambda c: -abs(c["x"] - 32))]
    >>> result = search_by_group(groups, per_group=7, sampler="random", seed=0)
    >>> result.configs, result.measurements
    ({'a': {'x': 8}, 'b': {'x': 32}}, 14)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from autotune.driver.ask_tell import AskTellSearch, Measure
from autotune.space import Space, SpaceError
from autotune.space.params import Constraint, Param


def split_by_prefix(space: Space) -> tuple[dict[str, Space], Space]:
    """The groups of a composed space (one per include prefix, names and constraints without
    the prefix) and the joint knobs (parameters without one).

    Example:
        >>> from autotune.space import load_space
        >>> groups, joint = split_by_prefix(load_space("llm_projections"))
        >>> len(groups), groups["layer0.qkv."].names[:2], len(joint.params)
        (32, ['BLOCK_M', 'BLOCK_N'], 0)
    """
    prefixes = list(dict.fromkeys(p.prefix for p in space.params if p.prefix))
    grouped = {p.name for p in space.params if p.prefix}
    for c in space.constraints:
        across = sorted(c.expression.names & grouped) if not c.prefix else []
        if across:  # no group's search would check it: its best configs could break it
            raise SpaceError(
                f"{c.where}: reads {across[0]!r}, a parameter of an include; "
                "searched by group, a constraint reads one include's parameters"
            )
    groups = {}
    for prefix in prefixes:
        params = [_strip(p, prefix) for p in space.params if p.prefix == prefix]
        constraints = [
            Constraint(c.name[len(prefix):] if c.name.startswith(prefix) else c.name,
                       c.expression, "", c.where)
            for c in space.constraints if c.prefix == prefix
        ]  # fmt: skip
        groups[prefix] = Space(f"{space.name}:{prefix}", params, constraints, space.source)
    joint = Space(
        f"{space.name}:joint",
        [p for p in space.params if not p.prefix],
        [c for c in space.constraints if not c.prefix],
        space.source,
    )
    return groups, joint


def _strip(param: Param, prefix: str) -> Param:
    from dataclasses import replace

    return replace(param, name=param.name[len(prefix) :], prefix="")


@dataclass
class Group:
    """One part of a composed objective: its space (names without the group's prefix), its
    sub-metric (higher is better, e.g. minus the kernel's weighted time) and what its
    constraints read."""

    name: str
    space: Space
    measure: Measure
    problem: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    first: dict[str, Any] | None = None


@dataclass
class JointKnobs:
    """The knobs every group shares, tuned last: ``measure(group_configs, knobs)`` measures
    the whole objective with each group at its best config."""

    space: Space
    measure: Callable[[Mapping[str, dict[str, Any]], dict[str, Any]], float | None]
    trials: int
    problem: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    first: dict[str, Any] | None = None


@dataclass
class GroupedResult:
    """Each group's best config, the joint knobs' best, and the progress: after every round,
    (measurements so far, sum of the groups' best sub-metrics)."""

    configs: dict[str, dict[str, Any]]
    values: dict[str, float]
    joint: dict[str, Any] | None = None
    joint_value: float | None = None
    measurements: int = 0
    progress: list[tuple[int, float]] = field(default_factory=list)


def search_by_group(
    groups: list[Group],
    per_group: int,
    *,
    sampler: str = "auto",
    seed: int | None = None,
    joint: JointKnobs | None = None,
) -> GroupedResult:
    """Tune every group with ``per_group`` measurements of its own, in rounds (one measurement
    of each group per round, as concurrent trials would), then the ``joint`` knobs with the
    groups at their best.

    Raises:
        ValueError: two groups of one name (the second's search would replace the first's).
    """
    names = [g.name for g in groups]
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise ValueError(f"search_by_group: group {twice!r} is named twice")
    searches = {
        g.name: AskTellSearch(
            g.space, g.measure, sampler=sampler,
            seed=None if seed is None else seed * 1009 + i,
            problem=g.problem, device=g.device, first=g.first,
        )
        for i, g in enumerate(groups)
    }  # fmt: skip
    result = GroupedResult(configs={}, values={})
    for _ in range(per_group):
        for search in searches.values():
            if not search.exhausted:
                search.step()
        result.measurements = sum(s.measurements for s in searches.values())
        result.progress.append((result.measurements, sum(s.best_value for s in searches.values())))
    result.configs = {name: dict(s.best_config or {}) for name, s in searches.items()}
    result.values = {name: s.best_value for name, s in searches.items()}
    if joint is not None and joint.trials > 0:
        search = AskTellSearch(
            joint.space, lambda knobs: joint.measure(result.configs, knobs), sampler=sampler,
            seed=seed, problem=joint.problem, device=joint.device, first=joint.first,
        )  # fmt: skip
        for _ in range(joint.trials):
            if search.exhausted:
                break
            search.step()
        result.joint, result.joint_value = search.best_config, search.best_value
        result.measurements += search.measurements
    return result
