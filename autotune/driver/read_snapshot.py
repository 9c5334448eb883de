"""One read of a study's trials serves the driver until it needs another.

A sweep reads its study's trials several times a trial: the budget count before and after each
ask, the samplers, the twin check, the trial book. On SQLite each read is half a dozen queries
(about 3 ms, whatever the study's size: Optuna's cached storage fetches only what changed), and
those reads were most of a sweep's storage time. :class:`SnapshotStorage` wraps Optuna's cached
RDB storage and answers ``get_all_trials`` from its last read. This driver's own writes to a
trial in that read (a parameter, an attribute, a reported step, its end) go to the database and
into the snapshot (:mod:`autotune.driver.own_writes`); any other write (a new trial, a study
attribute) makes the next read fresh, and so do :meth:`SnapshotStorage.expire` and the passing
of ``max_age_s``, after which what other drivers wrote shows. Every other call goes straight
through.

A read sees this driver's own writes at once and other drivers' at most ``max_age_s`` late, as
a read a moment earlier would have; a protocol that must see theirs now (the twin check, after
this driver's config is written) calls :meth:`~SnapshotStorage.expire` first.

Example:
    >>> import tempfile, optuna
    >>> from autotune.storage import open_storage
    >>> url = f"sqlite:///{tempfile.mkdtemp()}/s.db"
    >>> storage = snapshot_reads(open_storage(url), max_age_s=60)  # no expiry mid-example
    >>> study = optuna.create_study(storage=storage)
    >>> study.enqueue_trial({"x": 1})  # a write: the next read is fresh
    >>> len(study.get_trials()), storage.fresh_reads
    (1, 1)
    >>> len(study.get_trials()), storage.fresh_reads  # nothing written since: no query
    (1, 1)
    >>> trial = study.ask()  # a new trial: read back once and added to the snapshot
    >>> trial.set_user_attr("worker", "gpu0")  # taken into the snapshot
    >>> study.get_trials()[-1].user_attrs, storage.fresh_reads
    ({'worker': 'gpu0'}, 1)
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Container, Iterator, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.study._frozen import FrozenStudy
from optuna.study._study_direction import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from autotune.driver import own_writes, quiet_check, write_batch
from autotune.driver.write_batch import QueuedWrite

#: How a write changes a trial the snapshot holds (see :mod:`autotune.driver.own_writes`)
Patch = Callable[[FrozenTrial], FrozenTrial]
#: How a write changes a study's snapshot, given the write's result (its trials, in place)
Edit = Callable[[list[FrozenTrial], Any], None]

#: Seconds a snapshot serves reads at most, when this driver writes nothing meanwhile.
MAX_AGE_S = 0.25
#: Seconds between the tries of a write that SQLite refused as locked (it doubles each time)
LOCKED_BACKOFF_S = (0.05, 0.1, 0.2, 0.4, 0.8, 1.6)


def _sqlite_locked(exc: BaseException) -> bool:
    """Whether SQLite refused a write as locked anywhere in ``exc``'s chain of causes: with
    several drivers on one file it answers so at once, whatever its busy timeout, when two
    transactions that read would both write (each would wait for the other)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if type(cause).__name__ == "OperationalError" and "database is locked" in str(cause):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def batched_writes(study: optuna.Study) -> contextlib.AbstractContextManager[None]:
    """``SnapshotStorage.batched()`` of the study's storage; elsewhere a block that does
    nothing (each write goes through at once)."""
    storage = study._storage
    return storage.batched() if isinstance(storage, SnapshotStorage) else contextlib.nullcontext()


def snapshot_reads(storage: BaseStorage, max_age_s: float = MAX_AGE_S) -> BaseStorage:
    """``storage`` with snapshot reads when it is a database (RDB) storage, else unchanged
    (in memory a read costs nothing; a journal file is read incrementally by Optuna)."""
    if isinstance(storage, optuna.storages.RDBStorage):
        return SnapshotStorage(optuna.storages.get_storage(storage), max_age_s)
    return storage


