"""The server watchdog's program, and what it shares with the trials: whether a process
group still has a live process (:func:`group_alive`), and the note each running server
leaves (:func:`note_server`) so that the next trial waits for a server whose trial was
killed (:func:`await_leftovers`) rather than starting its own beside it.

The program runs as ``python -I -S server_watchdog.py FD GRACE`` (no site, no project
imports: the standard library alone, started in milliseconds). It reads its pipe until the
pipe closes. The pipe's one write end is the trial's, so it closes when the trial's process
ends, whatever ends it. If the trial wrote ``done`` (it stopped the group itself), nothing is
left to do; else the group the trial named gets SIGTERM, then SIGKILL once ``GRACE`` seconds
pass with a process of it still alive, and the watchdog removes the server's note and
exits. While the pipe is open, it looks every :data:`SCAN_S` seconds for what the server
started outside its group (:func:`server_tree`: a ``setsid`` worker, a double fork), which
gets the same signals: a trial killed at its timeout ends no such process itself. It has a
session of its own: a signal to the trial's process group, or the terminal's Ctrl-C, does not
reach it.

Example:
    >>> import subprocess
    >>> group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    >>> group_alive(group.pid)
    True
    >>> group.kill(); _ = group.wait()
    >>> group_alive(group.pid)
    False
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def process_stats(pids: list[int] | None = None) -> Iterator[tuple[int, list[bytes]]]:
    """Each process's ``/proc/PID/stat`` fields after its name (state, parent, group, ...),
    for ``pids`` or every process; none without ``/proc``, none for one that is gone.

    Example:
        >>> [fields[0] != b"Z" for _, fields in process_stats([os.getpid()])]
        [True]
    """
    if pids is None:
        try:
            pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
        except OSError:
            return
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 2:
            yield pid, fields


def _running_in(group: int | None, pid: int | None = None) -> bool:
    """Whether a process of ``group`` (or process ``pid``) runs: zombies, which a
    container's init may never reap, hold no port and no memory and do not count."""
    try:
        if group is not None:
            os.killpg(group, 0)
        else:
            os.kill(pid, 0)
    except OSError:
        return False
    if not os.path.isdir("/proc"):
        return True  # the group exists, zombies or not
    return any(
        fields[0] != b"Z" and (group is None or int(fields[2]) == group)
        for _, fields in process_stats(None if group is not None else [pid])
    )


def group_alive(group: int) -> bool:
    """Whether process group ``group`` has a process that is not a zombie."""
    return _running_in(group)


def stop_group(group: int, grace_s: float) -> None:
    """SIGTERM to ``group``, then SIGKILL once ``grace_s`` pass with a process of it alive;
    returns when none is (or one second after the SIGKILL)."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 1.0)):
        if not group_alive(group):
            return
        try:
            os.killpg(group, sig)
        except OSError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and group_alive(group):
            time.sleep(0.05)


def notes_folder() -> Path:
    """Where each running server's note lies: one file a group, named by it, holding the pid
    of the trial's process that started it."""
    return Path(tempfile.gettempdir()) / f"autotune-servers-{os.getuid()}"


def note_server(group: int) -> Path:
    """Leave a note that this process runs server group ``group``; returns its path."""
    folder = notes_folder()
    folder.mkdir(mode=0o700, exist_ok=True)
    note = folder / str(group)
    note.write_text(str(os.getpid()))
    return note


def await_leftovers(grace_s: float) -> list[int]:
    """Wait for the server groups whose trial's process is gone (a trial killed at its
    timeout: its watchdog is stopping them), SIGKILL any still alive after ``grace_s``, and
    remove their notes; returns those groups. A server whose trial runs (another worker's)
    is left alone.

    Example:
        >>> await_leftovers(1.0) == [] or True
        True
    """
    try:
        notes = list(notes_folder().iterdir())
    except OSError:
        return []
    left: list[int] = []
    for note in notes:
        try:
            group, owner = int(note.name), int(note.read_text() or 0)
        except (OSError, ValueError):
            continue
        if owner and owner != os.getpid() and _running_in(None, owner):
            continue
        if group_alive(group):
            left.append(group)
            deadline = time.monotonic() + grace_s
            while time.monotonic() < deadline and group_alive(group):
                time.sleep(0.05)
            with contextlib.suppress(OSError):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(OSError):
            note.unlink()
    return left


