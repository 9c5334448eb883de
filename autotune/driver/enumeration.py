"""The feasible configs of a discrete space, listed once: their features for a model (order
kept: a power of two by its log2, an int by its value, another number by its rank, a string
one-hot, a bool 0/1) and which of them dominate a config that ran out of a resource. The
enumerated samplers (:mod:`autotune.driver.grid_sampler`) share one such list.

Example:
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=16, high=64), Param("on", "bool")])
    >>> grid = Enumeration.of(space, None, None)
    >>> len(grid.configs), grid.features[grid.index[config_key({"x": 32, "on": True})]].tolist()
    (6, [0.5, 1.0])
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from autotune.driver.novelty import config_key
from autotune.space import Param, Space

MAX_GRID = 50_000  # raw configs (before constraints) the enumerated samplers list


def is_enumerable(space: Space) -> bool:
    """True when every parameter is discrete and the raw grid has at most MAX_GRID configs."""
    if not all(p.discrete for p in space.params):
        return False
    return space.grid_size() <= MAX_GRID


def _is_ordered_number(values: Sequence[Any]) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)


def features(space: Space, configs: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """One row of features in [0, 1] per config (an inactive parameter reads as 0).

    Example:
        >>> space = Space("s", [Param("x", "pow2", low=16, high=256)])
        >>> features(space, [{"x": 16}, {"x": 64}, {"x": 256}])[:, 0].tolist()
        [0.0, 0.5, 1.0]
    """
    # a column at a time, one-hot places from a dict: 20 ms over 22,500 configs instead of
    # 98 (a nested list a column, list.index a one-hot value)
    columns: list[np.ndarray] = []
    rows = len(configs)
    for param in space.params:
        values = param.values()
        present = [c.get(param.name) for c in configs]
        if param.kind == "bool":
            column = np.fromiter((float(bool(v)) for v in present), float, rows)
            columns.append(column.reshape(rows, 1))
        elif param.kind in ("pow2", "int") or _is_ordered_number(values):
            position = _positions(param, values)
            column = np.fromiter((position.get(v, 0.0) for v in present), float, rows)
            columns.append(column.reshape(rows, 1))
        else:
            columns.append(_one_hot(values, present))
    return np.concatenate(columns, axis=1)


def _one_hot(values: list[Any], present: list[Any]) -> np.ndarray:
    """One column per value of ``values``: 1.0 where the config holds it (the first equal
    value, as ``list.index`` finds it), 0 elsewhere (an inactive parameter: all 0)."""
    place: dict[Any, int] = {}
    for i, value in enumerate(values):
        place.setdefault(value, i)
    hits = [(row, place[v]) for row, v in enumerate(present) if v in place]
    onehot = np.zeros((len(present), len(values)))
    if hits:
        onehot[tuple(np.array(hits).T)] = 1.0
    return onehot


def _positions(param: Param, values: list[Any]) -> dict[Any, float]:
    """Value -> place in [0, 1]: log2 for powers of two, linear for ints, rank otherwise."""
    if len(values) == 1:
        return {values[0]: 0.0}
    powers_of_two = all(isinstance(v, int) and v > 0 and v & (v - 1) == 0 for v in values)
    if param.kind == "pow2" or powers_of_two:
        keys = [math.log2(v) for v in values]
    elif param.kind == "int":
        keys = [float(v) for v in values]
    else:
        keys = [float(i) for i in range(len(values))]
    low, high = min(keys), max(keys)
    return {v: (k - low) / (high - low) for v, k in zip(values, keys, strict=True)}


def _dominance_view(
    space: Space, configs: Sequence[Mapping[str, Any]]
) -> tuple[np.ndarray, np.ndarray]:
    """Per config (rows): the value of each numeric parameter (int, power of two, or a choice
    of numbers, as a table's columns are; an inactive one at -1), and a code of each other
    parameter's value (strings and bools: a bool such as activation checkpointing may need
    less memory when on, so only equal values count)."""
    ordered: list[list[float]] = []
    codes: list[list[int]] = []
    for param in space.params:
        present = [c.get(param.name) for c in configs]
        if param.kind in ("pow2", "int") or (
            param.kind == "categorical" and _is_ordered_number(param.values())
        ):
            ordered.append([-1.0 if v is None else float(v) for v in present])
        else:
            codes.append([hash(repr(v)) for v in present])
    return _columns(ordered, float, len(configs)), _columns(codes, np.int64, len(configs))


def _columns(columns: list[list[Any]], dtype: Any, rows: int) -> np.ndarray:
    """``columns`` as a (rows, len(columns)) array."""
    if not columns:
        return np.zeros((rows, 0), dtype=dtype)
    return np.array(columns, dtype=dtype).T


@dataclass
class Enumeration:
    """The feasible configs of a space at a problem and device, listed once, with each one's
    key and place in the list; their features are computed at first use. Samplers over the
    same space and problem can share one (the default portfolio's two members do: building
    that sampler over 22,500 configs took 0.09 s instead of 0.58 s, 1 ms a trial of a
    100-trial sweep instead of 6)."""

    space: Space
    configs: list[dict[str, Any]]
    keys: list[tuple]
    index: dict[tuple, int]
    _features: np.ndarray | None = field(default=None, init=False, repr=False)
    _order: tuple[np.ndarray, np.ndarray] | None = field(default=None, init=False, repr=False)

    @classmethod
    def of(
        cls, space: Space, problem: Mapping[str, Any] | None, device: Mapping[str, Any] | None
    ) -> Enumeration:
        configs = list(space.grid(problem or {}, device or {}))
        keys = [config_key(c) for c in configs]
        return cls(space, configs, keys, {k: i for i, k in enumerate(keys)})

    @property
    def features(self) -> np.ndarray:
        """:func:`features` of every config, one row each (0 x 0 without configs)."""
        if self._features is None:
            self._features = (
                features(self.space, self.configs) if self.configs else np.zeros((0, 0))
            )
        return self._features

    def dominating(self, failed: Sequence[int], candidates: Sequence[int]) -> np.ndarray:
        """Which of ``candidates`` (indices) dominate a ``failed`` config: at least its value in
        every numeric parameter, the same value in every other one (strings, bools). A config
        that ran out of shared memory or device memory does so at every config that dominates
        it: larger tiles, more stages, a larger micro-batch only ever ask for more.

        Example:
            >>> space = Space("s", [Param("x", "pow2", low=16, high=64), Param("g", "categorical",
            ...                     choices=["a", "b"])])
            >>> grid = Enumeration.of(space, None, None)
            >>> [grid.configs[i] for i in (0, 3)]
            [{'x': 16, 'g': 'a'}, {'x': 32, 'g': 'b'}]
            >>> grid.dominating([2], range(6)).tolist()  # x = 32, g = a failed
            [False, False, True, False, True, False]
        """
        if self._order is None:
            self._order = _dominance_view(self.space, self.configs)
        ordered, codes = self._order
        rows = np.asarray(list(candidates), dtype=np.int64)
        at, code = ordered[rows], codes[rows]
        hit = np.zeros(len(rows), dtype=bool)
        for f in failed:
            hit |= (at >= ordered[f]).all(axis=1) & (code == codes[f]).all(axis=1)
        return hit
