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


def _drawn_at_random(ctx: SamplerContext) -> str | None:
    """CMA-ES searches int and float parameters; Optuna draws the rest (categorical, pow2,
    bool: suggested as categories) at random, which the sweep says.

    Example:
        >>> from autotune.space import Param, Space
        >>> space = Space("s", [Param("BM", "pow2", low=16, high=64),
        ...                     Param("stages", "int", low=2, high=5)])
        >>> print(_drawn_at_random(SamplerContext(space=space)))
        cmaes searches the int and float parameters (stages); the other 1 (BM) is drawn at random
    """
    if ctx.space is None:
        return None
    numeric = [p.name for p in ctx.space.params if p.kind in ("int", "float")]
    other = [p.name for p in ctx.space.params if p.kind not in ("int", "float")]
    if not other:
        return None
    if not numeric:
        return ("cmaes: every parameter of this space is categorical (pow2, bool and choices "
                "are): CMA-ES draws them all at random, as --sampler random does")  # fmt: skip
    shown = ", ".join(other[:5]) + (", ..." if len(other) > 5 else "")
    return (f"cmaes searches the int and float parameters ({', '.join(numeric[:5])}"
            f"{', ...' if len(numeric) > 5 else ''}); the other {len(other)} ({shown}) "
            f"{'is' if len(other) == 1 else 'are'} drawn at random")  # fmt: skip


SPEC = register(
    SamplerSpec(
        name="cmaes",
        build=cma_es,
        summary="CMA-ES (Optuna)",
        serves=one_objective,
        note=_drawn_at_random,
    )  # fmt: skip
)
