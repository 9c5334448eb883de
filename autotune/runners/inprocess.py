"""Run trials in the driver's own process: for replay and objectives that cannot crash.

Whatever a trial prints (``print``, a write to file descriptor 1, a child process it starts)
goes to stderr: the driver's stdout holds its results only (``autotune tune ... > best.json``).
Any exception a trial raises is its failure, ``SystemExit`` included (``crashed: SystemExit:
3``); only ``KeyboardInterrupt`` (the sweep being stopped) goes through, also when the
objective caught it and raised its own error (the trial is ``interrupted``, not blamed). With
``timeout_s`` a trial that runs longer is stopped there and comes back ``timeout``: a timer
(``SIGALRM``) raises in ``evaluate``, which interrupts a sleep, a wait on a lock, a socket or a
child process and Python code, though not one C call that never returns to the interpreter; one
running when the sweep's time budget ends (``budget_ends``) is stopped there and comes back
``interrupted``. Signals reach the main thread only, so elsewhere (and on a system without
``setitimer``) a trial has no time limit.

Example:
    >>> runner = InProcessRunner("faults", {}, timeout_s=0.5)
    >>> runner.evaluate({"fault": "none"}).status.value
    'ok'
    >>> result = runner.evaluate({"fault": "hang", "seconds": 60})
    >>> result.status.value, result.reason
    ('timeout', 'no result after 0.5 s; evaluate stopped')
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from autotune.failures import TrialStatus, classify, first_line
from autotune.objectives import get_objective
from autotune.objectives.external import keeps_working_folder, setup_call
from autotune.runners.base import (
    PruneCheck,
    Runner,
    TrialResult,
    checked_measurement,
    close_objective,
    never_prune,
    pruned,
)
from autotune.time_limit import TimeLimit


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Within the block, what is written to stdout goes to stderr: ``sys.stdout`` and, where
    the process has both, file descriptor 1 (so C code and child processes started within the
    block follow). Both are put back after it.

    Example:
        >>> import sys
        >>> with stdout_to_stderr():
        ...     redirected = sys.stdout is sys.stderr
        >>> redirected, sys.stdout is sys.stderr
        (True, False)
    """
    with contextlib.suppress(Exception):  # a closed or odd stream: nothing buffered to keep
        sys.stdout.flush()
    try:
        saved: int | None = os.dup(1)
        os.dup2(2, 1)
    except OSError:  # no fd 1 or no fd 2: sys.stdout alone is redirected
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, 1)
            os.close(saved)


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether a ``KeyboardInterrupt`` (the sweep being stopped) is in ``exc``'s chain of
    causes: an objective or a library under it that caught the Ctrl-C and raised its own error.

    Example:
        >>> try:
        ...     try:
        ...         raise KeyboardInterrupt
        ...     except KeyboardInterrupt as stop:
        ...         raise RuntimeError("compile workers stopped") from stop
        ... except RuntimeError as wrapped:
        ...     caused_by_interrupt(wrapped), caused_by_interrupt(ValueError("x"))
        (True, False)
    """
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if isinstance(link, KeyboardInterrupt):
            return True
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return False


class InProcessRunner(Runner):
    """Evaluate the objective directly; exceptions become failures, but a crash is fatal.

    Args:
        workload, problem: the objective to build (in this process, once).
        timeout_s: wall-time limit of one trial, where it can be enforced (see the module
            docstring); None: none.
    """

    def __init__(
        self, workload: str, problem: dict[str, Any], *, timeout_s: float | None = None
    ) -> None:
        self.timeout_s = timeout_s
        #: ``time.monotonic()`` at which the sweep's time budget ends (None: no budget): a trial
        #: still running then is stopped and comes back ``interrupted``
        self.budget_ends: float | None = None
        self.workload = workload
        objective_cls = get_objective(workload)
        # a workload file's __init__ that raises (on a resume, which does not build it while
        # the sweep is set up) is one line naming it
        with stdout_to_stderr(), setup_call(workload, objective_cls, "__init__"):
            self.objective = objective_cls(problem)

    def evaluate(
        self, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> TrialResult:
        first: list[float] = []  # the trial's first reported value

        def report(step: int, value: float) -> None:
            if should_prune(step, value):
                raise pruned(step, value, first[0] if first else None)
            first[:] = first or [float(value)]

        limit = TimeLimit(self.timeout_s)
        budget_left = None if self.budget_ends is None else self.budget_ends - time.monotonic()
        # the sweep's time budget ends first: the trial is stopped there, not judged slow
        by_budget = budget_left is not None and (
            self.timeout_s is None or budget_left < self.timeout_s
        )
        if by_budget:
            limit.timeout_s = max(budget_left, 0.001)
        start = time.perf_counter()
        try:
            with stdout_to_stderr(), keeps_working_folder(), limit.running():
                measurement = checked_measurement(self.objective.evaluate(config, report))
        except KeyboardInterrupt:  # the sweep is being stopped: not this trial's failure
            raise
        except BaseException as exc:  # noqa: BLE001 - every failure is data, SystemExit too
            if caused_by_interrupt(exc):  # a Ctrl-C the objective wrapped in its own error
                raise KeyboardInterrupt(first_line(exc)) from exc
            if not limit.fired:
                failure = classify(exc)
                return TrialResult(failure.status, str(failure), None, time.perf_counter() - start)
        if limit.fired and by_budget:
            return TrialResult(
                TrialStatus.INTERRUPTED,
                "the sweep's time budget ended while it ran; evaluate stopped",
                duration_s=time.perf_counter() - start,
            )
        if limit.fired:  # out of time, whatever the objective made of the exception
            return TrialResult(
                TrialStatus.TIMEOUT,
                f"no result after {self.timeout_s:.1f} s; evaluate stopped",
                duration_s=time.perf_counter() - start,
            )
        return TrialResult(TrialStatus.OK, "", measurement, time.perf_counter() - start)

    def close(self) -> None:
        """Close the objective; one that raises there (its trials are stored by then) is a
        warning on stderr, not the sweep's end."""
        with stdout_to_stderr():
            close_objective(self.workload, self.objective)
