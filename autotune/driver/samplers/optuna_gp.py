"""``gp``: Optuna's GPSampler (its own kernel over the parameters' distributions).

Example:
    >>> type(SPEC.build(SamplerContext(seed=0))).__name__
    'GPSampler'
"""

from __future__ import annotations

import optuna

from autotune.driver.samplers.registry import SamplerSpec, register

SPEC = register(
    SamplerSpec(
        name="gp",
        build=lambda ctx: optuna.samplers.GPSampler(
            n_startup_trials=ctx.n_startup_trials, seed=ctx.seed
        ),
        summary="Optuna's GPSampler",
    )
)
