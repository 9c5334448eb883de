"""The configs a sweep asked for ahead: kept oldest first, compiled in the compile-ahead pool
(:mod:`autotune.driver.compile_ahead`) where there is one, and launched when a slot frees and
their compile has ended (one that failed to compile is told without taking a slot).

Example:
    >>> from autotune.driver import Sweep, SweepSettings
    >>> from autotune.space import load_space
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, n_trials=4, seed=0, storage="memory",
    ...     executor="inline", device={"type": "cpu"})
    >>> summary = Sweep(settings).run()  # no pool: one config asked ahead, compiled by its trial
    >>> summary.compile_jobs, summary.compile_wait_s
    (0, 0.0)
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from autotune.driver.settings import SweepSettings
from autotune.driver.trial_book import Asked, TrialBook
from autotune.runners.base import TrialResult

if TYPE_CHECKING:
    from autotune.driver.compile_ahead import CompileAhead
    from autotune.driver.liveness import Heartbeat


class AskAhead:
    """The ask-ahead queue of the sweep's run (``_SweepRun``, which keeps the state below and
    gives :meth:`launched` and :meth:`account`)."""

    settings: SweepSettings
    book: TrialBook
    heartbeat: Heartbeat
    ahead: deque[Asked]
    compiler: CompileAhead | None
    depth: int
    compile_wait_s: float

    def wants_ahead(self) -> bool:
        """True while fewer configs are asked ahead than the lookahead holds and the budget
        leaves room for them."""
        if len(self.ahead) >= self.depth:
            return False
        n_trials = self.settings.n_trials
        return n_trials is None or self.launched() + len(self.ahead) < n_trials

    def queue(self, asked: Asked | None) -> None:
        """Keep a config asked for ahead, and start compiling it."""
        if asked is None:
            return
        self.ahead.append(asked)
        if self.compiler is not None:
            self.compiler.submit(asked.trial.number, asked.config)

    def ready_ahead(self) -> Asked | None:
        """The oldest config asked ahead that may launch now: its compile has ended, or the
        pool has not begun it (still starting, or behind), so that a free slot never waits for
        a compile nobody runs: the trial compiles it itself. One that failed to compile is told
        to the study (it costs no slot) and the next is looked at."""
        for asked in list(self.ahead):
            number = asked.trial.number
            if self.compiler is not None and not self.compiler.done(number):
                if self.compiler.started(number):
                    continue  # being compiled: wait for it rather than compile it twice
                self.compiler.discard(number)
            self.ahead.remove(asked)
            failed = self.compiler.wait(number) if self.compiler is not None else None
            if failed is None:
                return asked
            self.tell_unlaunched(asked, failed)
        return None

    def wait_for_compile(self) -> None:
        """Wait for the oldest config's compile (a free slot waits on it): time counted as
        the compile share the pool did not hide."""
        started = time.perf_counter()
        number = self.ahead[0].trial.number
        failed = (
            self.compiler.wait(number, self.settings.trial_timeout_s) if self.compiler else None
        )
        self.compile_wait_s += time.perf_counter() - started
        if failed is not None:
            self.tell_unlaunched(self.ahead.popleft(), failed)

    def tell_unlaunched(self, asked: Asked, result: TrialResult) -> None:
        """A config that failed in the compile pool: a trial result that took no slot."""
        self.account(self.book.tell_result(asked, result, "compile-ahead pool"))
        self.heartbeat.discard(asked.trial.number)
