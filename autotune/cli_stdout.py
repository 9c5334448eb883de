"""Stdout holds a command's result alone: ``autotune tune ./mine.py > best.json`` is JSON.

While a command runs under :func:`result_only`, whatever else writes to Python's stdout (a
workload file's import-time ``print``, its ``default_config``, a library's message) goes to
stderr beside the progress; :func:`write_result` writes to the stdout the command started
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
import sys
from collections.abc import Callable
from typing import Any, TextIO

_RESULT_STREAMS: list[TextIO] = []  # the stdout each running command started with


def result_only(command: Callable[..., Any]) -> Callable[..., Any]:
    """Run ``command`` with Python's stdout sent to stderr; :func:`write_result` still
    writes to the real stdout."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _RESULT_STREAMS.append(sys.stdout)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                return command(*args, **kwargs)
        finally:
            _RESULT_STREAMS.pop()

    return wrapper


def result_stream() -> TextIO:
    """The stdout the running command's result goes to."""
    return _RESULT_STREAMS[-1] if _RESULT_STREAMS else sys.stdout


def write_result(text: str) -> None:
    """Write ``text`` (and a newline) to the command's result stream."""
    stream = result_stream()
    stream.write(text + "\n")
    stream.flush()
