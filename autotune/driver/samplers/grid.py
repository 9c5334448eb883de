"""``grid``: every config of the space, in Optuna's grid order.

Example:
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=1, high=4)])
    >>> type(SPEC.build(SamplerContext(space=space, seed=0))).__name__
    'AskTellGridSampler'
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from autotune.driver.samplers.registry import SamplerContext, SamplerSpec, register


class AskTellGridSampler(optuna.samplers.GridSampler):
    """Optuna's grid sampler for an ask/tell loop, which knows its points by their values.

    - The driver checks :meth:`is_exhausted` itself (the stock sampler calls ``study.stop()``,
      which only works inside ``study.optimize``).
    - A point counts as visited when a trial holds its values, however it got them (the
      untuned default, a warm start's config), not by the grid index Optuna stored: the index
      follows a shuffle by the seed, which moves on when a sweep resumes.
    - A trial stopped from outside (told FAIL: the budget's end, Ctrl-C, a killed driver)
      measured nothing: its point stays unvisited, and a resume measures it.
    """

    def after_trial(self, study, trial, state, values) -> None:  # noqa: ANN001
        return None

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        """Give the trial an unvisited point (Optuna's own gives trial N point N while N is
        below the grid's size, visited or not)."""
        if "grid_id" in trial.system_attrs or "fixed_params" in trial.system_attrs:
            return
        unvisited = self._get_unvisited_grid_ids(study) or list(range(len(self._all_grids)))
        storage = study._storage
        storage.set_trial_system_attr(trial._trial_id, "search_space", self._search_space)
        storage.set_trial_system_attr(trial._trial_id, "grid_id", unvisited[0])

    def _grid_ids(self, study: optuna.Study) -> tuple[set[int], set[int]]:
        """The grid points measured (or found failing) and those running now."""
        index = {tuple(point): i for i, point in enumerate(self._all_grids)}
        done: set[int] = set()
        running: set[int] = set()
        for t in study._storage.get_all_trials(study._study_id, deepcopy=False):
            values = tuple(t.params.get(name, _ABSENT) for name in self._param_names)
            point = index.get(values)
            if point is None and t.system_attrs.get("search_space") == self._search_space:
                point = t.system_attrs.get("grid_id")  # asked, its values not sampled yet
            if point is None:
                continue
            if t.state in (TrialState.RUNNING, TrialState.WAITING):
                running.add(point)
            elif t.state != TrialState.FAIL:
                done.add(point)
        return done, running

    def _get_unvisited_grid_ids(self, study: optuna.Study) -> list[int]:
        done, running = self._grid_ids(study)
        every = range(len(self._all_grids))
        return [i for i in every if i not in done and i not in running] or [
            i for i in every if i not in done
        ]

    def is_exhausted(self, study: optuna.Study) -> bool:
        """True when every grid point is measured or being measured: the driver keeps one
        trial in flight while it asks for the next."""
        done, running = self._grid_ids(study)
        return len(done | running) >= len(self._all_grids)

    def untried(self, study: optuna.Study) -> int:
        """The grid points neither measured (or found failing) nor running now."""
        done, running = self._grid_ids(study)
        return max(0, len(self._all_grids) - len(done | running))


_ABSENT = object()  # a parameter the trial does not have: matches no grid point


#: the configs a grid search may list (Optuna's GridSampler holds every one in memory: a
#: space of billions filled the machine's memory before the first trial)
MAX_GRID_POINTS = 1_000_000


def _serves(ctx: SamplerContext) -> str | None:
    """A ``serves`` check: a space whose grid fits in memory (a float without a step is
    refused when the grid is built, naming it).

    Example:
        >>> from autotune.space import Param, Space
        >>> wide = Space("s", [Param("n", "int", low=1, high=10**9)])
        >>> print(_serves(SamplerContext(space=wide, seed=0)))
        it lists every config, and this space has 1,000,000,000 (more than 1,000,000); use auto, ...
    """
    if ctx.space is None:
        return "grid search needs the search space"
    if not all(p.discrete for p in ctx.space.params):
        return None
    size = ctx.space.grid_size()
    if size > MAX_GRID_POINTS:
        shown = f"{size:,}" if size < 10**15 else f"{size:.3g}"  # 1,001,000 read 1e+06
        return (f"it lists every config, and this space has {shown} (more than "
                f"{MAX_GRID_POINTS:,}); use auto, tpe or random")  # fmt: skip
    return None


SPEC = register(
    SamplerSpec(
        name="grid",
        build=lambda ctx: AskTellGridSampler(ctx.space.grid_search_space(), seed=ctx.seed),
        summary="every config of the space, in grid order",
        serves=_serves,
    )
)
