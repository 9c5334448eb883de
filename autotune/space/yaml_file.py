"""Read a space file's YAML: safe loading that refuses a key given twice in one mapping (the
last would silently win), merges ``<<`` keys as YAML says, and turns every way a file can be
unreadable into one line naming the file.

Example:
    >>> import yaml
    >>> yaml.load("a: 1\\nb: {<<: {c: 2}, c: 3}", Loader=UniqueKeyLoader)
    {'a': 1, 'b': {'c': 3}}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from autotune.space.space import SpaceError

#: a space file larger than this is refused before parsing (a space is a few kB)
MAX_SPACE_BYTES = 1 << 20


_MERGE_TAG = "tag:yaml.org,2002:merge"
_VALUE_TAG = "tag:yaml.org,2002:value"


class UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (the last would silently
    win: a parameter or a constraint lost)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._checked: set[int] = set()  # ids of the mapping nodes checked for repeated keys

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self._refuse_repeated_keys(node, deep)
        return super().construct_mapping(node, deep=deep)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        """Merge ``<<`` keys as YAML says: the mapping's own keys win, then the first merged
        mapping that has the key (PyYAML's own merge lets a later one win where the key's text
        is not interned, as in ``<<: [*a, *b]``)."""
        own = sum(1 for key_node, _ in node.value if key_node.tag != _MERGE_TAG)
        super().flatten_mapping(node)
        split = len(node.value) - own
        merged, seen = [], set()
        for key_node, value_node in node.value[:split]:
            key = self.construct_object(key_node)
            if isinstance(key, (list, dict)) or key not in seen:  # unhashable: the base refuses
                merged.append((key_node, value_node))
            if not isinstance(key, (list, dict)):
                seen.add(key)
        node.value = merged + node.value[split:]

    def _refuse_repeated_keys(self, node: yaml.Node, deep: bool) -> None:
        """Refuse a key given twice among a mapping's own keys. A merge key (``<<: *anchor``)
        is no repeat: the keys it brings are overridden by the mapping's own, as YAML says
        (the base class merges them); each merged mapping is checked on its own keys."""
        if not isinstance(node, yaml.MappingNode) or id(node) in self._checked:
            return  # an alias merged again: checked once (nested aliases: not 10**9 times)
        self._checked.add(id(node))
        seen: set = set()
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged = (
                    value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                )
                for each in merged:
                    self._refuse_repeated_keys(each, deep)
                continue
            if key_node.tag == _VALUE_TAG:  # a '=' key reads as text, as the base class reads it
                key_node.tag = "tag:yaml.org,2002:str"
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (list, dict)):
                continue  # the base class refuses an unhashable key
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark
                )
            seen.add(key)


def read_yaml_mapping(path: Path) -> dict[str, Any]:
    """The mapping at the top of the YAML file ``path``, read with :class:`UniqueKeyLoader`;
    anything else (too large, not UTF-8, invalid YAML, a repeated key, unreadable, not a
    mapping) is a :class:`SpaceError` of one line naming the file and, where known, the line.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "s.yaml"
        >>> _ = path.write_text("parameters: {}\\nparameters: {}\\n")
        >>> try:
        ...     read_yaml_mapping(path)
        ... except SpaceError as exc:
        ...     print(str(exc).split(": ", 1)[1])
        line 2: invalid YAML: key 'parameters' given twice
    """
    try:
        if path.stat().st_size > MAX_SPACE_BYTES:
            raise SpaceError(f"{path}: larger than {MAX_SPACE_BYTES >> 20} MiB: not a space file")
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=UniqueKeyLoader)  # noqa: S506 - a safe loader
    except RecursionError:
        raise SpaceError(f"{path}: nested too deeply to be a space file") from None
    except UnicodeDecodeError as exc:
        bad = exc.object[exc.start]
        raise SpaceError(f"{path}: not UTF-8 text (byte {exc.start} is {bad:#04x})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpaceError(f"{path}:{line}: invalid YAML: {problem}") from None
    except OSError as exc:
        raise SpaceError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:  # after UnicodeDecodeError, one of them: a value YAML reads and
        # Python cannot hold (a date 2024-13-45, an integer of more than 4300 digits)
        raise SpaceError(f"{path}: invalid YAML: {str(exc).split(';')[0]}") from None
    if not isinstance(data, dict):
        raise SpaceError(f"{path}: expected a mapping at the top level")
    return data
