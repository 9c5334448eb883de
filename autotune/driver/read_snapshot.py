"""One read of a study's trials serves the driver until something is written.

A sweep reads its study's trials several times a trial: the budget count before and after each
ask, the samplers, the twin check, the trial book. On SQLite each read is half a dozen queries
(about 3 ms, whatever the study's size: Optuna's cached storage fetches only what changed), and
those reads were most of a sweep's storage time. :class:`SnapshotStorage` wraps Optuna's cached
RDB storage and answers ``get_all_trials`` from its last read until a write goes through it
(this driver asking, suggesting, telling, attributing) or ``max_age_s`` passes, after which
what other drivers wrote shows. Every other call goes straight through.

A read right after one of this driver's own writes is therefore always fresh, which the
driver's protocols rely on (the twin check reads after the config is written); a read with no
write of its own since the last sees other drivers' changes at most ``max_age_s`` late, as a
read a moment earlier would have.

Example:
    >>> import tempfile, optuna
    >>> from autotune.storage import open_storage
    >>> storage = snapshot_reads(open_storage(f"sqlite:///{tempfile.mkdtemp()}/s.db"))
    >>> study = optuna.create_study(storage=storage)
    >>> study.enqueue_trial({"x": 1})  # a write: the next read is fresh
    >>> len(study.get_trials()), storage.fresh_reads
    (1, 1)
    >>> len(study.get_trials()), storage.fresh_reads  # nothing written since: no query
    (1, 1)
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Container, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.study._frozen import FrozenStudy
from optuna.study._study_direction import StudyDirection
from optuna.trial import FrozenTrial, TrialState

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


def snapshot_reads(storage: BaseStorage, max_age_s: float = MAX_AGE_S) -> BaseStorage:
    """``storage`` with snapshot reads when it is a database (RDB) storage, else unchanged
    (in memory a read costs nothing; a journal file is read incrementally by Optuna)."""
    if isinstance(storage, optuna.storages.RDBStorage):
        return SnapshotStorage(optuna.storages.get_storage(storage), max_age_s)
    return storage


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
        self.fresh_reads = 0
        self.locked_retries = 0  # writes tried again after SQLite refused them as locked

    # -- the snapshot ------------------------------------------------------------------------
    def _write(self, write: Any, *args: Any) -> Any:
        """``write(*args)`` on the inner storage, the count bumped before and after it: a read
        begun while the write was under way must not stand either. A write SQLite refused as
        locked is tried again after :data:`LOCKED_BACKOFF_S` (Optuna rolled it back whole)."""
        with self._lock:
            self._writes += 1
        try:
            for pause in (*LOCKED_BACKOFF_S, None):
                try:
                    return write(*args)
                except Exception as exc:
                    if pause is None or not _sqlite_locked(exc):
                        raise
                    self.locked_retries += 1
                    time.sleep(pause)
        finally:
            with self._lock:
                self._writes += 1

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
            trials = self._inner.get_all_trials(study_id, deepcopy=False)
            self.fresh_reads += 1
            with self._lock:
                # stamped with the write count from before the read: a write meanwhile makes
                # the next read fresh again
                self._snapshots[study_id] = (writes, now, trials)
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
        return self._write(self._inner.create_new_trial, study_id, template_trial)

    def set_trial_param(
        self,
        trial_id: int,
        param_name: str,
        param_value_internal: float,
        distribution: BaseDistribution,
    ) -> None:
        inner = self._inner.set_trial_param
        self._write(inner, trial_id, param_name, param_value_internal, distribution)

    def set_trial_state_values(
        self, trial_id: int, state: TrialState, values: Sequence[float] | None = None
    ) -> bool:
        return self._write(self._inner.set_trial_state_values, trial_id, state, values)

    def set_trial_intermediate_value(
        self, trial_id: int, step: int, intermediate_value: float
    ) -> None:
        self._write(self._inner.set_trial_intermediate_value, trial_id, step, intermediate_value)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._write(self._inner.set_trial_user_attr, trial_id, key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._write(self._inner.set_trial_system_attr, trial_id, key, value)

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
        return self._inner.get_trial(trial_id)

    def get_best_trial(self, study_id: int) -> FrozenTrial:
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
