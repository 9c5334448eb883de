"""Build Optuna samplers by name, each told which trials failed (so it leaves failing regions).

Failed trials are told to the study as complete with a penalty value and a violated
constraint (``Trial.set_constraint``, see :func:`mark_feasibility`): TPE and GP then model
where configs fail and stop proposing there, instead of ignoring them as they do FAIL trials.

Example:
    >>> sampler = make_sampler("tpe", seed=0)
    >>> type(sampler).__name__
    'TPESampler'
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna

from autotune.space import Space

SAMPLERS = ("tpe", "random", "gp", "cmaes", "grid")
STATUS_ATTR = "status"


def mark_feasibility(trial: optuna.Trial, ok: bool) -> None:
    """Record the trial's outcome as an Optuna constraint: 0 when it measured, 1 when it failed.

    Constraint-aware samplers (TPE, GP, NSGA-II) rank failed trials below every feasible one.
    """
    trial.set_constraint("failed", 0.0 if ok else 1.0)


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler for an ask/tell loop: the driver checks ``is_exhausted`` itself
    (the stock sampler calls ``study.stop()``, which only works inside ``study.optimize``)."""

    def after_trial(self, study, trial, state, values) -> None:  # noqa: ANN001
        return None


class SamplerError(ValueError):
    """A sampler that cannot serve this space or these objectives."""


def make_sampler(
    name: str,
    *,
    seed: int | None = None,
    space: Space | None = None,
    n_objectives: int = 1,
    n_startup_trials: int = 10,
) -> optuna.samplers.BaseSampler:
    """Return the sampler called ``name`` (one of :data:`SAMPLERS`)."""
    options: dict[str, Any] = {"seed": seed}
    if name == "tpe":
        # multivariate + group: models parameters jointly, and conditional ones per group
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(
                multivariate=True, group=True, n_startup_trials=n_startup_trials, **options
            )
    if name == "random":
        return optuna.samplers.RandomSampler(**options)
    if name == "gp":
        return optuna.samplers.GPSampler(n_startup_trials=n_startup_trials, seed=seed)
    if name == "cmaes":
        if n_objectives > 1:
            raise SamplerError("cmaes handles one objective only; use tpe for several")
        # CMA-ES ignores constraints: failed trials reach it through their penalty value only
        warnings.filterwarnings("ignore", "Constraints have been set, but CmaEsSampler")
        return optuna.samplers.CmaEsSampler(warn_independent_sampling=False, **options)
    if name == "grid":
        if space is None:
            raise SamplerError("grid search needs the search space")
        return AskTellGridSampler(space.grid_search_space(), **options)
    raise SamplerError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}")
