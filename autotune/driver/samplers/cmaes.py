"""``cmaes``: Optuna's CMA-ES (one objective; failures reach it through their penalty only).

Example:
    >>> type(SPEC.build(SamplerContext(seed=0))).__name__
    'CmaEsSampler'
"""

from __future__ import annotations

import warnings

import optuna

from autotune.driver.samplers.registry import (
    SamplerContext,
    SamplerSpec,
    one_objective,
    register,
)


def cma_es(ctx: SamplerContext) -> optuna.samplers.CmaEsSampler:
    """CMA-ES ignores constraints: its warning about them is silenced."""
    warnings.filterwarnings("ignore", "Constraints have been set, but CmaEsSampler")
    return optuna.samplers.CmaEsSampler(warn_independent_sampling=False, seed=ctx.seed)


SPEC = register(
    SamplerSpec(name="cmaes", build=cma_es, summary="CMA-ES (Optuna)", serves=one_objective)
)
