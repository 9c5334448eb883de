"""Two objectives on the training-step landscape (REPLAY): tokens/s (maximised) against peak
memory (minimised). Every sampler gets the same trial 0 and the same dedup (a repeat costs no
trial); the score is the hypervolume of the measured front, as a fraction of the hypervolume
of the table's whole Pareto front, with the reference point at the table's worst tokens/s and
largest peak memory.

Example:
    >>> hypervolume([(2.0, 1.0), (1.0, 0.5)], reference=(0.0, 2.0))
    2.5
"""

from __future__ import annotations

import random
from collections.abc import Callable

import optuna

from autotune.driver.novelty import config_key
from autotune.driver.pareto_sampler import ParEgoSampler
from autotune.driver.trial_attrs import INFEASIBLE, STATUS, mark_feasibility
from benchmarks.search.landscapes import Landscape, by_name

OBJECTIVES = ("tokens_per_s", "peak_memory_gb")  # maximise, minimise


def hypervolume(points: list[tuple[float, float]], reference: tuple[float, float]) -> float:
    """Area dominated by ``points`` (x maximised, y minimised) and bounded by ``reference``."""
    front = sorted(
        ((x, y) for x, y in points if x > reference[0] and y < reference[1]), key=lambda p: -p[0]
    )
    area, lowest = 0.0, reference[1]
    for x, y in front:
        if y < lowest:
            area += (x - reference[0]) * (lowest - y)
            lowest = y
    return area


def _values(landscape: Landscape) -> dict[tuple, tuple[float, float] | None]:
    frame = landscape.frame
    out = {}
    for row in frame.to_dict(orient="records"):
        config = {p: row[p] for p in landscape.params}
        config = {k: (v.item() if hasattr(v, "item") else v) for k, v in config.items()}
        ok = row["status"] == "ok"
        out[config_key(config)] = (row[OBJECTIVES[0]], row[OBJECTIVES[1]]) if ok else None
    return out


def reference_and_best(landscape: Landscape) -> tuple[tuple[float, float], float]:
    values = _values(landscape)
    feasible = [values[config_key(c)] for c in landscape.feasible()]
    points = [v for v in feasible if v is not None]
    reference = (min(p[0] for p in points), max(p[1] for p in points))
    return reference, hypervolume(points, reference)


SAMPLERS: dict[str, Callable[[Landscape, int], optuna.samplers.BaseSampler]] = {
    "random (no repeats)": lambda ls, s: optuna.samplers.RandomSampler(seed=s),
    "optuna NSGA-II": lambda ls, s: optuna.samplers.NSGAIISampler(seed=s),
    "optuna TPE (multi-objective)": lambda ls, s: optuna.samplers.TPESampler(seed=s),
    "autotune ParEGO (bo-pareto)": lambda ls, s: ParEgoSampler(
        ls.space(), ls.problem, ls.device, seed=s
    ),
}


def run(name: str, seed: int, trials: int, landscape: Landscape | None = None) -> float:
    """Fraction of the front's hypervolume that sampler ``name`` reaches after ``trials``."""
    landscape = landscape or by_name("train_step")
    values = _values(landscape)
    space = landscape.space()
    feasible = {config_key(c): c for c in landscape.feasible()}
    reference, best = reference_and_best(landscape)
    study = optuna.create_study(
        directions=["maximize", "minimize"], sampler=SAMPLERS[name](landscape, seed)
    )
    study.enqueue_trial(landscape.first_config())
    seen: dict[tuple, tuple[float, float] | None] = {}
    draws, free = random.Random(seed + 7919), 0
    while len(seen) < min(trials, len(feasible)):
        trial = study.ask()
        config = space.sample(trial, landscape.problem, landscape.device)
        key = config_key(config)
        fresh = key in feasible and key not in seen
        value = values[key] if fresh else seen.get(key)
        if fresh:
            seen[key] = value
            free = 0
        else:
            free += 1
        trial.set_user_attr(STATUS, "ok" if value else ("failed" if fresh else INFEASIBLE))
        mark_feasibility(trial, value is not None)
        study.tell(trial, list(value) if value else [reference[0], reference[1]])
        if free >= 20:
            unvisited = [k for k in feasible if k not in seen]
            study.enqueue_trial(feasible[draws.choice(unvisited)])
            free = 0
    points = [v for v in seen.values() if v is not None]
    return hypervolume(points, reference) / best
