"""Whether any other driver is at work on a study, in one query of its database.

The twin check (does another driver run the config this one just wrote?) must see other
drivers' trials as they stand now, and a fresh read of a study is half a dozen queries (the
trials, their parameters, values and attributes). Most sweeps are the only driver of their
study: then one query of the trials' numbers answers that nothing changed elsewhere, and the
driver's own snapshot of the study stays exact.

Nothing of another driver can have changed since a snapshot when (1) the snapshot holds no
trial of another that is unfinished (a finished trial never changes: Optuna refuses writes
to it) and (2) every trial now running, or created after the snapshot's newest, is this
driver's own. :func:`quiet_since` asks (2) of Optuna's RDB storage, through its session and
table model (internal to Optuna, as :mod:`autotune.driver.write_batch` uses them); where those
are missing it answers False, and the caller reads afresh as before.

Example:
    >>> import tempfile, optuna
    >>> storage = optuna.storages.get_storage(f"sqlite:///{tempfile.mkdtemp()}/q.db")
    >>> study = optuna.create_study(storage=storage)
    >>> study_id = study._study_id
    >>> first = study.ask()
    >>> quiet_since(storage, study_id, newest_trial_id=first._trial_id, mine={first.number})
    True
    >>> other = study.ask()  # another driver's trial, created after the snapshot
    >>> quiet_since(storage, study_id, newest_trial_id=first._trial_id, mine={first.number})
    False
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from optuna.trial import TrialState


def _rdb_backend(storage: Any) -> Any | None:
    """The RDB storage under Optuna's cached storage when it has the session used here."""
    backend = getattr(storage, "_backend", storage)
    return backend if hasattr(backend, "scoped_session") else None


def quiet_since(storage: Any, study_id: int, *, newest_trial_id: int, mine: Container[int]) -> bool:
    """True when every trial of the study that runs now, or whose id is above
    ``newest_trial_id``, has its number in ``mine``; False when one does not, or when
    ``storage`` is not Optuna's RDB storage (nothing can be told in one query then)."""
    backend = _rdb_backend(storage)
    if backend is None:
        return False
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session
    from sqlalchemy import or_

    trial = models.TrialModel
    with _create_scoped_session(backend.scoped_session) as session:
        numbers = (
            session.query(trial.number)
            .filter(trial.study_id == study_id)
            .filter(or_(trial.state == TrialState.RUNNING, trial.trial_id > newest_trial_id))
            .all()
        )
    return all(number in mine for (number,) in numbers)
