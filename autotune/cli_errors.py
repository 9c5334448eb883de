"""How a command fails: bad input in one line naming the problem and exit code 2 (a file that
cannot be written or a port that is taken too, and a SQLite file SQLite finds damaged), a
storage that stops answering in one line and exit code 1 (the finished trials are stored),
Ctrl-C with exit code 130; never a traceback, and never a storage URL's password
(:func:`one_line_errors`).

Example:
    >>> @one_line_errors
    ... def command() -> None:
    ...     raise UsageError("--trials: 0 must be positive")
    >>> try:
    ...     command()
    ... except typer.Exit as stop:
    ...     stop.exit_code
    2
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from autotune.cli_parsing import UsageError
from autotune.redact import redact

err = Console(stderr=True, soft_wrap=True)  # a path or message is never broken mid-line


def _bad_input_types() -> tuple[type[Exception], ...]:
    from autotune.driver.samplers import SamplerError
    from autotune.driver.study_setup import StudyMismatch
    from autotune.executors.base import ExecutorError
    from autotune.export import ExportError
    from autotune.file_lock import WriterBusy
    from autotune.objectives.external import WorkloadError
    from autotune.record import RecordError
    from autotune.serving_export import ServingExportError
    from autotune.space import ExpressionError, SpaceError
    from autotune.storage import StorageError
    from autotune.sweep_setup import SetupError
    from autotune.train_record import TrainExportError
    from autotune.triton_names import TritonExportError

    return (
        UsageError,
        SpaceError,
        ExpressionError,
        StorageError,
        SamplerError,
        ExportError,
        TritonExportError,
        TrainExportError,
        ServingExportError,
        SetupError,
        StudyMismatch,
        ExecutorError,
        WorkloadError,
        RecordError,
        WriterBusy,
    )


def _storage_source(exc: Exception) -> str:
    """`` (from $AUTOTUNE_STORAGE)`` where a storage URL's error is about the URL the
    environment gave (no ``--storage`` on the command line): the place the value came from."""
    from autotune.redact import STORAGE_ENV
    from autotune.storage import StorageError

    given = os.environ.get(STORAGE_ENV)
    on_line = any(arg == "--storage" or arg.startswith("--storage=") for arg in sys.argv[1:])
    if isinstance(exc, StorageError) and given and not on_line and "storage URL" in str(exc):
        return f" (from ${STORAGE_ENV})"
    return ""


def _storage_failure_types() -> tuple[type[Exception], ...]:
    """A database that went away or stayed locked in the middle of a command."""
    import optuna
    import sqlalchemy.exc

    return (optuna.exceptions.StorageInternalError, sqlalchemy.exc.OperationalError)


def _sqlite_error_types() -> tuple[type[Exception], ...]:
    """What SQLite raises on a file it cannot read (directly, or through SQLAlchemy): a
    damaged one is told apart from a database that stops answering."""
    import sqlite3

    import sqlalchemy.exc

    return (sqlite3.DatabaseError, sqlalchemy.exc.DatabaseError)


def _lost_types() -> tuple[type[Exception], ...]:
    """What a sweep loses mid-way (exit code 1): the study's file deleted (its trials saved
    beside it), the Ray cluster stopped."""
    from autotune.driver.storage_watch import StorageLost
    from autotune.executors.base import ClusterLost

    return StorageLost, ClusterLost


def _root_cause_line(exc: BaseException) -> str:
    """The first line of the innermost cause that says something: Optuna wraps a dropped
    database connection in a generic commit error; the driver's own message (e.g. "server
    closed the connection unexpectedly") is what names the problem. Causes with no words
    (SQLAlchemy's pool-bookkeeping ``InvalidatePoolError`` prints ``()``) are passed over.

    Example:
        >>> try:
        ...     try:
        ...         try:
        ...             raise LookupError(())  # bookkeeping: no words
        ...         except LookupError:
        ...             raise ConnectionError("server closed the connection\\nmore")
        ...     except ConnectionError as inner:
        ...         raise RuntimeError("commit failed") from inner
        ... except RuntimeError as outer:
        ...     _root_cause_line(outer)
        'server closed the connection'
    """
    chain = [exc]
    while (
        exc.__cause__ is not None or (exc.__context__ is not None and not exc.__suppress_context__)
    ) and len(chain) < 50:
        exc = exc.__cause__ or exc.__context__
        chain.append(exc)
    for cause in reversed(chain):
        lines = [line.strip() for line in str(cause).strip().splitlines() if line.strip()]
        if lines and any(char.isalpha() for char in lines[0]):
            return lines[0]
    return type(chain[-1]).__name__


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """What Ctrl-C (or SIGTERM) says: a sweep's finished trials are stored; a report's server
    says it stopped.

    Example:
        >>> from autotune.report_server import ServerStopped
        >>> interrupted_line(KeyboardInterrupt()), interrupted_line(ServerStopped("stopped"))
        ('interrupted; finished trials are stored', 'stopped')
    """
    from autotune.report_server import ServerStopped

    if isinstance(exc, ServerStopped):
        return str(exc)
    return "interrupted; finished trials are stored"


def one_line_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input ends with one line naming the problem, exit code 2, no traceback."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except _bad_input_types() as exc:
            # one line, and a storage URL's password never reaches a log
            message = escape(redact(str(exc) + _storage_source(exc)).replace("\r", "\\r")
                             .replace("\n", "\\n"))  # fmt: skip
            err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt as exc:
            err.print(interrupted_line(exc))
            raise typer.Exit(130) from None
        except _lost_types() as exc:
            err.print(f"[red]error:[/red] {escape(redact(str(exc)))}", highlight=False,
                      soft_wrap=True)  # fmt: skip
            raise typer.Exit(1) from None
        except (*_storage_failure_types(), *_sqlite_error_types()) as exc:
            from autotune.storage import StorageError, damaged_database, sqlite_damage

            damage = sqlite_damage(exc)
            if damage is not None:  # the file itself: no retry will help
                url = kwargs.get("storage")
                damaged = StorageError(damaged_database(url if isinstance(url, str) else "",
                                                        damage))  # fmt: skip
                line = escape(redact(str(damaged) + _storage_source(damaged)))
                err.print(f"[red]error:[/red] {line}", highlight=False, soft_wrap=True)
                raise typer.Exit(2) from None
            if not isinstance(exc, _storage_failure_types()):
                raise
            first = _root_cause_line(exc)
            if "readonly database" in first or "read-only" in first:  # no retry will help
                why = escape(redact(first))
                err.print(f"[red]error:[/red] the storage cannot be written: {why} (a read-only "
                          "file or folder)", highlight=False, soft_wrap=True)  # fmt: skip
                raise typer.Exit(2) from None
            err.print(f"[red]error:[/red] the storage stopped answering: {escape(redact(first))}; "
                      "the finished trials are stored: run the same command again to resume",
                      highlight=False, soft_wrap=True)  # fmt: skip
            raise typer.Exit(1) from None
        except json.JSONDecodeError as exc:  # Optuna reads every stored attribute as JSON
            err.print(f"[red]error:[/red] a value read from the storage is not JSON ({exc}): a "
                      "damaged record; the storage was not changed", highlight=False,
                      soft_wrap=True)  # fmt: skip
            raise typer.Exit(2) from None
        except OSError as exc:
            # a file that cannot be written or read, a port already taken: the place and why
            place = f"{exc.filename}: " if exc.filename else ""
            message = escape(redact(f"{place}{exc.strerror or exc}"))
            err.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None

    return wrapper
