"""A one-shot time limit on a block of this process's own code: ``SIGALRM`` raises
:class:`TimeUp` in it once the time is up (an inline trial's ``evaluate``, a workload's set-up
code under the command's budget). Where no alarm can be set (another thread, another timer
of this process pending) the block runs without a limit.

Example:
    >>> import time
    >>> limit = TimeLimit(0.05)
    >>> try:
    ...     with limit.running():
    ...         time.sleep(5)
    ... except TimeUp:
    ...     print("stopped", limit.fired)
    stopped True
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class TimeUp(BaseException):
    """Raised in the block when its time is up: not an ``Exception``, so that the code's own
    ``except Exception`` does not swallow it."""


#: The longest ``setitimer`` takes (about three years: 1e10 s overflowed the platform's
#: time_t and failed every trial ``crashed``); a limit past it is no limit in practice
LONGEST_TIMER_S = 1e8


class TimeLimit:
    """A one-shot ``SIGALRM`` that raises :class:`TimeUp` while armed, where it can be set
    (the main thread, ``setitimer``, no other timer of this process pending)."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.fired = False  # the time ran out (even if the block caught the exception)
        self._armed = False

    def _possible(self) -> bool:
        return (
            self.timeout_s is not None
            and self.timeout_s > 0
            and hasattr(signal, "setitimer")
            and threading.current_thread() is threading.main_thread()
            and signal.getitimer(signal.ITIMER_REAL)[0] == 0  # not someone else's timer
        )

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        if self._armed:
            self.fired = True
            raise TimeUp

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """The block runs under the limit."""
        if not self._possible():
            yield
            return
        assert self.timeout_s is not None
        previous = signal.signal(signal.SIGALRM, self._on_alarm)
        try:
            self._armed = True
            signal.setitimer(signal.ITIMER_REAL, min(self.timeout_s, LONGEST_TIMER_S))
            yield
        finally:
            try:
                self._armed = False  # the alarm may come now: it no longer raises
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
