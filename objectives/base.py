"""The objective interface: turn (workload, config, device) into a Measurement.

An objective is built inside the trial's worker process from its name and a plain ``problem``
dict (sizes, dtype, flags), so everything it needs must be picklable. ``evaluate`` either
returns a :class:`~autotune.measurement.Measurement` or raises a
:class:`~autotune.failures.TrialFailure`.

Example:
    >>> from autotune.objectives import get_objective
    >>> cls = get_objective("matmul")
    >>> cls.directions
    {'ratio_to_cublas': 'maximize', 'tflops': 'maximize'}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from autotune.measurement import Measurement

#: Called by an objective after each step with a value to watch (e.g. the loss).
#: Raises :class:`~autotune.failures.Diverged` when the driver's pruner says to stop.
Reporter = Callable[[int, float], None]


def no_reporting(step: int, value: float) -> None:
    """A reporter that watches nothing (used when an objective runs outside a sweep)."""


class Objective(ABC):
    """Base class of every workload the tuner can measure.

    Subclasses set ``name``, ``space`` (the YAML file in ``search_spaces/`` holding the default
    search space), and ``directions`` (metric -> "maximize" | "minimize"; the first entry is the
    default objective).
    """

    name: ClassVar[str]
    space: ClassVar[str]
    directions: ClassVar[dict[str, str]]
    #: False for an objective that looks figures up rather than measuring them (replay):
    #: a sweep of it has no noise to finish against.
    measures: ClassVar[bool] = True
    #: True for an objective whose ``prepare`` compiles a config ahead of its trial (into an
    #: on-disk cache the trial then reads), so that the driver's compile-ahead pool pays.
    compiles: ClassVar[bool] = False
    #: ``--slo`` limit -> the problem keys that take the same limit (a serving objective's
    #: goodput counts the requests within it, and it stops a trial once it is certain to be
    #: broken): ``autotune tune --slo`` sets each key that ``--problem`` does not
    slo_problem_keys: ClassVar[dict[str, tuple[str, ...]]] = {}
    #: False for an objective that reads no problem values, so that ``--problem`` is refused
    #: rather than ignored; one that declares no :meth:`default_problem` (a plugin's) is
    #: otherwise taken to read whatever keys its user gives
    takes_problem: ClassVar[bool] = True
    #: a figure the objective reports that ``--slo`` may not limit -> why, and what limits it
    #: instead (the serving workload's ``kl``: its quality gate's, ``max_kl``)
    not_slo: ClassVar[dict[str, str]] = {}

    def __init__(self, problem: dict[str, Any]) -> None:
        self.problem = dict(problem)

    @classmethod
    def slo_metrics(cls) -> tuple[str, ...] | None:
        """The figures every measurement of this workload reports that are better low, which
        ``--slo`` may cap (a limit is an upper bound); None where they are not known ahead (a
        recorded table's columns are checked apart). ``autotune tune --slo`` refuses another
        name before the sweep starts, rather than record every trial as over a limit it never
        measured, or cap a throughput from above.

        Example:
            >>> from autotune.objectives import get_objective
            >>> get_objective("matmul").slo_metrics()
            ('ms', 'spread', 'compile_s')
        """
        return None

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """Problem values to use when the user gives none, sized to ``device``."""
        return {}

    @classmethod
    def resolve_problem(cls, problem: dict[str, Any]) -> dict[str, Any]:
        """The problem a sweep stores, from the defaults merged with the user's values (a
        preset expanded into the values it stands for); the same problem by default.

        Raises:
            ValueError: a value the objective cannot take, e.g. an unknown preset.
        """
        return problem

    @abstractmethod
    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Run the workload with ``config`` and measure it."""

    def prepare(self, config: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Compile ``config`` ahead of its trial, in another process (nothing by default).

        Raises:
            TrialFailure: the config cannot compile (told to the study without a trial).
        """

    def default_config(self) -> dict[str, Any] | None:
        """The config a user would run without tuning (the baseline), if there is one."""
        return None

    def config_keys(self) -> tuple[str, ...] | None:
        """The parameter names a config may hold; None where any name goes (a command template's
        placeholders, a recorded table's columns). ``autotune tune`` refuses a space with
        another name before the sweep starts, instead of a thousand trials that fail on it."""
        return None

    @classmethod
    def predict_memory(cls, problem: dict[str, Any], config: dict[str, Any]) -> float | None:
        """Predicted peak memory of a trial in bytes, before it runs; None without a model.
        The driver rejects configs predicted over the device's memory without launching them
        (:mod:`autotune.driver.memory_guard`), the model corrected by the peaks it sees."""
        return None

    @classmethod
    def futile(
        cls, problem: dict[str, Any], outcomes: list[tuple[str, str]], served_before: bool
    ) -> str | None:
        """Why the sweep should stop now, as one line (None: go on; never, by default): the
        driver asks after each launched trial of the run is told, given those trials'
        ``(status, reason)`` in order, while no trial of the study succeeded
        (``served_before``: one of an earlier run did). A workload that can tell a failure
        every config would share (a server that cannot start) stops the sweep with it."""
        return None

    def reference_configs(self) -> dict[str, dict[str, Any]]:
        """Further untuned configs a report shows beside the default, by name (none here)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what the objective holds (buffers, models) before the worker exits."""
