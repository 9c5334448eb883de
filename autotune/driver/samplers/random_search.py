"""``random``: random search; without replacement over the feasible configs of a discrete
space (:class:`~autotune.driver.grid_sampler.UnvisitedRandomSampler`), Optuna's
RandomSampler otherwise.

Example:
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=1, high=4)])
    >>> type(SPEC.build(SamplerContext(space=space, seed=0))).__name__
    'UnvisitedRandomSampler'
"""

from __future__ import annotations

import optuna

from autotune.driver.enumeration import is_enumerable
from autotune.driver.grid_sampler import UnvisitedRandomSampler
from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


def random_search(ctx: SamplerContext) -> optuna.samplers.BaseSampler:
    if ctx.space is not None and is_enumerable(ctx.space):
        return UnvisitedRandomSampler(ctx.space, ctx.problem, ctx.device, seed=ctx.seed)
    return optuna.samplers.RandomSampler(seed=ctx.seed)


SPEC = register(
    SamplerSpec(name="random", build=random_search, summary="random search, no config twice")
)
