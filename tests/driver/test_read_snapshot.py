import random
import threading
import time

import optuna
import pytest

from autotune.driver import read_snapshot
from autotune.driver.read_snapshot import SnapshotStorage, snapshot_reads
from autotune.driver.trial_attrs import WORKER
from autotune.storage import open_storage


def _sqlite(tmp_path, max_age_s=60.0):
    url = f"sqlite:///{tmp_path / 's.db'}"
    return url, snapshot_reads(open_storage(url, heartbeat_s=5), max_age_s=max_age_s)


def test_reads_between_writes_reach_the_database_once_and_a_new_trial_is_not_read_back(
    tmp_path, monkeypatch
):
    _, storage = _sqlite(tmp_path)
    assert isinstance(storage, SnapshotStorage)
    study = optuna.create_study(storage=storage, study_name="s")
    study.get_trials()
    before = storage.fresh_reads
    backend_reads = []
    backend = storage._inner._backend
    monkeypatch.setattr(backend, "get_trial", lambda *a: backend_reads.append(a))
    trial = study.ask()  # created, appended to the snapshot as the insert returned it
    assert backend_reads == []  # no read-back of the new trial
    monkeypatch.undo()
    for _ in range(5):
        study.get_trials(deepcopy=False)
        study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert storage.fresh_reads == before  # the new trial came with its creation
    assert [t.number for t in study.get_trials()] == [trial.number]
    study.set_user_attr("note", "a study's attribute")  # not a trial's: the next read is fresh
    study.get_trials()
    assert storage.fresh_reads == before + 1


def _every_own_write(study: optuna.Study) -> None:
    trial = study.ask()
    trial.suggest_int("x", 0, 8, log=False)
    trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    trial.suggest_categorical("kind", ["a", None, 2])
    trial.set_user_attr("metrics", {"tflops": 1.5, "shape": (1, 2)})
    study._storage.set_trial_system_attr(trial._trial_id, "constraints", [0.0])
    trial.report(0.5, step=3)
    study.tell(trial, 2.0)
    other = study.ask()
    study.tell(other, state=optuna.trial.TrialState.FAIL)


