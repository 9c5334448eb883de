"""Compile the configs the driver asked for ahead, in processes across the CPU's cores, while
the device measures others.

A cold Triton kernel takes a second or more to compile, longer than it takes to measure, so a
sweep that compiles each config in the trial that runs it spends most of its wall time
compiling. The driver asks the sampler a few configs ahead (they are RUNNING trials, pending
for the sampler) and hands each to this pool, whose processes call the objective's
``prepare`` (Triton's ``warmup``): the kernel lands in Triton's on-disk cache, where the worker
that later runs the trial finds it. A config that fails to compile comes back as its typed
failure without taking a device slot.

Example:
    >>> with CompileAhead("faults", {}, jobs=1) as pool:
    ...     pool.submit(0, {"fault": "none"})
    ...     pool.submit(1, {"fault": "compile_error"})
    ...     pool.wait(0), pool.wait(1).status.value
    (None, 'compile_error')
"""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any

from autotune.driver.settings import SweepSettings
from autotune.failures import TrialStatus, classify
from autotune.runners.base import TrialResult

#: the objective each pool process builds, its workload and its problem
_OBJECTIVE: Any = None
_WORKLOAD = ""
_PROBLEM: dict[str, Any] = {}


def _build(workload: str, problem: dict[str, Any]) -> None:
    global _OBJECTIVE, _WORKLOAD, _PROBLEM
    from autotune.objectives import get_objective
    from autotune.runners.worker import output_to_stderr

    output_to_stderr()  # what compiling prints is progress, not the sweep's result
    _OBJECTIVE, _WORKLOAD, _PROBLEM = get_objective(workload)(problem), workload, problem


def _at(problem: dict[str, Any]) -> None:
    """In a pool process: serve ``problem`` (the next sweep of a search by group), the
    objective rebuilt where it was built for another."""
    global _OBJECTIVE
    if problem != _PROBLEM:
        from autotune.runners.base import close_objective

        objective, _OBJECTIVE = _OBJECTIVE, None
        close_objective(_WORKLOAD, objective)
        _build(_WORKLOAD, problem)


def _ready() -> bool:
    """In a pool process, after its initializer built the objective: nothing more to do."""
    return _OBJECTIVE is not None


def _compile(config: dict[str, Any], problem: dict[str, Any]) -> tuple[str, str, float]:
    """In a pool process: (status, reason, seconds) of compiling one config at ``problem``."""
    started = time.perf_counter()
    try:
        _at(problem)
        _OBJECTIVE.prepare(config)
    except Exception as exc:  # noqa: BLE001 - a failure to compile is a result
        failure = classify(exc)
        return failure.status.value, str(failure), time.perf_counter() - started
    return TrialStatus.OK.value, "", time.perf_counter() - started


def default_jobs(capacity: int) -> int:
    """Processes for a GPU sweep: the cores the executor's workers and the driver leave,
    at most 16 (e.g. 16 cores, 1 worker: 14; 4 cores, 2 workers: 1). A cold Triton compile
    takes several times a trial's measurement, so the pool needs many processes to keep ahead."""
    return max(1, min(16, (os.cpu_count() or 1) - capacity - 1))


