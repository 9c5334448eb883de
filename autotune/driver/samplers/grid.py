"""``grid``: every config of the space, in Optuna's grid order.

Example:
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=1, high=4)])
    >>> type(SPEC.build(SamplerContext(space=space, seed=0))).__name__
    'AskTellGridSampler'
"""

from __future__ import annotations

import optuna

from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler for an ask/tell loop: the driver checks ``is_exhausted`` itself
    (the stock sampler calls ``study.stop()``, which only works inside ``study.optimize``)."""

    def after_trial(self, study, trial, state, values) -> None:  # noqa: ANN001
        return None

    def is_exhausted(self, study: optuna.Study) -> bool:
        """True when every grid point is measured or being measured: the driver keeps one
        trial in flight while it asks for the next."""
        taken = {
            t.system_attrs["grid_id"]
            for t in study.get_trials(deepcopy=False)
            if "grid_id" in t.system_attrs
            and (t.state.is_finished() or t.state == optuna.trial.TrialState.RUNNING)
        }
        return len(taken) >= len(self._all_grids)


def _needs_space(ctx: SamplerContext) -> str | None:
    return None if ctx.space is not None else "grid search needs the search space"


SPEC = register(
    SamplerSpec(
        name="grid",
        build=lambda ctx: AskTellGridSampler(ctx.space.grid_search_space(), seed=ctx.seed),
        summary="every config of the space, in grid order",
        serves=_needs_space,
    )
)
