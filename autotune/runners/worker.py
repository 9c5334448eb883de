"""Run each trial in a spawned worker process, reused while healthy, with a per-trial timeout.

A segfault, a CUDA illegal address or the host's OOM killer ends only the worker; a hang ends
at the timeout. The driver sees every one of these as a :class:`TrialResult`. What a worker
prints (its objective, a child process it starts) goes to stderr, never to the driver's
stdout, which holds the sweep's results; the worker talks to its driver through a pipe.

Example:
    >>> with IsolatedRunner("faults", {}, timeout_s=30) as runner:
    ...     runner.evaluate({"fault": "segfault"}).status.value
    'crashed'
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from typing import Any

from autotune.failures import TrialStatus, classify
from autotune.objectives.server_watchdog import await_leftovers
from autotune.runners.base import (
    PruneCheck,
    Runner,
    TrialResult,
    checked_measurement,
    close_objective,
    never_prune,
    pruned,
)

# After these, the worker's state (CUDA context, allocator, interpreter) is not trusted: the
# next trial gets a fresh process.
_RESTART_AFTER = {TrialStatus.OOM, TrialStatus.CRASHED, TrialStatus.TIMEOUT}
_POLL_S = 0.25
#: how long an idle worker's objective may take to close before the worker is killed
_CLOSE_S = 10.0
#: how often a worker checks that its driver is still alive
_DRIVER_CHECK_S = 1.0
#: how long a killed trial's server may take to go (its watchdog's SIGTERM grace, 10 s, and
#: a second for the SIGKILL) before it is killed here
_SERVER_GRACE_S = 11.0


def _progress_bars_lock_in_process() -> None:
    """Give tqdm's progress bars (torch inductor shows one while it compiles) a lock of this
    process only. By default they share a named semaphore across processes, which a worker
    killed mid-trial (a timeout, the sweep stopped) leaves to the resource tracker, which then
    warns of a leaked semaphore as the sweep exits. A worker's bars draw nowhere shared."""
    try:
        from tqdm import tqdm
    except ImportError:  # nothing draws bars then
        return
    tqdm.set_lock(threading.RLock())


def _end_with_the_driver(driver_pid: int, every_s: float = _DRIVER_CHECK_S) -> None:
    """End this worker within ``every_s`` of its driver's end, whatever ended it: a driver
    killed with SIGKILL tells its worker nothing, and a trial that hangs never reads the
    closed pipe, so without this it would hold the device (and its memory) for good."""

    def watch() -> None:
        while True:
            time.sleep(every_s)
            if os.getppid() != driver_pid:  # the driver is gone: this process was re-parented
                _end_own_group()
                os._exit(1)

    threading.Thread(target=watch, name="autotune-driver-watch", daemon=True).start()


def _own_group() -> None:
    """Lead a process group of its own: what a trial starts (a server, a forked helper) is in
    it, and ends with the worker (:func:`kill_group`), not left holding the device."""
    with contextlib.suppress(OSError, AttributeError):  # not POSIX: the worker alone
        os.setpgid(0, 0)


def _end_own_group() -> None:
    """Kill the rest of this worker's process group (the driver is gone: nobody else will)."""
    with contextlib.suppress(OSError, AttributeError):
        os.killpg(os.getpgid(0), signal.SIGKILL)  # this process too: it was ending anyway


def kill_group(pid: int) -> None:
    """Kill the process group worker ``pid`` leads: the processes its trials started, even
    after the worker itself ended (they keep its group)."""
    with contextlib.suppress(OSError, AttributeError):
        os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Within the block SIGINT is blocked for this thread, and so for a process it starts
    (the mask survives fork and exec): a Ctrl-C while a worker's interpreter starts, before
    it can ignore it, printed a KeyboardInterrupt traceback from Python's spawn. The driver
    gets a Ctrl-C that came meanwhile once the block ends (another thread takes it at once).
    multiprocessing's resource tracker is started first: starting it unblocks SIGINT.

    Example:
        >>> with _sigint_blocked():
        ...     signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        True
        >>> signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        False
    """
    resource_tracker.ensure_running()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def output_to_stderr() -> None:
    """Send all this process writes to stdout to stderr for good: file descriptor 1 (which C
    code and child processes inherit) and ``sys.stdout``. The driver's stdout is the sweep's
    result (``autotune tune ... > best.json``); a trial's prints are progress, as on stderr."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(OSError):  # no fd 2 to point at: fd 1 stays
        os.dup2(2, 1)
    sys.stdout = sys.stderr