class CompileAhead:
    """A pool of ``jobs`` spawned processes compiling configs of one workload."""

    def __init__(self, workload: str, problem: dict[str, Any], jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, not {jobs}")
        self.jobs = jobs
        self._problem = dict(problem)
        self._pool: ProcessPoolExecutor | None = ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=get_context("spawn"),
            initializer=_build,
            initargs=(workload, dict(problem)),
        )
        self._futures: dict[int, Future] = {}
        # start every process now (importing torch and Triton takes seconds), while the
        # executor starts its workers; until they are up, trials compile their own configs
        self._warming = [self._pool.submit(_ready) for _ in range(jobs)]
        self.compile_s = 0.0  # pool-seconds spent compiling
        self.broken = ""  # why the pool stopped, if it did (trials then compile themselves)
        #: kept for the command's next sweep (:mod:`autotune.driver.kept_processes`): a sweep's
        #: close() then drops its compiles and keeps the processes
        self.kept = False

    def submit(self, ticket: int, config: dict[str, Any]) -> None:
        """Start compiling ``config``; a broken pool leaves it to the trial."""
        if self._pool is None:
            return
        try:
            self._futures[ticket] = self._pool.submit(_compile, dict(config), self._problem)
        except (BrokenProcessPool, RuntimeError) as exc:
            self._stop(f"compile-ahead pool stopped: {exc}")

    @property
    def warm(self) -> bool:
        """True once every process of the pool is up."""
        return all(f.done() for f in self._warming)

    def started(self, ticket: int) -> bool:
        """True when a process of the pool is compiling ``ticket`` (or has done so): waiting
        for it beats compiling it again in the trial."""
        future = self._futures.get(ticket)
        return future is not None and self.warm and (future.running() or future.done())

    def done(self, ticket: int) -> bool:
        """True when ``ticket``'s compile has ended (or was never started)."""
        future = self._futures.get(ticket)
        return future is None or future.done()

    def wait(self, ticket: int, timeout_s: float | None = None) -> TrialResult | None:
        """Wait for ``ticket``'s compile: None when it compiled (or the trial should compile it
        itself: the pool broke, the compile ran past ``timeout_s``), else its failure."""
        future = self._futures.pop(ticket, None)
        if future is None:
            return None
        try:
            status, reason, seconds = future.result(timeout=timeout_s)
        except TimeoutError:
            future.cancel()
            return None
        except BrokenProcessPool as exc:  # a compile crashed its process
            self._stop(f"compile-ahead pool stopped: {exc}")
            return None
        self.compile_s += seconds
        if status == TrialStatus.OK.value:
            return None
        return TrialResult(TrialStatus(status), f"{reason} (compiled ahead)", duration_s=seconds)

    def discard(self, ticket: int) -> None:
        future = self._futures.pop(ticket, None)
        if future is not None:
            future.cancel()

    def take_up(self, problem: dict[str, Any]) -> bool:
        """Compile for the next sweep, at ``problem`` (a search by group's next group), in the
        processes already up: each rebuilds its objective as its first compile at the new
        problem starts. False where the pool broke (the next sweep then starts its own).

        Example:
            >>> with CompileAhead("faults", {}, jobs=1) as pool:
            ...     pool.submit(0, {"fault": "none"})
            ...     first = pool.wait(0)
            ...     pool.take_up({"scale": 2.0}), pool.submit(1, {"fault": "compile_error"})
            ...     pool.wait(1).status.value
            (True, None)
            'compile_error'
        """
        self.release()
        self._problem, self.compile_s = dict(problem), 0.0
        return self._pool is not None

    def release(self) -> None:
        """End one sweep's use, keeping the processes: the compiles it asked for are dropped."""
        for ticket in list(self._futures):
            self.discard(ticket)

    def _stop(self, why: str) -> None:
        self.broken = self.broken or why
        self.kept = False  # a broken pool is no use to the next sweep
        self.close()

    def close(self) -> None:
        if self.kept:
            self.release()
            return
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._futures.clear()

    def __enter__(self) -> CompileAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def ahead_jobs(settings: SweepSettings, capacity: int) -> int:
    """The processes ``settings.compile_ahead`` asks for; by default (None) :func:`default_jobs`
    for a compiling objective on a local GPU, else none (the interpreter compiles nothing; a
    Ray cluster's nodes keep their own kernel caches)."""
    jobs = settings.compile_ahead
    if jobs is None:
        from autotune.objectives import get_objective

        local_gpu = settings.device.get("type") == "cuda" and settings.executor == "local"
        jobs = (
            default_jobs(capacity) if local_gpu and get_objective(settings.workload).compiles else 0
        )
    return jobs


def compile_ahead_pool(settings: SweepSettings, capacity: int) -> CompileAhead | None:
    """A pool of :func:`ahead_jobs` processes, or None where that is none."""
    jobs = ahead_jobs(settings, capacity)
    return CompileAhead(settings.workload, settings.problem, jobs) if jobs >= 1 else None
