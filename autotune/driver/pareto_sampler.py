"""Several objectives over the enumerated configs: ParEGO (Knowles, 2006) on the grid sampler.

Each proposal draws a random weight vector, scalarises the measured objectives (each
log-scaled where positive, oriented so that higher is better, and normalised to [0, 1]) by
the augmented Tchebycheff function, and picks the unvisited config of highest expected
improvement of that scalar, with failures kept out through the feasibility classifier. Over a
run the weights sweep the Pareto front.

Example:
    >>> import optuna
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "int", low=0, high=9)])
    >>> sampler = ParEgoSampler(space, seed=0, n_startup_trials=3)
    >>> study = optuna.create_study(directions=["maximize", "maximize"], sampler=sampler)
    >>> for _ in range(6):
    ...     trial = study.ask(); x = space.sample(trial)["x"]
    ...     _ = study.tell(trial, [x, 9 - x])
    >>> len({t.params["x"] for t in study.trials})
    6
"""

from __future__ import annotations

import numpy as np
import optuna
from optuna.study import StudyDirection

from autotune.driver.grid_sampler import GridBayesSampler, _Observations

_RHO = 0.05  # the augmentation of the Tchebycheff scalarisation


class ParEgoSampler(GridBayesSampler):
    """GP + EI of a randomly weighted Tchebycheff scalarisation, per proposal."""

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        kwargs.setdefault("failures", "classifier")
        super().__init__(*args, **kwargs)
        self._weights_rng = np.random.default_rng(kwargs.get("seed"))

    def _observations(self, study: optuna.Study) -> _Observations:
        signs = [1.0 if d == StudyDirection.MAXIMIZE else -1.0 for d in study.directions]
        seen, measured = self._read_trials(study)
        if not measured:
            return seen
        columns = np.array(list(measured.values()), dtype=float)
        for j in range(columns.shape[1]):
            column = columns[:, j]
            if (column > 0).all():
                column = np.log(column)
            column = column * signs[j]
            low, high = column.min(), column.max()
            columns[:, j] = (column - low) / (high - low) if high > low else 0.0
        weights = self._weights_rng.dirichlet(np.ones(columns.shape[1]))
        # maximised: the worst weighted objective, plus a little of their sum
        scalar = (weights * columns).min(axis=1) + _RHO * (weights * columns).sum(axis=1)
        seen.targets = dict(zip(measured, scalar.tolist(), strict=True))
        return seen
