"""``auto``: the policy that picks a registered sampler for a space and its objectives.

The first rule whose sampler serves the context wins: one objective over an enumerable
discrete space takes ``bo``, several take ``bo-pareto``; anything else (float parameters, a
composed space too large to list) takes multivariate ``tpe``. The rules were chosen by measurement
(benchmarks/search_quality.py).

Example:
    >>> from autotune.space import load_space
    >>> resolve_sampler("auto", SamplerContext(space=load_space("matmul")))
    'bo'
"""

from __future__ import annotations

from autotune.driver.samplers.registry import SamplerContext, spec_for

AUTO_RULES: tuple[str, ...] = ("bo", "bo-pareto", "tpe")


def resolve_sampler(name: str, ctx: SamplerContext) -> str:
    """The registered sampler ``name`` stands for: itself, or ``auto``'s choice."""
    if name != "auto":
        return name
    for candidate in AUTO_RULES:
        if spec_for(candidate).serves(ctx) is None:
            return candidate
    raise AssertionError("the last auto rule serves every context")  # pragma: no cover
