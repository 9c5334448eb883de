"""Trials left RUNNING by a driver that died: found and recorded as interrupted.

Every trial carries the ``driver`` that asked for it (host and pid). A RUNNING trial whose
driver ran on this host and is gone is stale at once; on another host (a cluster, a shared
PostgreSQL) it is stale when its heartbeat, which each live driver records through Optuna's
RDB heartbeat, is older than the grace period. A RUNNING trial with no driver (written by an
older version) is stale after :data:`LEGACY_GRACE_S`. Several drivers can therefore share
one study: none takes another's running trial for a dead one.

Example:
    >>> me = DriverIdentity.current()
    >>> me.is_alive_here(), DriverIdentity("elsewhere", 1).is_alive_here()
    (True, None)
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import warnings
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.storages import BaseStorage

from autotune.driver.trial_attrs import (
    DRIVER,
    IN_DRIVER,
    INTERRUPTED,
    REASON,
    STATUS,
    failure_penalty,
    mark_feasibility,
)
from autotune.failures import TrialStatus

LEGACY_GRACE_S = 60.0
#: seconds between heartbeats of a running trial; stale after GRACE_FACTOR of them
HEARTBEAT_S = 20
GRACE_FACTOR = 4


@dataclass(frozen=True)
class DriverIdentity:
    """The process that asked for a trial."""

    host: str
    pid: int

    @classmethod
    def current(cls) -> DriverIdentity:
        return cls(socket.gethostname(), os.getpid())

    def as_attr(self) -> dict[str, Any]:
        return {"host": self.host, "pid": self.pid}

    def is_alive_here(self) -> bool | None:
        """True/False for a driver on this host; None when it ran elsewhere."""
        if self.host != socket.gethostname():
            return None
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # alive, another user's
            return True
        return True


def _is_stale(trial: optuna.trial.FrozenTrial, me: DriverIdentity) -> bool:
    attr = trial.user_attrs.get(DRIVER)
    if attr is None:
        started = trial.datetime_start or datetime.datetime.now()
        return (datetime.datetime.now() - started).total_seconds() > LEGACY_GRACE_S
    owner = DriverIdentity(str(attr.get("host")), int(attr.get("pid", -1)))
    if owner == me:
        return False
    return owner.is_alive_here() is False


#: why a stale trial that ran in its driver's process is recorded crashed, not interrupted
CRASHED_ITS_DRIVER = (
    "its driver's process ended while this trial ran in it (--executor inline): a crash of "
    "the trial's own (a segfault, os._exit, the OOM killer) ends the sweep; --executor local "
    "runs each trial in a worker whose crash costs that trial alone (found stale)"
)


def reap_stale_trials(study: optuna.Study, storage: BaseStorage) -> list[int]:
    """Record every stale RUNNING trial as interrupted, or as crashed where it ran in its
    driver's process (a segfaulting config was proposed again at every resume, which it
    killed in turn); return their numbers."""
    me = DriverIdentity.current()
    reaped = []
    study_id = storage.get_study_id_from_name(study.study_name)
    running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
    stale = {t.number for t in running if _is_stale(t, me)}
    # told before Optuna's heartbeat check closes them FAIL (stopped: proposed again)
    in_driver = {t.number for t in running if t.user_attrs.get(IN_DRIVER)}
    for number in sorted(stale & in_driver):
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        try:  # a failure of its config, told as any other is
            storage.set_trial_user_attr(trial_id, STATUS, TrialStatus.CRASHED.value)
            storage.set_trial_user_attr(trial_id, REASON, CRASHED_ITS_DRIVER)
            mark_feasibility(optuna.Trial(study, trial_id), False)
            study.tell(number, failure_penalty(study))
            reaped.append(number)
        except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError):
            continue  # another driver reaped or finished it first
    stale -= set(reaped)
    if _heartbeat_enabled(storage):
        before = {t.number for t in running} - set(reaped)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            optuna.storages.fail_stale_trials(study)
        still = {
            t.number
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        }
        stale |= before - still
    for number in sorted(stale):
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        try:
            storage.set_trial_user_attr(trial_id, STATUS, INTERRUPTED)
            storage.set_trial_user_attr(
                trial_id, REASON, "its driver stopped while this trial ran (found stale)"
            )
            if storage.get_trial(trial_id).state == optuna.trial.TrialState.RUNNING:
                storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
            reaped.append(number)
        except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError):
            continue  # another driver reaped or finished it first
    return reaped


def _heartbeat_enabled(storage: BaseStorage) -> bool:
    interval = getattr(storage, "get_heartbeat_interval", lambda: None)()
    return interval is not None


class Heartbeat:
    """Records a heartbeat for each of this driver's running trials every interval (storages
    that support it: SQLite, PostgreSQL, MySQL opened with a heartbeat)."""

    def __init__(self, storage: BaseStorage, study_name: str) -> None:
        self._storage = storage
        self._enabled = _heartbeat_enabled(storage)
        self._study_id = storage.get_study_id_from_name(study_name)
        self._numbers: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self._enabled:
            self._thread = threading.Thread(target=self._beat, name="autotune-heartbeat")
            self._thread.daemon = True
            self._thread.start()

    def add(self, number: int) -> None:
        with self._lock:
            self._numbers.add(number)
        if self._enabled:
            self._record(number)

    def discard(self, number: int) -> None:
        with self._lock:
            self._numbers.discard(number)

    @property
    def numbers(self) -> list[int]:
        """This driver's trials not yet told a result."""
        with self._lock:
            return sorted(self._numbers)

    def _record(self, number: int) -> None:
        try:
            trial_id = self._storage.get_trial_id_from_study_id_trial_number(self._study_id, number)
            self._storage.record_heartbeat(trial_id)
        except Exception:  # noqa: BLE001 - a missed beat is retried at the next interval
            pass

    def _beat(self) -> None:
        interval = self._storage.get_heartbeat_interval()
        while not self._stop.wait(interval):
            with self._lock:
                numbers = list(self._numbers)
            for number in numbers:
                self._record(number)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
