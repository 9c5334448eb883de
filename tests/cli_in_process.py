"""Run an ``autotune`` command in the test's own process, for commands that end before a worker
starts: bad input refused up front, and the readers of a stored study.

A command started as a process pays Python's start and the imports (2.5-4 s on a loaded 2-core
CI machine); here it pays them once per test worker. What differs from the installed command:
the process does not end (:func:`autotune.cli.main` ends it with :func:`autotune.cli.run`'s
code), and only what is written through ``sys.stdout`` / ``sys.stderr`` is captured (a logging
handler made earlier holds the stream it was made with). A test of signals, of what a process
imports, of workers or of how a process ends starts the command as a process instead, and so
does a command with a ``--time-budget``: the budget counts from the process's start
(``autotune.cli.COMMAND_STARTED``), here the test worker's.

A workload file's import is once a process, its folder put on ``sys.path``, and a module it
imports beside it (its kernel) is kept in ``sys.modules``: each command here forgets what it
imported from a folder it put on ``sys.path``, and takes those folders off, so that the next
command imports its own workload's files as a new process does, not an earlier test's.

Example:
    >>> done = autotune_in_process("export", "--to", "xml", "--storage", "sqlite:///r.db")
    >>> done.returncode, "--to xml: unknown target" in done.stderr
    (2, True)
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autotune.cli import run


@dataclass(frozen=True)
class Ran:
    """A finished command: its exit code and what it wrote (as subprocess.CompletedProcess)."""

    returncode: int
    stdout: str
    stderr: str


def autotune_in_process(*args: str, cwd: Path | None = None) -> Ran:
    """``autotune ARGS`` run in this process (in folder ``cwd``, where given), its stdout and
    stderr captured."""
    stdout, stderr = io.StringIO(), io.StringIO()
    folder = contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext()
    captured = contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr)
    with folder, _imports_forgotten(), captured[0], captured[1]:
        code = run(args)
    return Ran(code, stdout.getvalue(), stderr.getvalue())


@contextlib.contextmanager
def _imports_forgotten() -> Iterator[None]:
    """Around a command: the folders it put on ``sys.path`` (a workload file's) taken off
    afterwards, and the modules it imported from them (the workload, the kernel beside it)
    dropped from ``sys.modules``, as the end of its process would."""
    path, modules = list(sys.path), set(sys.modules)
    try:
        yield
    finally:
        added = [Path(folder) for folder in sys.path if folder not in path]
        sys.path[:] = path
        for name in set(sys.modules) - modules:
            file = getattr(sys.modules[name], "__file__", None)
            if name.startswith("autotune_workload_") or (
                file is not None and any(Path(file).is_relative_to(f) for f in added)
            ):
                del sys.modules[name]
