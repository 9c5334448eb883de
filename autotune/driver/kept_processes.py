"""The worker processes and compile-ahead pool one command keeps from one sweep to the next.

A search by group (:mod:`autotune.grouped_sweep`) runs a sweep per group: the same workload at
another problem. Each sweep used to start its processes again (a trial worker and up to 16
compile processes, each importing torch and Triton, the worker then opening the device's
context): seconds a group, most of a short group's share of the time budget. Kept, the
processes of the first sweep serve the next ones, each rebuilding only its objective at the new
problem (:meth:`IsolatedRunner.take_up`, :meth:`CompileAhead.take_up`). A local executor's
workers and the pool are kept; a Ray cluster's and the inline executor's are the sweep's own.

The noise-aware finish measures in a worker of its own, apart from the sweep's (none of their
trials ran in it), kept too: a fresh one for each group's finish cost its start (4-5 s, torch
and the device's context) in every group's share, which left a 12-s share too little for the
finish (1 of 12 groups finished on an H100 at a 150-s budget). The first sweep's processes, the
finish's worker among them, start side by side before it runs (:meth:`warm`), and its share of
the time budget is counted from then (:attr:`replan`): the start is paid by every group, not
the first one's alone (whose share it took, leaving it 1 trial).

Example:
    >>> from autotune.space import load_space
    >>> from autotune.driver.settings import SweepSettings
    >>> def settings(problem):
    ...     return SweepSettings(workload="faults", problem=problem, space=load_space("faults"),
    ...                          objectives={"score": "maximize"}, executor="local")
    >>> with KeptProcesses() as kept:
    ...     first = kept.executor(settings({}))
    ...     first.submit(0, {"fault": "none"}); _ = first.wait_any(); first.close()
    ...     second = kept.executor(settings({"scale": 2.0}))
    ...     second.submit(1, {"fault": "none"}); _ = second.wait_any(); second.close()
    ...     second is first, second.workers_started
    (True, 1)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from autotune.driver.compile_ahead import CompileAhead, ahead_jobs
from autotune.driver.executor_choice import make_executor
from autotune.driver.settings import SweepSettings
from autotune.executors.base import Executor
from autotune.executors.local import LocalExecutor


class KeptProcesses:
    """What one command's sweeps share: :meth:`executor` and :meth:`compile_pool` stand in
    for :func:`make_executor` and :func:`compile_ahead_pool` in each sweep; :meth:`close`
    (the end of the command) ends the processes."""

    def __init__(self) -> None:
        self._local: LocalExecutor | None = None
        self._local_key: tuple = ()
        self._pool: CompileAhead | None = None
        self._pool_key: tuple = ()
        self._finish: LocalExecutor | None = None
        self._finish_key: tuple = ()
        self._warmed = False
        #: told, once :meth:`warm` started the processes, the sweep's settings: sets its share
        #: of the time budget from the time left then and returns when it counts from
        self.replan: Callable[[SweepSettings], float] | None = None
        #: the ``time.monotonic()`` reading at which the command's time budget ends (None: no
        #: budget): no worker :meth:`warm` starts outlasts it
        self.deadline: float | None = None

    def warm(self, settings: SweepSettings, budget_from: float) -> float:
        """Start the processes of the command's first sweep that runs (``settings``; a group
        answered from the tuning cache starts none) side by side: its local executor's workers,
        its compile-ahead pool (in the background, as always) and, where it finishes, the
        finish's worker. Returns when the sweep's time budget counts from: ``budget_from``, or
        where processes were started now, :attr:`replan`'s answer (its share re-planned from
        the time left, the start paid by every group). Once a command; a Ray cluster's and the
        inline executor's sweeps start nothing here.

        Example (an inline sweep's trials start no process):
            >>> from autotune.space import load_space
            >>> settings = SweepSettings(workload="faults", problem={}, finish_top=3,
            ...     space=load_space("faults"), objectives={"score": "maximize"},
            ...     executor="inline")
            >>> with KeptProcesses() as kept:
            ...     kept.replan = lambda settings: 100.0
            ...     kept.warm(settings, 1.0)
            1.0
        """
        if self._warmed or settings.executor != "local":
            return budget_from
        self._warmed = True
        executor = self.executor(settings)
        runners = list(executor.runners) if isinstance(executor, LocalExecutor) else []
        self.compile_pool(settings, executor.capacity)
        if settings.finish_top:
            finisher = self.finish_executor(settings)
            runners += finisher.runners if isinstance(finisher, LocalExecutor) else []
        for runner in runners:
            runner.budget_ends = self.deadline
        threads = [threading.Thread(target=runner.start_worker, name="autotune-warm",
                                    daemon=True) for runner in runners]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return self.replan(settings) if self.replan is not None else time.monotonic()

    def finish_executor(self, settings: SweepSettings) -> Executor:
        """The finish's executor (one worker): the kept local one at the sweep's problem where
        it has the same workload, device and trial timeout; else a new one (kept in turn where
        it is local)."""
        key = _executor_key(settings, 1)
        if self._finish is not None and key == self._finish_key:
            self._finish.take_up(settings.problem)
            return self._finish
        self._close_finish()
        executor = make_executor(settings, workers=1)
        if isinstance(executor, LocalExecutor):
            executor.kept = True
            self._finish, self._finish_key = executor, key
        return executor

    def finish_ready(self, settings: SweepSettings) -> bool:
        """Take the kept finish worker up at the sweep's problem now (its objective built
        within the sweep's share, not its finish's); whether it is up, so that the finish
        starts no worker (its start then costs the finish nothing)."""
        if self._finish is None or _executor_key(settings, 1) != self._finish_key:
            return False
        self._finish.take_up(settings.problem)
        return self._finish.workers_up

    def executor(self, settings: SweepSettings, workers: int | None = None) -> Executor:
        """The executor of the sweep ``settings`` describe: the kept local one where it has the
        same workload, slots, devices and trial timeout, at the sweep's problem; else a new
        one (kept in turn where it is local)."""
        kept = self._local
        key = _executor_key(settings, workers)
        if kept is not None and key == self._local_key:
            kept.take_up(settings.problem)
            return kept
        self._close_executor()
        executor = make_executor(settings, workers)
        if isinstance(executor, LocalExecutor):
            executor.kept = True
            self._local, self._local_key = executor, key
        return executor

    def compile_pool(self, settings: SweepSettings, capacity: int) -> CompileAhead | None:
        """The sweep's compile-ahead pool (:func:`ahead_jobs` processes, None for none): the
        kept one where it has the same workload and processes and did not break."""
        jobs = ahead_jobs(settings, capacity)
        if jobs < 1:
            return None
        key = (settings.workload, jobs)
        pool = self._pool
        if pool is not None and key == self._pool_key and pool.take_up(settings.problem):
            return pool
        self._close_pool()
        pool = CompileAhead(settings.workload, settings.problem, jobs)
        pool.kept = True
        self._pool, self._pool_key = pool, key
        return pool

    def close(self) -> None:
        """End every kept process."""
        self._close_executor()
        self._close_pool()
        self._close_finish()

    def _close_finish(self) -> None:
        if self._finish is not None:
            self._finish.kept = False
            self._finish.close()
            self._finish = None

    def _close_executor(self) -> None:
        if self._local is not None:
            self._local.kept = False
            self._local.close()
            self._local = None

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.kept = False
            self._pool.close()
            self._pool = None

    def __enter__(self) -> KeptProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _executor_key(settings: SweepSettings, workers: int | None) -> tuple[Any, ...]:
    """What a kept executor must share with the next sweep to serve it."""
    s = settings
    return (s.executor, s.workload, s.workers if workers is None else workers,
            s.trial_timeout_s, json.dumps(s.device, sort_keys=True, default=str),
            s.gpus_per_trial, s.ray_address)  # fmt: skip
