"""Several writes to a study's trials sent to its database in one transaction.

A trial's parameters go to Optuna's storage one ``suggest`` at a time, and the driver's record
of a result (status, reason, duration, worker, metrics, telemetry, feasibility) one attribute
at a time: on SQLite each is a transaction of its own, about 1.5-2 ms, a dozen of them a
trial. :class:`~autotune.driver.read_snapshot.SnapshotStorage` queues those writes while the
driver asks for a config or records a result (its ``batched()``) and sends them here, in one
transaction, before anything else reaches the database. Other drivers then see a config, or a
result's record, whole or not at all.

Sending them together uses Optuna's RDB storage's session, table models and checks (internal
to Optuna): one lookup of the trial, its parameters in one insert, its attributes in one
upsert a kind. Where those are missing (another Optuna), each write goes through the public
method as before.

Example:
    >>> import tempfile, optuna
    >>> from optuna.distributions import IntDistribution
    >>> storage = optuna.storages.get_storage(f"sqlite:///{tempfile.mkdtemp()}/b.db")
    >>> study = optuna.create_study(storage=storage)
    >>> trial_id = study.ask()._trial_id
    >>> send(storage, [QueuedWrite("param", trial_id, "x", 3.0, IntDistribution(0, 8)),
    ...                QueuedWrite("user", trial_id, "status", "ok")])
    >>> study.trials[0].params, study.trials[0].user_attrs
    ({'x': 3}, {'status': 'ok'})
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from optuna import distributions
from optuna.distributions import BaseDistribution


class WriteConflict(Exception):
    """Another driver wrote first what a batch writes only once (a parameter of the trial):
    the batch was rolled back whole. On SQLite two drivers can both take one waiting trial
    (Optuna reads its state, then writes it, outside one transaction)."""


class QueuedWrite(NamedTuple):
    """One write to a trial: ``kind`` is "param", "user" or "system" (attribute)."""

    kind: str
    trial_id: int
    key: str
    value: Any
    distribution: BaseDistribution | None = None


def _rdb_backend(storage: Any) -> Any | None:
    """The RDB storage under Optuna's cached storage when it has what is used here."""
    backend = getattr(storage, "_backend", storage)
    needed = ("_set_trial_attr_without_commit", "check_trial_is_updatable", "scoped_session")
    return backend if all(hasattr(backend, name) for name in needed) else None


def send(
    storage: Any,
    writes: Sequence[QueuedWrite],
    known: dict[tuple[int, str], BaseDistribution] | None = None,
) -> None:
    """``writes`` to ``storage`` (Optuna's cached RDB storage, or any other), in order; in one
    transaction where the storage allows it (all or none of them then lands): per trial one
    lookup, its parameters in one executemany insert, each kind of attribute in one upsert.

    ``known`` remembers each (study id, parameter)'s distribution across calls (the caller
    keeps it), so that Optuna's check that a parameter keeps a compatible distribution in a
    study asks the database once per parameter, not once per write."""
    backend = _rdb_backend(storage)
    if backend is None:
        for write in writes:
            _send_one(storage, write)
        return
    from optuna.storages._rdb.storage import _create_scoped_session
    from sqlalchemy.exc import IntegrityError

    known = {} if known is None else known
    learned: dict[tuple[int, str], BaseDistribution] = {}
    try:
        with _create_scoped_session(backend.scoped_session) as session:
            for trial_id, trial_writes in _by_trial(writes).items():
                _send_trial(backend, session, trial_id, trial_writes, known, learned)
    except IntegrityError as exc:
        trials = sorted({w.trial_id for w in writes})
        raise WriteConflict(f"trial ids {trials}: written by another driver first") from exc
    known.update(learned)


def _by_trial(writes: Sequence[QueuedWrite]) -> dict[int, list[QueuedWrite]]:
    grouped: dict[int, list[QueuedWrite]] = {}
    for w in writes:
        grouped.setdefault(w.trial_id, []).append(w)
    return grouped


def _send_trial(
    backend: Any,
    session: Any,
    trial_id: int,
    writes: list[QueuedWrite],
    known: dict[tuple[int, str], BaseDistribution],
    learned: dict[tuple[int, str], BaseDistribution],
) -> None:
    """One trial's writes inside ``session``: Optuna's checks, then one statement a kind."""
    from optuna.storages._rdb import models

    trial = models.TrialModel.find_or_raise_by_id(trial_id, session)
    backend.check_trial_is_updatable(trial_id, trial.state)
    params = [w for w in writes if w.kind == "param"]
    for w in params:
        key = (trial.study_id, w.key)
        previous = known.get(key) or learned.get(key) or _stored_distribution(session, trial, w.key)
        if previous is not None:
            distributions.check_distribution_compatibility(previous, w.distribution)
        learned[key] = w.distribution
    if params:  # one executemany: the ORM's add_all sent an INSERT a parameter on SQLite
        session.execute(_param_insert(models.TrialParamModel), [
            {"trial_id": trial_id, "param_name": w.key, "param_value": w.value,
             "distribution_json": distributions.distribution_to_json(w.distribution)}
            for w in params
        ])  # fmt: skip
    for kind, model in (("user", models.TrialUserAttributeModel),
                        ("system", models.TrialSystemAttributeModel)):  # fmt: skip
        attrs = {w.key: w.value for w in writes if w.kind == kind}  # the last write of a key
        if attrs:
            _upsert_attrs(backend, session, model, trial_id, attrs)


def _stored_distribution(session: Any, trial: Any, name: str) -> BaseDistribution | None:
    """The distribution a trial of ``trial``'s study stored for parameter ``name``, if any."""
    from optuna.storages._rdb import models

    row = (
        session.query(models.TrialParamModel.distribution_json)
        .join(models.TrialModel)
        .filter(models.TrialModel.study_id == trial.study_id)
        .filter(models.TrialParamModel.param_name == name)
        .first()
    )
    return None if row is None else distributions.json_to_distribution(row[0])


def _upsert_attrs(
    backend: Any, session: Any, model: Any, trial_id: int, attrs: dict[str, Any]
) -> None:
    """Every attribute in one INSERT ... ON CONFLICT UPDATE (SQLite, PostgreSQL), else one at
    a time through Optuna's own helper."""
    statement = _upsert_statement(backend.engine.name, model)
    if statement is None:
        for key, value in attrs.items():
            backend._set_trial_attr_without_commit(session, model, trial_id, key, value)
        return
    rows = [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)} for k, v in attrs.items()]
    session.execute(statement, rows)


@functools.cache
def _param_insert(model: Any) -> Any:
    """The insert of one parameter row, built once (see :func:`_upsert_statement`)."""
    from sqlalchemy import insert

    return insert(model)


@functools.cache
def _upsert_statement(dialect: str, model: Any) -> Any | None:
    """The upsert of one attribute row of ``model``, built once: executed with a list of rows,
    SQLAlchemy compiles it once and reuses it (a statement built with the rows in it was
    compiled anew each time: 3.4 ms of the 5 a result's record took on SQLite)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        return None
    statement = insert(model)
    return statement.on_conflict_do_update(
        index_elements=[model.trial_id, model.key],
        set_={"value_json": statement.excluded.value_json},
    )


def _send_one(storage: Any, w: QueuedWrite) -> None:
    if w.kind == "param":
        storage.set_trial_param(w.trial_id, w.key, w.value, w.distribution)
    elif w.kind == "user":
        storage.set_trial_user_attr(w.trial_id, w.key, w.value)
    else:
        storage.set_trial_system_attr(w.trial_id, w.key, w.value)
