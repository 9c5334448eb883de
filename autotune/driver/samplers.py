"""Build Optuna samplers by name, each told which trials failed (so it leaves failing regions).

Failed trials are told to the study as complete with a penalty value and a violated
constraint (``Trial.set_constraint``, see
:func:`autotune.driver.trial_attrs.mark_feasibility`): TPE and GP then model where configs fail
and stop proposing there, instead of ignoring them as they do FAIL trials.

With several trials in flight (``in_flight > 1``), the configs still running are known to the
sampler: ``bo`` never proposes one and conditions its model on them at their predicted value
(the kriging believer), TPE runs with Optuna's constant liar.

The default, ``auto``, is Bayesian optimisation over the enumerated configs
(:mod:`autotune.driver.grid_sampler`) for a single objective over a discrete space of at most
``MAX_GRID`` configs, and multivariate TPE otherwise (float parameters, huge composed spaces,
several objectives).

Example:
    >>> sampler = make_sampler("tpe", seed=0)
    >>> type(sampler).__name__
    'TPESampler'
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna

from autotune.driver.grid_sampler import MAX_GRID, GridBayesSampler, is_enumerable
from autotune.space import Space

SAMPLERS = ("auto", "bo", "tpe", "random", "gp", "cmaes", "grid")


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler for an ask/tell loop: the driver checks ``is_exhausted`` itself
    (the stock sampler calls ``study.stop()``, which only works inside ``study.optimize``)."""

    def after_trial(self, study, trial, state, values) -> None:  # noqa: ANN001
        return None

    def is_exhausted(self, study: optuna.Study) -> bool:
        """True when every grid point is measured or being measured: the driver keeps one
        trial in flight while it asks for the next."""
        taken = {
            t.system_attrs["grid_id"]
            for t in study.get_trials(deepcopy=False)
            if "grid_id" in t.system_attrs
            and (t.state.is_finished() or t.state == optuna.trial.TrialState.RUNNING)
        }
        return len(taken) >= len(self._all_grids)


class SamplerError(ValueError):
    """A sampler that cannot serve this space or these objectives."""


def resolve_sampler(name: str, space: Space | None, n_objectives: int = 1) -> str:
    """The sampler ``auto`` stands for here: ``bo`` where it applies, else ``tpe``.

    Example:
        >>> from autotune.space import load_space
        >>> resolve_sampler("auto", load_space("matmul")), resolve_sampler("tpe", None)
        ('bo', 'tpe')
    """
    if name != "auto":
        return name
    if n_objectives == 1 and space is not None and is_enumerable(space):
        return "bo"
    return "tpe"


def make_sampler(
    name: str,
    *,
    seed: int | None = None,
    space: Space | None = None,
    n_objectives: int = 1,
    n_startup_trials: int = 10,
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
    in_flight: int = 1,
) -> optuna.samplers.BaseSampler:
    """Return the sampler called ``name`` (one of :data:`SAMPLERS`); ``problem`` and
    ``device`` are what the space's constraints read (``bo`` lists the configs they allow);
    ``in_flight`` is how many trials run at once (more than one: pending configs are lied
    about, see the module's docstring)."""
    name = resolve_sampler(name, space, n_objectives)
    options: dict[str, Any] = {"seed": seed}
    if name == "bo":
        if space is None or not is_enumerable(space):
            raise SamplerError(f"bo needs a discrete space of at most {MAX_GRID} configs; use tpe")
        if n_objectives > 1:
            raise SamplerError("bo handles one objective only; use tpe for several")
        return GridBayesSampler(space, problem, device, seed=seed)
    if name == "tpe":
        # multivariate + group: models parameters jointly, and conditional ones per group
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.samplers.TPESampler(
                multivariate=True,
                group=True,
                n_startup_trials=n_startup_trials,
                constant_liar=in_flight > 1,
                **options,
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
