"""A composed space of 100+ parameters searched by group vs flat (REPLAY).

The objective is the time of a decoder's GEMMs plus a weighted training step: 24 GEMM groups
(each with the six tile tunables), every group replaying one recorded per-shape matmul
landscape (the six recorded matmul tables, four groups each, as four projections of one
shape would), plus the training-step landscape's five knobs as the joint workload knobs:
24 x 6 + 5 = 149 parameters. The composed time is the sum of the groups' kernel times plus
``TRAIN_WEIGHT`` x the step's time; a failed kernel fails a flat trial.

Search by group (autotune's default sampler per group, one measurement of each group per
round, the joint knobs last with the groups at their best) is compared with flat Optuna TPE
and flat random over all 149 parameters at the same number of kernel measurements: a flat
trial measures every group and the step (25 measurements).

Example:
    >>> problem = ComposedProblem.build()
    >>> len(problem.flat_space().params)
    149
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

import optuna

from autotune.driver.grouped import Group, JointKnobs, search_by_group
from autotune.space import Space
from benchmarks.search.landscapes import Landscape, available, by_name

REPEATS = 4
TRAIN_WEIGHT = 0.1
REJECTIONS = 20
MATMUL_KEYS = ("4096", "mlp", "decode", "raw_8192", "raw_mlp", "raw_decode")


@dataclass
class ComposedProblem:
    groups: list[tuple[str, Landscape]]
    train: Landscape

    @classmethod
    def build(cls) -> ComposedProblem:
        present = {ls.key for ls in available()}
        keys = [k for k in MATMUL_KEYS if k in present and _complete(by_name(k))]
        groups = [(f"{k}.p{r}", by_name(k)) for k in keys for r in range(REPEATS)]
        return cls(groups, by_name("train_step"))

    def kernel_ms(self, landscape: Landscape, config: dict[str, Any]) -> float | None:
        status, tflops = landscape.lookup(config)
        if tflops is None:
            return None
        p = landscape.problem
        return 2 * p["M"] * p["N"] * p["K"] / (tflops * 1e12) * 1e3

    def step_ms(self, knobs: dict[str, Any]) -> float | None:
        _, tokens_per_s = self.train.lookup(knobs)
        return None if tokens_per_s is None else TRAIN_WEIGHT * 16 * 1024 / tokens_per_s * 1e3

    def optimum_ms(self) -> float:
        total = 0.0
        for _, ls in self.groups:
            total += min(t for c in ls.feasible() if (t := self.kernel_ms(ls, c)) is not None)
        total += min(t for c in self.train.feasible() if (t := self.step_ms(c)) is not None)
        return total

    def flat_space(self) -> Space:
        params = []
        for name, ls in self.groups:
            for p in ls.space().params:
                params.append(_renamed(p, f"{name}."))
        params += list(self.train.space().params)
        return Space("composed", params)

    def feasible(self, config: dict[str, Any]) -> bool:
        """Every group's part and the knobs pass their spaces' static constraints."""
        for name, ls in self.groups:
            if {p: config[f"{name}.{p}"] for p in ls.params} not in _feasible_list(ls):
                return False
        return {p: config[p] for p in self.train.params} in _feasible_list(self.train)

    def random_feasible(self, rng: random.Random) -> dict[str, Any]:
        config = {}
        for name, ls in self.groups:
            config.update({f"{name}.{k}": v for k, v in rng.choice(_feasible_list(ls)).items()})
        config.update(rng.choice(_feasible_list(self.train)))
        return config

    def flat_ms(self, config: dict[str, Any]) -> float | None:
        total = 0.0
        for name, ls in self.groups:
            part = {p: config[f"{name}.{p}"] for p in ls.params}
            if part not in _feasible_list(ls):
                return None  # outside the group's constraints: the run fails
            ms = self.kernel_ms(ls, part)
            if ms is None:
                return None
            total += ms
        knobs = {p: config[p] for p in self.train.params}
        if knobs not in _feasible_list(self.train):
            return None
        step = self.step_ms(knobs)
        return None if step is None else total + step


_FEASIBLE: dict[str, list[dict[str, Any]]] = {}


def _feasible_list(ls: Landscape) -> list[dict[str, Any]]:
    if ls.key not in _FEASIBLE:
        _FEASIBLE[ls.key] = ls.feasible()
    return _FEASIBLE[ls.key]


def _complete(ls: Landscape) -> bool:
    try:
        ls.feasible()
    except ValueError:
        return False
    return True


def _renamed(param, prefix: str):  # noqa: ANN001, ANN202
    from dataclasses import replace

    return replace(param, name=prefix + param.name, prefix=prefix)


def grouped_curve(problem: ComposedProblem, seed: int, per_group: int, joint_trials: int):
    """(measurements, fraction of the optimum) after every round, then after the joint knobs."""
    groups = [
        Group(name, ls.space(), _kernel_measure(problem, ls), ls.problem, ls.device,
              ls.first_config())
        for name, ls in problem.groups
    ]  # fmt: skip
    first_knobs = problem.train.first_config()
    result = search_by_group(
        groups, per_group, seed=seed,
        joint=JointKnobs(
            problem.train.space(), lambda _configs, knobs: _neg(problem.step_ms(knobs)),
            joint_trials, problem.train.problem, problem.train.device, first_knobs,
        ),
    )  # fmt: skip
    optimum = problem.optimum_ms()
    step_first = problem.step_ms(first_knobs)
    curve = [(m, optimum / (-value + step_first)) for m, value in result.progress]
    total = -sum(result.values.values()) - (result.joint_value or -step_first)
    curve.append((result.measurements, optimum / total))
    return curve, result


def flat_curve(problem: ComposedProblem, sampler: str, seed: int, trials: int):
    """(measurements, fraction of the optimum) after every flat trial of ``sampler``.

    As in the driver, a config that breaks a group's static constraints is rejected before
    launch and costs no measurement; after ``REJECTIONS`` rejections in a row the trial takes
    a uniformly drawn feasible config of every group instead. A recorded failure of any
    group's kernel fails the whole trial (its measurements are spent)."""
    space = problem.flat_space()
    if sampler == "tpe":
        chosen = optuna.samplers.TPESampler(seed=seed)
    else:
        chosen = optuna.samplers.RandomSampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=chosen)
    first = {f"{name}.{k}": v for name, ls in problem.groups for k, v in ls.first_config().items()}
    first.update(problem.train.first_config())
    study.enqueue_trial(first)
    draws = random.Random(seed + 7919)
    optimum, best, curve = problem.optimum_ms(), math.inf, []
    per_trial = len(problem.groups) + 1
    worst = None
    for n in range(trials):
        rejected = 0
        while True:
            trial = study.ask()
            config = space.sample(trial)
            if problem.feasible(config):
                break
            study.tell(trial, worst if worst is not None else 1e9)  # rejected: free
            rejected += 1
            if rejected >= REJECTIONS:
                study.enqueue_trial(problem.random_feasible(draws))
                rejected = 0
        ms = problem.flat_ms(config)
        if ms is None:
            study.tell(trial, worst if worst is not None else 1e9)
        else:
            worst = ms if worst is None else max(worst, ms)
            study.tell(trial, ms)
            best = min(best, ms)
        curve.append(((n + 1) * per_trial, optimum / best if best < math.inf else 0.0))
    return curve


def _kernel_measure(problem: ComposedProblem, landscape: Landscape):  # noqa: ANN202
    return lambda config: _neg(problem.kernel_ms(landscape, config))


def _neg(ms: float | None) -> float | None:
    return None if ms is None else -ms


def measurements_to(curve: list[tuple[int, float]], fraction: float) -> float:
    return next((m for m, f in curve if f >= fraction), math.inf)
