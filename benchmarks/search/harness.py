"""The one set of rules every Optuna sampler is benchmarked under (REPLAY): those of
:class:`autotune.driver.ask_tell.AskTellSearch` (a constraint rejection or a repeat costs no
trial; a failed measurement costs one), with the landscape's feasible set and its trial 0
(:meth:`Landscape.first_config`) for everybody.

Example:
    >>> import optuna
    >>> from benchmarks.search.landscapes import by_name
    >>> curve = run_sampler(by_name("decode"), lambda ls, seed: optuna.samplers.RandomSampler(
    ...     seed=seed), seed=0, trials=5)
    >>> len(curve)
    5
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from autotune.driver.ask_tell import AskTellSearch
from autotune.failures import TrialStatus
from benchmarks.search.landscapes import Landscape

SamplerFactory = Callable[[Landscape, int], optuna.samplers.BaseSampler]


def _measured(landscape: Landscape, config: dict) -> float | TrialStatus:
    """The recorded metric of ``config``, or its recorded failure state."""
    status, value = landscape.lookup(config)
    return value if value is not None else TrialStatus(status)


def run_sampler(
    landscape: Landscape, factory: SamplerFactory, seed: int, trials: int
) -> list[float]:
    """Best-so-far value after each measured config of the sampler ``factory`` builds."""
    search = AskTellSearch(
        landscape.space(), lambda config: _measured(landscape, config),
        sampler=factory(landscape, seed), seed=seed, problem=landscape.problem,
        device=landscape.device, first=landscape.first_config(),
    )  # fmt: skip
    curve: list[float] = []
    while len(curve) < trials and not search.exhausted:
        search.step()
        curve.append(search.best_value)
    return curve + [search.best_value] * (trials - len(curve))
