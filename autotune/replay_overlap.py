"""How much of a ``--space`` a replay table can answer, counted before the sweep starts.

A replay over a ``--space`` file looks every config the sampler proposes up in the table; one
the table does not hold is refused, and the sweep asks again. A space far larger than the
table's rows (a composed space of billions of configs over a table of a few rows) was refused
config after config, for minutes and without a word, until the sweep's limit on rejections in
a row stopped it. So the rows the space admits are counted first (each row's values among the
space's, inactive exactly where the row is blank, within the constraints), and with them the
chance that a proposal drawn at random from the space is one of them: a space whose proposals
would find a row less often than once in :data:`~autotune.driver.sweep.MAX_REJECTIONS_PER_TRIAL`
is refused in one line.

Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> table, space = os.path.join(folder, "t.csv"), os.path.join(folder, "s.yaml")
    >>> _ = open(table, "w").write("a,b,ms\\n1,1,5\\n2,7,6\\n")
    >>> _ = open(space, "w").write("parameters:\\n  a: {type: int, low: 0, high: 3}\\n"
    ...                            "  b: {type: int, low: 0, high: 3}\\n")
    >>> from autotune.space import load_space
    >>> overlap = table_overlap(Path(table), load_space(space), {}, {})
    >>> overlap.admitted, overlap.rows, overlap.hit_chance
    (1, 2, 0.0625)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.setup_error import SetupError
from autotune.space import Param, Space

_MISSING = object()  # a cell whose value the parameter cannot take


@dataclass
class Overlap:
    """The table's rows that are configs of the space."""

    rows: int  # the table's rows
    admitted: int  # of them, configs of the space (within its constraints)
    hit_chance: float  # that a config drawn at random from the space is an admitted row
    first_miss: str  # why the first row that is no config of the space is not ("": none)


def table_overlap(
    table_path: Path, space: Space, problem: Mapping[str, Any], device: Mapping[str, Any]
) -> Overlap:
    """Count the rows of the table at ``table_path`` that are configs of ``space``, and the
    chance that a config drawn at random (each active parameter's value uniformly, as a
    sampler's first proposals are) is one of them.

    A row is a config of the space where each parameter active in it (its ``when:`` read over
    the row's values) holds a value the parameter takes (a number by its value, a choice as
    the table wrote it or by its value), each inactive one is blank, and no constraint breaks.
    """
    from autotune.objectives.replay_rows import offered_keys
    from autotune.objectives.replay_table import cell, load_table, text_keys

    table = load_table(str(table_path))
    names = space.names
    offered = offered_keys(table, names)
    values = list(zip(*([cell(v) for v in table[n]] for n in names), strict=True))
    texts = text_keys(str(table_path), tuple(names))
    admitted, chance, first_miss = 0, 0.0, ""
    rows = len(table)
    for index in range(rows):
        cells = {n: (offered[index][i], values[index][i], texts[index][i])
                 for i, n in enumerate(names)}  # fmt: skip
        config, miss = _config_of(space, cells, problem, device)
        if config is None:
            first_miss = first_miss or f"line {index + 2}: {miss}"
            continue
        admitted += 1
        chance += math.prod(_draw_chance(space[name]) for name in config)
    return Overlap(rows=rows, admitted=admitted, hit_chance=chance, first_miss=first_miss)


def _config_of(
    space: Space,
    cells: dict[str, tuple[Any, Any, str]],
    problem: Mapping[str, Any],
    device: Mapping[str, Any],
) -> tuple[dict[str, Any] | None, str]:
    """The config of the space a row's ``cells`` hold (each name -> its value as the table's
    own space offers it, its value, its text as written), or None and why it is none."""
    config: dict[str, Any] = {}
    for param in space.params:
        offered, value, text = cells[param.name]
        blank = offered is None
        if not space.is_active(param, config, problem, device):
            if not blank:
                return None, f"{param.name} is set where the space leaves it inactive"
            continue
        if blank:
            return None, f"{param.name} is blank where the space sets it"
        taken = _taken(param, (offered, value), text)
        if taken is _MISSING:
            return None, f"{param.name}={text} is not a value of the space"
        config[param.name] = taken
    broken = space.violations(config, problem, device)
    if broken:
        return None, f"it breaks the space's constraint {broken[0]}"
    return config, ""


def _taken(param: Param, candidates: tuple[Any, Any], text: str) -> Any:
    """The value of ``param`` that a cell holds (its value, or a choice the table wrote as
    ``text``), or :data:`_MISSING`."""
    if param.kind in ("int", "float"):
        for value in candidates:
            if param.contains(value):
                return value
        return _MISSING
    for choice in param.values():
        if str(choice) == text:
            return choice
        plain = isinstance(choice, int | float) and not isinstance(choice, bool)
        if plain and any(isinstance(v, int | float) and not isinstance(v, bool) and v == choice
                         for v in candidates):  # fmt: skip
            return choice
    return _MISSING


def _draw_chance(param: Param) -> float:
    """The chance that a uniform draw of ``param`` is one given value (a float without a
    ``step`` draws one value of a continuum: none, unless its range is one number)."""
    if not param.discrete:
        return 1.0 if param.low == param.high else 0.0
    return 1.0 / param.count()


def check_table_overlap(
    table_path: Path,
    space: Space,
    space_path: str,
    problem: Mapping[str, Any],
    device: Mapping[str, Any],
) -> None:
    """Refuse a ``--space`` that a replay of the table could hardly ever serve: one that no row
    of the table is a config of, or whose random proposals would find a row less often than
    once in :data:`~autotune.driver.sweep.MAX_REJECTIONS_PER_TRIAL` (the rejections a sweep
    budgets a trial).

    Raises:
        SetupError: naming the space, the table, the rows it admits and how rarely a
            proposal finds one, and what to do instead.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> table, space = os.path.join(folder, "t.csv"), os.path.join(folder, "s.yaml")
        >>> _ = open(table, "w").write("a,b,ms\\n1,1,5\\n2,7,6\\n")
        >>> _ = open(space, "w").write("parameters:\\n  a: {type: int, low: 0, high: 99}\\n"
        ...                            "  b: {type: int, low: 0, high: 99}\\n")
        >>> from autotune.space import load_space
        >>> check_table_overlap(Path(table), load_space(space), space, {}, {})
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: ...: the space admits 2 of ...'s 2 rows, one config in ...
    """
    from autotune.driver.sweep import MAX_REJECTIONS_PER_TRIAL

    overlap = table_overlap(table_path, space, problem, device)
    leave_out = ("give a space nearer the table's rows, or leave --space out (the table's own "
                 "space keeps to its rows)")  # fmt: skip
    if overlap.admitted == 0:
        raise SetupError(f"{space_path}: no row of {table_path} is a config of the space "
                         f"({overlap.first_miss}), and a replay looks every config up in the "
                         f"table; {leave_out}")  # fmt: skip
    if overlap.hit_chance * MAX_REJECTIONS_PER_TRIAL >= 1:
        return
    odds = (f"one config in {1 / overlap.hit_chance:,.0f} of its proposals" if overlap.hit_chance
            else "and no proposal of it finds one (a float without a step draws no recorded "
            "value)")  # fmt: skip
    raise SetupError(f"{space_path}: the space admits {overlap.admitted} of {table_path}'s "
                     f"{overlap.rows} rows, {odds} (a sweep refuses the others "
                     f"one by one, more than {MAX_REJECTIONS_PER_TRIAL} a trial); "
                     f"{leave_out}")  # fmt: skip
