"""Run trials in the driver's own process, with ``capacity`` trials in flight on a simulated
clock: for replay, tests, and objectives that cannot crash.

Each submitted trial is evaluated at once; it "finishes" at the simulated time it was
submitted plus how long it took, so :meth:`InlineExecutor.wait_any` hands trials back in the
order they would finish if ``capacity`` of them really ran side by side. For a replay the
duration is the one recorded with the measurement (see
:class:`~autotune.objectives.replay.ReplayObjective`), so a replay of N in flight shows what a
sweep on N devices would have seen. With capacity 1 trials come back in submission order.

Trials run in the driver's process (:class:`~autotune.runners.inprocess.InProcessRunner`):
what they print goes to stderr, an exception (``SystemExit`` included) is the trial's
failure, and a trial past ``timeout_s`` is stopped and comes back ``timeout`` (one running
when the sweep's time budget ends, ``interrupted``) where a timer can interrupt it (the main
thread; a C call that never returns to Python cannot be). A segfault ends the driver:
objectives that can crash take the local executor. When the sweep stops (Ctrl-C), the trials
evaluated but still waiting on the simulated clock are measured: :meth:`finished_at_stop`
hands them to the driver to tell; the one a Ctrl-C cut mid-evaluation is ``interrupted``.

Example:
    >>> executor = InlineExecutor("faults", {}, capacity=2)
    >>> executor.submit(0, {"fault": "none", "delay": 0.05})
    >>> executor.submit(1, {"fault": "none", "delay": 0.0})
    >>> [f.ticket for f in executor.wait_any()], [f.ticket for f in executor.wait_any()]
    ([1], [0])
"""

from __future__ import annotations

import heapq
from typing import Any

from autotune.executors.base import Executor, Finished
from autotune.runners.base import PruneCheck, never_prune
from autotune.runners.inprocess import InProcessRunner


class InlineExecutor(Executor):
    """Evaluate in this process; ``capacity`` trials in flight on a simulated clock.

    Args:
        workload, problem: the objective, built once in this process.
        capacity: trials in flight on the simulated clock.
        timeout_s: wall-time limit of one trial (real time, not simulated); None: none.
    """

    name = "inline"

    def __init__(
        self,
        workload: str,
        problem: dict[str, Any],
        capacity: int = 1,
        *,
        timeout_s: float | None = 300.0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self._capacity = capacity
        self._runner = InProcessRunner(workload, problem, timeout_s=timeout_s)
        self._clock = 0.0  # simulated seconds
        self._order = 0  # ties finish in submission order
        self._pending: list[tuple[float, int, Finished]] = []
        self._handed: list[Finished] = []  # the last trial wait_any handed back
        self._evaluating: int | None = None  # the ticket submit() evaluates now

    @property
    def capacity(self) -> int:
        return self._capacity

    @property
    def side_by_side(self) -> int:
        """1: however many are in flight on the simulated clock, trials run one at a time."""
        return 1

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    @property
    def clock_s(self) -> float:
        """Simulated time: when the last trial handed back finished."""
        return self._clock

    def end_at(self, budget_ends: float | None) -> None:
        """Stop a trial still running at ``budget_ends`` (a ``time.monotonic()`` reading),
        where the timer can (see the module docstring)."""
        self._runner.budget_ends = budget_ends

    def submit(
        self, ticket: int, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> None:
        self._evaluating = ticket  # kept where a stop ends the evaluation (KeyboardInterrupt)
        result = self._runner.evaluate(config, should_prune)
        self._evaluating = None
        recorded = result.measurement.recorded_duration_s if result.measurement else None
        simulated = result.duration_s if recorded is None else recorded
        self._order += 1
        # seconds: the real time spent (the driver's overhead figures stay real); the order of
        # finishing follows the simulated clock
        finished = Finished(ticket, result, result.duration_s, worker="inline")
        heapq.heappush(self._pending, (self._clock + simulated, self._order, finished))

    def wait_any(self) -> list[Finished]:
        if not self._pending:
            raise RuntimeError("wait_any() with no trial in flight")
        # kept before it leaves the heap: a stop before the driver told it still finds it
        self._handed = [self._pending[0][2]]
        finish_at, _, finished = heapq.heappop(self._pending)
        self._clock = max(self._clock, finish_at)
        return [finished]

    def running_on(self) -> dict[int, str]:
        """The trial being evaluated now, if a stop came while it ran (in this process)."""
        return {} if self._evaluating is None else {self._evaluating: "inline"}

    def finished_at_stop(self) -> list[Finished]:
        """Every trial evaluated and not handed back yet (in the order the simulated clock
        finishes them), after the last one handed back: all were measured, whatever the
        simulated clock says, so a stop keeps them."""
        waiting = [finished for _, _, finished in sorted(self._pending, key=lambda p: p[:2])]
        handed, self._handed, self._pending = self._handed, [], []
        return handed + waiting

    def close(self) -> None:
        self._pending.clear()
        self._evaluating = None
        self._handed = []
        self._runner.close()
