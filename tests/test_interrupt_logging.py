"""SQLAlchemy's ``Error closing cursor`` of a read cut short by Ctrl-C is not logged; the
same failure outside an interrupt, and every other error, still is."""

import logging

import sqlalchemy

from autotune.interrupt_logging import quiet_interrupted_cursor_close


def _close_a_dead_cursor(url: str, interrupted: bool) -> None:
    """SQLAlchemy's own path: a cursor closed on a connection already closed (what an
    interrupted fetch leaves), while a ``KeyboardInterrupt`` is handled or not."""
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        cursor = raw.cursor()
        raw.close()
        if not interrupted:
            conn._safe_close_cursor(cursor)
            return
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            conn._safe_close_cursor(cursor)
    engine.dispose()


def test_an_interrupted_reads_cursor_close_error_is_not_logged_and_others_are(tmp_path, caplog):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    caplog.set_level(logging.WARNING)
    quiet_interrupted_cursor_close()
    _close_a_dead_cursor(url, interrupted=True)
    assert [r for r in caplog.records if r.getMessage() == "Error closing cursor"] == []
    _close_a_dead_cursor(url, interrupted=False)  # no interrupt: a real fault, logged
    said = [r for r in caplog.records if r.getMessage() == "Error closing cursor"]
    assert len(said) == 1 and said[0].name.startswith("sqlalchemy.pool")
    logging.getLogger("sqlalchemy.pool.impl.QueuePool").error("another error")
    assert caplog.records[-1].getMessage() == "another error"
