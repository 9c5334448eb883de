"""The search space a recorded table holds: a categorical parameter a column, its values those
the table records (ordered numbers stay ordered). A parameter blank in some rows is active only
where the table sets it (a ``when:`` on the parameter whose values say so), and a table that
records only some configs of its columns' product keeps a sweep to its rows.

Example:
    >>> t = pd.DataFrame({"BM": [64, 128, 128], "BN": [64, 64, 128]})
    >>> space = space_from_table(t, ["BM", "BN"], "grid.csv")
    >>> space.names, space.max_configs, [c["BN"] for c in space.grid() if c["BM"] == 64]
    (['BM', 'BN'], 3, [64])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from autotune.objectives.replay_rows import offered_cells
from autotune.space import Constraint, Expression, ExpressionError, Param, Space, SpaceError
from autotune.space.expr import NAMESPACES
from autotune.space.loader import check_name


def space_from_table(table: pd.DataFrame, params: list[str], source: str = "<table>") -> Space:
    """Derive a search space from the values a table holds; ordered numbers stay ordered. A
    parameter blank in some rows is active only where the table sets it: its condition reads
    the parameter whose values say so (placed before it), else the never-blank parameters
    together.

    Raises:
        SpaceError: naming the table and the column: not a column, a name the expression
            language takes (``device``, ``problem``), blank in every row, or blank in rows
            that no other parameter tells apart from those that set it.

    Example:
        >>> t = pd.DataFrame({"SCHEDULE": ["tiled", "persistent", "persistent"],
        ...                   "SUBTILE": [None, 0, 1], "ms": [1.0, 5.0, 6.0]})
        >>> space = space_from_table(t, ["SUBTILE", "SCHEDULE"])
        >>> space.names, space["SUBTILE"].condition.source
        (['SCHEDULE', 'SUBTILE'], "SCHEDULE != 'tiled'")
        >>> for config in space.grid():
        ...     print(config)
        {'SCHEDULE': 'persistent', 'SUBTILE': 0}
        {'SCHEDULE': 'persistent', 'SUBTILE': 1}
        {'SCHEDULE': 'tiled'}
    """
    missing = [p for p in params if p not in table.columns]
    if missing:
        raise SpaceError(f"{source}: --params names {missing[0]!r}, which is not a column")
    # a constraint over the rows reads a parameter by its name, where `device` and `problem`
    # are the namespaces (device.X, problem.X): a sparse table's lookup got the device's dict
    taken = next((p for p in params if p in NAMESPACES), None)
    if taken is not None:
        raise SpaceError(f"{source}: column {taken!r} is taken by the expression language; "
                         "rename the column or leave it out of --params")  # fmt: skip
    cells = {name: offered_cells(table, name) for name in params}
    choices: dict[str, list[Any]] = {}
    for name in params:
        values = list(dict.fromkeys(v for v in cells[name] if v is not None))
        if not values:
            raise SpaceError(f"{source}: column {name!r} is blank in every row: it holds no value "
                             "to tune")  # fmt: skip
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        choices[name] = sorted(values) if numeric else sorted(values, key=str)
    conditions: dict[str, tuple[list[str], Expression]] = {}
    for name in params:
        if None in cells[name]:
            conditions[name] = _condition(name, cells, choices, params, conditions, source)
    by_name = {
        name: Param(
            name=name,
            kind="categorical",
            choices=choices[name],
            condition=conditions[name][1] if name in conditions else None,
        )
        for name in params
    }
    order = _ordered(params, {name: reads for name, (reads, _) in conditions.items()})
    space = Space(f"replay:{source}", [by_name[n] for n in order], source=source)
    if not conditions:
        recorded = {tuple(cells[n][row] for n in order) for row in range(len(table))}
        if len(recorded) < space.grid_size():  # not the whole product: a sweep keeps to rows
            space.constraints = _recorded_rows(order, recorded, source)
            space.max_configs = len(recorded)
    return space


class _RecordedPrefix:
    """The expression of a constraint that holds where the first parameters' values (in the
    space's order) are those of some row of a table: with one for each prefix, a sparse
    table's space lists its rows alone, cut at the first value no row goes on with.

    Example:
        >>> first = _RecordedPrefix(["a", "b"], {(1, 2), (3, 4)}, "t.csv")
        >>> sorted(first.names), first.evaluate({"a": 1, "b": 2}), first.evaluate({"a": 1, "b": 4})
        (['a', 'b'], True, False)
    """

    def __init__(self, order: list[str], rows: set[tuple], source: str) -> None:
        self.order = list(order)
        self.names = frozenset(order)
        self.prefixes = {row[: len(order)] for row in rows}
        self.source = f"a row of {source} holds ({', '.join(order)})"

    def evaluate(self, env: Mapping[str, Any]) -> bool:
        return tuple(env[name] for name in self.order) in self.prefixes


def _recorded_rows(order: list[str], rows: set[tuple], source: str) -> list[Constraint]:
    """One constraint a prefix of ``order``: a config is one of the table's ``rows``. A table
    measured by hand holds a few configs of its columns' product (40 of 65,536): proposals
    from the product were almost all absent (2,247 rejected in 44 s for one trial)."""
    return [
        Constraint("recorded", _RecordedPrefix(order[:n], rows, source), where=f"{source}: rows")
        for n in range(1, len(order) + 1)
    ]


def _condition(
    name: str,
    cells: dict[str, list[Any]],
    choices: dict[str, list[Any]],
    params: list[str],
    conditions: dict[str, tuple[list[str], Expression]],
    source: str,
) -> tuple[list[str], Expression]:
    """The ``when:`` of a parameter blank in some rows (the parameters it reads, and it): the
    first other parameter whose every value is either always or never recorded with it (a
    never-blank one first, or a conditional one before it), else the tuple of every
    never-blank parameter.

    Example:
        >>> cells = {"S": ["a", "b", "c"], "E": [None, 0, 1]}
        >>> _condition("E", cells, {"S": ["a", "b", "c"]}, ["S", "E"], {}, "t.csv")
        (['S'], Expression("S != 'a'"))
    """
    active = [v is not None for v in cells[name]]
    never_blank = [p for p in params if p != name and None not in cells[p] and _readable(p)]
    earlier = [p for p in params[: params.index(name)] if p in conditions and _readable(p)]
    for other in [*never_blank, *earlier]:
        verdict = _verdict(cells[other], active)
        if verdict is None or verdict.get(None, False):
            continue  # it does not tell the rows apart, or it is blank where `name` is set
        on = [v for v in choices[other] if verdict.get(v)]
        off = [v for v in choices[other] if verdict.get(v) is False]
        texts = [f"{other} in {on!r}", f"{other} not in {off!r}"]
        texts = [f"{other} != {off[0]!r}"] if len(off) == 1 else texts  # as a space file says
        condition = _expression(min(texts, key=len))
        if condition is not None:
            return [other], condition
    if len(never_blank) > 1:
        verdict = _verdict(list(zip(*(cells[p] for p in never_blank), strict=True)), active)
        if verdict is not None:
            on = [key for key, is_on in verdict.items() if is_on]
            condition = _expression(f"({', '.join(never_blank)}) in {on!r}")
            if condition is not None:
                return never_blank, condition
    raise SpaceError(
        f"{source}: column {name!r} is blank in some rows, and no other parameter says in "
        "which: a blank cell is a parameter inactive in its row (fill the cells in, or pass a "
        "--space whose `when:` says where it is active)"
    )


def _expression(text: str) -> Expression | None:
    """``text`` parsed, or None where the expression language refuses it (too long)."""
    try:
        return Expression(text)
    except ExpressionError:
        return None


def _verdict(keys: list[Any], active: list[bool]) -> dict[Any, bool] | None:
    """Each key -> whether its rows are active, or None where one key holds rows of both."""
    verdict: dict[Any, bool] = {}
    for key, on in zip(keys, active, strict=True):
        if verdict.setdefault(key, on) != on:
            return None
    return verdict


def _readable(name: str) -> bool:
    """Whether an expression can read a column by ``name`` (``telemetry.x`` cannot)."""
    try:
        check_name(name, "")
    except SpaceError:
        return False
    return True


def _ordered(params: list[str], reads: dict[str, list[str]]) -> list[str]:
    """``params`` in their order, except that each comes after every parameter it reads.

    Example:
        >>> _ordered(["E", "S", "B"], {"E": ["S"]})
        ['S', 'E', 'B']
    """
    order: list[str] = []
    pending = list(params)
    while pending:
        ready = next(p for p in pending if all(r in order for r in reads.get(p, [])))
        order.append(ready)
        pending.remove(ready)
    return order