def test_own_writes_are_taken_into_the_snapshot_as_the_database_stores_them(tmp_path):
    url, storage = _sqlite(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s")
    study.get_trials()
    before = storage.fresh_reads
    _every_own_write(study)
    snapshot = study.get_trials()
    assert storage.fresh_reads == before  # every write taken in: no read reached the database
    stored = optuna.load_study(study_name="s", storage=open_storage(url)).get_trials()
    assert len(snapshot) == len(stored) == 2
    for mine, theirs in zip(snapshot, stored, strict=True):
        assert mine.state == theirs.state and mine.values == theirs.values
        assert mine.params == theirs.params and mine.distributions == theirs.distributions
        assert mine.user_attrs == theirs.user_attrs  # a tuple stored as JSON reads as a list
        assert mine.system_attrs == theirs.system_attrs
        assert mine.intermediate_values == theirs.intermediate_values
        assert (mine.datetime_complete is None) == (theirs.datetime_complete is None)


def test_expire_makes_the_next_read_fresh(tmp_path):
    url, storage = _sqlite(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s")
    study.get_trials()
    other = optuna.load_study(study_name="s", storage=open_storage(url))  # another driver
    other.enqueue_trial({"x": 1})
    assert study.get_trials() == []  # within the age: the snapshot's answer
    storage.expire()
    assert [t.state.name for t in study.get_trials()] == ["WAITING"]


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


def test_a_trial_another_driver_closed_meanwhile_is_not_told_over_its_end(tmp_path):
    """The snapshot still holds the trial as running; the database refuses the tell, and the
    book records the trial as closed elsewhere (what the other driver stored stands)."""
    from autotune.driver import SweepSettings
    from autotune.driver.trial_book import Asked, TrialBook
    from autotune.failures import TrialStatus
    from autotune.measurement import Measurement
    from autotune.runners.base import TrialResult
    from autotune.space import Param, Space

    url, storage = _sqlite(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    settings = SweepSettings(
        workload="faults", problem={}, space=Space("d", [Param("x", "int", low=0, high=3)]),
        objectives={"score": "maximize"}, storage=url,
    )  # fmt: skip
    book = TrialBook(study, settings, random.Random(0))
    trial = study.ask()
    asked = Asked(trial, {"x": trial.suggest_int("x", 0, 3)})
    study.get_trials()  # the snapshot: running
    reaper = open_storage(url)  # another driver found it stale
    reaper.set_trial_state_values(trial._trial_id, optuna.trial.TrialState.FAIL)
    measured = TrialResult(TrialStatus.OK, "", Measurement(values={"score": 1.0}), 0.1)
    record = book.tell_result(asked, measured)
    assert record.status == "interrupted" and "closed by another driver" in record.reason
    (stored,) = optuna.load_study(study_name="s", storage=open_storage(url)).trials
    assert stored.state.name == "FAIL"


def test_a_lone_drivers_sweep_reads_its_study_less_than_once_a_trial(tmp_path, monkeypatch):
    """Its own writes keep the snapshot current, and the twin check of a lone driver is one
    query that finds nothing changed elsewhere, so the reads left are those of a snapshot past
    its age. Before: the twin check's fresh read every trial; before that, 4-5 reads a
    trial."""
    import os

    from autotune.driver import Sweep, SweepSettings, quiet_check
    from autotune.space import load_space

    answers = []
    quiet_since = quiet_check.quiet_since

    def counted(*args, **kwargs):
        answers.append(quiet_since(*args, **kwargs))
        return answers[-1]

    monkeypatch.setattr(quiet_check, "quiet_since", counted)
    data = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "data")
    params = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]
    settings = SweepSettings(
        workload="replay", space=load_space(os.path.join(data, "matmul_tiled_grid.yaml")),
        problem={"table": os.path.join(data, "matmul_4096_h200.csv"), "params": params,
                 "metric": "tflops", "M": 4096, "N": 4096, "K": 4096},
        objectives={"tflops": "maximize"}, n_trials=20, seed=0, executor="inline",
        storage=f"sqlite:///{tmp_path / 's.db'}", warm_start="off",
        device={"type": "cuda", "max_shared_memory": 232448, "name": "NVIDIA H200"},
    )  # fmt: skip
    study = Sweep(settings).run().study
    storage = study._storage
    assert isinstance(storage, SnapshotStorage)
    launched = [t for t in study.trials if WORKER in t.user_attrs]
    # every launched trial's twin check (and the repeats') was answered by the query alone
    assert len(answers) >= len(launched) >= 20 and all(answers), answers
    assert storage.fresh_reads < len(study.trials), (storage.fresh_reads, len(study.trials))


def test_a_lone_driver_is_told_in_one_query_that_nothing_changed_elsewhere(tmp_path):
    """The twin check's shortcut: with every running trial this driver's own, the snapshot
    answers as a fresh read would; another driver's running or new trial, or an unfinished
    one in the snapshot, sends it back to a fresh read."""
    url, storage = _sqlite(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s")
    mine = study.ask()
    study.get_trials()
    assert storage.quiet_elsewhere(study._study_id, {mine.number})
    other = optuna.load_study(study_name="s", storage=open_storage(url))  # another driver
    theirs = other.ask()
    # the snapshot (age 60 s) does not hold their trial, the query sees it
    assert [t.number for t in study.get_trials()] == [mine.number]
    assert not storage.quiet_elsewhere(study._study_id, {mine.number})
    other.tell(theirs, 1.0)  # finished after the snapshot was read: still a change to see
    assert not storage.quiet_elsewhere(study._study_id, {mine.number})
    storage.expire()
    study.get_trials()  # their trial, finished, now in the snapshot: nothing left to change
    assert storage.quiet_elsewhere(study._study_id, {mine.number})
    other.enqueue_trial({"x": 1})
    storage.expire()
    study.get_trials()  # a waiting trial in the snapshot: another driver may take it
    assert not storage.quiet_elsewhere(study._study_id, {mine.number})
    storage.expire()
    assert not storage.quiet_elsewhere(study._study_id, {mine.number})  # no snapshot held


class _PublicOnly:
    """Optuna's cached RDB storage through its public methods only: what an Optuna release
    that renamed the internals used by write_batch, quiet_check and _cached_new_trial (its RDB
    session, table models and trial cache) would leave them."""

    HIDDEN = frozenset({"_backend", "scoped_session", "_set_trial_attr_without_commit",
                        "check_trial_is_updatable", "_trial_id_to_study_id_and_number",
                        "_studies"})  # fmt: skip

    def __init__(self, storage: optuna.storages.BaseStorage) -> None:
        self._wrapped = storage
        self.calls: list[str] = []  # the public methods called, in order

    def __getattr__(self, name: str):
        if name in self.HIDDEN:
            raise AttributeError(name)
        attr = getattr(self._wrapped, name)
        if not callable(attr):
            return attr

        def called(*args, **kwargs):
            self.calls.append(name)
            return attr(*args, **kwargs)

        return called


def test_without_optunas_internals_every_write_still_lands_by_the_public_path(tmp_path):
    # the fast paths fall back to Optuna's public storage API (one write at a time, a new
    # trial read back, a fresh read where one query would have said nothing changed): slower,
    # and the study the same
    url = f"sqlite:///{tmp_path / 's.db'}"
    open_storage(url)  # the schema
    inner = _PublicOnly(optuna.storages.get_storage(url))
    storage = SnapshotStorage(inner)
    study = optuna.create_study(storage=storage, study_name="s")
    study.get_trials()
    with read_snapshot.batched_writes(study):  # one transaction where internals allow it
        _every_own_write(study)
    snapshot = study.get_trials()
    assert not storage.quiet_elsewhere(study._study_id, mine={0, 1})  # cannot tell: read
    # each write went by itself, and each new trial was read back after its creation
    assert inner.calls.count("set_trial_param") == 3
    assert inner.calls.count("set_trial_user_attr") == 1
    created = [i for i, name in enumerate(inner.calls) if name == "create_new_trial"]
    assert len(created) == 2 and all(inner.calls[i + 1] == "get_trial" for i in created)
    stored = optuna.load_study(study_name="s", storage=open_storage(url)).get_trials()
    assert len(snapshot) == len(stored) == 2
    for mine, theirs in zip(snapshot, stored, strict=True):
        assert mine.state == theirs.state and mine.values == theirs.values
        assert mine.params == theirs.params and mine.distributions == theirs.distributions
        assert mine.user_attrs == theirs.user_attrs
        assert mine.system_attrs == theirs.system_attrs
        assert mine.intermediate_values == theirs.intermediate_values
