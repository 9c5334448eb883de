"""Warm start through autotune's own driver (REPLAY): a default sweep of a source landscape,
stored, then a default sweep of a target landscape with ``--warm-start SOURCE`` (its best
configs queued first, its model a prior trusted as far as it ranks the target's
measurements), against a cold default sweep of the target.

Example:
    >>> from benchmarks.search.landscapes import by_name
    >>> curve = sweep_curve(by_name("decode"), "auto", seed=0, trials=3)
    >>> len(curve)
    3
"""

from __future__ import annotations

import tempfile

from autotune.driver import Sweep
from autotune.driver.trial_attrs import INFEASIBLE, STATUS, is_repeat
from benchmarks.search.landscapes import Landscape


def sweep_curve(
    landscape: Landscape, sampler: str, seed: int, trials: int, **overrides
) -> list[float]:  # noqa: ANN003, E501
    """Best-so-far after each launched trial of a real replay sweep."""
    study = Sweep(landscape.sweep_settings(sampler, seed, trials, **overrides)).run().study
    best, curve = float("-inf"), []
    for t in sorted(study.trials, key=lambda t: t.number):
        status = t.user_attrs.get(STATUS)
        if status == INFEASIBLE or is_repeat(t):
            continue
        if status == "ok":
            best = max(best, t.values[0])
        curve.append(best)
    return (curve + [best] * trials)[:trials]


def warm_curve(source: Landscape, target: Landscape, seed: int, trials: int,
               source_trials: int = 50) -> list[float]:  # fmt: skip
    """The target's curve, warm-started from a stored default sweep of ``source``."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"journal:///{tmp}/sweeps.log"
        sweep_curve(source, "auto", seed, source_trials, storage=url, study_name="source")
        return sweep_curve(
            target, "auto", seed + 1000, trials, storage=url, study_name="target",
            warm_start="source",
        )  # fmt: skip
