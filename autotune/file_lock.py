"""One writer per file: a lock beside it (``NAME.lock``, holding the writer's pid) that a
second writer finds taken and refuses, instead of both rewriting the file and each losing the
other's rows. The lock is the kernel's (``flock``): it ends with its process, a crash too, and
the lock file is removed when the writer is done.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> table = Path(tempfile.mkdtemp()) / "grid.csv"
    >>> with sole_writer(table):
    ...     with sole_writer(table):
    ...         pass
    Traceback (most recent call last):
    ...
    autotune.file_lock.WriterBusy: .../grid.csv: another process (pid ...) is writing it; ...
    >>> with sole_writer(table):  # free again once the first writer is done
    ...     table.with_name("grid.csv.lock").exists()
    True
    >>> table.with_name("grid.csv.lock").exists()
    False
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path


class WriterBusy(ValueError):
    """Another process holds the file: one line naming it, the holder's pid, and what to do."""


def _holder(lock: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        return f"pid {int(lock.read_text().strip())}"
    return "pid unknown"


@contextlib.contextmanager
def sole_writer(path: str | Path) -> Iterator[None]:
    """Hold ``path``'s lock while the block runs; raise :class:`WriterBusy` at once when another
    process (or another block of this one) holds it. A lock file removed under a waiting
    writer (its holder ended between the open and the lock) is opened again, so that two
    writers never hold locks on two files of one name. The lock lies beside the file ``path``
    names once links are followed: two names of one file (a link) share one lock."""
    real = Path(os.path.realpath(path))
    lock = real.with_name(real.name + ".lock")
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WriterBusy(f"{path}: another process ({_holder(lock)}) is writing it; wait "
                             "for it to end or name another file") from None  # fmt: skip
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(lock)
        except FileNotFoundError:
            current = None
        if current is not None and current.st_ino == os.fstat(fd).st_ino:
            break
        os.close(fd)  # removed by the writer before: lock the file that stands now
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)
