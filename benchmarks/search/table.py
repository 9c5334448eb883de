"""Run strategies over landscapes and seeds (in parallel processes) and summarise the curves:
mean / worst fraction of the optimum at each checkpoint, median trials to 98%.

Example:
    >>> summarise([[1.0, 2.0], [2.0, 2.0]], optimum=2.0, checkpoints=(1, 2))["to98"]
    1.5
"""

from __future__ import annotations

import statistics
import warnings
from concurrent.futures import ProcessPoolExecutor
from typing import Any

CHECKPOINTS = (10, 20, 50, 100)


def _one(job: tuple[str, str, int, int]) -> tuple[str, str, int, list[float]]:
    import optuna

    from benchmarks.search.landscapes import by_name
    from benchmarks.search.strategies import STRATEGIES

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    strategy, key, seed, trials = job
    return strategy, key, seed, STRATEGIES[strategy](by_name(key), seed, trials)


def run_all(
    strategies: list[str], keys: list[str], seeds: int, trials: int, jobs: int = 2
) -> dict[tuple[str, str], list[list[float]]]:
    """(strategy, landscape key) -> one curve per seed."""
    work = [(s, k, seed, trials) for k in keys for s in strategies for seed in range(seeds)]
    curves: dict[tuple[str, str], list[list[float]]] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for strategy, key, _seed, curve in pool.map(_one, work, chunksize=4):
            curves.setdefault((strategy, key), []).append(curve)
    return curves


def summarise(
    curves: list[list[float]], optimum: float, checkpoints: tuple[int, ...] = CHECKPOINTS
) -> dict[Any, Any]:
    """Per checkpoint n: (mean, worst) fraction of the optimum after n trials; ``to98``: the
    median number of trials to reach 98% (inf where a seed never does)."""
    row: dict[Any, Any] = {}
    for n in checkpoints:
        fractions = [c[min(n, len(c)) - 1] / optimum for c in curves]
        row[n] = (statistics.mean(fractions), min(fractions))
    reach = []
    for c in curves:
        hit = next((i + 1 for i, v in enumerate(c) if v >= 0.98 * optimum), None)
        reach.append(hit if hit is not None else float("inf"))
    row["to98"] = statistics.median(reach)
    return row
