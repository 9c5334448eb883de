"""``nsga2``: Optuna's NSGA-II, a genetic algorithm for several objectives.

Example:
    >>> type(SPEC.build(SamplerContext(seed=0, n_objectives=2))).__name__
    'NSGAIISampler'
"""

from __future__ import annotations

import optuna

from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


def nsga2(ctx: SamplerContext) -> optuna.samplers.NSGAIISampler:
    """NSGA-II with Optuna's defaults, seeded."""
    return optuna.samplers.NSGAIISampler(seed=ctx.seed)


SPEC = register(
    SamplerSpec(
        name="nsga2",
        build=lambda ctx: nsga2(ctx),
        summary="NSGA-II (Optuna), for several objectives",
    )
)
