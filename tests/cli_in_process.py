"""Run an ``autotune`` command in the test's own process, for commands that end before a worker
starts: bad input refused up front, and the readers of a stored study.

A command started as a process pays Python's start and the imports (2.5-4 s on a loaded 2-core
CI machine); here it pays them once per test worker. What differs from the installed command:
the process does not end (:func:`autotune.cli.main` ends it with :func:`autotune.cli.run`'s
code), and only what is written through ``sys.stdout`` / ``sys.stderr`` is captured (a logging
handler made earlier holds the stream it was made with). A test of signals, of what a process
imports, of workers or of how a process ends starts the command as a process instead.

Example:
    >>> done = autotune_in_process("export", "--to", "xml", "--storage", "sqlite:///r.db")
    >>> done.returncode, "--to xml: unknown target" in done.stderr
    (2, True)
"""

from __future__ import annotations

import contextlib
import io
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
    with folder, contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = run(args)
    return Ran(code, stdout.getvalue(), stderr.getvalue())