def _worker_main(
    conn: Connection, workload: str, problem: dict[str, Any], env: dict[str, str]
) -> None:
    """Body of the worker process: build the objective once, then evaluate configs on request."""
    # Ctrl-C is the driver's to handle; the worker started with it blocked (_sigint_blocked),
    # so one that came while Python started is dropped here, not a KeyboardInterrupt
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    output_to_stderr()  # before the objective is imported: it may print as it is built
    _own_group()
    _end_with_the_driver(os.getppid())
    os.environ.update(env)  # e.g. CUDA_VISIBLE_DEVICES, before torch is imported
    _progress_bars_lock_in_process()
    held: list[Any] = [None]  # the objective now served
    with contextlib.suppress(_DriverGone):  # a killed driver: nothing is left to tell
        held[0] = _built(conn, workload, problem)
        if held[0] is not None:
            _send(conn, ("ready",))
            _serve(conn, workload, held)
    if held[0] is not None:
        close_objective(workload, held[0])


def _built(conn: Connection, workload: str, problem: dict[str, Any]) -> Any:
    """``workload``'s objective at ``problem``; or None, its error said to the driver (the
    worker then ends)."""
    from autotune.objectives import get_objective

    try:
        objective = get_objective(workload)(problem)
    except Exception as exc:  # noqa: BLE001 - reported to the driver, which records it
        with contextlib.suppress(_DriverGone):
            _send(conn, ("init_error", f"{type(exc).__name__}: {exc}"))
        return None
    return objective


class _DriverGone(BaseException):
    """The driver's end of the pipe closed (it was killed): the worker ends quietly."""


def _send(conn: Connection, message: object) -> None:
    try:
        conn.send(message)
    except (OSError, EOFError):
        raise _DriverGone from None


def _serve(conn: Connection, workload: str, held: list[Any]) -> None:
    """Evaluate the configs the driver sends with ``held[0]``, the objective, until the driver
    says stop or is gone. A new problem (``("problem", {...})``: the next sweep of a search by
    group) replaces ``held[0]`` in this process, torch, Triton and the device's context already
    loaded (None where it could not be built: the worker ends)."""
    while True:
        objective = held[0]
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the driver is gone
            break
        if message[0] == "stop":
            break
        if message[0] == "problem":
            held[0] = None
            close_objective(workload, objective)
            held[0] = _built(conn, workload, message[1])
            if held[0] is None:
                return
            _send(conn, ("ready",))
            continue
        config = message[1]
        first: list[float] = []  # the trial's first reported value

        def report(step: int, value: float, first: list[float] = first) -> None:
            _send(conn, ("report", int(step), float(value)))
            try:
                answer = conn.recv()
            except (EOFError, OSError):
                raise _DriverGone from None
            if answer == "prune":
                raise pruned(step, value, first[0] if first else None)
            first[:] = first or [float(value)]

        try:
            measurement = checked_measurement(objective.evaluate(config, report))
        except _DriverGone:
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure is data
            failure = classify(exc)
            _send(conn, ("result", failure.status.value, str(failure), None))
            if failure.status in _RESTART_AFTER:
                break
        else:
            _send(conn, ("result", TrialStatus.OK.value, "", measurement))


