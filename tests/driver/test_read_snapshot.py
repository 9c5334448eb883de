import threading
import time

import optuna
import pytest

from autotune.driver import read_snapshot
from autotune.driver.read_snapshot import SnapshotStorage, snapshot_reads
from autotune.storage import open_storage


def _sqlite(tmp_path, max_age_s=60.0):
    url = f"sqlite:///{tmp_path / 's.db'}"
    return url, snapshot_reads(open_storage(url, heartbeat_s=5), max_age_s=max_age_s)


def test_reads_between_writes_reach_the_database_once_and_a_write_makes_the_next_fresh(tmp_path):
    _, storage = _sqlite(tmp_path)
    assert isinstance(storage, SnapshotStorage)
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    study.get_trials()
    before = storage.fresh_reads
    for _ in range(5):
        study.get_trials(deepcopy=False)
        study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert storage.fresh_reads == before  # nothing written: the snapshot answered
    trial.set_user_attr("seen", 1)
    (read,) = study.get_trials()
    assert read.user_attrs == {"seen": 1} and storage.fresh_reads == before + 1
    study.tell(trial, 2.0)
    assert [t.state.name for t in study.get_trials()] == ["COMPLETE"]
    assert study.get_trials(states=(optuna.trial.TrialState.RUNNING,)) == []


def test_another_drivers_write_shows_once_the_snapshot_is_older_than_its_age(tmp_path):
    # an age of 2 s: the reads below fall within it even on a loaded 2-core machine
    url, storage = _sqlite(tmp_path, max_age_s=2.0)
    study = optuna.create_study(storage=storage, study_name="s")
    assert study.get_trials() == []
    other = optuna.load_study(study_name="s", storage=open_storage(url))  # another driver
    other.enqueue_trial({"x": 1})
    assert study.get_trials() == []  # read within the age: the snapshot's answer
    time.sleep(2.05)
    assert [t.state.name for t in study.get_trials()] == ["WAITING"]


def test_heartbeats_pass_through_and_memory_storage_is_left_as_it_is(tmp_path):
    _, storage = _sqlite(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s")
    trial = study.ask()
    assert storage.get_heartbeat_interval() == 5
    storage.record_heartbeat(trial._trial_id)
    assert storage._get_stale_trial_ids(study._study_id) == []  # it just beat
    memory = optuna.storages.InMemoryStorage()
    assert snapshot_reads(memory) is memory


def _locked_for(path, seconds: float) -> threading.Thread:
    """Another process's view: a connection holding the file's exclusive lock a while."""
    import sqlite3

    ready = threading.Event()

    def hold() -> None:
        con = sqlite3.connect(path, timeout=0.0, isolation_level=None)
        con.execute("BEGIN EXCLUSIVE")
        ready.set()
        time.sleep(seconds)
        con.execute("COMMIT")
        con.close()

    thread = threading.Thread(target=hold)
    thread.start()
    ready.wait()
    return thread


def _quick_to_give_up(tmp_path) -> tuple[SnapshotStorage, int]:
    # SQLite's busy wait cut to 20 ms, so that a lock held longer refuses the write
    url, quick = f"sqlite:///{tmp_path / 's.db'}", {"connect_args": {"timeout": 0.02}}
    inner = optuna.storages.RDBStorage(url, engine_kwargs=quick)
    storage = SnapshotStorage(optuna.storages.get_storage(inner))
    study = optuna.create_study(storage=storage, study_name="s")
    return storage, study._study_id


def test_a_write_sqlite_refused_as_locked_is_tried_again_until_it_goes_through(tmp_path):
    storage, study_id = _quick_to_give_up(tmp_path)
    holder = _locked_for(tmp_path / "s.db", 0.3)
    storage.set_study_user_attr(study_id, "after", "the lock")  # refused, then tried again
    holder.join()
    assert storage.locked_retries >= 1
    assert storage.get_study_user_attrs(study_id) == {"after": "the lock"}


def test_a_lock_held_past_every_try_fails_the_write(tmp_path, monkeypatch):
    monkeypatch.setattr(read_snapshot, "LOCKED_BACKOFF_S", (0.01, 0.01))
    storage, study_id = _quick_to_give_up(tmp_path)
    holder = _locked_for(tmp_path / "s.db", 1.0)
    with pytest.raises(optuna.exceptions.StorageInternalError) as failed:
        storage.set_study_user_attr(study_id, "never", "stored")
    holder.join()
    assert read_snapshot._sqlite_locked(failed.value)  # Optuna's error, SQLite's cause
    assert storage.locked_retries == 2
    assert storage.get_study_user_attrs(study_id) == {}
