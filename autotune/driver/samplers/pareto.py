"""``bo-pareto`` (the default for several objectives over a discrete space): ParEGO over the
enumerated feasible configs (:class:`~autotune.driver.pareto_sampler.ParEgoSampler`).

Example:
    >>> from autotune.space import load_space
    >>> ctx = SamplerContext(space=load_space("matmul"), n_objectives=2,
    ...                      problem={"M": 64, "N": 64, "K": 64})
    >>> SPEC.serves(ctx) is None, type(SPEC.build(ctx)).__name__
    (True, 'ParEgoSampler')
"""

from __future__ import annotations

from autotune.driver.pareto_sampler import ParEgoSampler
from autotune.driver.samplers.bo import discrete
from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


def several_discrete(ctx: SamplerContext) -> str | None:
    """A ``serves`` check: several objectives over an enumerable discrete space."""
    if ctx.n_objectives < 2:
        return "it is for several objectives; use bo for one"
    return discrete(ctx)


SPEC = register(
    SamplerSpec(
        name="bo-pareto",
        build=lambda ctx: ParEgoSampler(ctx.space, ctx.problem, ctx.device, seed=ctx.seed),
        summary="ParEGO: GP-EI of random Tchebycheff weightings, for several objectives",
        serves=several_discrete,
    )
)
