"""The parts of a composed space: each include of a space file with the prefix its parameters
carry, the space file it reads, and the problem it runs at (the include's ``problem``).

An include may say the problem its part runs at, e.g. one GEMM of a decoder::

    include:
      - {space: matmul.yaml, prefix: "decode.qkv.", problem: {M: 16, N: 6144, K: 4096}}
      - {space: matmul.yaml, prefix: "layer{i}.up.", repeat: 2, problem: {M: 16, N: 28672}}
      - {space: matmul.yaml, prefix: "l{i}.", repeat: 2, problem: [{M: 1}, {M: 2048}]}

A repeated include runs every copy at its one ``problem`` mapping, or copy ``i`` at item
``i`` of a list of as many mappings as copies. ``autotune tune`` searches such a space by
group (:mod:`autotune.grouped_sweep`); a search over the whole space at once reads none of it.

Example:
    >>> parts = composed_parts("decoder_gemms.yaml")
    >>> parts[0].prefix, parts[0].space.name, parts[0].problem
    ('decode1.qkv.', 'matmul.yaml', {'M': 1, 'N': 6144, 'K': 4096})
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autotune.space.space import SpaceError, shown


@dataclass(frozen=True)
class Part:
    """One copy of an include: its parameters' ``prefix``, the ``space`` file it reads, the
    ``problem`` values its include sets, and ``where`` the include is written (messages)."""

    prefix: str
    space: Path
    problem: dict[str, Any] = field(default_factory=dict)
    where: str = ""


def include_problems(value: Any, repeat: int, where: str) -> list[dict[str, Any]]:
    """The problem of each of an include's ``repeat`` copies: ``{}`` each where it gives none,
    its one mapping for each copy, or one mapping of a list per copy.

    Example:
        >>> include_problems({"M": 16}, 2, "top.yaml: include[0]")
        [{'M': 16}, {'M': 16}]
        >>> include_problems([{"M": 1}], 2, "top.yaml: include[0]")
        Traceback (most recent call last):
        ...
        autotune.space.space.SpaceError: top.yaml: include[0].problem: a list of 1 problems \
for 2 copies (repeat); give one mapping for every copy, or one per copy

    Raises:
        SpaceError: naming the include and what is wrong with its problem.
    """
    if value is None:
        return [{} for _ in range(repeat)]
    if isinstance(value, dict):
        return [_problem(value, f"{where}.problem") for _ in range(repeat)]
    if not isinstance(value, list):
        raise SpaceError(f"{where}.problem: {shown(value)} is not a mapping of problem key to "
                         "value (or a list of them, one per copy)")  # fmt: skip
    if len(value) != repeat:
        raise SpaceError(f"{where}.problem: a list of {len(value)} problems for {repeat} copies "
                         "(repeat); give one mapping for every copy, or one per copy")  # fmt: skip
    return [_problem(item, f"{where}.problem[{k}]") for k, item in enumerate(value)]


def _problem(value: Any, where: str) -> dict[str, Any]:
    """One problem mapping, its keys text and its values numbers, text or bools."""
    if not isinstance(value, dict):
        raise SpaceError(f"{where}: {shown(value)} is not a mapping of problem key to value")
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise SpaceError(f"{where}: the key {shown(key)} is not a problem key's name")
        if item is None or not isinstance(item, (str, int, float, bool)):
            raise SpaceError(f"{where}.{key}: {shown(item)} is not a number, text or bool")
    return dict(value)


def composed_parts(path: str | Path) -> list[Part]:
    """Every copy of every include of the space file ``path`` (not of the files it includes),
    in order; the file is loaded first (:func:`~autotune.space.loader.load_space`), so that
    whatever is wrong with it is said as for any space.

    Raises:
        SpaceError: as :func:`~autotune.space.loader.load_space` does.
    """
    from autotune.space.loader import _number, load_space, resolve_space_path
    from autotune.space.yaml_file import read_yaml_mapping

    space = load_space(path)
    source = Path(space.source)
    parts = []
    for i, entry in enumerate(read_yaml_mapping(source).get("include") or []):
        where = f"{source}: include[{i}]"
        repeat = int(_number(entry.get("repeat", 1), f"{where}.repeat", integer=True))
        file = resolve_space_path(entry["space"], relative_to=source)
        problems = include_problems(entry.get("problem"), repeat, where)
        prefix = entry.get("prefix", "")
        for k in range(repeat):
            parts.append(Part(prefix.replace("{i}", str(k)), file, problems[k], where))
    return parts
