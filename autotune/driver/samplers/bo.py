"""``bo`` (the default for one objective over a discrete space): a portfolio of two GP +
expected-improvement searches over the enumerated feasible configs, one over all of them and
one over the neighbours of the best config found, sharing trials by recent improvement
(:class:`~autotune.driver.portfolio.PortfolioSampler`). Failures are kept out of the
regression and weigh the acquisition by a feasibility classifier. ``gp-ei`` is the single
global search of earlier releases (failures at the worst value). Chosen by measurement:
benchmarks/search_quality.py.

Example:
    >>> from autotune.space import load_space
    >>> ctx = SamplerContext(space=load_space("matmul"), problem={"M": 64, "N": 64, "K": 64})
    >>> SPEC.serves(ctx) is None, sorted(SPEC.build(ctx).members)
    (True, ['global', 'local'])
"""

from __future__ import annotations

from autotune.driver.enumeration import MAX_GRID, Enumeration, is_enumerable
from autotune.driver.grid_sampler import GridBayesSampler
from autotune.driver.portfolio import PortfolioSampler
from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


def enumerable(ctx: SamplerContext) -> str | None:
    """A ``serves`` check: None for one objective over a discrete space of at most MAX_GRID."""
    if ctx.n_objectives != 1:
        return "it handles one objective only; use bo-pareto or tpe for several"
    return discrete(ctx)


def discrete(ctx: SamplerContext) -> str | None:
    """A ``serves`` check: None for a discrete space of at most MAX_GRID raw configs."""
    if ctx.space is None or not is_enumerable(ctx.space):
        return f"it needs a discrete space of at most {MAX_GRID} configs; use tpe"
    return None


def global_and_local(ctx: SamplerContext) -> PortfolioSampler:
    """The default: global and local GP-EI with a feasibility classifier, as a portfolio;
    the two list and featurise the space's configs once between them."""
    grid = Enumeration.of(ctx.space, ctx.problem, ctx.device)
    members = {
        "global": GridBayesSampler(
            ctx.space, ctx.problem, ctx.device, seed=ctx.seed, failures="classifier", grid=grid
        ),
        "local": GridBayesSampler(
            ctx.space, ctx.problem, ctx.device, seed=ctx.seed, failures="classifier",
            region="local", grid=grid,
        ),
    }  # fmt: skip
    return PortfolioSampler(members)


SPEC = register(
    SamplerSpec(
        name="bo",
        build=global_and_local,
        summary="GP-EI over the feasible configs, globally and around the best, as a portfolio",
        serves=enumerable,
    )
)
GP_EI = register(
    SamplerSpec(
        name="gp-ei",
        build=lambda ctx: GridBayesSampler(ctx.space, ctx.problem, ctx.device, seed=ctx.seed),
        summary="one global GP-EI over the feasible configs (the default before 2026-12-01)",
        serves=enumerable,
    )
)
