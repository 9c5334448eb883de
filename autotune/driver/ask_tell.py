"""An in-process ask/tell search over a discrete space, one measured config per :meth:`step`.

The rules are the driver's: a config that breaks a static constraint is told as failed and
costs no measurement; a config measured before is answered from the study and costs none;
after ``STUCK`` such answers in a row a uniformly drawn unvisited config is measured instead; a
failed measurement is told at the worst value so far with a violated constraint. Used where
many small searches run side by side (:mod:`autotune.driver.grouped`) and by the search
benchmark, which runs every strategy under exactly these rules.

Example:
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=1, high=64)])
    >>> search = AskTellSearch(space, lambda c: -abs(c["x"] - 8), sampler="random", seed=0)
    >>> for _ in range(7):
    ...     _ = search.step()
    >>> search.best_config, search.measurements
    ({'x': 8}, 7)
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import optuna

from autotune.driver.novelty import config_key
from autotune.driver.samplers import make_sampler
from autotune.driver.trial_attrs import INFEASIBLE, STATUS, mark_feasibility
from autotune.failures import TrialStatus
from autotune.space import Space

STUCK = 5
#: config -> the metric (maximised); a failed measurement: its failure state, or None
Measure = Callable[[dict[str, Any]], float | TrialStatus | None]


class AskTellSearch:
    """One search: ``measure`` is called once per distinct feasible config it proposes.

    Args:
        space, problem, device: the space and what its constraints read.
        measure: the measurement; higher is better (negate a time).
        sampler: a registered sampler name or an Optuna sampler.
        first: a config measured first (the untuned default), if feasible.
    """

    def __init__(
        self,
        space: Space,
        measure: Measure,
        *,
        sampler: str | optuna.samplers.BaseSampler = "auto",
        seed: int | None = None,
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
        first: Mapping[str, Any] | None = None,
    ) -> None:
        self.space, self.measure = space, measure
        self.problem, self.device = dict(problem or {}), dict(device or {})
        if isinstance(sampler, str):
            sampler = make_sampler(
                sampler, seed=seed, space=space, problem=self.problem, device=self.device
            )
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.feasible = {config_key(c): c for c in space.grid(self.problem, self.device)}
        self._draws = random.Random(None if seed is None else seed + 7919)
        self.seen: dict[tuple, float | None] = {}
        self.best_config: dict[str, Any] | None = None
        self.best_value = float("-inf")
        if first is not None and config_key(dict(first)) in self.feasible:
            self.study.enqueue_trial(dict(first))

    @property
    def measurements(self) -> int:
        return len(self.seen)

    @property
    def exhausted(self) -> bool:
        return len(self.seen) >= len(self.feasible)

    def step(self) -> float | None:
        """Measure one more distinct config; returns its value (None: failed or exhausted)."""
        free_in_a_row = 0
        while not self.exhausted:
            trial = self.study.ask()
            config = self.space.sample(trial, self.problem, self.device)
            key = config_key(config)
            if key not in self.feasible or key in self.seen:
                # rejected by a constraint, or answered from the study: no measurement
                value = self.seen.get(key)
                status = "ok" if value is not None else INFEASIBLE
                self._tell(trial, status, value)
                free_in_a_row += 1
                if free_in_a_row >= STUCK:
                    unvisited = [k for k in self.feasible if k not in self.seen]
                    self.study.enqueue_trial(self.feasible[self._draws.choice(unvisited)])
                    free_in_a_row = 0
                continue
            measured = self.measure(config)
            value = measured if isinstance(measured, int | float) else None
            failure = measured.value if isinstance(measured, TrialStatus) else "failed"
            self.seen[key] = value
            self._tell(trial, "ok" if value is not None else failure, value)
            if value is not None and value > self.best_value:
                self.best_value, self.best_config = value, dict(config)
            return value
        return None

    def _tell(self, trial: optuna.Trial, status: str, value: float | None) -> None:
        trial.set_user_attr(STATUS, status)
        mark_feasibility(trial, value is not None)
        self.study.tell(trial, value if value is not None else self._worst())

    def _worst(self) -> float:
        values = [v for v in self.seen.values() if v is not None]
        return min(values) if values else 0.0
