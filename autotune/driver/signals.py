"""How the sweep takes SIGINT, SIGTERM and SIGHUP (a closed terminal or SSH session): a
signal stops it at the next turn of its loop (cutting a wait short), never while a measured
trial is half-told or a new trial is not yet known to the heartbeat, and a second signal
neither hangs the first's handler nor interrupts the sweep's stop. Outside the sweep's loop (the
finish, a search by group between its groups) the command's handlers raise KeyboardInterrupt and
record the signal (:func:`stop_signals_recorded`), which stops the command where CPython
dropped the exception (:func:`raise_if_stopped`).

Example:
    >>> import threading
    >>> stop = threading.Event()
    >>> restore = stop_on_signals(stop)  # in the main thread: SIGINT now sets ``stop``
    >>> with interrupt_deferred():  # a signal here would only set the flag
    ...     pass
    >>> restore()
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

#: the signals that stop a sweep as Ctrl-C does
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

#: the stop signals that came while a command's handlers were in force
#: (:func:`stop_signals_recorded`; the sweep's own record them too); None outside them
_came: list[int] | None = None

#: set while a measured trial is told, or a new one is created: a signal then only sets the stop
#: flag, so that a trial half-written (its status stored, its value not yet) is never marked
#: interrupted, and a trial the storage just created is known to the heartbeat before the stop
_DEFERRED = threading.Event()


@contextlib.contextmanager
def interrupt_deferred() -> Iterator[None]:
    """A block in which a signal only sets the sweep's stop flag (see ``_DEFERRED``)."""
    _DEFERRED.set()
    try:
        yield
    finally:
        _DEFERRED.clear()


def stop_on_signals(stop: threading.Event) -> Callable[[], None]:
    """Make SIGINT, SIGTERM and SIGHUP (each unless the process was started ignoring it:
    :func:`taken_signals`) stop the sweep (the trials in flight marked interrupted,
    workers ended): the handler sets ``stop``, which the loop checks at every turn, and raises
    KeyboardInterrupt to cut a wait short, except while a measured trial is being told (Python
    drops an exception raised inside a garbage collector's callback; the flag still stops the
    sweep then). Each signal is also recorded for the command (:func:`raise_if_stopped`): one
    whose exception was dropped after the loop's last look at the flag stops what follows, the
    finish or the next group; one recorded before, its exception dropped in the sweep's
    set-up, sets ``stop`` at once. A signal after the first does nothing: the sweep is
    stopping. Returns what puts the previous handlers back. Only the main thread takes
    signals: elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    taken: list[int] = []  # the signals that came: only the first stops the sweep

    def interrupt(signum: int, frame: object) -> None:
        # A second signal (Ctrl-C twice, a closed terminal's SIGHUP then SIGTERM) is let be:
        # its handler may run inside the first's ``stop.set()``, whose lock it would wait on
        # for ever, and raising again could cut the sweep's stop short before its trials are
        # closed. The first one's flag or exception stops the sweep all the same.
        _record(signum)
        first = not taken
        taken.append(signum)
        if not first:
            return
        stop.set()
        if not _DEFERRED.is_set():
            raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, interrupt) for sig in taken_signals()}
    if _came:  # one came before (the sweep's set-up), its KeyboardInterrupt dropped
        taken.extend(_came)
        stop.set()

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    return restore


@contextlib.contextmanager
def stop_signals_recorded() -> Iterator[None]:
    """A command's stop signals within the block (those it takes: :func:`taken_signals`):
    each raises KeyboardInterrupt, as Ctrl-C does ("interrupted", exit 130, workers closed),
    and is recorded. CPython drops a KeyboardInterrupt raised while a garbage collector's or a
    weakref's callback runs (it prints "Exception ignored in: <function WeakSet...>" and goes
    on), and the command ran on to its end, exit 0; the record outlives the exception, and
    :func:`raise_if_stopped` raises it again where the command looks (the finish between its
    measurements, a search by group between its groups). A sweep sets its own handlers while
    its loop runs (:func:`stop_on_signals`, which record too) and puts these back. The main
    thread only.

    Example:
        >>> with stop_signals_recorded():  # SIGINT now raises KeyboardInterrupt and is kept
        ...     raise_if_stopped()  # none came: nothing raised
    """
    global _came
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        _record(signum)
        raise KeyboardInterrupt(f"signal {signum}")

    outer, _came = _came, []
    previous = {sig: signal.signal(sig, interrupt) for sig in taken_signals()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _came = outer


def _record(signum: int) -> None:
    """Keep ``signum`` for :func:`raise_if_stopped` (where a command's handlers are in force)."""
    if _came is not None:
        _came.append(signum)


def raise_if_stopped() -> None:
    """Raise KeyboardInterrupt, as the handler did, where a stop signal came while
    :func:`stop_signals_recorded` was in force, whether or not its own exception was dropped:
    a place where the command would go on (the finish's next measurement, the next group)
    stops as an interrupt that reached it stops it.

    Example:
        >>> raise_if_stopped()  # no command's handlers in force, or no signal came
    """
    if _came:
        raise KeyboardInterrupt(f"signal {_came[0]}")


def taken_signals() -> tuple[signal.Signals, ...]:
    """The stop signals this process takes: those it was not started ignoring. ``nohup``
    starts a command with SIGHUP ignored, a shell its background jobs with SIGINT ignored, so
    that a closed terminal or a Ctrl-C meant for the foreground leaves them running.

    Example:
        >>> signal.SIGTERM in taken_signals()
        True
    """
    return tuple(sig for sig in STOP_SIGNALS if signal.getsignal(sig) is not signal.SIG_IGN)


@contextlib.contextmanager
def signals_held(came: list[int] | None = None) -> Iterator[None]:
    """Hold the stop signals off while the sweep closes its trials (a second Ctrl-C must not
    leave one RUNNING): each that comes is only put in ``came`` (where given), for the sweep
    to pass on once closed where it ended on its own as the signal came; the main thread
    only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def hold(signum: int, frame: object) -> None:
        if came is not None:
            came.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """A block of writes that belong together (a new study's queued default and its
    description), which a stop signal does not cut: one that comes meanwhile is delivered
    once the block ends, to the handler it would have reached (Ctrl-C's KeyboardInterrupt);
    the main thread only.

    Example:
        >>> with signals_deferred():
        ...     pass
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []

    def hold(signum: int, frame: object) -> None:
        came.append(signum)

    previous = {sig: signal.signal(sig, hold) for sig in taken_signals()}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if came:
            signal.raise_signal(came[0])
