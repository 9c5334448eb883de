"""Whether a storage URL names Optuna's in-memory storage, which keeps nothing between
commands: the one place that spells its names (``memory``, and SQLite's ``:memory:``).

Example:
    >>> in_memory("memory"), in_memory(":memory:"), in_memory("sqlite:///autotune.db")
    (True, True, False)
"""

from __future__ import annotations

#: the storage URLs that open Optuna's InMemoryStorage
IN_MEMORY_NAMES = ("memory", ":memory:")


def in_memory(url: str | None) -> bool:
    """True where ``url`` names the in-memory storage (a sweep's studies end with it)."""
    return url in IN_MEMORY_NAMES
