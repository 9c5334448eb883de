"""A Ray Tune searcher that serves autotune's space, constraints and default sampler.

For teams whose pipelines already run on Ray Tune: put :class:`AutotuneSearcher` into an
existing ``tune.Tuner`` (any scheduler, ASHA included, on top) and keep the trainable as it
is. Each suggestion is a config of the autotune space that passes its static constraints (a
config that breaks one is told to the sampler as infeasible without reaching Tune), never a
config already measured or still running, drawn by autotune's default sampler (Bayesian
optimisation over the feasible configs, which knows the configs Tune is still running). Every
Tune trial lands in an Optuna study, in memory or in any storage autotune reads, so
``autotune best``, ``trials`` and ``export`` work on it.

Example (runnable: ``python examples/ray_tune_searcher.py``)::

    from ray import tune
    from autotune.integrations.ray_tune import AutotuneSearcher

    searcher = AutotuneSearcher("matmul", metric="tflops", mode="max",
                                problem={"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"},
                                device=device)
    tuner = tune.Tuner(my_trainable, tune_config=tune.TuneConfig(
        search_alg=searcher, num_samples=40))
    tuner.fit()

Ray is an optional extra: ``pip install 'autotune[ray]'``.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

import optuna

from autotune.driver.enumeration import is_enumerable
from autotune.driver.liveness import DriverIdentity, reap_stale_trials
from autotune.driver.novelty import config_key, unvisited_config
from autotune.driver.samplers import sampler_note
from autotune.driver.settings import SweepSettings
from autotune.driver.study_setup import open_study
from autotune.driver.trial_attrs import DRIVER
from autotune.driver.trial_book import Asked, TrialBook
from autotune.executors.base import ExecutorError
from autotune.executors.ray import INSTALL_HINT
from autotune.failures import TrialStatus
from autotune.measurement import Measurement
from autotune.runners.base import TrialResult
from autotune.space import Space, load_space
from autotune.storage import open_storage

try:
    from ray.tune.search import Searcher as _Searcher
except ImportError:
    raise ExecutorError(f"the Ray Tune searcher needs Ray Tune: {INSTALL_HINT}") from None
# Rejections by constraints allowed in a row for one suggestion before giving up.
MAX_REJECTIONS = 10_000


class AutotuneSearcher(_Searcher):
    """Serve configs of ``space`` to Ray Tune.

    Args:
        space: an autotune space, or the name/path of its YAML file.
        metric, mode: what the trainable reports and its direction (``max`` or ``min``);
            may come from ``tune.TuneConfig`` instead only where the ``Tuner`` has a
            ``param_space`` (Tune hands them to a searcher with it, else never).
        problem, device: what the space's constraints read (sizes; device limits).
        sampler: ``auto`` (the default of ``autotune tune``) or any autotune sampler.
        seed: seeds the sampler.
        storage, study_name: where the Tune trials are recorded (default: in memory).
        in_flight: how many trials Tune runs at once (the sampler lies about the pending ones).

    As it opens its study (given ``metric`` and ``mode``, or once Tune sets them), it prints
    to stderr the notes ``autotune tune`` prints of the same sampler and space (``note:
    cmaes searches the int and float parameters ...``), and keeps them in :attr:`notes`.
    """

    def __init__(
        self,
        space: Space | str,
        *,
        metric: str | None = None,
        mode: str | None = None,
        problem: dict[str, Any] | None = None,
        device: dict[str, Any] | None = None,
        sampler: str = "auto",
        seed: int | None = None,
        storage: str = "memory",
        study_name: str | None = None,
        in_flight: int = 2,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self.autotune_space = load_space(space) if isinstance(space, str) else space
        self.problem, self.device = dict(problem or {}), dict(device or {})
        self.sampler_name, self.seed, self.in_flight = sampler, seed, in_flight
        self.storage_url, self.study_name = storage, study_name
        self._storage = open_storage(storage)
        self._live: dict[str, Asked] = {}
        self.study: optuna.Study | None = None
        self._book: TrialBook | None = None
        self._grid: list[dict[str, Any]] | None = None  # the feasible configs, if enumerable
        self.notes: list[str] = []  # what a sweep of this sampler and space says first
        if metric is not None and mode is not None:
            self._open()

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        if self.study is not None:
            return True
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        if self._metric is None or self._mode is None:
            return False
        self._open()
        return True

    def _open(self) -> None:
        direction = {"max": "maximize", "min": "minimize"}.get(self._mode or "")
        if direction is None:
            raise ValueError(f"mode must be 'max' or 'min', not {self._mode!r}")
        settings = SweepSettings(
            workload="ray-tune",
            problem=self.problem,
            space=self.autotune_space,
            objectives={self._metric: direction},
            sampler=self.sampler_name,
            seed=self.seed,
            storage=self.storage_url,
            study_name=self.study_name,
            device=self.device,
            warm_start="off",
            label="Ray Tune trials suggested by autotune",
        )
        # the same study a sweep opens: sampler (told how many run at once), description
        self.study = open_study(settings, self._storage, in_flight=self.in_flight)
        self.notes = _notes(settings)
        for note in self.notes:  # as a sweep prints its set-up's notes
            print(f"note: {note}", file=sys.stderr, flush=True)
        # trials a Tune run that died left RUNNING (Tune's own abort, a Ctrl-C) are interrupted
        # now, as a sweep opening the study records them
        reap_stale_trials(self.study, self._storage)
        self._book = TrialBook(self.study, settings, random.Random(self.seed))
        space, problem, device = self.autotune_space, self.problem, self.device
        self._grid = list(space.grid(problem, device)) if is_enumerable(space) else None

    def _unclaimed(self) -> list[dict[str, Any]] | None:
        """The feasible configs neither measured nor running (None: not enumerated)."""
        if self._grid is None or self._book is None:
            return None
        visited, running = self._book.visited, self._book.running
        return [c for c in self._grid if (k := config_key(c)) not in visited and k not in running]

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """A config for Tune's trial ``trial_id``: feasible, not measured, not running.

        None (ask again later) while the only configs left are running in Tune;
        ``FINISHED`` once every feasible config is measured.

        Raises:
            ValueError: no metric and mode yet (None would have Tune wait for ever).
        """
        if self.study is None or self._book is None:
            raise ValueError(
                "AutotuneSearcher has no metric and mode: pass metric= and mode= to it "
                "(tune.TuneConfig hands them on only to a Tuner with a param_space)"
            )
        s = self._book.settings
        for _ in range(MAX_REJECTIONS):
            left = self._unclaimed()
            if self._book.exhausted or left == []:
                # nothing to suggest: wait for Tune's running trials, or finish
                return None if self._book.running else _Searcher.FINISHED
            trial = self.study.ask()
            # whose trial it is: a sweep on the same study leaves it alone while this process
            # lives, and records it interrupted once it is gone
            trial.set_user_attr(DRIVER, DriverIdentity.current().as_attr())
            config = s.space.sample(trial, s.problem, s.device)
            asked = Asked(trial, config)
            broken = s.space.violations(config, s.problem, s.device)
            if broken:
                reason = "violates " + ", ".join(broken) + " (not launched)"
                self._book.tell_result(asked, TrialResult(TrialStatus.INFEASIBLE, reason))
                continue
            previous = self._book.previous(config)
            if previous is not None or asked.key in self._book.running:
                if previous is not None:
                    self._book.tell_repeat(asked, previous)
                else:
                    self._book.mark_interrupted(trial, "config already running in Ray Tune")
                    # steer the next ask to a config neither measured nor running
                    taken = set(self._book.visited) | self._book.running
                    steer = (
                        self._book.rng.choice(left)
                        if left
                        else unvisited_config(
                            s.space, None, taken, self._book.rng, s.problem, s.device
                        )
                    )
                    if steer is None:
                        return None  # none found now: ask again later
                    self.study.enqueue_trial(steer)
                continue
            self._book.running.add(asked.key)
            self._live[trial_id] = asked
            return dict(config)
        return _Searcher.FINISHED

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Tell the study how Tune's trial ended (an error or a missing metric: crashed)."""
        asked = self._live.pop(trial_id, None)
        if asked is None or self._book is None:
            return
        self._book.running.discard(asked.key)
        value = _number((result or {}).get(self._metric))
        if error or value is None:
            reason = "the Ray Tune trial errored" if error else f"no {self._metric!r} reported"
            outcome = TrialResult(TrialStatus.CRASHED, reason)
        else:
            metrics = {
                k: v if isinstance(v, str | bool) else _number(v)
                for k, v in (result or {}).items()
                if (isinstance(v, str | bool) or _number(v) is not None) and k != self._metric
            }
            measurement = Measurement(values={self._metric: value}, metrics=metrics)
            seconds = float((result or {}).get("time_total_s") or 0.0)
            outcome = TrialResult(TrialStatus.OK, "", measurement, seconds)
        self._book.tell_result(asked, outcome, worker=f"ray tune trial {trial_id}")

    def save(self, checkpoint_path: str) -> None:
        """The study's name (the storage keeps the trials; its URL, which may hold a
        password, is not written)."""
        name = self.study.study_name if self.study is not None else None
        with open(checkpoint_path, "w") as f:
            json.dump({"study_name": name}, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path) as f:
            self.study_name = json.load(f)["study_name"]
        if self._metric is not None and self._mode is not None:
            self._open()


def _notes(settings: SweepSettings) -> list[str]:
    """The set-up notes a sweep of ``settings`` prints that apply to Tune's trials: the
    sampler's (how it serves the space) and the study's (a warm start's, which is off here)."""
    note = sampler_note(settings.sampler, settings.space, len(settings.objectives),
                        settings.problem, settings.device)  # fmt: skip
    return [*([note] if note else []), *settings.study_notes]


def _number(value: Any) -> float | None:
    """``value`` as a float where it is a real number (a Python, NumPy or 0-d torch scalar:
    what a trainable's ``tune.report`` often holds); None where it is not (bools included)."""
    if isinstance(value, bool | str | bytes) or not hasattr(value, "__float__"):
        return None
    if getattr(value, "ndim", 0) or isinstance(value, complex):
        return None  # an array, or a complex number: no one reading
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
