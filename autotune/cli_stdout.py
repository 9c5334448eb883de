"""Stdout holds a command's result alone: ``autotune tune ./mine.py > best.json`` is JSON.

While a command runs under :func:`result_only`, whatever else writes to stdout (a workload
file's import-time ``print``, its ``default_config``, a library's message, and where the
process has file descriptors 1 and 2, what a subprocess it starts or C code writes there) goes
to stderr beside the progress; :func:`write_result` writes to the stdout the command started
with.

Example:
    >>> import contextlib, io
    >>> real, other = io.StringIO(), io.StringIO()
    >>> with contextlib.redirect_stdout(real), contextlib.redirect_stderr(other):
    ...     @result_only
    ...     def command():
    ...         print("chatter from a workload file")
    ...         write_result('{"x": 1}')
    ...     command()
    >>> real.getvalue(), other.getvalue()
    ('{"x": 1}\\n', 'chatter from a workload file\\n')
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

from autotune.std_paths import descriptor_of

_RESULT_STREAMS: list[TextIO] = []  # the stdout each running command started with


def result_only(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``command`` with Python's stdout sent to stderr; :func:`write_result` still
    writes to the real stdout."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _descriptor_1_to_stderr() as real_stdout:
            _RESULT_STREAMS.append(real_stdout)
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    return command(*args, **kwargs)
            finally:
                _RESULT_STREAMS.pop()

    return wrapper


@contextlib.contextmanager
def _descriptor_1_to_stderr() -> Iterator[TextIO]:
    """Within the block file descriptor 1 is stderr's (a child process or C code writes its
    output beside the progress); yields a stream on the stdout the process had. Where stdout
    is not descriptor 1 (a test's ``StringIO``) or there are no descriptors, nothing moves
    and the stream is ``sys.stdout``."""
    try:
        on_fd_1 = sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        on_fd_1 = False
    saved = None
    if on_fd_1:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        try:
            saved = os.dup(1)
            os.dup2(2, 1)
        except OSError:
            saved = None
    if saved is None:
        yield sys.stdout
        return
    real = open(saved, "w", encoding=sys.stdout.encoding, errors=sys.stdout.errors, closefd=False)  # noqa: SIM115
    try:
        yield real
    finally:
        with contextlib.suppress(Exception):
            real.flush()
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(saved, 1)
        real.close()
        os.close(saved)


def result_stream() -> TextIO:
    """The stdout the running command's result goes to."""
    return _RESULT_STREAMS[-1] if _RESULT_STREAMS else sys.stdout


def write_result(text: str) -> None:
    """Write ``text`` (and a newline) to the command's result stream."""
    stream = result_stream()
    stream.write(text + "\n")
    stream.flush()


def names_stdout(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is the process's stdout (``--output /dev/stdout``).

    Example:
        >>> names_stdout("/dev/stdout"), names_stdout("best.json")
        (True, False)
    """
    return descriptor_of(path) == 1  # moved to stderr under :func:`result_only`


def say_written(output: str | os.PathLike[str]) -> None:
    """Say on stderr that ``output`` was written (``wrote PATH``); nothing where it is the
    command's stdout (``--output -``), which the user reads it on: 'wrote /dev/stdout' is noise.
    """
    if names_stdout(output):
        return
    from autotune.cli_errors import err

    err.print(f"wrote {output}", markup=False, highlight=False)
