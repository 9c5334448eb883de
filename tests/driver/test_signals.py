"""The sweep's signal handling, with real signals sent to this process (main thread only:
elsewhere the handlers are not Python's to set)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from autotune.driver.signals import (
    interrupt_deferred,
    raise_if_stopped,
    signals_held,
    stop_on_signals,
    stop_signals_recorded,
)

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


def test_a_signal_while_the_sweep_closes_is_kept_for_it_to_pass_on():
    came: list[int] = []
    with signals_held(came):
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(0.2)  # the handler has run: nothing raised
    assert came == [signal.SIGTERM]


def test_a_sweep_started_under_nohup_runs_on_when_the_terminal_closes(tmp_path):
    # the command and the sweep put their own handlers over nohup's ignored SIGHUP: a closed
    # terminal (or SSH session) stopped the sweep nohup was meant to keep running
    import subprocess
    import sys

    (tmp_path / "s.yaml").write_text(
        "parameters:\n  score: {type: float, low: 0, high: 1}\n  delay: {type: float, low: 0.5,"
        " high: 0.5}\n"
    )  # fmt: skip
    command = [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", "s.yaml",
               "--trials", "6", "--finish-top", "0", "--storage", "memory"]  # fmt: skip
    ignoring = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # as nohup starts it
    )  # fmt: skip
    taking = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    for process in (ignoring, taking):
        while not process.stderr.readline().startswith("[1/"):  # its first trial is in
            assert process.poll() is None, process.stderr.read()
        process.send_signal(signal.SIGHUP)
    assert ignoring.wait(timeout=120) == 0, ignoring.stderr.read()
    assert "done: 6 trials" in ignoring.stderr.read()
    assert taking.wait(timeout=120) == 130  # a SIGHUP it was not started ignoring stops it


SLOW_TO_SET = """
import signal, sys, threading, time
from autotune.driver.signals import stop_on_signals


class SlowToSet(threading.Event):
    '''An Event whose set() holds its lock a while, as a loaded machine's may.'''

    def set(self):
        with self._cond:
            print("setting", flush=True)
            time.sleep(1.0)  # a second signal lands here
            self._flag = True
            self._cond.notify_all()


stop = SlowToSet()
stop_on_signals(stop)
try:  # (the signal may come as soon as "ready" is read: before the sleep)
    print("ready", flush=True)
    time.sleep(30)
except KeyboardInterrupt:
    print("interrupted", stop.is_set(), flush=True)
"""


def test_a_second_signal_while_the_first_sets_the_stop_neither_hangs_nor_raises_again():
    # Ctrl-C twice, or a closed terminal's SIGHUP then SIGTERM: the second handler ran inside
    # the first's stop.set() and waited for ever on the Event's lock, the sweep hung (seen:
    # an inline sweep sent SIGINT and SIGTERM together never ended)
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", SLOW_TO_SET], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert process.stdout.readline() == "ready\n", process.stderr.read()
        process.send_signal(signal.SIGINT)
        assert process.stdout.readline() == "setting\n"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        process.kill()
    assert out == "interrupted True\n", err


def test_a_ctrl_c_whose_keyboard_interrupt_cpython_dropped_is_kept_for_the_command(
    dropped_ctrl_c,
):
    """Raised inside a garbage collector's callback, the handler's KeyboardInterrupt is
    printed and lost, and the command ran on; the command's handlers record the signal, and
    the places where it would go on raise it again."""
    before = signal.getsignal(signal.SIGINT)
    with stop_signals_recorded():
        raise_if_stopped()  # none came yet
        with dropped_ctrl_c.dropped() as dropped:
            dropped_ctrl_c.press_ctrl_c_in_a_gc_callback()  # nothing raised here
        assert dropped == [KeyboardInterrupt]
        with pytest.raises(KeyboardInterrupt):
            raise_if_stopped()
    assert signal.getsignal(signal.SIGINT) is before
    raise_if_stopped()  # the command's handlers gone: its record too


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_a_command_stop_signal_raises_keyboard_interrupt_and_is_recorded(sent):
    with stop_signals_recorded():
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), sent)
            threading.Event().wait(5)  # the handler runs here at the latest
        with pytest.raises(KeyboardInterrupt):
            raise_if_stopped()


def test_a_signal_the_sweep_took_is_recorded_for_the_command():
    # its KeyboardInterrupt dropped after the loop last looked at the flag, the sweep ends on
    # its own: the record stops what follows (the finish, the next group)
    with stop_signals_recorded():
        stop = threading.Event()
        restore = stop_on_signals(stop)
        try:
            with interrupt_deferred():  # (only the flag set, as where it was dropped)
                os.kill(os.getpid(), signal.SIGINT)
                threading.Event().wait(0.2)
        finally:
            restore()
        with pytest.raises(KeyboardInterrupt):
            raise_if_stopped()


def test_a_signal_recorded_before_the_sweep_took_over_stops_it_at_once(dropped_ctrl_c):
    # Ctrl-C in a sweep's set-up (its study opened, its trials counted) whose KeyboardInterrupt
    # was dropped: the sweep that starts after it stops at its first turn
    with stop_signals_recorded():
        with dropped_ctrl_c.dropped():
            dropped_ctrl_c.press_ctrl_c_in_a_gc_callback()
        stop = threading.Event()
        stop_on_signals(stop)()
        assert stop.is_set()
