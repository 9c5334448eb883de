"""Where trials run: the one interface every executor has (capacity, submit, wait for any).

An executor runs up to :attr:`Executor.capacity` trials at once. The driver submits a trial
with an opaque ``ticket`` (the trial number) and collects finished trials with
:meth:`Executor.wait_any`, which returns at least one :class:`Finished` (the shape of
``concurrent.futures.wait(..., FIRST_COMPLETED)`` and of Kernel Tuner's runners). A failing
trial is never an exception: it comes back as a :class:`~autotune.runners.base.TrialResult`
with its status and reason.

Example:
    >>> from autotune.executors.inline import InlineExecutor
    >>> with InlineExecutor("faults", {}) as executor:
    ...     executor.submit(0, {"fault": "none", "score": 2.0})
    ...     [(f.ticket, f.result.status.value) for f in executor.wait_any()]
    [(0, 'ok')]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from autotune.runners.base import PruneCheck, TrialResult, never_prune


@dataclass
class Finished:
    """One finished trial: its ticket, its result, the seconds it ran, and where it ran."""

    ticket: int
    result: TrialResult
    seconds: float
    worker: str = ""


class ExecutorError(RuntimeError):
    """An executor that cannot start (a missing extra, no cluster); one line says why."""


class ClusterLost(RuntimeError):
    """The cluster the trials ran on stopped answering mid-sweep (not bad input: exit code 1);
    the trials it held come back ``interrupted`` first, one line says where."""


class Executor(ABC):
    """Runs trials of one workload, up to ``capacity`` at a time."""

    #: shown in progress lines and stored with each trial
    name: str = "executor"

    @property
    @abstractmethod
    def capacity(self) -> int:
        """How many trials may run at once now (a cluster that lost a node has less)."""

    @property
    def side_by_side(self) -> int:
        """How many trials really run at the same time, in wall time: the capacity, but for an
        executor that simulates it (the inline one runs its trials one after another)."""
        return self.capacity

    @property
    @abstractmethod
    def in_flight(self) -> int:
        """How many submitted trials have not been returned by :meth:`wait_any` yet."""

    def end_at(self, budget_ends: float | None) -> None:  # noqa: B027 - optional
        """Stop trials still running when the sweep's time budget ends (a ``time.monotonic()``
        reading); executors that cannot stop a trial midway ignore it."""

    @abstractmethod
    def submit(
        self, ticket: int, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> None:
        """Start one trial; the caller keeps ``in_flight < capacity``."""

    @abstractmethod
    def wait_any(self) -> list[Finished]:
        """Block until at least one trial in flight has finished; return those finished."""

    def poll(self) -> list[Finished]:
        """The trials finished by now, without waiting (none where the executor cannot tell
        without blocking): the driver tells them while it goes on asking for configs."""
        return []

    def finished_at_stop(self) -> list[Finished]:
        """The trials whose results are in hand but were not handed back, or were handed back
        and perhaps not told, as the sweep stops (called before :meth:`close`): the driver
        tells those it has not told yet, rather than mark measured trials interrupted. By
        default those :meth:`poll` finds."""
        return self.poll()

    def running_on(self) -> dict[int, str]:
        """Where each trial in flight runs, by ticket (the ``worker`` a :class:`Finished` of it
        would carry), for the trials a stop interrupts; empty where the executor cannot say."""
        return {}

    def worker_start_s(self) -> float | None:
        """The longest a worker took to start (import its libraries, build the objective) before
        its first trial, where the executor measures it; None where it does not. A fresh
        worker pays it once more in the finish (see :mod:`autotune.driver.finish_costs`)."""
        return None

    @property
    def free(self) -> int:
        """Slots free now."""
        return max(0, self.capacity - self.in_flight)

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Stop every trial still running and release workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
