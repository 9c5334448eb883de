"""Run trials in worker processes on this machine: by default one per visible GPU, each pinned
to its GPU with ``CUDA_VISIBLE_DEVICES``, and one on a machine without a GPU.

Each slot is an :class:`~autotune.runners.worker.IsolatedRunner` (a spawned process, reused
while healthy, with a per-trial timeout), so a segfault, a CUDA illegal address or a hang ends
one slot's worker, and its trial comes back as ``crashed`` or ``timeout`` while the other slots
go on. A thread per slot waits on its worker; finished trials are handed to the driver in the
order they finish.

Example:
    >>> with LocalExecutor("faults", {}, workers=2, timeout_s=30) as executor:
    ...     executor.submit(0, {"fault": "none", "delay": 1.0})
    ...     executor.submit(1, {"fault": "segfault"})
    ...     first = executor.wait_any()[0]
    ...     (first.ticket, first.result.status.value)
    (1, 'crashed')
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from typing import Any

from autotune.executors.base import Executor, Finished
from autotune.failures import TrialStatus
from autotune.runners.base import PruneCheck, TrialResult, never_prune
from autotune.runners.worker import IsolatedRunner


class LocalExecutor(Executor):
    """``workers`` worker processes; slot i is pinned to GPU ``gpu_ids[i % len(gpu_ids)]``.

    Args:
        workload, problem: what every worker builds.
        workers: slots (trials at once); default one per GPU id, or 1 without GPUs.
        gpu_ids: ``CUDA_VISIBLE_DEVICES`` values to pin slots to (see
            :func:`autotune.device.visible_gpu_ids`); empty on a CPU machine.
        timeout_s: wall-time limit of one trial.
    """

    name = "local"

    def __init__(
        self,
        workload: str,
        problem: dict[str, Any],
        *,
        workers: int | None = None,
        gpu_ids: list[str] | None = None,
        timeout_s: float = 300.0,
    ) -> None:
        gpu_ids = list(gpu_ids or [])
        count = workers if workers is not None else max(1, len(gpu_ids))
        if count < 1:
            raise ValueError(f"workers must be at least 1, not {count}")
        self._slots: list[tuple[IsolatedRunner, str]] = []
        for slot in range(count):
            gpu = gpu_ids[slot % len(gpu_ids)] if gpu_ids else None
            env = {"CUDA_VISIBLE_DEVICES": gpu} if gpu is not None else {}
            where = f"local worker {slot}" + (f" on GPU {gpu}" if gpu is not None else "")
            self._slots.append(
                (IsolatedRunner(workload, problem, timeout_s=timeout_s, env=env), where)
            )
        self._idle = list(range(count))
        self._lock = threading.Lock()
        self._done: queue.Queue[Finished] = queue.Queue()
        self._in_flight = 0
        self._running: dict[int, int] = {}  # ticket -> slot, while its trial runs
        self._closing = False
        self._threads: list[threading.Thread] = []
        #: kept for the command's next sweep (:mod:`autotune.driver.kept_processes`): close()
        #: then only releases the workers (:meth:`release`)
        self.kept = False

    @property
    def capacity(self) -> int:
        return len(self._slots)

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def workers_started(self) -> int:
        """Worker processes started so far (a crash, OOM or timeout restarts its slot's)."""
        return sum(runner.workers_started for runner, _ in self._slots)

    def worker_start_s(self) -> float | None:
        starts = [runner.longest_start_s for runner, _ in self._slots
                  if runner.longest_start_s is not None]  # fmt: skip
        return max(starts, default=None)

    @property
    def runners(self) -> list[IsolatedRunner]:
        """Each slot's runner, in slot order."""
        return [runner for runner, _ in self._slots]

    @property
    def workers_up(self) -> bool:
        """Whether every slot has a worker running: the next trials start none."""
        return all(runner.up for runner, _ in self._slots)

    def running_on(self) -> dict[int, str]:
        """The slot each trial in flight runs on (``local worker 0``, ``... on GPU 1``)."""
        with self._lock:
            return {ticket: self._slots[slot][1] for ticket, slot in self._running.items()}

    def end_at(self, budget_ends: float | None) -> None:
        """Stop trials still running at ``budget_ends`` (a ``time.monotonic()`` reading)."""
        for runner, _ in self._slots:
            runner.budget_ends = budget_ends

    def submit(
        self, ticket: int, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> None:
        with self._lock:
            if not self._idle:
                raise RuntimeError("submit() with every worker busy")
            slot = self._idle.pop(0)
            self._in_flight += 1
            self._running[ticket] = slot
        thread = threading.Thread(
            target=self._run,
            args=(slot, ticket, config, should_prune),
            name=f"autotune-slot-{slot}",
            daemon=True,
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _run(
        self, slot: int, ticket: int, config: dict[str, Any], should_prune: PruneCheck
    ) -> None:
        runner, where = self._slots[slot]
        started = time.perf_counter()
        try:
            result = runner.evaluate(config, should_prune)
        except BaseException as exc:  # noqa: BLE001 - the slot must always report back
            result = TrialResult(TrialStatus.CRASHED, f"worker slot failed: {exc}")
        if self._closing:
            result = TrialResult(TrialStatus.INTERRUPTED, "the sweep stopped while it ran")
        seconds = time.perf_counter() - started
        with self._lock:
            self._idle.append(slot)
            self._running.pop(ticket, None)
        self._done.put(Finished(ticket, result, seconds, worker=where))

    def wait_any(self) -> list[Finished]:
        if self._in_flight == 0:
            raise RuntimeError("wait_any() with no trial in flight")
        first = self._done.get()  # wait for one, then take all that are there
        self._in_flight -= 1
        return [first, *self.poll()]

    def poll(self) -> list[Finished]:
        finished = []
        while True:
            try:
                finished.append(self._done.get_nowait())
            except queue.Empty:
                break
        self._in_flight -= len(finished)
        return finished

    def close(self) -> None:
        if self.kept:
            self.release()
            return
        self._closing = True
        for runner, _ in self._slots:
            runner.close()  # ends a worker still measuring: its slot's thread returns at once
        self._join()

    def release(self) -> None:
        """End one sweep's use, keeping the idle workers for :meth:`take_up`: a trial still
        running is stopped (its worker ended, the trial ``interrupted``), as :meth:`close`
        stops it."""
        self._closing = True
        for runner, _ in self._slots:
            if runner.busy:
                runner.close()
        self._join()

    def take_up(self, problem: dict[str, Any]) -> None:
        """Serve the next sweep, at ``problem``, with the workers kept (see
        :meth:`IsolatedRunner.take_up`); the trials the last sweep left are dropped.

        Example:
            >>> with LocalExecutor("faults", {}, workers=1, timeout_s=30) as executor:
            ...     executor.submit(0, {"fault": "none"})
            ...     _ = executor.wait_any()
            ...     executor.release()
            ...     executor.take_up({"scale": 2.0})
            ...     executor.submit(1, {"fault": "none"})
            ...     executor.wait_any()[0].result.status.value, executor.workers_started
            ('ok', 1)
        """
        self.poll()
        self._closing, self._in_flight = False, 0
        self._running.clear()
        for runner, _ in self._slots:
            runner.take_up(problem)

    def _join(self) -> None:
        """Wait for the slots' threads (their workers were ended first). A thread whose
        ``start()`` a Ctrl-C interrupted (it waits there for the thread to run) cannot be
        joined, though it may run: its worker ended, it returns at once."""
        for thread in self._threads:
            with contextlib.suppress(RuntimeError):  # "cannot join thread before it is started"
                thread.join(timeout=30)
