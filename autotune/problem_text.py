"""A problem's values as one line shows them (a sweep's header, a report's heading, a search by
group's lines): ``M=4, N=4096``, a value left unset (a workload's default of None) or empty left
out rather than shown as ``N=None``, a password in a text value as ``***``, a list by its items.

Example:
    >>> problem_text({"M": 4, "N": None, "K": "", "dtype": "bf16"})
    'M=4, dtype=bf16'
    >>> problem_text({"table": "t.csv", "params": ["a", "b"], "metric": "ms"}, leave_out=("table",))
    'params=(a, b), metric=ms'
    >>> problem_text({"command": "srv --db postgresql://bob:hunter2@db/prod"})
    'command=srv --db postgresql://bob:***@db/prod'
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from autotune.redact import redact_values

#: the items of a list a line shows before it says how many more there are
LISTED = 8


def listed(value: object) -> str:
    """A problem value as a line shows it: a list (a replay's parameters) as its items, not
    Python's ``repr`` of it, cut after :data:`LISTED`.

    Example:
        >>> listed(["BLOCK_M", "BLOCK_N"]), listed(4096)
        ('(BLOCK_M, BLOCK_N)', '4096')
        >>> listed([f"p{i}" for i in range(10)])
        '(p0, p1, p2, p3, p4, p5, p6, p7 and 2 more)'
    """
    if not isinstance(value, list | tuple):
        return str(value)
    items = ", ".join(str(v) for v in value[:LISTED])
    more = f" and {len(value) - LISTED} more" if len(value) > LISTED else ""
    return f"({items}{more})"


def problem_text(problem: Mapping[str, Any], leave_out: Collection[str] = ()) -> str:
    """``problem``'s values as ``key=value`` joined by ``", "`` (as a list's items are: one
    form on every line): those left unset (None) or empty, and the keys ``leave_out`` names,
    left out; text redacted; lists by their items (:func:`listed`). '' where nothing is left
    to show."""
    shown = {k: v for k, v in problem.items() if k not in leave_out and v is not None and v != ""}
    return ", ".join(f"{k}={listed(v)}" for k, v in redact_values(shown).items())