#: seconds between the watchdog's looks at what the server started
SCAN_S = 0.5


def detached_children(parent: int, spare: set[int], table: dict[int, list[bytes]]) -> set[int]:
    """The children of ``parent`` outside its process group and not in ``spare`` (those it had
    before the server started): what the server detached, reparented to ``parent``, its
    subreaper. ``table`` maps pid -> :func:`process_stats` fields.

    Example:
        >>> import subprocess
        >>> child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        >>> table = dict(process_stats())
        >>> child.pid in detached_children(os.getpid(), set(), table)
        True
        >>> child.pid in detached_children(os.getpid(), {child.pid}, table)
        False
        >>> child.kill(); _ = child.wait()
    """
    group = table[parent][2] if parent in table else b""
    return {pid for pid, fields in table.items()
            if int(fields[1]) == parent and fields[2] != group and pid not in spare}  # fmt: skip


def server_tree(trial: int, spare: set[int], known: dict[int, bytes]) -> dict[int, bytes]:
    """``known`` (pid -> start time) plus the processes the server started, wherever they
    went: each child of ``trial`` outside its process group that is not in ``spare`` (the
    server, and what the server detached that was reparented to the trial, its subreaper),
    each live process of ``known``, and their descendants (a ``setsid`` child of the server's
    shell, whose group is its own). A pid whose start time changed is another process.

    Example:
        >>> import subprocess
        >>> child = subprocess.Popen(["sleep", "60"], start_new_session=True)
        >>> child.pid in server_tree(os.getpid(), set(), {})
        True
        >>> child.kill(); _ = child.wait()
    """
    table = {pid: f for pid, f in process_stats() if len(f) > 19 and f[0] != b"Z"}
    spare = {*spare, os.getpid()}  # the watchdog, a child of the trial in a session of its own
    found = {pid: start for pid, start in known.items() if pid in table and table[pid][19] == start}
    found.update({pid: table[pid][19] for pid in detached_children(trial, spare, table)})
    grew = True
    while grew:
        more = {pid: f[19] for pid, f in table.items() if int(f[1]) in found and pid not in found}
        found.update(more)
        grew = bool(more)
    return found


def main(argv: list[str]) -> int:
    """The watchdog: ``FD GRACE`` (the module's docstring says what it does). The trial
    writes ``GROUP TRIAL SPARE...`` (the server's group, its own pid, its children before the
    server), then ``done`` once it stopped the server itself."""
    import select

    fd, grace = int(argv[0]), float(argv[1])
    said = b""
    tree: dict[int, bytes] = {}
    while True:
        if select.select([fd], [], [], SCAN_S)[0]:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            said += chunk
        words = said.split()
        if said.endswith(b"\n") and len(words) > 1 and words[-1] != b"done":
            tree = server_tree(int(words[1]), {int(w) for w in words[2:]}, tree)
    words = said.split()
    if not words or words[-1] == b"done":
        return 0
    group = int(words[0])
    tree = server_tree(int(words[1]), {int(w) for w in words[2:]}, tree) if len(words) > 1 else {}
    _signal_tree(tree, signal.SIGTERM)
    stop_group(group, grace)
    _signal_tree(tree, signal.SIGKILL)  # those the group's stop missed: they left it
    with contextlib.suppress(OSError):
        (notes_folder() / str(group)).unlink()
    return 0


def _signal_tree(tree: dict[int, bytes], sig: int) -> None:
    """``sig`` to each process of ``tree`` that is still the one it names."""
    alive = server_tree(-1, set(), tree)
    for pid in alive:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
