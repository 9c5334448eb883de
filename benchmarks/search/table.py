"""Run strategies over landscapes and seeds (in parallel processes) and summarise the curves:
mean / worst fraction of the optimum at each checkpoint, median trials to 98%.

Example:
    >>> summarise([[1.0, 2.0], [2.0, 2.0]], optimum=2.0, checkpoints=(1, 2))["to98"]
    1.5
"""

from __future__ import annotations

import json
import statistics
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
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
    strategies: list[str],
    keys: list[str],
    seeds: int,
    trials: int,
    jobs: int = 2,
    cache: Path | None = None,
) -> dict[tuple[str, str], list[list[float]]]:
    """(strategy, landscape key) -> one curve per seed, in seed order. With ``cache`` (a
    JSON-lines file), curves already there are read back rather than run again, and each new
    one is appended as soon as it is done: a long table survives being stopped."""
    done = _read_cache(cache)
    work = [(s, k, seed, trials) for k in keys for s in strategies for seed in range(seeds)]
    todo = [job for job in work if job not in done]
    if todo:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for strategy, key, seed, curve in pool.map(_one, todo, chunksize=4):
                done[(strategy, key, seed, trials)] = curve
                if cache is not None:
                    with cache.open("a") as out:
                        out.write(json.dumps([strategy, key, seed, trials, curve]) + "\n")
    curves: dict[tuple[str, str], list[list[float]]] = {}
    for job in work:
        curves.setdefault((job[0], job[1]), []).append(done[job])
    return curves


def _read_cache(cache: Path | None) -> dict[tuple[str, str, int, int], list[float]]:
    if cache is None or not cache.exists():
        return {}
    done = {}
    for line in cache.read_text().splitlines():
        if line.strip():
            strategy, key, seed, trials, curve = json.loads(line)
            done[(strategy, key, seed, trials)] = curve
    return done


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
