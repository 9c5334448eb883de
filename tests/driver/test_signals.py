"""The sweep's signal handling, with real signals sent to this process (main thread only:
elsewhere the handlers are not Python's to set)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from autotune.driver.signals import interrupt_deferred, signals_held, stop_on_signals

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="signal handlers can only be set in the main thread",
)


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGHUP])  # SIGHUP: a closed terminal
def test_a_signal_sets_the_stop_and_cuts_a_wait_short_then_the_old_handler_is_back(sent):
    before = signal.getsignal(sent)
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sent)
            threading.Event().wait(5)  # the handler runs here at the latest
        assert stop.is_set()
    finally:
        restore()
    assert signal.getsignal(sent) is before


def test_while_a_trial_is_told_a_signal_only_sets_the_stop():
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        with interrupt_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(0.2)  # the handler has run: no KeyboardInterrupt
        assert stop.is_set()
    finally:
        restore()


def test_while_the_sweep_closes_a_second_signal_is_ignored():
    stop = threading.Event()
    restore = stop_on_signals(stop)
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            threading.Event().wait(0.2)
        assert not stop.is_set()  # not even seen: the close runs to its end
    finally:
        restore()
