"""The commands autotune's output suggests to the user (``autotune trials --study X`` after a
sweep whose every trial failed, ``autotune best --study X``, ...), spelled in one place: each
argument shell-quoted, and ``--storage URL`` where the command would otherwise read another
storage than the one the study is in. A URL's password is never printed (``***``, as
:func:`~autotune.redact.redact_url` shows it); a storage ``$AUTOTUNE_STORAGE`` supplies is left
to it; one that keeps nothing (memory) has no command to suggest.

Example:
    >>> suggested("trials", "my run", "sqlite:///autotune.db")
    "autotune trials --study 'my run'"
    >>> suggested("trials", "s", "sqlite:///other dir/x.db", "--all")
    "autotune trials --study s --all --storage 'sqlite:///other dir/x.db'"
    >>> suggested("best", "s", "postgresql://u:pw@h/db")
    "autotune best --study s --storage 'postgresql://u:***@h/db'"
    >>> suggested("trials", "s", "memory") is None
    True
"""

from __future__ import annotations

import os
import shlex

from autotune.in_memory import in_memory
from autotune.redact import STORAGE_ENV, redact_url
from autotune.storage import DEFAULT_STORAGE


def storage_args(storage: str) -> list[str] | None:
    """The ``--storage URL`` a suggested command needs to read ``storage`` (the password
    ``***``): none where the command reads it without (the default, or the value of
    ``$AUTOTUNE_STORAGE``); None where ``storage`` keeps nothing for a command to read.

    Example:
        >>> storage_args("journal:///tmp/s.log")
        ['--storage', 'journal:///tmp/s.log']
        >>> storage_args("sqlite:///autotune.db")
        []
    """
    if in_memory(storage):
        return None
    given = os.environ.get(STORAGE_ENV)
    if given and given.strip():  # set: a command without --storage reads what it names
        return [] if storage == given else ["--storage", redact_url(storage)]
    return [] if storage == DEFAULT_STORAGE else ["--storage", redact_url(storage)]


def suggested(command: str, study: str | None, storage: str, *more: str) -> str | None:
    """``autotune COMMAND --study STUDY MORE... [--storage URL]`` as the shell reads it (no
    ``--study`` where ``study`` is empty), or None where ``storage`` keeps nothing: see
    :func:`storage_args`."""
    where = storage_args(storage)
    if where is None:
        return None
    named = ["--study", study] if study else []
    return shlex.join(["autotune", command, *named, *more, *where])
