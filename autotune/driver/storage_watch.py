"""Notice that the file a sweep's study lives in was deleted or replaced while the sweep runs.

A SQLite database deleted mid-sweep is not an error to SQLite: the open connection goes on
writing into the deleted file, the sweep reports its winner, and every trial is gone once the
process ends. A deleted journal file is worse: the next write starts a new file that holds
only the trials after it, which Optuna cannot read back. :class:`StorageWatch` looks at the
file before every step of the driver; when it is gone or another file stands in its place,
the sweep stops with :class:`StorageLost`, after saving what the open storage still holds
beside it (``autotune.db.recovered``): SQLite's ``VACUUM INTO`` from the open connection, or
for a journal, its bytes read through a descriptor held open since the sweep began.

Example:
    >>> import os, tempfile
    >>> from autotune.storage import open_storage
    >>> folder = tempfile.mkdtemp()
    >>> url = f"sqlite:///{folder}/a.db"
    >>> storage = open_storage(url)
    >>> _ = optuna.create_study(storage=storage, study_name="s").ask()
    >>> watch = StorageWatch(url, storage)
    >>> watch.check()  # still there: nothing happens
    >>> os.remove(f"{folder}/a.db")
    >>> try:
    ...     watch.check()
    ... except StorageLost as lost:
    ...     print(str(lost).replace(folder, "DIR"))
    the study's database DIR/a.db was deleted during the sweep; the sweep stopped; what it \
stored is saved in DIR/a.db.recovered (move it back to DIR/a.db to resume)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import optuna

from autotune.failures import first_line
from autotune.storage import sqlite_path

#: The name a salvaged copy takes beside the lost file (then .recovered-2, -3, ...).
RECOVERED_SUFFIX = ".recovered"


class StorageLost(RuntimeError):
    """The study's file went away mid-sweep; the message says where, and where its trials
    were saved (one line)."""


class StorageWatch:
    """The identity (device, inode) of a file storage's file, checked for change.

    Storages with no file of their own (a database server, memory) are never lost here."""

    def __init__(self, url: str, storage: optuna.storages.BaseStorage) -> None:
        self.url, self.storage = url, storage
        self.kind, self.path = _file_of(url)
        self.identity: tuple[int, int] | None = None
        self.lost = False  # reported once: the sweep's own close must not raise again
        # a journal's records stay readable through an open descriptor after its deletion
        # (never one on a SQLite file: closing it would drop SQLite's locks on the file)
        self._journal_fd: int | None = None
        self._take_identity()

    def _take_identity(self) -> None:
        """Note the file's identity (when it exists: a journal is made by its first write)."""
        if self.path is None or self.identity is not None:
            return
        self.identity = _identity(self.path)
        if self.kind == "journal" and self.identity is not None:
            try:
                self._journal_fd = os.open(self.path, os.O_RDONLY)
            except OSError:
                self.identity = None

    def check(self) -> None:
        """Raise :class:`StorageLost` when the file is gone or replaced (after saving the
        study's trials beside it); else nothing."""
        if self.identity is None:
            self._take_identity()
        if self.identity is None or self.path is None or self.lost:
            return
        now = _identity(self.path)
        if now == self.identity:
            return
        what = "deleted" if now is None else "replaced by another file"
        self.lost = True
        saved = self._salvage()
        raise StorageLost(f"the study's {self.kind} {self.path} was {what} during the sweep; "
                          f"the sweep stopped; {saved}")  # fmt: skip

    def close(self) -> None:
        """Let go of the journal's descriptor (a SQLite file holds none)."""
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None

    __del__ = close

    def let_go(self) -> None:
        """After a loss: close the connections to the deleted database, and remove the
        write-ahead log and index it leaves by name, which would otherwise be read as the log
        of the copy moved back in its place (and break it)."""
        self.close()
        if self.kind != "database" or self.path is None:
            return
        try:
            _engine(self.storage).dispose()
        except Exception:  # noqa: BLE001 - nothing to close
            return
        if not self.path.exists():  # a file put in its place keeps its own log
            for suffix in ("-wal", "-shm", "-journal"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _salvage(self) -> str:
        """Save what the open storage holds next to the lost file; say where (or why not)."""
        assert self.path is not None
        target = _free_name(self.path)
        try:
            if self.kind == "database":
                _vacuum_into(self.storage, target)
            else:
                _copy_journal(self._journal_fd, target)
        except Exception as exc:  # noqa: BLE001 - the stop is reported either way
            Path(target).unlink(missing_ok=True)
            return f"its trials could not be saved ({first_line(exc)})"
        return f"what it stored is saved in {target} (move it back to {self.path} to resume)"


def _file_of(url: str) -> tuple[str, Path | None]:
    """("database", the SQLite file) or ("journal", the journal file), made absolute (a
    relative path names the same file after a change of folder); no path otherwise."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme.split("+")[0] == "sqlite":
        path = sqlite_path(url)
        return "database", None if path is None or str(path) == ":memory:" else path.absolute()
    if scheme == "journal":
        return "journal", Path(url.split("://", 1)[1]).absolute()
    return "", None


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_dev, stat.st_ino


def _free_name(path: Path) -> Path:
    candidate = Path(f"{path}{RECOVERED_SUFFIX}")
    n = 2
    while candidate.exists():
        candidate = Path(f"{path}{RECOVERED_SUFFIX}-{n}")
        n += 1
    return candidate


def _engine(storage: Any) -> Any:
    """The SQLAlchemy engine under the driver's storage wrappers (snapshot, Optuna's cache)."""
    for _ in range(5):
        if hasattr(storage, "engine"):
            return storage.engine
        storage = getattr(storage, "_inner", None) or getattr(storage, "_backend", None)
    raise RuntimeError("no database engine under the storage")


def _vacuum_into(storage: Any, target: Path) -> None:
    """Copy the database the open connection still reads (the deleted file) to ``target``;
    a new connection (none was left to reuse) would find only an empty file: refused."""
    engine = _engine(storage)
    with engine.connect() as connection:
        tables = connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()
        if not tables:
            raise RuntimeError("no open connection still reads the deleted file")
        connection.exec_driver_sql("VACUUM INTO ?", (str(target),))


def _copy_journal(fd: int | None, target: Path) -> None:
    """Write the journal's records, as far as they reached its deleted file, to ``target``."""
    if fd is None:
        raise RuntimeError("the journal was not open")
    with open(target, "xb") as out:
        offset = 0
        while chunk := os.pread(fd, 1 << 20, offset):
            out.write(chunk)
            offset += len(chunk)
