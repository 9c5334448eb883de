"""The sampler registry: a name -> :class:`SamplerSpec` map that the samplers' own modules fill.

A spec says what a sampler serves (``serves``: None, or why not) and how to build it from a
:class:`SamplerContext`. ``auto`` is not a sampler but a policy over the registered ones
(:mod:`autotune.driver.samplers.policy`).

Example:
    >>> from autotune.driver.samplers import SAMPLERS
    >>> "tpe" in SAMPLERS and "auto" in SAMPLERS
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune.space import Space


class SamplerError(ValueError):
    """A sampler that cannot serve this space or these objectives, or one not registered."""


@dataclass(frozen=True)
class SamplerContext:
    """What a sampler is built for: the space, its constraints' inputs, the objectives, the
    seed and how many trials run at once (several: pending configs are lied about)."""

    space: Space | None = None
    n_objectives: int = 1
    seed: int | None = None
    n_startup_trials: int = 10
    problem: dict[str, Any] = field(default_factory=dict)
    device: dict[str, Any] = field(default_factory=dict)
    in_flight: int = 1


@dataclass(frozen=True)
class SamplerSpec:
    """One registered sampler.

    Args:
        name: what ``--sampler`` calls it.
        build: the factory.
        summary: one line for ``--help`` and the docs.
        serves: None where the sampler can serve ``ctx``, else the reason it cannot.
        note: what a user should know of how it serves ``ctx`` (a sweep prints it), or None.
    """

    name: str
    build: Callable[[SamplerContext], optuna.samplers.BaseSampler]
    summary: str
    serves: Callable[[SamplerContext], str | None] = lambda ctx: None
    note: Callable[[SamplerContext], str | None] = lambda ctx: None


_REGISTRY: dict[str, SamplerSpec] = {}


def register(spec: SamplerSpec) -> SamplerSpec:
    """Add ``spec`` to the registry (a sampler module calls this once, at import)."""
    _REGISTRY[spec.name] = spec
    return spec


def registered() -> dict[str, SamplerSpec]:
    """The registered samplers by name, in registration order."""
    return dict(_REGISTRY)


def spec_for(name: str) -> SamplerSpec:
    """The spec called ``name``, or a :class:`SamplerError` naming the choices."""
    try:
        return _REGISTRY[name]
    except KeyError:
        choices = ", ".join(["auto", *_REGISTRY])
        raise SamplerError(f"unknown sampler {name!r}; choose one of {choices}") from None


def one_objective(ctx: SamplerContext) -> str | None:
    """A ``serves`` check: None for one objective."""
    return None if ctx.n_objectives == 1 else "it handles one objective only; use tpe for several"


def is_exhausted(sampler: optuna.samplers.BaseSampler, study: optuna.Study) -> bool:
    """True when ``sampler`` says it has nothing left to propose (a grid run through); samplers
    without an ``is_exhausted`` method never are."""
    check = getattr(sampler, "is_exhausted", None)
    return bool(check(study)) if callable(check) else False


def untried_configs(sampler: optuna.samplers.BaseSampler, study: optuna.Study) -> int | None:
    """How many configs ``sampler`` has left to propose in ``study``, where it can tell
    before proposing one (it lists the space's configs: ``bo``, ``grid``), else None."""
    count = getattr(sampler, "untried", None)
    return count(study) if callable(count) else None
