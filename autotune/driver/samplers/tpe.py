"""``tpe`` (multivariate, grouped, Optuna's constant liar when several trials run) and
``tpe-univariate`` (Optuna's stock TPE, one density per parameter).

Example:
    >>> type(SPEC.build(SamplerContext(seed=0))).__name__
    'TPESampler'
"""

from __future__ import annotations

import warnings

import optuna

from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


def multivariate_tpe(ctx: SamplerContext) -> optuna.samplers.TPESampler:
    """Multivariate + group TPE: models parameters jointly, and conditional ones per group."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            multivariate=True,
            group=True,
            n_startup_trials=ctx.n_startup_trials,
            constant_liar=ctx.in_flight > 1,
            seed=ctx.seed,
        )


SPEC = register(
    SamplerSpec(
        name="tpe",
        build=multivariate_tpe,
        summary="multivariate TPE (Optuna), any space, several objectives",
    )
)
UNIVARIATE = register(
    SamplerSpec(
        name="tpe-univariate",
        build=lambda ctx: optuna.samplers.TPESampler(
            n_startup_trials=ctx.n_startup_trials, seed=ctx.seed
        ),
        summary="Optuna's stock TPE: one density per parameter",
    )
)
