"""An export as text: its settings in the target's file format (:class:`TrainExport`), each
value as one printable line (:func:`shown`), and what the target could not express as ``#``
comments (:func:`comment_lines`) where the format allows them (YAML, TOML).

Shared by every stack's export, training (:mod:`autotune.train_export`) and serving
(:mod:`autotune.serving_export`), and by the listings that print a stored value on one line.

Example:
    >>> out = TrainExport("accelerate", {"num_processes": 2},
    ...                   {"micro_batch": "4: the DataLoader's batch_size"})
    >>> print(out.text, end="")
    # not expressed: micro_batch: 4: the DataLoader's batch_size
    num_processes: 2
    >>> shown("a\\nb")
    "'a\\\\nb'"
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass
class TrainExport:
    """One target's settings, their text, and what the target could not express."""

    target: str
    settings: dict[str, Any]
    not_expressed: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        notes = comment_lines(self.not_expressed)
        if self.target == "accelerate":
            return notes + yaml.safe_dump(self.settings, sort_keys=False)
        if self.target == "torchtitan":
            from autotune.torchtitan_export import toml_text

            return notes + toml_text(self.settings)
        return json.dumps(self.settings, indent=2) + "\n"

    @property
    def notes_inline(self) -> bool:
        """Whether the file itself carries ``not_expressed`` (as comments)."""
        return self.target in ("accelerate", "torchtitan")


def shown(value: Any) -> str:
    """``value`` as one printable line: as is where it is one, else its ``repr`` (a newline in
    a comment would end it, and the rest would be read as the file's own lines).

    Example:
        >>> shown("fcfs"), shown(64), shown("a\\nb")
        ('fcfs', '64', "'a\\\\nb'")
    """
    text = str(value)
    return text if text.isprintable() else repr(text)


def comment_lines(notes: dict[str, str]) -> str:
    """``not_expressed`` as ``#`` comment lines, each note kept on its own line.

    Example:
        >>> print(comment_lines({"policy": "x\\ny: 1"}), end="")
        # not expressed: policy: 'x\\ny: 1'
    """
    return "".join(f"# not expressed: {shown(k)}: {shown(v)}\n" for k, v in notes.items())
