"""``nsga2``: Optuna's NSGA-II, a genetic algorithm for several objectives.

Example:
    >>> type(SPEC.build(SamplerContext(seed=0, n_objectives=2))).__name__
    'NSGAIISampler'
"""

from __future__ import annotations

import optuna

from autotune.driver.samplers.registry import SamplerSpec, register

SPEC = register(
    SamplerSpec(
        name="nsga2",
        build=lambda ctx: optuna.samplers.NSGAIISampler(seed=ctx.seed),
        summary="NSGA-II (Optuna), for several objectives",
    )
)
