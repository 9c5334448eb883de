"""``gp``: Optuna's GPSampler (its own kernel over the parameters' distributions).

Example:
    >>> type(SPEC.build(SamplerContext(seed=0))).__name__
    'GPSampler'
"""

from __future__ import annotations

import optuna

from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


def gp_sampler(ctx: SamplerContext) -> optuna.samplers.GPSampler:
    """Optuna's GPSampler, seeded, with the sweep's start-up draws."""
    return optuna.samplers.GPSampler(n_startup_trials=ctx.n_startup_trials, seed=ctx.seed)


SPEC = register(
    SamplerSpec(
        name="gp",
        build=lambda ctx: gp_sampler(ctx),
        summary="Optuna's GPSampler",
    )
)
