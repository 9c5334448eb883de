"""The server watchdog's shared pieces: a trial whose server outlives a killed trial waits
for it before starting its own."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autotune.objectives.server_process import running
from autotune.objectives.server_watchdog import await_leftovers, group_alive, notes_folder

IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
)
_TRIAL = """
import sys, time
from autotune.objectives.server_process import running
with open(sys.argv[2], "w") as log, running(sys.argv[3:], log, grace_s=2.0) as proc:
    time.sleep(0.5)  # the server's SIGTERM handler set
    open(sys.argv[1], "w").write(str(proc.pid))
    time.sleep(60)
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_server_starts_once_the_server_of_a_killed_trial_is_gone(until, tmp_path, monkeypatch):
    # a server ignoring SIGTERM outlived its killed trial for the watchdog's grace, and the
    # next trial's server started beside it (on a GPU: its memory still held)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    started = tmp_path / "server.pid"
    trial = subprocess.Popen(
        [sys.executable, "-c", _TRIAL, str(started), str(tmp_path / "log"),
         sys.executable, "-c", IGNORES_SIGTERM],
        env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True,
    )  # fmt: skip
    old = 0
    try:
        assert until(started.exists, 60), "the first server never started"
        old = int(started.read_text())
        assert (notes_folder() / str(old)).read_text() == str(trial.pid)
        trial.kill()  # a trial timeout: no finally runs
        trial.wait()
        begun = time.monotonic()
        with tempfile.TemporaryFile("w+") as log, running(["sleep", "30"], log, 2.0) as proc:
            assert not group_alive(old), "the new server started beside the old one"
            assert time.monotonic() - begun < 6
            assert (notes_folder() / str(proc.pid)).exists()
        assert not (notes_folder() / str(proc.pid)).exists()  # a stopped server's note goes
        assert not (notes_folder() / str(old)).exists()
    finally:
        trial.kill()
        trial.wait()
        if old and group_alive(old):
            os.killpg(old, 9)


def test_a_server_whose_trial_runs_is_no_leftover(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        notes_folder().mkdir()
        (notes_folder() / str(group.pid)).write_text(str(os.getppid()))  # a live trial's
        assert await_leftovers(0.2) == [] and group.poll() is None
        (notes_folder() / str(group.pid)).write_text("999999999")  # a trial that is gone
        assert await_leftovers(0.2) == [group.pid]
        assert group.wait(timeout=5) == -9
        assert list(notes_folder().iterdir()) == []
    finally:
        group.kill()
        group.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_process_the_server_detaches_ends_with_it(until):
    # `setsid sleep &` left the server's group: stopping the group missed it, and it lived on
    # under init (a real server's detached worker keeps its port and GPU memory)
    from autotune.objectives.server_process import OutputTail

    marker = f"{time.time_ns() % 10**9 + 10**9}"  # a sleep of its own, found by its argument
    command = f"setsid sleep {marker} & sleep 600"
    with running(["sh", "-c", command], OutputTail()):
        assert until(lambda: _sleeping(marker), 10), "the detached process never started"
    assert not _sleeping(marker)


def _sleeping(marker: str) -> bool:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                state = Path(f"/proc/{name}/stat").read_text().rpartition(")")[2].split()[0]
            except OSError:
                continue
            if argv[:2] == [b"sleep", marker.encode()] and state != "Z":
                return True
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_process_the_server_detaches_ends_when_its_trial_is_killed(until, tmp_path):
    # the trial's own stop ended what the server detached, but a trial killed at its timeout
    # runs no stop: its watchdog ended the server's group alone, and the detached process
    # lived on under init
    marker = f"{time.time_ns() % 10**9 + 2 * 10**9}"
    started = tmp_path / "server.pid"
    trial = subprocess.Popen(
        [sys.executable, "-c", _TRIAL, str(started), str(tmp_path / "log"),
         "sh", "-c", f"setsid sleep {marker} & sleep 600"],
        env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True,
    )  # fmt: skip
    try:
        assert until(lambda: started.exists() and _sleeping(marker), 60), "never started"
        time.sleep(1.0)  # the watchdog's next look at the server's processes
        trial.kill()  # a trial timeout: no finally runs
        trial.wait()
        assert until(lambda: not _sleeping(marker), 10), "the detached process lived on"
    finally:
        trial.kill()
        trial.wait()
        subprocess.run(["pkill", "-f", f"sleep {marker}"], check=False)
