"""Read a study back: trials as a pandas DataFrame, the best trial, the Pareto front.

Example:
    >>> import optuna
    >>> study = optuna.create_study(direction="maximize")
    >>> study.set_user_attr("autotune", {"objectives": {"score": "maximize"}})
    >>> study.add_trial(optuna.trial.create_trial(params={"x": 1}, value=2.0,
    ...     distributions={"x": optuna.distributions.IntDistribution(0, 3)},
    ...     user_attrs={"status": "ok"}))
    >>> best_trials(study)[0].params
    {'x': 1}
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import optuna

from autotune.driver.trial_attrs import (
    DRIVER,
    DURATION,
    REASON,
    STATUS,
    is_ok,
    is_repeat,
    stored_info,
    trial_metrics,
    trial_status,
)

if TYPE_CHECKING:
    import pandas as pd


def study_info(study: optuna.Study) -> dict[str, Any]:
    """What the sweep stored about itself (workload, problem, objectives, device, command)."""
    return stored_info(study.user_attrs)


def objectives_of(study: optuna.Study) -> dict[str, str]:
    """Metric -> direction, as the study's record names them; from Optuna's own where the
    record has none, or one that does not match the study's directions (a damaged record:
    every listing would fail on it).

    Example:
        >>> study = optuna.create_study(directions=["maximize", "minimize"])
        >>> study.set_user_attr("autotune", {"objectives": {"tflops": "maximize"}})
        >>> objectives_of(study)
        {'value0': 'maximize', 'value1': 'minimize'}
    """
    info = study_info(study)
    named = info.get("objectives", {})
    directions = [d.name.lower() for d in study.directions]
    if list(named.values()) == directions:
        return dict(named)
    names = study.metric_names or [f"value{i}" for i in range(len(study.directions))]
    return {n: d.name.lower() for n, d in zip(names, study.directions, strict=True)}


def ok_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """Successful trials, each config once (repeats answered from the study are left out)."""
    return [t for t in study.get_trials(deepcopy=False) if is_ok(t) and not is_repeat(t)]


def shown_status(trial: optuna.trial.FrozenTrial) -> str:
    """autotune's status of ``trial``; a complete trial of a plain Optuna study counts as ok."""
    if STATUS not in trial.user_attrs and trial.state == optuna.trial.TrialState.COMPLETE:
        return "ok"
    return trial_status(trial)


def measured_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that measured a config (repeats left out), as a report or comparison shows
    them."""
    return [t for t in study.trials if shown_status(t) == "ok" and t.values and not is_repeat(t)]


def _dominates(a: list[float], b: list[float], signs: list[float]) -> bool:
    better_or_equal = all(s * x >= s * y for x, y, s in zip(a, b, signs, strict=True))
    return better_or_equal and any(s * x > s * y for x, y, s in zip(a, b, signs, strict=True))


def best_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The best successful trial (one objective), or the Pareto front sorted by the first
    objective (several). Failed trials, told to Optuna with penalty values, never appear."""
    trials = ok_trials(study)
    if not trials:
        return []
    signs = [1.0 if d == "maximize" else -1.0 for d in objectives_of(study).values()]
    if len(signs) == 1:
        return [max(trials, key=lambda t: signs[0] * t.values[0])]
    front = [t for t in trials if not any(_dominates(o.values, t.values, signs) for o in trials)]
    return sorted(front, key=lambda t: -signs[0] * t.values[0])


#: the columns every listing has after the values and parameters
_LISTING_COLUMNS = ("reason", "duration_s")


def _gone_driver(trial: optuna.trial.FrozenTrial, status: str) -> str:
    """Why a trial listed as running never ends, where its driver ran on this host and is
    gone (killed outright: nothing recorded it interrupted); "" otherwise (a live driver's,
    or one on another host, which this process cannot see).

    Example:
        >>> import optuna
        >>> gone = optuna.trial.create_trial(state=optuna.trial.TrialState.RUNNING,
        ...     user_attrs={"driver": {"host": "elsewhere", "pid": 1}})
        >>> _gone_driver(gone, "running")
        ''
    """
    from autotune.driver.liveness import DriverIdentity

    owner = trial.user_attrs.get(DRIVER)
    if status != "running" or not isinstance(owner, dict):
        return ""
    try:
        driver = DriverIdentity(str(owner.get("host")), int(owner.get("pid", -1)))
    except (TypeError, ValueError):  # a record another program wrote
        return ""
    if driver.pid <= 0 or driver.is_alive_here() is not False:
        return ""
    return f"its driver (pid {driver.pid}) is gone: it will never end (a resume closes it)"


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: number, status, reason, objective values, parameters, metrics."""
    import pandas as pd  # here: the best trial, a study's record and a listing need no pandas

    objectives = list(objectives_of(study))
    rows = []
    kinds: dict[str, set[type]] = {}  # each parameter and metric column's value types
    # the columns in order of first appearance: a parameter of a later trial only (one
    # conditional on another) among the parameters, not after the listing's own columns
    params_seen: dict[str, None] = {}
    metrics_seen: dict[str, None] = {}
    for trial in study.get_trials(deepcopy=False):
        status = trial_status(trial)
        row: dict[str, Any] = {"trial": trial.number, "status": status}
        ok = status == "ok" and trial.values is not None
        for i, name in enumerate(objectives):
            row[name] = trial.values[i] if ok else None
        # a parameter named like an objective (replay tables), a listing column (reason,
        # duration_s) or a metric's column (m.NAME) keeps a "param." prefix
        taken = {*row, *_LISTING_COLUMNS}
        params = {
            (f"param.{k}" if k in taken or k.startswith("m.") else k): v
            for k, v in trial.params.items()
        }
        for k, v in params.items():
            kinds.setdefault(k, set()).add(type(v))
            params_seen.setdefault(k)
        row.update(params)
        metrics = trial_metrics(trial)
        metrics = {f"m.{k}": v for k, v in metrics.items() if k not in objectives}
        for k, v in metrics.items():
            metrics_seen.setdefault(k)
            if v is not None:
                kinds.setdefault(k, set()).add(type(v))
        row.update(metrics)
        row["reason"] = trial.user_attrs.get(REASON, "") or _gone_driver(trial, status)
        row["duration_s"] = trial.user_attrs.get(DURATION)
        rows.append(row)
    columns = ["trial", "status", *objectives, *params_seen, *metrics_seen, *_LISTING_COLUMNS]
    frame = pd.DataFrame(rows, columns=columns if rows else None)
    # an integer parameter or metric stays one where a trial lacks it (a failure, or a trial
    # interrupted before it was asked)
    for column, types in kinds.items():
        if types == {int} and frame[column].isna().any():
            frame[column] = frame[column].astype("Int64")
    return frame
