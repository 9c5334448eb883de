"""Bayesian optimisation over the enumerated configs of a discrete space (the default sampler
for kernel tile sizes and training-step settings).

A tile-size space has a few hundred to a few thousand configs that pass its static
constraints. This sampler lists them once, describes each by features that keep the order of
the values (a power of two by its log2, an int by its value, another number by its rank, a
string by one-hot, a bool as 0/1), fits a Gaussian process to the log of the measured metric
and launches the unvisited config of highest expected improvement. So it never proposes a
config that breaks a constraint or repeats one, and a measured region informs its neighbours
(TPE over categoricals learns each tile size separately).

Failed trials enter the model at the worst value measured, so the region around a crash, an
OOM or a config the objective cannot run (``infeasible``) is left; none is proposed again.
A config that dominates one that ran out of a resource (``out_of_resources``, ``oom``: at least
its value in every numeric parameter, the same strings and bools) waits until no other is
left: more of every tile size, stage or micro-batch never needs less shared or device memory.
Configs still running (several trials in flight, or other drivers of the same study) are
never proposed, and enter the model at their predicted mean (the kriging believer): the
variance around them shrinks, so the next pick goes elsewhere instead of next to them.
The configs and their features are :mod:`autotune.driver.enumeration`'s. Spaces with a float
parameter, with more than its ``MAX_GRID`` raw configs, or with several objectives are not for
this sampler: :func:`autotune.driver.samplers.make_sampler` gives them TPE.

Example:
    >>> import optuna
    >>> from autotune.space import Param, Space
    >>> space = Space("s", [Param("x", "pow2", low=1, high=64), Param("y", "bool")])
    >>> sampler = GridBayesSampler(space, seed=0, n_startup_trials=3)
    >>> study = optuna.create_study(direction="maximize", sampler=sampler)
    >>> for _ in range(10):
    ...     trial = study.ask()
    ...     config = space.sample(trial)
    ...     _ = study.tell(trial, -abs(config["x"] - 16) - (0 if config["y"] else 1))
    >>> study.best_params
    {'x': 16, 'y': True}
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from autotune.driver.enumeration import Enumeration, features
from autotune.driver.novelty import config_key
from autotune.driver.transfer_prior import TransferPrior
from autotune.driver.trial_attrs import INFEASIBLE, STATUS, is_repeat
from autotune.driver.trial_memo import FinishedTrialMemo
from autotune.space import Space

if TYPE_CHECKING:
    from autotune.driver.gp import GaussianProcess

#: failure states that a config dominating the failed one shares (more of every ordered
#: parameter asks for more of the resource): not proposed while others are left
RESOURCE_FAILURES = frozenset({"out_of_resources", "oom"})


@dataclass(frozen=True)
class _TrialRow:
    """What :meth:`EnumeratedSampler._read_trials` takes from one trial. ``kind``: repeat,
    outside (not an enumerated config), pending, stopped (told FAIL: stopped from outside,
    by the budget's end or a driver's kill, so its config is still unvisited), other
    (waiting: enqueued), measured or failed."""

    kind: str
    key: tuple = ()
    index: int = -1
    drawn: bool = False
    values: tuple[float, ...] = ()
    status: str = ""


@dataclass
class _Observations:
    visited: set[tuple] = field(default_factory=set)
    targets: dict[int, float] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    #: failed for want of a resource (shared memory, device memory): see RESOURCE_FAILURES
    short_of_resources: list[int] = field(default_factory=list)
    drawn: int = 0


class EnumeratedSampler(optuna.samplers.BaseSampler):
    """A sampler that lists the feasible configs of ``space`` once and proposes each unvisited
    one at most once; subclasses choose which (:meth:`_choose`). Exhausted when every
    feasible config was tried.

    Args:
        space: a discrete space (see :func:`~autotune.driver.enumeration.is_enumerable`).
        problem, device: what the space's constraints read.
        seed: seeds the random draws.
        grid: the space's :class:`Enumeration` at this problem and device, if another
            sampler listed it already (else it is listed here).
    """

    def __init__(
        self,
        space: Space,
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
        *,
        seed: int | None = None,
        grid: Enumeration | None = None,
    ) -> None:
        self.space = space
        self._rng = random.Random(seed)
        self._fallback = optuna.samplers.RandomSampler(seed=seed)
        self._grid = grid if grid is not None else Enumeration.of(space, problem, device)
        self._configs = self._grid.configs
        self._keys = self._grid.keys
        self._index = self._grid.index
        self._distributions = {p.name: p.distribution() for p in space.params}
        self._left: int | None = None  # unvisited configs at the last proposal
        # each finished trial read once, not at every proposal: at 139 trials reading the
        # study took 0.06-0.10 ms a proposal instead of 0.42-0.48
        self._rows = FinishedTrialMemo(self._trial_row)

    @property
    def feasible_configs(self) -> int:
        return len(self._configs)

    def is_exhausted(self, study: optuna.Study) -> bool:
        """True when the last proposal found no unvisited feasible config left (read from
        that proposal's view of the study: this check costs nothing)."""
        return self._left == 0

    def untried(self, study: optuna.Study) -> int:
        """The feasible configs no trial of ``study`` has tried (or runs now): those this
        sampler may still propose, before it proposes any."""
        visited = self._observations(study).visited
        return sum(1 for key in self._keys if key not in visited)

    def reseed_rng(self) -> None:
        self._rng.seed()
        self._fallback.reseed_rng()

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return dict(self._distributions)

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space or not self._configs or "fixed_params" in trial.system_attrs:
            return {}  # an enqueued trial (baseline, warm start, steering) sets its own values
        seen = self._observations(study)
        # in index order, from the few visited keys rather than a lookup per config (at 20,000
        # configs and 100 visited: 0.5 ms instead of 4.1)
        taken = np.zeros(len(self._keys), dtype=bool)
        taken[[i for k in seen.visited if (i := self._index.get(k)) is not None]] = True
        unvisited = np.flatnonzero(~taken).tolist()
        self._left = max(0, len(unvisited) - 1)
        if not unvisited:
            return {}
        return dict(self._configs[self._choose(seen, unvisited)])

    def _choose(self, seen: _Observations, unvisited: list[int]) -> int:
        """The index of the config to propose next: here, a uniform draw."""
        return self._rng.choice(unvisited)

    def _read_trials(self, study: optuna.Study) -> tuple[_Observations, dict[int, list[float]]]:
        """What the study says about the grid, for a model to read: the keys of every config
        tried (running ones too), the configs still running (pending), the failed ones, how
        many measured configs this sampler drew (not enqueued); and the values (every
        objective, all finite) of each measured config. Repeats are skipped."""
        seen = _Observations()
        measured: dict[int, list[float]] = {}
        for row in self._rows.summaries(study, study.get_trials(deepcopy=False)):
            if row.kind in ("repeat", "stopped"):
                continue  # a stopped trial (the budget's end, a kill) says nothing: unvisited
            seen.visited.add(row.key)
            if row.kind == "outside":
                continue
            if row.kind == "pending":
                seen.pending.append(row.index)
                continue
            if row.kind == "other":
                continue
            seen.drawn += row.drawn
            if row.kind == "measured":
                measured[row.index] = list(row.values)
            else:
                seen.failed.append(row.index)
                if row.status in RESOURCE_FAILURES:
                    seen.short_of_resources.append(row.index)
        seen.failed = [i for i in seen.failed if i not in measured]
        seen.short_of_resources = [i for i in seen.short_of_resources if i not in measured]
        return seen, measured

    def _trial_row(self, t: FrozenTrial) -> _TrialRow:
        """What :meth:`_read_trials` takes from trial ``t``."""
        if is_repeat(t):
            return _TrialRow("repeat")
        key = config_key(t.params)
        index = self._index.get(key)
        if index is None:
            return _TrialRow("outside", key)
        if t.state == TrialState.RUNNING:
            return _TrialRow("pending", key, index)
        if t.state == TrialState.FAIL:
            return _TrialRow("stopped", key, index)
        if t.state not in (TrialState.COMPLETE, TrialState.PRUNED):
            return _TrialRow("other", key, index)  # waiting: enqueued, so visited
        status = t.user_attrs.get(STATUS)
        drawn = "fixed_params" not in t.system_attrs and status != INFEASIBLE
        if status == "ok" and t.values and all(math.isfinite(v) for v in t.values):
            return _TrialRow("measured", key, index, drawn, tuple(t.values))
        return _TrialRow("failed", key, index, drawn, status=str(status))

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._fallback.sample_independent(study, trial, param_name, param_distribution)


class UnvisitedRandomSampler(EnumeratedSampler):
    """Random search without replacement over the feasible configs.

    Example:
        >>> from autotune.space import Param
        >>> space = Space("s", [Param("x", "pow2", low=1, high=8)])
        >>> study = optuna.create_study(sampler=UnvisitedRandomSampler(space, seed=0))
        >>> for _ in range(4):
        ...     trial = study.ask(); _ = study.tell(trial, float(space.sample(trial)["x"]))
        >>> sorted(t.params["x"] for t in study.trials)
        [1, 2, 4, 8]
    """

    def _observations(self, study: optuna.Study) -> _Observations:
        return _Observations(
            visited={config_key(t.params) for t in study.get_trials(deepcopy=False)}
        )


class GridBayesSampler(EnumeratedSampler):
    """GP + expected improvement over the feasible configs of ``space`` (single objective).

    Args:
        space: a discrete space (see :func:`~autotune.driver.enumeration.is_enumerable`).
        problem, device: what the space's constraints read.
        seed: seeds the start-up draws.
        n_startup_trials: configs drawn at random before the model takes over. Enqueued
            configs (the untuned default, a warm start's) come on top: a warm start from an
            unlike problem must not leave the model with one cluster of points.
        grid: the space's :class:`Enumeration`, shared with another sampler (see
            :class:`EnumeratedSampler`).
    """

    def __init__(
        self,
        space: Space,
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
        *,
        seed: int | None = None,
        n_startup_trials: int = 5,
        target: str = "log",
        failures: str = "worst",
        region: str = "global",
        grid: Enumeration | None = None,
    ) -> None:
        super().__init__(space, problem, device, seed=seed, grid=grid)
        self.n_startup_trials = n_startup_trials
        self.target = target
        self.failures = failures
        self.region = region
        self._features = self._grid.features
        self.prior: TransferPrior | None = None
        self._codes: np.ndarray | None = None  # a value code per config and parameter

    @cached_property
    def _model(self) -> GaussianProcess:
        """The surrogate of the target, made where first fitted (torch is imported there: a
        sweep that ends within its start-up draws needs none)."""
        from autotune.driver.gp import GaussianProcess

        return GaussianProcess()

    @cached_property
    def _feasibility(self) -> GaussianProcess:
        """The classifier of where configs fail, made where first fitted (as :attr:`_model`)."""
        from autotune.driver.gp import GaussianProcess

        return GaussianProcess()

    def _choose(self, seen: _Observations, unvisited: list[int]) -> int:
        if seen.short_of_resources:
            doomed = self._grid.dominating(seen.short_of_resources, unvisited)
            if not doomed.all():
                unvisited = [i for i, out in zip(unvisited, doomed, strict=True) if not out]
        if len(set(seen.targets.values())) < 2:
            return self._rng.choice(unvisited)
        if seen.drawn < self.n_startup_trials and not self._prior_trusted(seen):
            return self._rng.choice(unvisited)
        return self._most_promising(seen.targets, unvisited, seen.pending, seen.failed)

    def _prior_trusted(self, seen: _Observations) -> bool:
        """A prior that ranks the measurements so far well (w >= 0.5) replaces the start-up
        draws."""
        if self.prior is None:
            return False
        measured = list(seen.targets)
        y = np.array([seen.targets[i] for i in measured])
        return self.prior.trust(self._features[measured], y) >= 0.5

    def _observations(self, study: optuna.Study) -> _Observations:
        """:meth:`_read_trials`, with the model's target per measured config (log of the
        metric, negated when minimised; failures at the worst, or left to the classifier)."""
        maximize = study.direction == optuna.study.StudyDirection.MAXIMIZE
        seen, values = self._read_trials(study)
        measured = {i: v[0] for i, v in values.items()}
        if not measured:
            return seen
        positive = all(v > 0 for v in measured.values())
        seen.targets = {
            i: (math.log(v) if positive else v) * (1.0 if maximize else -1.0)
            for i, v in measured.items()
        }
        if self.target == "rank":
            seen.targets = _normal_scores(seen.targets)
        if self.failures == "worst":
            worst = min(seen.targets.values())
            seen.targets.update({i: worst for i in seen.failed})
        return seen

    def set_prior(
        self, configs: Sequence[Mapping[str, Any]], values: Sequence[float], maximize: bool = True
    ) -> None:
        """Take a related sweep's measured ``configs`` and ``values`` as a prior
        (:class:`~autotune.driver.transfer_prior.TransferPrior`), trusted as far as it ranks
        this sweep's own measurements."""
        pairs = [(c, v) for c, v in zip(configs, values, strict=True) if math.isfinite(v)]
        if len(pairs) < 2:
            return
        raw = np.array([v for _, v in pairs], dtype=float)
        target = np.log(raw) if (raw > 0).all() else raw
        self.prior = TransferPrior(
            features(self.space, [c for c, _ in pairs]), target * (1.0 if maximize else -1.0)
        )

    def _prior_offset(self, seen: list[int], y: np.ndarray) -> np.ndarray | None:
        """w x the prior mean at every enumerated config, or None without a trusted prior."""
        if self.prior is None:
            return None
        weight = self.prior.trust(self._features[seen], y)
        if weight <= 0:
            return None
        return weight * self.prior.mean(self._features[seen], y, self._features)

    def _most_promising(
        self,
        targets: dict[int, float],
        unvisited: list[int],
        pending: list[int],
        failed: list[int] = (),
    ) -> int:
        seen = list(targets)
        y = np.array([targets[i] for i in seen])
        if self.region == "local":
            unvisited = self._neighbours(seen[int(np.argmax(y))], unvisited)
        offset = self._prior_offset(seen, y)
        if offset is None:
            offset = np.zeros(len(self._configs))
        residual = y - offset[seen]
        self._model.fit(self._features[seen], residual)
        pending = [i for i in pending if i not in targets]
        if pending:
            # kriging believer: a running config counts as measured at its predicted value,
            # so the variance around it shrinks and the next pick goes elsewhere
            believed, _ = self._model.predict(self._features[pending])
            self._model.condition(
                self._features[seen + pending], np.concatenate([residual, believed])
            )
        from autotune.driver.gp import expected_improvement

        mean, std = self._model.predict(self._features[unvisited])
        gain = expected_improvement(mean + offset[unvisited], std, float(y.max()))
        if self.failures == "classifier" and failed:
            gain = gain * self._feasible_probability(list(targets), failed, unvisited)
        return unvisited[int(np.argmax(gain))]

    def _neighbours(self, incumbent: int, unvisited: list[int]) -> list[int]:
        """The unvisited configs that differ from ``incumbent`` in one parameter (else in
        two, else all): a local search around the best config, ranked by the model."""
        if self._codes is None:
            names = self.space.names
            self._codes = np.array(
                [[hash(repr(c.get(n))) for n in names] for c in self._configs], dtype=np.int64
            )
        candidates = np.array(unvisited)
        differ = (self._codes[candidates] != self._codes[incumbent]).sum(axis=1)
        for allowed in (1, 2):
            near = candidates[differ <= allowed]
            if len(near):
                return near.tolist()
        return unvisited

    def _feasible_probability(
        self, measured: list[int], failed: list[int], unvisited: list[int]
    ) -> np.ndarray:
        """P(a config runs), from a GP fitted to +1 (measured) / -1 (failed) labels."""
        tried = measured + failed
        labels = np.array([1.0] * len(measured) + [-1.0] * len(failed))
        self._feasibility.fit(self._features[tried], labels)
        mean, std = self._feasibility.predict(self._features[unvisited])
        import torch  # loaded already: the GPs above are torch's

        from autotune.driver.gp import standard_normal_cdf

        z = torch.as_tensor(mean / np.sqrt(1.0 + std**2))
        return standard_normal_cdf(z).numpy()  # vectorised: 50k configs


#: the standard normal of the stdlib, for a handful of distinct ranks: importing this module
#: (the CLI's best, trials and export do) does not import torch
_STANDARD_NORMAL = statistics.NormalDist()


def _normal_scores(targets: dict[int, float]) -> dict[int, float]:
    """Targets replaced by the normal quantiles of their ranks (ties share a rank): a cliff
    of 5% of the best weighs as one rank below the rest, not as a wall the GP must bend to."""
    values = sorted(set(targets.values()))
    n = len(values)
    score = {v: _STANDARD_NORMAL.inv_cdf((r + 0.5) / n) for r, v in enumerate(values)}
    return {i: score[v] for i, v in targets.items()}
