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
from collections.abc import Iterator
from typing import IO

from autotune.failures import Crashed


@contextlib.contextmanager
def running(argv: list[str], log: IO[str], grace_s: float = 10.0) -> Iterator[subprocess.Popen]:
    """``argv`` started in a process group of its own (no shell), its output to ``log``; on
    leaving, the whole group is stopped (:func:`stop`). A :class:`GroupWatchdog` stops it too
    if this process dies first, however it dies (a trial timeout's SIGKILL runs no ``finally``).

    Raises:
        Crashed: the command cannot start (no such program, not executable).

    Example: the module's.
    """
    try:
        watchdog = GroupWatchdog(grace_s)
    except OSError as exc:
        raise Crashed(f"the server's watchdog cannot start: {exc}") from None
    try:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    except OSError as exc:
        watchdog.release()
        raise Crashed(f"the server command cannot start: {exc}") from None
    watchdog.watch(proc.pid)
    try:
        yield proc
    finally:
        try:
            stop(proc, grace_s)
        finally:
            watchdog.release()


#: The watchdog's program (``python -I -S -c``: no site, no project imports, started in
#: milliseconds). It reads its pipe until the pipe closes. The pipe's one write end is the
#: trial's, so it closes when the trial's process ends, whatever ends it. If the trial wrote
#: ``done`` (it stopped the group itself), nothing is left to do; else the group the trial named
#: gets SIGTERM, then SIGKILL once ``grace`` seconds pass with a process of it still alive
#: (zombies, which a container's init may never reap, hold no port and do not count), and the
#: watchdog exits. It has a session of its own: a signal to the trial's process group, or the
#: terminal's Ctrl-C, does not reach it.
_WATCHDOG = r"""# autotune: the server watchdog (objectives/server_process.py)
import os, signal, sys, time

fd, grace = int(sys.argv[1]), float(sys.argv[2])
said = b""
while chunk := os.read(fd, 4096):
    said += chunk
words = said.split()
if not words or words[-1] == b"done":
    sys.exit(0)
group = int(words[0])


def alive():
    try:
        os.killpg(group, 0)
    except OSError:
        return False
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return True  # no /proc: the group exists, zombies or not
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if fields and fields[0] != b"Z" and int(fields[2]) == group:
            return True
    return False


for sig, wait_s in ((signal.SIGTERM, grace), (signal.SIGKILL, 1.0)):
    if not alive():
        break
    try:
        os.killpg(group, sig)
    except OSError:
        break
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and alive():
        time.sleep(0.05)
"""


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
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(read), str(grace_s)],
                pass_fds=(read,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        except OSError:
            os.close(self._write)
            raise
        finally:
            os.close(read)
        self._open = True

    def watch(self, pgid: int) -> None:
        """Stop process group ``pgid`` if this process ends before :meth:`release`."""
        os.write(self._write, f"{pgid}\n".encode())

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
