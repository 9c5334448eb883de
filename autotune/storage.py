"""Where studies live: any Optuna storage URL, embedded SQLite by default.

Accepted URLs:
    ``sqlite:///autotune.db`` (default), ``postgresql://user:pass@host/db``,
    ``mysql://...``, ``journal:///path/to/sweeps.log`` (Optuna's journal file, good on NFS),
    ``memory`` (nothing kept).

Example:
    >>> storage = open_storage("memory")
    >>> type(storage).__name__
    'InMemoryStorage'
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import reprlib
import time
import warnings
import weakref
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlparse

import optuna

from autotune.export_text import shown
from autotune.failures import first_line
from autotune.in_memory import in_memory
from autotune.redact import query_secret_holds_at, redact, redact_url

DEFAULT_STORAGE = "sqlite:///autotune.db"
_RDB_SCHEMES = ("sqlite", "postgresql", "postgres", "mysql")


class StorageError(ValueError):
    """A storage URL that cannot be used; the message says why in one line."""


def _driver_hint(scheme: str) -> str:
    return {
        "postgresql": " (install the driver: pip install 'psycopg[binary]')",
        "mysql": " (install the driver: pip install pymysql, and use mysql+pymysql://)",
    }.get(scheme.split("+")[0], "")


def open_storage(
    url: str, heartbeat_s: int | None = None, *, existing: bool = False
) -> optuna.storages.BaseStorage:
    """Open the storage at ``url``, raising :class:`StorageError` with a one-line reason.

    ``heartbeat_s``: for database storages, record trial heartbeats at this interval so that
    a trial whose driver died on another machine is found stale (see
    :mod:`autotune.driver.liveness`); other storages ignore it. ``existing``: a command that
    only reads (``best``, ``trials``, ``export``, ...) creates no file: a mistyped SQLite or
    journal path is an error, not a new empty database; nor does it switch a SQLite file to
    write-ahead logging (:func:`_fast_sqlite`, a sweep's)."""
    if in_memory(url):
        if existing:  # a reader's own storage in memory: no sweep ever wrote to it
            raise StorageError(f"storage {url!r} holds no study: in-memory storage keeps "
                               "nothing between commands (a sweep's studies end with it); "
                               "sweep with a file storage (sqlite:///autotune.db, the "
                               "default) to read them later")  # fmt: skip
        return optuna.storages.InMemoryStorage()
    shown = redact_url(url)  # what messages show: never the password
    try:
        parsed = urlparse(url)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL": an unclosed [
        raise StorageError(f"storage URL {shown!r}: {exc}") from None
    scheme = parsed.scheme.lower()
    if parsed.netloc.count("@") > 1:  # the drivers end the password at its first '@' and
        # take the rest for the host, which their errors then print
        raise StorageError(f"storage URL {shown!r}: its user or password holds a raw '@'; "
                           "write it as %40")  # fmt: skip
    if not scheme:
        raise StorageError(
            f"storage URL {shown!r} has no scheme; try sqlite:///{shown} or journal:///{shown}"
        )
    if query_secret_holds_at(url):
        # the drivers read up to that '@' as user:password and what follows as the host
        raise StorageError(f"storage URL '{redact_url(scheme + '://' + parsed.netloc)}/...': "
                           "its query's password holds a raw '@' (a driver may read up to "
                           "it as user:password, the rest as host); write it as %40")  # fmt: skip
    if scheme == "journal":
        path = Path(parsed.netloc + parsed.path)
        _check_sqlite_query(parsed.query, shown)
        _check_not_folder(path, shown, "journal://", "sweeps.log")
        if not path.parent.is_dir():
            raise StorageError(f"storage URL {shown!r}: directory {path.parent} does not exist")
        if existing and not path.exists():
            raise StorageError(f"storage URL {shown!r}: no journal at {path} (nothing to read)")
        _check_journal(path, shown, writes=not existing)
        backend = optuna.storages.journal.JournalFileBackend(str(path))
        try:
            return optuna.storages.JournalStorage(backend)  # replays the file's records
        except Exception as exc:  # noqa: BLE001 - Optuna asserts on a record it cannot apply
            why = "" if isinstance(exc, AssertionError) else f": {first_line(exc)}"
            raise StorageError(f"storage URL {shown!r}: Optuna cannot replay the journal "
                               f"{path} (a line that is no record, or a record it cannot "
                               f"apply{why})") from None  # fmt: skip
    if scheme.split("+")[0] not in _RDB_SCHEMES:
        raise StorageError(
            f"storage URL {shown!r}: unsupported scheme {scheme!r} "
            "(use sqlite://, postgresql://, mysql://, journal:// or memory)"
        )
    if scheme.split("+")[0] == "sqlite":
        path = sqlite_path(url)
        if path is None or str(path) in ("", ".", ":memory:"):
            # in memory, each of the pool's connections would open a database of its own
            raise StorageError(f"storage URL {shown!r} names no database file; use "
                               "sqlite:///FILE.db, or memory for a run's own")  # fmt: skip
        _check_sqlite_query(parsed.query, shown)
        _check_not_folder(path, shown, "sqlite:///", "autotune.db")
        if not path.parent.is_dir():
            raise StorageError(f"storage URL {shown!r}: directory {path.parent} does not exist")
        if existing and not path.exists():
            raise StorageError(f"storage URL {shown!r}: no database at {path} (nothing to read)")
    if existing:  # a reader creates no schema in a database that holds none
        _check_optuna_schema(url, scheme, shown)
    heartbeat: dict[str, int] = {}
    if heartbeat_s is not None:
        heartbeat = {"heartbeat_interval": heartbeat_s, "grace_period": 4 * heartbeat_s}
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = optuna.storages.RDBStorage(
                    url,
                    skip_compatibility_check=False,
                    engine_kwargs=_engine_kwargs(scheme),
                    **heartbeat,
                )
            break
        except ImportError as exc:
            raise StorageError(f"storage URL {shown!r}: {exc}{_driver_hint(scheme)}") from None
        except Exception as exc:  # noqa: BLE001 - sqlalchemy raises many kinds
            if _is_creation_race(exc) and attempt + 1 < _CREATE_ATTEMPTS:
                time.sleep(0.2 * (attempt + 1))  # another process is creating the schema
                continue
            damage = sqlite_damage(exc)
            if damage is not None:
                raise StorageError(damaged_database(url, damage)) from None
            first = first_line(exc)
            raise StorageError(f"storage URL {shown!r}: cannot connect: {redact(first)}") from None
    if scheme.split("+")[0] == "sqlite" and not existing:  # a reader keeps the journal mode
        _fast_sqlite(storage)
    # closed at exit: a SQLite file's last connection to close checkpoints its log and removes
    # the -wal and -shm files; a server's sees its session end (a command ends with os._exit,
    # before garbage collection would close them: autotune.process_end)
    atexit.register(_dispose, weakref.ref(storage.engine))
    return storage


def _check_not_folder(path: Path, shown: str, prefix: str, example: str) -> None:
    """A journal's or a SQLite database's path names a file, not a folder (Optuna's error
    for a folder spoke of a journal line it cannot replay, SQLite's of a file it cannot open).

    Raises:
        StorageError: naming the folder and a file in it to name instead.

    Example:
        >>> try:
        ...     _check_not_folder(Path("/tmp"), "journal:///tmp", "journal://", "sweeps.log")
        ... except StorageError as exc:
        ...     print(exc)
        storage URL 'journal:///tmp': /tmp is a folder; name a file (in it: \
journal:///tmp/sweeps.log)
    """
    if path.is_dir() and str(path) not in ("", "."):
        inside = prefix + str(path / example)  # (journal:// and sqlite:/// take it as it is)
        raise StorageError(f"storage URL {shown!r}: {path} is a folder; name a file (in it: "
                           f"{inside})")  # fmt: skip


def sqlite_path(url: str) -> Path | None:
    """The database file of a ``sqlite://`` (or ``sqlite+DRIVER://``) URL; None for one in
    memory or without a path.

    Example:
        >>> sqlite_path("sqlite:///a.db"), sqlite_path("sqlite+pysqlite:////tmp/b.db?timeout=5")
        (PosixPath('a.db'), PosixPath('/tmp/b.db'))
        >>> sqlite_path("sqlite://") is None
        True
    """
    rest = url.split("://", 1)[1] if "://" in url else ""
    if not rest.startswith("/"):
        return None
    return Path(rest[1:].split("?", 1)[0])


def storage_files(url: str) -> list[Path]:
    """The files a storage URL keeps its studies in (a SQLite database with its write-ahead
    log and journal, or a journal file and its lock); none for a server or memory.

    Example:
        >>> [p.name for p in storage_files("sqlite:///runs/a.db")]
        ['a.db', 'a.db-wal', 'a.db-shm', 'a.db-journal']
        >>> storage_files("postgresql://u@h/db")
        []
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme.split("+")[0] == "sqlite":
        path = sqlite_path(url)
        suffixes = ("", "-wal", "-shm", "-journal")
        return [Path(f"{path}{suffix}") for suffix in suffixes] if path else []
    if scheme == "journal":
        path = Path(url.split("://", 1)[1])
        return [path, Path(f"{path}.lock")]
    return []


def _check_journal(path: Path, shown: str, writes: bool = False) -> None:
    """A journal file that exists begins with a journal record (a JSON object with an
    ``op_code``): another kind of file (a SQLite database, text) is refused, not parsed. One
    that a command ``writes`` ends its last record with a newline: after a cut-off write,
    Optuna's next record would be joined to the partial one and both lost (``tune`` failed on
    Optuna's "Should not reach" and appended to it still), and with a whole record: Optuna
    passes over a last line that is no JSON, but not one with records after it (``tune``
    appended its study's record after such a line, then failed, and every command after it
    found the journal unreadable); a reader passes either over.

    Raises:
        StorageError: naming the file.
    """
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb") as file:
        first = file.readline(1 << 20)
        last = _last_line(file) if writes else b""
    if not _is_record(first):
        raise StorageError(f"storage URL {shown!r}: {path} is not an Optuna journal (its first "
                           "line is not a journal record)")  # fmt: skip
    if writes and not last.endswith(b"\n"):
        raise StorageError(f"storage URL {shown!r}: the journal {path} ends in a cut-off record "
                           "(a write was interrupted), which a new record would be joined to: "
                           "remove its partial last line (after the last newline) to go "
                           "on")  # fmt: skip
    if writes and not _is_record(last):
        raise StorageError(f"storage URL {shown!r}: the journal {path} ends in a damaged record "
                           "(its last line is no journal record), which Optuna passes over "
                           "only while it is last: a new record after it would leave the "
                           "journal unreadable; remove its last line to go on")  # fmt: skip


def _is_record(line: bytes) -> bool:
    """Whether ``line`` is a journal record: a JSON object with an ``op_code``.

    Example:
        >>> _is_record(b'{"op_code": 0}\\n'), _is_record(b'{"op_code": 5, "bo\\n')
        (True, False)
    """
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and "op_code" in record


def _last_line(file: BinaryIO) -> bytes:
    """The last line of the open ``file``, its newline included (none after a cut-off
    write); read back from the end a block at a time, so a long journal is not read whole."""
    start = file.seek(0, os.SEEK_END)
    tail = b""
    while start > 0:
        block = min(start, 1 << 16)
        start -= block
        file.seek(start)
        tail = file.read(block) + tail
        cut = tail.rfind(b"\n", 0, len(tail) - 1)  # the newline before the last line
        if cut >= 0:
            return tail[cut + 1 :]
    return tail


#: what SQLAlchemy's pysqlite dialect takes from a sqlite:// URL's query (it drops the rest
#: with a warning); ``uri`` is left out: it makes the path a file: URI that no check here reads
_SQLITE_QUERY_KEYS = ("timeout", "isolation_level", "detect_types", "check_same_thread",
                      "cached_statements")  # fmt: skip


def _check_sqlite_query(query: str, shown: str) -> None:
    """A sqlite:// URL's ``?key=value`` options are ones SQLite's driver takes.

    Example:
        >>> _check_sqlite_query("timeout=30", "sqlite:///a.db?timeout=30")
        >>> try:
        ...     _check_sqlite_query("mode=ro", "sqlite:///a.db?mode=ro")
        ... except StorageError as exc:
        ...     print(exc)
        storage URL 'sqlite:///a.db?mode=ro': SQLite takes no 'mode' option here (it takes \
timeout, isolation_level, detect_types, check_same_thread, cached_statements); the commands \
that read (best, trials, export, report, ...) write nothing, so it is not needed
    """
    from urllib.parse import parse_qsl

    for key, _ in parse_qsl(query, keep_blank_values=True):
        if key not in _SQLITE_QUERY_KEYS:
            why = ("; the commands that read (best, trials, export, report, ...) write nothing, "
                   "so it is not needed" if key == "mode" else "")  # fmt: skip
            raise StorageError(f"storage URL {shown!r}: SQLite takes no {key!r} option here "
                               f"(it takes {', '.join(_SQLITE_QUERY_KEYS)}){why}")  # fmt: skip


def _check_optuna_schema(url: str, scheme: str, shown: str) -> None:
    """The database at ``url`` holds Optuna's tables (the commands that only read create none
    in an empty file or in another program's database).

    Raises:
        StorageError: a database without them, or one that cannot be reached.
    """
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url, **_engine_kwargs(scheme))
    except ImportError as exc:
        raise StorageError(f"storage URL {shown!r}: {exc}{_driver_hint(scheme)}") from None
    except Exception as exc:  # noqa: BLE001 - a port that is no number, an unknown driver
        raise StorageError(f"storage URL {shown!r}: {redact(first_line(exc))}") from None
    try:
        tables = set(sqlalchemy.inspect(engine).get_table_names())
    except Exception as exc:  # noqa: BLE001 - sqlalchemy raises many kinds
        damage = sqlite_damage(exc)
        if damage is not None:
            raise StorageError(damaged_database(url, damage)) from None
        first = first_line(exc)
        why = _read_only_wal(url) if scheme.split("+")[0] == "sqlite" else ""
        raise StorageError(f"storage URL {shown!r}: cannot connect: {redact(first)}{why}"
                           ) from None  # fmt: skip
    finally:
        engine.dispose()
    if not tables >= _OPTUNA_TABLES:  # another program's "studies" table is not Optuna's
        raise StorageError(f"storage URL {shown!r}: the database holds no autotune (Optuna) "
                           "studies; nothing to read")  # fmt: skip


#: SQLite's primary result codes for a file it cannot read as a database: SQLITE_CORRUPT
#: ("database disk image is malformed") and SQLITE_NOTADB ("file is not a database")
_SQLITE_DAMAGE_CODES = {11: "SQLITE_CORRUPT", 26: "SQLITE_NOTADB"}
_SQLITE_DAMAGE_TEXTS = ("database disk image is malformed", "file is not a database")


def sqlite_damage(exc: BaseException) -> str | None:
    """SQLite's words where ``exc`` (or an exception it wraps: Optuna's commit error,
    SQLAlchemy's) is SQLite finding its file damaged or no database, which no retry mends;
    None for anything else (a lock held too long, a server that went away).

    Example:
        >>> import sqlite3
        >>> try:
        ...     try:
        ...         sqlite3.connect(":memory:").execute("select * from nosuch")
        ...     except sqlite3.Error as inner:
        ...         raise RuntimeError("commit failed") from inner
        ... except RuntimeError as outer:
        ...     print(sqlite_damage(outer))
        None
    """
    import sqlite3

    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 50:
        if isinstance(cause, sqlite3.DatabaseError):
            code = getattr(cause, "sqlite_errorcode", None)  # Python 3.11+; extended codes too
            text = first_line(cause)
            if (code is not None and code & 0xFF in _SQLITE_DAMAGE_CODES) or any(
                sign in text for sign in _SQLITE_DAMAGE_TEXTS
            ):
                return text
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
        seen += 1
    return None


def damaged_database(url: str, why: str) -> str:
    """The one-line refusal of a SQLite file that SQLite finds damaged (``why``, its words):
    the file by name, the URL without its password, and that a retry will not help.

    Example:
        >>> damaged_database("sqlite:///runs/a.db", "database disk image is malformed")
        "storage URL 'sqlite:///runs/a.db': the database runs/a.db is damaged (SQLite: \
database disk image is malformed); no command can read it and a retry will not help: restore \
it from a copy"
    """
    path = sqlite_path(url)
    where = f"storage URL {redact_url(url)!r}: " if url else ""
    place = f"the database {path}" if path is not None else "the SQLite database"
    what = "is damaged or no SQLite database" if "not a database" in why else "is damaged"
    return (
        f"{where}{place} {what} (SQLite: {why}); no command can read it and a retry will not "
        "help: restore it from a copy"
    )


def _read_only_wal(url: str) -> str:
    """Why SQLite cannot open a database it can read: the file is in write-ahead-log mode (as
    a sweep leaves it) and its folder cannot be written, so the ``-shm`` file beside it cannot
    be made; '' where that is not the case.

    Example:
        >>> _read_only_wal("sqlite:////nonexistent/a.db")
        ''
    """
    path = sqlite_path(url)
    try:
        with open(path, "rb") as file:  # type: ignore[arg-type]
            header = file.read(20)
    except (OSError, TypeError):
        return ""
    in_wal = len(header) == 20 and header[18] == 2 and header[19] == 2  # read/write versions
    if not in_wal or os.access(path.parent, os.W_OK):
        return ""
    return (
        f" ({path.name} is in write-ahead-log mode and its folder {path.parent} is "
        "read-only: SQLite cannot make the -shm file it reads through; copy the file "
        "to a folder that can be written)"
    )


#: tables every Optuna database has (a reader checks them before reading)
_OPTUNA_TABLES = {"studies", "trials", "version_info", "study_directions"}
_CREATE_ATTEMPTS = 8
#: seconds a SQLite write waits for another process's lock before it fails
SQLITE_BUSY_TIMEOUT_S = 60


def _engine_kwargs(scheme: str) -> dict:
    """SQLAlchemy engine options: SQLite waits out another writer's lock for a minute (its
    default, 5 s, fails a sweep while a reader such as a report holds the file)."""
    if scheme.split("+")[0] == "sqlite":
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}
    return {"pool_pre_ping": True}  # a server connection that dropped is replaced, not used


def _is_creation_race(exc: Exception) -> bool:
    """Two processes opening a new database at once: one loses the schema's creation (an
    integrity error, a table that already exists) or finds it locked; it tries again."""
    text = str(exc)
    signs = ("alembic_version", "already exists", "database is locked", "UNIQUE constraint")
    return any(sign in text for sign in signs)


def _fast_sqlite(storage: optuna.storages.RDBStorage) -> None:
    """Write-ahead logging, and fsync at checkpoints rather than at every commit.

    A trial makes a dozen small commits (parameters, attributes, state); with the defaults
    each one syncs the disk. In WAL mode with synchronous=NORMAL a killed process still loses
    no committed trial (only a power cut can drop the last commits), and readers, such as
    ``autotune trials`` during a sweep, do not block the writer.
    """
    import sqlalchemy

    @sqlalchemy.event.listens_for(storage.engine, "connect")
    def _pragmas(connection, _record) -> None:  # noqa: ANN001 - SQLAlchemy's DBAPI objects
        cursor = connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    storage.engine.dispose()  # connections opened before the listener get the pragmas too


def _dispose(engine_ref: weakref.ref) -> None:
    """Close the pooled connections of the engine ``engine_ref`` names, if it lives."""
    engine = engine_ref()
    if engine is not None:
        with contextlib.suppress(Exception):
            engine.dispose()


def study_names(storage: optuna.storages.BaseStorage) -> list[str]:
    """Names of the studies in ``storage``, oldest first (no trial read: a study summary
    holds its trials' count, for which Optuna reads them all)."""
    return optuna.study.get_all_study_names(storage)


#: the longest study name Optuna's database tables hold (a VARCHAR(512) on PostgreSQL and
#: MySQL; SQLite took longer ones, which then would not move to a server)
LONGEST_STUDY_NAME = 512


def study_name_fault(name: str) -> str | None:
    """What makes ``name`` no study name (blank, not UTF-8, too long), as ``--study``'s
    one-line refusal; None for a good name.

    Example:
        >>> study_name_fault("mm-8192"), study_name_fault(" ")
        (None, "--study ' ': a blank name; name a study or leave --study out")
        >>> study_name_fault("s" * 513)
        "--study 'ssssssssssss...sssssssssssss': a name of 513 characters; at most 512"
    """
    fault = None
    if not name.strip():
        fault = "a blank name; name a study or leave --study out"
    elif len(name) > LONGEST_STUDY_NAME:
        fault = f"a name of {len(name)} characters; at most {LONGEST_STUDY_NAME}"
    else:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # bytes the shell passed through that are no UTF-8
            fault = "not valid UTF-8"
    return None if fault is None else f"--study {reprlib.repr(name)}: {fault}"


def load_study(storage: optuna.storages.BaseStorage, name: str | None) -> optuna.Study:
    """Load study ``name``, or the most recently created one when ``name`` is None (unless it
    is one group of a search by group's: :func:`autotune.group_studies.refuse_one_group`)."""
    fault = None if name is None else study_name_fault(name)
    if fault is not None:
        raise StorageError(fault)
    names = study_names(storage)
    if not names:
        raise StorageError("the storage holds no study yet; run `autotune tune` first")
    if name is None:
        from autotune.group_studies import refuse_one_group

        name = names[-1]
        refuse_one_group(storage, name, names)  # one group is not a search by group's answer
    elif name not in names:
        stored = ", ".join(shown(n) for n in names)  # escaped, as `autotune studies` lists them
        raise StorageError(f"no study named {name!r}; stored studies: {stored}")
    return optuna.load_study(study_name=name, storage=storage)
