"""The worker processes and compile-ahead pool one command keeps from one sweep to the next.

A search by group (:mod:`autotune.grouped_sweep`) runs a sweep per group: the same workload at
another problem. Each sweep used to start its processes again (a trial worker and up to 16
compile processes, each importing torch and Triton, the worker then opening the device's
context): seconds a group, most of a short group's share of the time budget. Kept, the
processes of the first sweep serve the next ones, each rebuilding only its objective at the new
problem (:meth:`IsolatedRunner.take_up`, :meth:`CompileAhead.take_up`). A local executor's
workers and the pool are kept; a Ray cluster's and the inline executor's are the sweep's own,
and the noise-aware finish still measures in a fresh process.

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
