"""Samplers by name: a registry (:mod:`.registry`), one module per sampler, and ``auto``, a
policy over them (:mod:`.policy`).

Failed trials are told to the study as complete with a penalty value and a violated
constraint (``Trial.set_constraint``, see
:func:`autotune.driver.trial_attrs.mark_feasibility`): TPE and GP then model where configs fail
and stop proposing there, instead of ignoring them as they do FAIL trials. With several trials
in flight, the configs still running are known to the sampler: ``bo`` never proposes one and
conditions its model on them at their predicted value (the kriging believer), TPE runs with
Optuna's constant liar.

Example:
    >>> sampler = make_sampler("tpe", seed=0)
    >>> type(sampler).__name__
    'TPESampler'
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.driver.samplers import (  # noqa: F401 - each registers its sampler
    bo,
    cmaes,
    grid,
    nsga2,
    optuna_gp,
    pareto,
    random_search,
    tpe,
)
from autotune.driver.samplers.grid import AskTellGridSampler
from autotune.driver.samplers.policy import resolve_sampler as _resolve
from autotune.driver.samplers.registry import (
    SamplerContext,
    SamplerError,
    SamplerSpec,
    is_exhausted,
    register,
    registered,
    spec_for,
    untried_configs,
)
from autotune.space import Space

SAMPLERS: tuple[str, ...] = ("auto", *registered())

__all__ = [
    "SAMPLERS",
    "AskTellGridSampler",
    "SamplerContext",
    "SamplerError",
    "SamplerSpec",
    "is_exhausted",
    "make_sampler",
    "register",
    "resolve_sampler",
    "sampler_note",
    "untried_configs",
]


def resolve_sampler(name: str, space: Space | None, n_objectives: int = 1) -> str:
    """The sampler ``auto`` stands for here (see :mod:`.policy`); another name stands for
    itself.

    Example:
        >>> from autotune.space import load_space
        >>> resolve_sampler("auto", load_space("matmul")), resolve_sampler("tpe", None)
        ('bo', 'tpe')
    """
    return _resolve(name, SamplerContext(space=space, n_objectives=n_objectives))


def sampler_note(
    name: str,
    space: Space,
    n_objectives: int = 1,
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> str | None:
    """What a user should know of how the sampler ``name`` (or ``auto``'s choice) serves
    ``space`` (a sweep prints it as a note before its header, the Ray Tune searcher as it
    opens its study), or None.

    Example:
        >>> from autotune.space import Param, Space
        >>> space = Space("s", [Param("a", "categorical", choices=[1, 2]),
        ...                     Param("x", "float", low=0.0, high=1.0)])
        >>> print(sampler_note("cmaes", space)); print(sampler_note("tpe", space))
        cmaes searches the int and float parameters (x); the other 1 (a) is drawn at random
        None
    """
    ctx = SamplerContext(space=space, n_objectives=n_objectives, problem=dict(problem or {}),
                         device=dict(device or {}))  # fmt: skip
    return spec_for(_resolve(name, ctx)).note(ctx)


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
    """Build the registered sampler called ``name`` (or ``auto``'s choice); ``problem`` and
    ``device`` are what the space's constraints read; ``in_flight`` is how many trials run
    at once. A sampler that cannot serve the context raises :class:`SamplerError`."""
    ctx = SamplerContext(
        space=space,
        n_objectives=n_objectives,
        seed=seed,
        n_startup_trials=n_startup_trials,
        problem=dict(problem or {}),
        device=dict(device or {}),
        in_flight=in_flight,
    )
    spec = spec_for(_resolve(name, ctx))
    why_not = spec.serves(ctx)
    if why_not is not None:
        raise SamplerError(f"{spec.name}: {why_not}")
    return spec.build(ctx)
