"""The strategies benchmarks/search_quality.py compares, by row name; each maps a landscape,
a seed and a trial budget to the best-so-far curve (REPLAY).

Every Optuna sampler (autotune's and stock ones) runs under :mod:`.harness`'s rules; Kernel
Tuner's strategies run in its own simulation mode under the same feasible set, trial 0 and
dedup (:mod:`.kernel_tuner_peer`).

Example:
    >>> "autotune default" in STRATEGIES and "kernel_tuner genetic_algorithm" in STRATEGIES
    True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import optuna

from autotune.driver.samplers import make_sampler
from benchmarks.search.harness import run_sampler
from benchmarks.search.kernel_tuner_peer import STRATEGIES as KT_STRATEGIES
from benchmarks.search.kernel_tuner_peer import run_kernel_tuner
from benchmarks.search.landscapes import Landscape

Strategy = Callable[[Landscape, int, int], list[float]]


def autotune(name: str) -> Strategy:
    """autotune's registered sampler ``name`` built for the landscape's space."""

    def factory(landscape: Landscape, seed: int) -> optuna.samplers.BaseSampler:
        return make_sampler(
            name, seed=seed, space=landscape.space(), problem=landscape.problem,
            device=landscape.device,
        )  # fmt: skip

    return lambda landscape, seed, trials: run_sampler(landscape, factory, seed, trials)


def stock(build: Callable[[int], optuna.samplers.BaseSampler]) -> Strategy:
    """An off-the-shelf Optuna sampler with its defaults."""
    return lambda landscape, seed, trials: run_sampler(
        landscape, lambda _ls, s: build(s), seed, trials
    )


def _gp(seed: int) -> optuna.samplers.BaseSampler:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optuna.samplers.GPSampler(seed=seed)


def kernel_tuner(strategy: str) -> Strategy:
    return lambda landscape, seed, trials: run_kernel_tuner(landscape, strategy, seed, trials)


STRATEGIES: dict[str, Strategy] = {
    "random (no repeats)": autotune("random"),
    # Optuna 5's stock TPE is multivariate for one objective
    "optuna TPE (stock)": stock(lambda s: optuna.samplers.TPESampler(seed=s)),
    "optuna TPE univariate": stock(
        lambda s: optuna.samplers.TPESampler(seed=s, multivariate=False)
    ),
    "optuna GPSampler": stock(_gp),
    **{f"kernel_tuner {name}": kernel_tuner(name) for name in KT_STRATEGIES},
    "autotune gp-ei (earlier default)": autotune("gp-ei"),
    "autotune default": autotune("auto"),
}
#: strategies too slow for 100 trials x 30 seeds x every landscape on 2 cores stop earlier
MAX_TRIALS = {
    "optuna GPSampler": 50,
    "kernel_tuner bayes_opt": 50,
    "autotune gp-ei (earlier default)": 50,
    "optuna TPE univariate": 50,
}
#: and with fewer seeds (Optuna's GPSampler: about 6 s a run of 50 trials)
MAX_SEEDS = {"optuna GPSampler": 10}
#: the stock baseline the default must never fall below
STOCK_TPE = "optuna TPE (stock)"