def _cached_new_trial(inner: Any, trial_id: int) -> FrozenTrial | None:
    """The trial Optuna's cached storage just created, as its database insert returned it
    (a copy, kept by that storage too), or None where that storage keeps no such thing: then
    it is read back, one more round of queries."""
    located = getattr(inner, "_trial_id_to_study_id_and_number", {}).get(trial_id)
    studies = getattr(inner, "_studies", {})
    if located is None or located[0] not in studies:
        return None
    trial = getattr(studies[located[0]], "trials", {}).get(located[1])
    return copy.deepcopy(trial) if isinstance(trial, FrozenTrial) else None


class SnapshotStorage(BaseStorage, BaseHeartbeat):
    """Optuna's cached RDB storage with ``get_all_trials`` served from a snapshot (see the
    module docstring); ``fresh_reads`` counts the reads that reached the database."""

    def __init__(self, inner: Any, max_age_s: float = MAX_AGE_S) -> None:
        self._inner = inner
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._writes = 0  # every write through this storage bumps it
        # study id -> (writes when the read began, when it began, its trials sorted by number)
        self._snapshots: dict[int, tuple[int, float, list[FrozenTrial]]] = {}
        self._where: dict[int, tuple[int, int]] = {}  # trial id -> (study id, index in its read)
        # the trial created last, as read back then, and the write count after its creation
        self._created: tuple[int, FrozenTrial] | None = None
        self._created_at = -1
        self._queue: list[QueuedWrite] | None = None  # trial writes held back (batched())
        self._distributions: dict[tuple[int, str], BaseDistribution] = {}  # sent before
        self.fresh_reads = 0
        self.locked_retries = 0  # writes tried again after SQLite refused them as locked

    # -- the snapshot ------------------------------------------------------------------------
    def _write(
        self,
        write: Any,
        *args: Any,
        study_id: int | None = None,
        edit: Edit | None = None,
        flush_first: bool = True,
    ) -> Any:
        """``write(*args)`` on the inner storage, the count bumped before and after it: a read
        begun while the write was under way must not stand either. A write SQLite refused as
        locked is tried again after :data:`LOCKED_BACKOFF_S` (Optuna rolled it back whole).

        With ``edit``: where study ``study_id``'s snapshot was current when the write began
        and no other write ran meanwhile, the snapshot takes the write in (``edit`` of its
        trials and the write's result) and stays current. Writes held back by ``batched()``
        go first (unless ``flush_first`` is False: this is the sending, or a write that only
        queues), so that the database sees every write in the order it was made."""
        if flush_first:
            self._flush()
        with self._lock:
            self._writes += 1
            began = self._writes
        done, result = False, None
        try:
            for pause in (*LOCKED_BACKOFF_S, None):
                try:
                    result = write(*args)
                    done = True
                    return result
                except Exception as exc:
                    if pause is None or not _sqlite_locked(exc):
                        raise
                    self.locked_retries += 1
                    time.sleep(pause)
        finally:
            with self._lock:
                self._writes += 1
                held = self._snapshots.get(study_id) if edit is not None else None
                current = held is not None and held[0] == began - 1
                if done and current and self._writes == began + 1:
                    self._snapshots[study_id] = (self._writes, held[1], held[2])
                    edit(held[2], result)

    def _trial_write(
        self, write: Any, trial_id: int, patch: Patch, *args: Any, queue: QueuedWrite | None = None
    ) -> Any:
        """``write(trial_id, *args)``, taken into the snapshot that holds the trial; inside
        ``batched()``, ``queue`` is held back instead, for one transaction at its end."""
        study_id, index = self._where.get(trial_id, (None, -1))

        def edit(trials: list[FrozenTrial], result: Any) -> None:
            # a write that reports False changed nothing (another driver moved the trial first)
            held = index < len(trials) and trials[index]._trial_id == trial_id
            patched = patch(trials[index]) if held and result is not False else None
            if patched is None:  # the snapshot cannot tell: read afresh next time
                self._snapshots.pop(study_id, None)
            else:
                trials[index] = patched

        if queue is not None and self._queue is not None:
            append = self._queue.append
            return self._write(append, queue, study_id=study_id, edit=edit, flush_first=False)
        return self._write(write, trial_id, *args, study_id=study_id, edit=edit)

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """Hold back this driver's writes of trial parameters and attributes until the block
        ends, then send them in one transaction (:mod:`autotune.driver.write_batch`). Reads
        see them at once; anything else that reaches the database sends them first."""
        if self._queue is not None:  # nested: the outer block sends them
            yield
            return
        self._queue = []
        try:
            yield
        finally:
            try:
                self._flush()
            finally:
                self._queue = None

    def _flush(self) -> None:
        """Send the writes held back, if any, keeping a current snapshot current (it holds
        them already); where sending fails, every snapshot is dropped with them."""
        if not self._queue:
            return
        queue, self._queue[:] = list(self._queue), []
        study_id = self._where.get(queue[0].trial_id, (None, -1))[0]
        try:
            self._write(write_batch.send, self._inner, queue, self._distributions,
                        study_id=study_id, edit=lambda _trials, _result: None,
                        flush_first=False)  # fmt: skip
        except BaseException:
            self.expire()
            raise

    def quiet_elsewhere(self, study_id: int, mine: Container[int]) -> bool:
        """Whether no other driver can have changed study ``study_id`` since this driver's
        current snapshot of it, told by one query (:mod:`autotune.driver.quiet_check`):
        the snapshot holds no unfinished trial outside ``mine`` (trial numbers), and every
        trial running now or created since is in ``mine``. The snapshot then answers as a
        fresh read would. False without a current snapshot."""
        self._flush()
        with self._lock:
            held = self._snapshots.get(study_id)
            current = held is not None and held[0] == self._writes
        if not current:
            return False
        trials = held[2]
        if any(not t.state.is_finished() and t.number not in mine for t in trials):
            return False
        newest = max((t._trial_id for t in trials), default=-1)
        return quiet_check.quiet_since(self._inner, study_id, newest_trial_id=newest, mine=mine)

    def expire(self) -> None:
        """Make the next read of every study fresh (other drivers' writes show at once)."""
        with self._lock:
            self._snapshots.clear()

    def get_all_trials(
        self,
        study_id: int,
        deepcopy: bool = True,
        states: Container[TrialState] | None = None,
    ) -> list[FrozenTrial]:
        with self._lock:
            writes = self._writes
            held = self._snapshots.get(study_id)
        now = time.monotonic()
        if held is None or held[0] != writes or now - held[1] > self._max_age_s:
            self._flush()  # the database first gets what this driver wrote
            with self._lock:
                writes = self._writes
            trials = self._inner.get_all_trials(study_id, deepcopy=False)
            self.fresh_reads += 1
            with self._lock:
                # stamped with the write count from before the read: a write meanwhile makes
                # the next read fresh again
                self._snapshots[study_id] = (writes, now, trials)
                self._where.update((t._trial_id, (study_id, i)) for i, t in enumerate(trials))
        else:
            trials = held[2]
        trials = list(trials) if states is None else [t for t in trials if t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    # -- writes: through, then the snapshot is stale ------------------------------------------
    def create_new_study(
        self, directions: Sequence[StudyDirection], study_name: str | None = None
    ) -> int:
        return self._write(self._inner.create_new_study, directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self._write(self._inner.delete_study, study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self._write(self._inner.set_study_user_attr, study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self._write(self._inner.set_study_system_attr, study_id, key, value)

    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        """The trial is read back at once (Optuna's ``ask`` reads it next, served from here)
        and appended to a current snapshot."""

        def write(study_id: int, template: FrozenTrial | None) -> int:
            trial_id = self._inner.create_new_trial(study_id, template)
            created = _cached_new_trial(self._inner, trial_id)
            self._created = (trial_id, created or self._inner.get_trial(trial_id))
            return trial_id

        def edit(trials: list[FrozenTrial], trial_id: int) -> None:
            self._where[trial_id] = (study_id, len(trials))
            trials.append(self._created[1])

        trial_id = self._write(write, study_id, template_trial, study_id=study_id, edit=edit)
        with self._lock:
            self._created_at = self._writes
        return trial_id

    def set_trial_param(
        self,
        trial_id: int,
        param_name: str,
        param_value_internal: float,
        distribution: BaseDistribution,
    ) -> None:
        def patch(t: FrozenTrial) -> FrozenTrial:
            return own_writes.with_param(t, param_name, param_value_internal, distribution)

        inner = self._inner.set_trial_param
        queue = QueuedWrite("param", trial_id, param_name, param_value_internal, distribution)
        args = (param_name, param_value_internal, distribution)
        self._trial_write(inner, trial_id, patch, *args, queue=queue)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        def patch(t: FrozenTrial) -> FrozenTrial:
            return own_writes.with_state(t, state, values)

        inner = self._inner.set_trial_state_values
        return self._trial_write(inner, trial_id, patch, state, values)

    def set_trial_intermediate_value(
        self, trial_id: int, step: int, intermediate_value: float
    ) -> None:
        def patch(t: FrozenTrial) -> FrozenTrial:
            return own_writes.with_intermediate(t, step, intermediate_value)

        inner = self._inner.set_trial_intermediate_value
        self._trial_write(inner, trial_id, patch, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        def patch(t: FrozenTrial) -> FrozenTrial:
            return own_writes.with_attr(t, "user", key, value)

        queue = QueuedWrite("user", trial_id, key, value)
        self._trial_write(self._inner.set_trial_user_attr, trial_id, patch, key, value, queue=queue)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        def patch(t: FrozenTrial) -> FrozenTrial:
            return own_writes.with_attr(t, "system", key, value)

        queue = QueuedWrite("system", trial_id, key, value)
        inner = self._inner.set_trial_system_attr
        self._trial_write(inner, trial_id, patch, key, value, queue=queue)

    # -- reads that go straight through ---------------------------------------------------------
    def get_study_id_from_name(self, study_name: str) -> int:
        return self._inner.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self._inner.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return self._inner.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self._inner.get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self._inner.get_study_system_attrs(study_id)

    def get_all_studies(self) -> list[FrozenStudy]:
        return self._inner.get_all_studies()

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        return self._inner.get_trial_id_from_study_id_trial_number(study_id, trial_number)

    def get_trial(self, trial_id: int) -> FrozenTrial:
        """From a current snapshot that holds it (or as it was read back when created, with
        nothing written since), else from the database."""
        with self._lock:
            held = self._held(trial_id)
        if held is not None:
            return copy.deepcopy(held)
        self._flush()
        return self._inner.get_trial(trial_id)

    def _held(self, trial_id: int) -> FrozenTrial | None:
        """``trial_id`` as a current snapshot holds it, or None (under the lock)."""
        created = self._created
        if created is not None and created[0] == trial_id and self._created_at == self._writes:
            return created[1]
        study_id, index = self._where.get(trial_id, (None, -1))
        held = self._snapshots.get(study_id) if study_id is not None else None
        if held is None or held[0] != self._writes:
            return None
        if time.monotonic() - held[1] > self._max_age_s or index >= len(held[2]):
            return None
        trial = held[2][index]
        return trial if trial._trial_id == trial_id else None

    def get_best_trial(self, study_id: int) -> FrozenTrial:
        self._flush()
        return self._inner.get_best_trial(study_id)

    def remove_session(self) -> None:
        self._inner.remove_session()

    # -- heartbeats (no trial field a read returns changes) ----------------------------------
    def record_heartbeat(self, trial_id: int) -> None:
        self._inner.record_heartbeat(trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        return self._inner._get_stale_trial_ids(study_id)

    def get_heartbeat_interval(self) -> int | None:
        return self._inner.get_heartbeat_interval()

    def get_heartbeat_stale_trial_callback(self) -> Any:
        return self._inner.get_heartbeat_stale_trial_callback()
