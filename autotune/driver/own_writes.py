"""A trial as one of this driver's own writes leaves it, without reading it back.

:class:`~autotune.driver.read_snapshot.SnapshotStorage` answers reads from its last read of a
study; when the driver writes to a trial in that read (a parameter, an attribute, a reported
step, its end), the snapshot takes the write in through these functions instead of reading the
whole study again. Each returns a new trial: the one in the snapshot may also be held by the
caller of an earlier read, or by Optuna's cache. Attribute values go through JSON, as the
database stores them, so that what a patched snapshot answers equals what a read would.

Example:
    >>> import optuna
    >>> study = optuna.create_study()
    >>> trial = study.ask()
    >>> patched = with_attr(study.trials[0], "user", "status", ("ok", 1))
    >>> patched.user_attrs, study.trials[0].user_attrs
    ({'status': ['ok', 1]}, {})
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState


def _copy(trial: FrozenTrial) -> FrozenTrial:
    """A shallow copy with its own dicts (the values in them are never changed in place)."""
    new = copy.copy(trial)
    new.params = dict(trial.params)
    new.distributions = dict(trial.distributions)
    new.user_attrs = dict(trial.user_attrs)
    new.system_attrs = dict(trial.system_attrs)
    new.intermediate_values = dict(trial.intermediate_values)
    return new


def with_param(
    trial: FrozenTrial, name: str, value_internal: float, distribution: BaseDistribution
) -> FrozenTrial:
    """``trial`` after ``set_trial_param``."""
    new = _copy(trial)
    new.params[name] = distribution.to_external_repr(value_internal)
    new.distributions[name] = distribution
    return new


def with_attr(trial: FrozenTrial, kind: str, key: str, value: Any) -> FrozenTrial:
    """``trial`` after ``set_trial_user_attr`` (``kind`` "user") or ``set_trial_system_attr``."""
    new = _copy(trial)
    attrs = new.user_attrs if kind == "user" else new.system_attrs
    attrs[key] = json.loads(json.dumps(value))
    return new


def with_intermediate(trial: FrozenTrial, step: int, value: float) -> FrozenTrial:
    """``trial`` after ``set_trial_intermediate_value``."""
    new = _copy(trial)
    new.intermediate_values[step] = float(value)
    return new


def with_state(
    trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
) -> FrozenTrial:
    """``trial`` after ``set_trial_state_values`` went through (it returned True)."""
    new = _copy(trial)
    new.state = state
    if values is not None:
        new.values = [float(v) for v in values]
    if state == TrialState.RUNNING:
        new.datetime_start = datetime.now()
    if state.is_finished():
        new.datetime_complete = datetime.now()
    return new
