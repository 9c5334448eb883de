"""Kernel Tuner's search strategies as a peer, through its simulation mode (REPLAY).

The landscape becomes a Kernel Tuner cache file (its format: one entry per config, the
objective ``time`` to minimise, a failure as ``CompilationFailedConfig`` or
``RuntimeFailedConfig``), restricted to the same feasible set as every other strategy. Trial 0
is the landscape's first config, as for everybody; Kernel Tuner then gets the remaining
budget as ``max_fevals`` (unique evaluations: a repeat costs it nothing, as it costs nobody).

Example:
    >>> from benchmarks.search.landscapes import by_name
    >>> len(run_kernel_tuner(by_name("decode"), "random_sample", seed=0, trials=10))
    10
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import tempfile
import warnings
from pathlib import Path

import numpy as np

from autotune.driver.novelty import config_key
from benchmarks.search.landscapes import Landscape

STRATEGIES = ("random_sample", "genetic_algorithm", "simulated_annealing", "bayes_opt")


def _cache_file(landscape: Landscape, directory: Path) -> tuple[Path, dict[str, list]]:
    feasible = landscape.feasible()
    tune_params = {p: sorted({c[p] for c in feasible}, key=_order) for p in landscape.params}
    cache = {}
    for config in feasible:
        status, value = landscape.lookup(config)
        entry = dict(config)
        failure = (
            "CompilationFailedConfig" if status == "out_of_resources" else "RuntimeFailedConfig"
        )
        entry["time"] = 1.0 / value if value else failure  # minimised: the metric's inverse
        entry.update(compile_time=0.0, verification_time=0.0, benchmark_time=0.0)
        cache[",".join(str(config[p]) for p in landscape.params)] = entry
    doc = {
        "device_name": "H200 (replay)",
        "kernel_name": landscape.key,
        "problem_size": [1],
        "tune_params_keys": landscape.params,
        "tune_params": tune_params,
        "objective": "time",
        "cache": cache,
    }
    path = directory / "cache.json"
    path.write_text(json.dumps(doc))
    return path, tune_params


def _order(value):  # noqa: ANN001, ANN202
    return (isinstance(value, str), value if not isinstance(value, str) else str(value))


def run_kernel_tuner(landscape: Landscape, strategy: str, seed: int, trials: int) -> list[float]:
    """Best-so-far value after each unique evaluation of Kernel Tuner's ``strategy``."""
    from constraint import FunctionConstraint
    from kernel_tuner import tune_kernel

    feasible_keys = {",".join(str(c[p]) for p in landscape.params) for c in landscape.feasible()}
    first = landscape.first_config()
    _, first_value = landscape.lookup(first)
    order = [config_key(first)]
    with tempfile.TemporaryDirectory() as tmp:
        cache, tune_params = _cache_file(landscape, Path(tmp))
        np.random.seed(seed)
        random.seed(seed)
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            results, _ = tune_kernel(
                landscape.key, "__global__ void kernel() {}", [1], [], tune_params,
                strategy=strategy, strategy_options={"max_fevals": trials - 1},
                cache=str(cache), simulation_mode=True, quiet=True,
                restrictions=[FunctionConstraint(
                    lambda *v: ",".join(str(x) for x in v) in feasible_keys)],
            )  # fmt: skip
    for result in results:
        if result is None:
            continue
        key = config_key({p: result[p] for p in landscape.params})
        if key not in order:
            order.append(key)
    best, curve = float("-inf"), []
    values = {config_key(c): landscape.lookup(c)[1] for c in landscape.feasible()}
    for key in order[:trials]:
        value = values[key] if key != config_key(first) else first_value
        if value is not None:
            best = max(best, value)
        curve.append(best)
    return curve + [best] * (trials - len(curve))
