"""Paths that name one of the process's open descriptors: ``/dev/stdout``, ``/dev/stderr``,
``/dev/fd/N``, ``/proc/self/fd/N``. An ``--output`` there is written through the descriptor,
in place, whatever it is open on: a pipe, a terminal, or a file the shell redirected to
(``>> run.log``), which a write through a temporary file and a rename would replace.

Example:
    >>> descriptor_of("/dev/stdout"), descriptor_of("/proc/self/fd/7"), descriptor_of("out.json")
    (1, 7, None)
"""

from __future__ import annotations

import os
import re

_DESCRIPTOR_PATH = re.compile(r"/dev/std(out|err)|/dev/fd/(\d+)|/proc/self/fd/(\d+)")


def descriptor_of(path: str | os.PathLike[str]) -> int | None:
    """The descriptor ``path`` names, or None for any other path."""
    found = _DESCRIPTOR_PATH.fullmatch(os.fspath(path))
    if found is None:
        return None
    if found.group(1):
        return 1 if found.group(1) == "out" else 2
    return int(found.group(2) or found.group(3))


def write_to_descriptor(fd: int, text: str | bytes) -> None:
    """Write all of ``text`` through ``fd`` where it stands (an append-mode file: at its end).

    Raises:
        OSError: the descriptor is not open, or not for writing.
    """
    data = text.encode() if isinstance(text, str) else text
    while data:
        data = data[os.write(fd, data) :]
