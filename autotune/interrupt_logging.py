"""A Ctrl-C in the middle of a SQLite read (about one in ten, reading a study) made
SQLAlchemy log ``Error closing cursor`` with a traceback before the command's one line
``interrupted``: the interrupted fetch closes its cursor on a connection already closed, and
the pool's logger reports the ``sqlite3.ProgrammingError`` that raises. The CLI installs
:class:`InterruptedCursorClose` on SQLAlchemy's pool loggers: that one message is dropped
where it comes of an interrupt (a ``KeyboardInterrupt``, which SIGTERM and SIGHUP raise too,
in its exception's chain); every other record, that message outside an interrupt included,
is logged as before.

Example:
    >>> quiet_interrupted_cursor_close()
    >>> import logging
    >>> any(isinstance(f, InterruptedCursorClose)
    ...     for f in logging.getLogger("sqlalchemy.pool.impl.QueuePool").filters)
    True
"""

from __future__ import annotations

import logging

#: what SQLAlchemy's ``Connection._safe_close_cursor`` logs when closing a cursor fails
CURSOR_CLOSE_MESSAGE = "Error closing cursor"


def _of_interrupt(exc: BaseException | None) -> bool:
    """Whether ``exc`` was raised while a ``KeyboardInterrupt`` was handled (its cause or
    context chain holds one)."""
    seen = 0
    while exc is not None and seen < 50:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


class InterruptedCursorClose(logging.Filter):
    """Drops SQLAlchemy's ``Error closing cursor`` record of a cursor closed by an
    interrupt; passes every other record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != CURSOR_CLOSE_MESSAGE or not record.exc_info:
            return True
        return not _of_interrupt(record.exc_info[1])


def _pool_logger_names() -> set[str]:
    """The loggers SQLAlchemy's pools log to (one per pool class, ``sqlalchemy.pool.impl.
    QueuePool``, ...): a filter on the ``sqlalchemy`` logger itself is not consulted for its
    children's records."""
    from sqlalchemy.pool import Pool

    names, classes = set(), [Pool]
    while classes:
        cls = classes.pop()
        classes += cls.__subclasses__()
        names.add(
            getattr(cls, "_sqla_logger_namespace", None) or f"{cls.__module__}.{cls.__name__}"
        )
    return names


def quiet_interrupted_cursor_close() -> None:
    """Install :class:`InterruptedCursorClose` on SQLAlchemy's pool loggers (once)."""
    for name in sorted(_pool_logger_names()):
        logger = logging.getLogger(name)
        if not any(isinstance(f, InterruptedCursorClose) for f in logger.filters):
            logger.addFilter(InterruptedCursorClose())