def _death_reason(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker stopped answering"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (the host's OOM killer?)" if name == "SIGKILL" else ""
        return f"worker killed by {name}{hint}"
    return f"worker exited with code {exitcode}"


def _crashed(reason: str) -> TrialResult:
    return TrialResult(TrialStatus.CRASHED, reason)


class IsolatedRunner(Runner):
    """Evaluate trials of ``workload`` in a spawned worker process.

    Args:
        workload: registered objective name.
        problem: the objective's problem dict (picklable).
        timeout_s: wall-time limit of one trial, from the moment the worker receives it.
        start_timeout_s: limit for a new worker to import its libraries and build the objective.
        env: environment variables set in the worker before anything is imported
            (``{"CUDA_VISIBLE_DEVICES": "1"}`` pins it to one GPU).
    """

    def __init__(
        self,
        workload: str,
        problem: dict[str, Any],
        *,
        timeout_s: float = 300.0,
        start_timeout_s: float = 180.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workload = workload
        self.env = dict(env or {})
        self.problem = dict(problem)
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        #: ``time.monotonic()`` at which the sweep's time budget ends (None: no budget): a trial
        #: still running then is stopped and comes back ``interrupted``
        self.budget_ends: float | None = None
        self._context = mp.get_context("spawn")
        self._process: mp.process.BaseProcess | None = None
        self._conn: Connection | None = None
        self.workers_started = 0
        #: the longest a worker took from its start to ready (None: none started yet)
        self.longest_start_s: float | None = None
        self._busy = False  # a trial is being evaluated (close() then kills at once)
        self._closed = False

    def _within_budget(self, limit_s: float) -> tuple[float, bool]:
        """``limit_s`` cut to the seconds left of the sweep's time budget, and whether the
        budget cut it (what then stops is ``interrupted``, not slow)."""
        left = None if self.budget_ends is None else self.budget_ends - time.monotonic()
        if left is not None and left < limit_s:
            return max(0.0, left), True
        return limit_s, False

    # -- worker lifecycle ----------------------------------------------------------------
    def _start(self) -> TrialResult | None:
        """Start a worker and wait until it is ready, at most ``start_timeout_s`` and not past
        the time budget's end; return the trial's result if it failed, or None."""
        parent, child = self._context.Pipe()
        process = self._context.Process(
            target=_worker_main, args=(child, self.workload, self.problem, self.env), daemon=True
        )
        with _sigint_blocked():  # the new process starts with it blocked (see _worker_main)
            process.start()
        child.close()
        self._process, self._conn = process, parent
        self.workers_started += 1
        started = time.perf_counter()
        limit_s, budget_ends = self._within_budget(self.start_timeout_s)
        deadline = started + limit_s
        try:
            message = self._await_message(parent, process, deadline)
            if message is None:
                self._kill()
                if budget_ends:
                    why = "the sweep's time budget ended while its worker started"
                    return TrialResult(TrialStatus.INTERRUPTED, f"{why}; worker killed")
                return _crashed(f"worker did not start within {self.start_timeout_s:.0f} s")
        except (EOFError, OSError):
            process.join(timeout=5)
            reason = "runner closed" if self._closed else _death_reason(process.exitcode)
            self._kill()
            return _crashed(reason)
        if message[0] != "ready":
            self._kill()
            return _crashed(f"workload could not be set up: {message[1]}")
        took = time.perf_counter() - started
        self.longest_start_s = max(took, self.longest_start_s or 0.0)
        return None

    def _await_message(
        self, conn: Connection, process: mp.process.BaseProcess, deadline: float
    ) -> Any | None:
        """The worker's next message, or None when ``deadline`` (``time.perf_counter()``)
        passes first. Polls in short steps, so that close() from another thread, or a worker
        that dies (say while it imports), ends the wait at once: EOFError."""
        while not conn.poll(_POLL_S):
            if self._closed or not process.is_alive():
                raise EOFError
            if time.perf_counter() > deadline:
                return None
        return conn.recv()

    def _kill(self) -> None:
        # may run in two threads at once (close() while a trial ends): take the handles first
        process, conn = self._process, self._conn
        self._process, self._conn = None, None
        if process is not None and process.pid is not None:
            kill_group(process.pid)  # and what its trials started (the worker leads the group)
        if process is not None and process.is_alive():
            process.kill()
            process.join(timeout=10)
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.close()
        if process is not None:
            # a server the killed trial started (the server workload's, in a session of its
            # own) is being stopped by its watchdog: SIGTERM, SIGKILL 10 s later. Wait for
            # it, so that a sweep stopped by Ctrl-C or ended by a trial timeout returns with
            # none left holding its port and GPU memory (one that ignores SIGTERM outlived
            # the command by 10 s)
            await_leftovers(_SERVER_GRACE_S)

    def close(self) -> None:
        """Stop the worker: politely when idle (its objective's ``close()`` gets up to 10 s,
        and no time past the sweep's time budget but a second), at once when a trial is still
        running."""
        self._closed = True
        busy = self._busy
        if (
            not busy
            and self._conn is not None
            and self._process is not None
            and self._process.is_alive()
        ):
            try:
                self._conn.send(("stop",))
                self._process.join(timeout=max(1.0, self._within_budget(_CLOSE_S)[0]))
            except (OSError, BrokenPipeError):
                pass
        self._kill()

    @property
    def busy(self) -> bool:
        """Whether a trial is being evaluated now."""
        return self._busy

    @property
    def up(self) -> bool:
        """Whether a worker is running, its objective built: the next trial starts none."""
        return self._process is not None and self._process.is_alive()

    def start_worker(self) -> None:
        """Start the worker now, where none is up, as the next trial would (a search by group
        starts its kept workers before the first group's share of the time budget: see
        :meth:`autotune.driver.kept_processes.KeptProcesses.warm`). A worker that fails to
        start is left to the next trial, whose failure it is, as always."""
        if not self.up:
            self._kill()
            self._start()

    def take_up(self, problem: dict[str, Any]) -> None:
        """Serve ``problem`` from the next trial on (the next sweep of a search by group, the
        same workload): an idle worker builds the new problem's objective in its own process,
        its libraries and the device's context still loaded (at the problem it has, it keeps
        its objective); one that is busy, or cannot build it within ``start_timeout_s``, is
        ended, and the next trial starts a fresh worker (whose failure to start is that
        trial's, as always).

        Example:
            >>> with IsolatedRunner("faults", {}, timeout_s=30) as runner:
            ...     _ = runner.evaluate({"fault": "none"})
            ...     runner.take_up({"scale": 2.0})
            ...     runner.evaluate({"fault": "none"}).status.value, runner.workers_started
            ('ok', 1)
        """
        same = dict(problem) == self.problem
        self.problem, self._closed, self.budget_ends = dict(problem), False, None
        conn, process = self._conn, self._process
        if same and self.up and not self._busy:
            return  # its objective is this problem's (warmed up for it, say)
        ready = False
        if conn is not None and process is not None and process.is_alive() and not self._busy:
            try:
                conn.send(("problem", self.problem))
                deadline = time.perf_counter() + self.start_timeout_s
                message = self._await_message(conn, process, deadline)
                ready = message is not None and message[0] == "ready"
            except (EOFError, OSError):
                pass
        if not ready:
            self._kill()

    # -- one trial -----------------------------------------------------------------------
    def evaluate(
        self, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> TrialResult:
        if self._process is None or not self._process.is_alive():
            self._kill()
            failure = self._start()
            if failure is not None:
                return failure
        assert self._conn is not None and self._process is not None
        # local references: close() from another thread (the sweep stopping) ends the worker,
        # and this loop then sees the pipe close instead of a missing attribute
        conn, process = self._conn, self._process
        self._busy = True
        try:
            return self._exchange(conn, process, config, should_prune)
        finally:
            self._busy = False

    def _exchange(
        self,
        conn: Connection,
        process: mp.process.BaseProcess,
        config: dict[str, Any],
        should_prune: PruneCheck,
    ) -> TrialResult:
        start = time.perf_counter()
        # the sweep's time budget ends first: the trial is stopped there, not judged slow
        limit_s, budget_ends = self._within_budget(self.timeout_s)
        deadline = start + limit_s
        try:
            conn.send(("evaluate", config))
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    self._kill()
                    if budget_ends:
                        return TrialResult(
                            TrialStatus.INTERRUPTED,
                            "the sweep's time budget ended while it ran; worker killed",
                            duration_s=time.perf_counter() - start,
                        )
                    return TrialResult(
                        TrialStatus.TIMEOUT,
                        f"no result after {self.timeout_s:.1f} s; worker killed",
                        duration_s=time.perf_counter() - start,
                    )
                if not conn.poll(min(remaining, _POLL_S)):
                    if self._closed:  # closed from another thread: end the worker now
                        self._kill()
                    if not process.is_alive():
                        raise EOFError
                    continue
                message = conn.recv()
                if message[0] == "report":
                    prune = should_prune(message[1], message[2])
                    conn.send("prune" if prune else "continue")
                    continue
                _, status, reason, measurement = message
                result = TrialResult(
                    TrialStatus(status), reason, measurement, time.perf_counter() - start
                )
                if result.status in _RESTART_AFTER:
                    process.join(timeout=5)
                    self._kill()
                return result
        except (EOFError, OSError, BrokenPipeError, ValueError):
            process.join(timeout=5)
            reason = _death_reason(process.exitcode)
            self._kill()
            return TrialResult(TrialStatus.CRASHED, reason, duration_s=time.perf_counter() - start)
        except BaseException:  # Ctrl-C in the driver: leave no worker behind
            self._kill()
            raise
