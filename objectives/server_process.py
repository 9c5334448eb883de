"""A server's process for one trial: started in a process group of its own, and that whole
group stopped when the trial ends, however it ends (:func:`running`): on leaving, by
:func:`stop`; if the trial's process dies first (a trial timeout's SIGKILL runs no
``finally``), by a :class:`GroupWatchdog` started beside it.

Example:
    >>> import tempfile
    >>> with tempfile.TemporaryFile("w+") as log, running(["sh", "-c", "echo hi"], log) as p:
    ...     code = p.wait()
    ...     _ = log.seek(0)
    ...     code, log.read()
    (0, 'hi\\n')
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from autotune.failures import Crashed
from autotune.objectives import server_watchdog


class OutputTail:
    """The last ``keep`` bytes a server wrote (its stdout and stderr), read from a pipe as it
    runs: a server that prints without end fills neither the disk nor the memory (a file took
    4-5 GB in 4 s of ``yes``).

    Example:
        >>> tail = OutputTail(keep=9)
        >>> with running(["sh", "-c", "seq 100000"], tail) as p:
        ...     code = p.wait()
        >>> tail.text()
        '9\\n100000\\n'
    """

    def __init__(self, keep: int = 1 << 16) -> None:
        self.keep = keep
        self._kept = bytearray()
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def follow(self, stream: IO[bytes]) -> None:
        """Read ``stream`` to its end in a thread of its own, keeping the last bytes."""
        fd = stream.fileno()

        def read() -> None:
            while chunk := _read_some(fd):
                with self._lock:
                    self._kept += chunk
                    if len(self._kept) > 2 * self.keep:
                        del self._kept[: -self.keep]
            stream.close()

        self._reader = threading.Thread(target=read, name="autotune-server-output", daemon=True)
        self._reader.start()

    def text(self, wait_s: float = 1.0) -> str:
        """The kept output, once the pipe is read to its end (or ``wait_s`` passed: a detached
        child may hold it open)."""
        if self._reader is not None:
            self._reader.join(wait_s)
        with self._lock:
            return bytes(self._kept[-self.keep :]).decode("utf-8", errors="replace")


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except OSError:  # closed under the reader
        return b""


@contextlib.contextmanager
def running(
    argv: list[str], log: IO[str] | OutputTail, grace_s: float = 10.0
) -> Iterator[subprocess.Popen]:
    """``argv`` started in a process group of its own (no shell), its output to ``log`` (a
    file, or an :class:`OutputTail` that keeps the last of it); on leaving, the whole group is
    stopped (:func:`stop`). A :class:`GroupWatchdog` stops it too if this process dies first,
    however it dies (a trial timeout's SIGKILL runs no ``finally``).

    Raises:
        Crashed: the command cannot start (no such program, not executable).

    Example: the module's.
    """
    # a server whose trial was killed is being stopped by its watchdog: wait for it, or its
    # port and GPU memory are still held while this one starts (and fails, or OOMs)
    server_watchdog.await_leftovers(grace_s + 1.0)
    try:
        watchdog = GroupWatchdog(grace_s)
    except OSError as exc:
        raise Crashed(f"the server's watchdog cannot start: {exc}") from None
    tail = log if isinstance(log, OutputTail) else None
    # a process the server detaches (setsid, a double fork) leaves its group: as this
    # process's child subreaper it is reparented here, not to init, and is ended below
    adopts = _adopt_orphans(True)
    ours_before = _children() | {watchdog.process.pid}
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE if tail else log,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    except OSError as exc:
        watchdog.release()
        if adopts:
            _adopt_orphans(False)
        raise Crashed(f"the server command cannot start: {exc}") from None
    if tail is not None:
        assert proc.stdout is not None
        tail.follow(proc.stdout)
    watchdog.watch(proc.pid, spare=ours_before)
    note = _note(proc.pid)
    try:
        yield proc
    finally:
        try:
            stop(proc, grace_s)
            if adopts:
                _end_adopted(ours_before)
        finally:
            if adopts:
                _adopt_orphans(False)
            watchdog.release()
            if note is not None:
                with contextlib.suppress(OSError):
                    note.unlink()


def _adopt_orphans(on: bool) -> bool:
    """Make this process a child subreaper (Linux ``prctl``), or stop being one: an orphan of
    its descendants is then reparented here rather than to init. Whether the call took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_CHILD_SUBREAPER = 36


def _children() -> set[int]:
    """The pids whose parent is this process (from ``/proc``; none without it)."""
    me = os.getpid()
    return {pid for pid, fields in server_watchdog.process_stats() if int(fields[1]) == me}


def _end_adopted(ours_before: set[int]) -> None:
    """SIGKILL and reap the children this process gained while the server ran outside its
    process group (a compile worker another thread started is in it): what the server
    detached, reparented here (zombies too: they are reaped)."""
    table = dict(server_watchdog.process_stats())
    for pid in server_watchdog.detached_children(os.getpid(), ours_before, table):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, 0)


def _note(group: int) -> Path | None:
    """The running server's note (:func:`~autotune.objectives.server_watchdog.note_server`),
    or None where none can be left (no writable temp folder): only the wait of a later
    trial is lost then."""
    try:
        return server_watchdog.note_server(group)
    except OSError:
        return None


class GroupWatchdog:
    """A process that stops a process group once this process ends, unless told it is done:
    the server of a trial whose worker was killed would otherwise live on, its port bound.

    Example:
        >>> group = subprocess.Popen(["sleep", "60"], start_new_session=True)
        >>> watchdog = GroupWatchdog(grace_s=1.0)
        >>> watchdog.watch(group.pid)
        >>> watchdog.abandon()  # as the worker's death would: the pipe closes unsaid
        >>> group.wait(timeout=10), watchdog.process.wait(timeout=10)
        (-15, 0)
    """

    def __init__(self, grace_s: float = 10.0) -> None:
        read, self._write = os.pipe()  # the write end stays this process's (not inheritable)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", server_watchdog.__file__, str(read), str(grace_s)],
                pass_fds=(read,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        except OSError:
            os.close(self._write)
            raise
        finally:
            os.close(read)
        self._open = True

    def watch(self, pgid: int, spare: Iterable[int] = ()) -> None:
        """Stop process group ``pgid`` if this process ends before :meth:`release`, and what
        its processes started that left it: each child of this process outside its group and
        not in ``spare`` (those it had before the server), with their descendants
        (:func:`~autotune.objectives.server_watchdog.server_tree`)."""
        os.write(self._write, " ".join(map(str, (pgid, os.getpid(), *spare))).encode() + b"\n")

    def release(self, timeout_s: float = 5.0) -> None:
        """The group is stopped (or was never started): let the watchdog exit, and reap it."""
        if self._open:
            with contextlib.suppress(OSError):
                os.write(self._write, b"done\n")
        self.abandon()
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def abandon(self) -> None:
        """Close the pipe without ``done``, as this process's death does: the watchdog stops
        the group it watches."""
        if self._open:
            self._open = False
            os.close(self._write)


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End the server's whole process group: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # children left in the group after the leader
