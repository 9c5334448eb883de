"""Each failure state produced by a real injected fault, in a real worker process."""

import os
import signal
import subprocess
import sys

import pytest

from autotune.failures import TrialStatus
from autotune.runners.inprocess import InProcessRunner
from autotune.runners.worker import IsolatedRunner


@pytest.fixture(scope="module")
def runner():
    with IsolatedRunner("faults", {}, timeout_s=3.0) as runner:
        yield runner


def test_ok_result_and_worker_reuse(runner):
    first = runner.evaluate({"fault": "none", "score": 0.5})
    started = runner.workers_started
    second = runner.evaluate({"fault": "none", "score": 0.25})
    assert first.ok and first.measurement.values["score"] == 0.5
    assert second.measurement.values["score"] == 0.25
    assert runner.workers_started == started  # the healthy worker was reused


def test_out_of_memory(runner):
    result = runner.evaluate({"fault": "oom"})
    assert result.status is TrialStatus.OOM
    assert "can't allocate memory" in result.reason


def test_segfault_kills_only_the_worker(runner):
    result = runner.evaluate({"fault": "segfault"})
    assert result.status is TrialStatus.CRASHED
    assert "SIGSEGV" in result.reason
    assert runner.evaluate({"fault": "none"}).ok  # a fresh worker took over


def test_hang_ends_at_the_timeout(runner):
    result = runner.evaluate({"fault": "hang"})
    assert result.status is TrialStatus.TIMEOUT
    assert 3.0 <= result.duration_s < 10.0
    assert runner.evaluate({"fault": "none"}).ok


def test_a_worker_killed_after_a_progress_bar_leaves_no_semaphore_behind():
    # torch inductor draws a tqdm bar while it compiles; a worker killed then (a timeout, the
    # sweep stopped) once left tqdm's named semaphore to the resource tracker, whose warning
    # ended the sweep's output
    script = (
        "from autotune.runners.worker import IsolatedRunner\n"
        "with IsolatedRunner('faults', {}, timeout_s=2.0) as runner:\n"
        "    print(runner.evaluate({'fault': 'hang', 'progress_bar': True}).status.value)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "timeout", done.stderr
    assert "leaked semaphore" not in done.stderr, done.stderr


def test_wrong_result(runner):
    result = runner.evaluate({"fault": "wrong_result"})
    assert result.status is TrialStatus.WRONG_RESULT
    assert "relative error" in result.reason


def test_divergence_is_pruned_through_the_check(runner):
    steps = []

    def should_prune(step, value):
        steps.append(step)
        return value > 100.0

    result = runner.evaluate({"fault": "diverge"}, should_prune)
    assert result.status is TrialStatus.DIVERGED
    # x doubles each step, loss = x^2 quadruples: 4, 16, 64, 256 -> pruned at step 3
    assert steps == [0, 1, 2, 3]
    # the reason gives the first value beside the last, which the blow-up rule compares
    assert result.reason == "pruned at step 3: value 256, up from 4 at the first report"


def test_a_pruned_trial_in_process_says_where_its_value_started():
    runner = InProcessRunner("faults", {})
    result = runner.evaluate({"fault": "diverge"}, lambda step, value: value > 100.0)
    assert result.status is TrialStatus.DIVERGED
    assert result.reason == "pruned at step 3: value 256, up from 4 at the first report"


def test_divergence_without_pruning_is_still_caught(runner):
    result = runner.evaluate({"fault": "diverge", "steps": 600})
    assert result.status is TrialStatus.DIVERGED
    assert "not finite" in result.reason


def test_workload_that_cannot_be_built_is_reported():
    with IsolatedRunner("nonexistent", {}, timeout_s=5.0) as runner:
        result = runner.evaluate({})
    assert result.status is TrialStatus.CRASHED
    assert "could not be set up" in result.reason and "nonexistent" in result.reason


def test_in_process_runner_maps_exceptions():
    runner = InProcessRunner("faults", {})
    assert runner.evaluate({"fault": "exception"}).status is TrialStatus.CRASHED
    assert runner.evaluate({"fault": "wrong_result"}).status is TrialStatus.WRONG_RESULT
    assert runner.evaluate({"fault": "diverge"}, lambda s, v: v > 10).status is (
        TrialStatus.DIVERGED
    )


DRIVER = """
import sys, threading
from autotune.runners.worker import IsolatedRunner
runner = IsolatedRunner("faults", {}, timeout_s=600)
runner.evaluate({"fault": "none", "score": 1.0})  # the worker is up
print(runner._process.pid, flush=True)
runner.evaluate({"fault": "hang"})  # the driver is killed during this
"""


def test_a_worker_ends_when_its_driver_is_killed_mid_trial():
    import os
    import signal
    import time

    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, text=True)
    worker = int(driver.stdout.readline())
    time.sleep(1.0)  # the hang has begun
    driver.send_signal(signal.SIGKILL)  # nothing tells the worker
    driver.wait(timeout=30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            return  # it ended (and init reaped it)
        time.sleep(0.2)
    os.kill(worker, signal.SIGKILL)
    pytest.fail("the worker outlived its driver by 30 s")


REPORTING_DRIVER = """
import sys, time
from autotune.runners.worker import IsolatedRunner
runner = IsolatedRunner("faults", {}, timeout_s=600)
runner.evaluate({"fault": "none", "score": 1.0})  # the worker is up
print(runner._process.pid, flush=True)
# the driver is killed while the trial reports its steps (one every 50 ms)
runner.evaluate({"fault": "diverge", "steps": 2000}, lambda s, v: time.sleep(0.05) or False)
"""


def test_a_worker_whose_driver_is_killed_while_it_reports_ends_without_a_traceback():
    # the report's send failed (BrokenPipeError), and so did the failure's: two tracebacks on
    # the user's terminal after a kill -9 of `autotune tune`
    import time

    driver = subprocess.Popen([sys.executable, "-c", REPORTING_DRIVER], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    int(driver.stdout.readline())
    time.sleep(1.0)  # steps are being reported
    driver.kill()
    driver.wait(timeout=30)
    said = driver.stderr.read()  # to its end: the worker, which shares it, is gone too
    assert "Traceback" not in said, said


# An objective written outside autotune (``autotune tune ./modes.py``) that prints, writes to
# fd 1, starts a child process that prints, exits, or outlasts its time, as its config says.
MODES = """import os
import subprocess
import sys
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Modes(Objective):
    name, space, directions = "modes", "modes.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        mode = config["mode"]
        if mode == "noise":
            print("NOISE from print")
            os.write(1, b"NOISE from fd 1\\n")
            subprocess.run([sys.executable, "-c", "print('NOISE from a child')"], check=True)
        elif mode == "exit":
            sys.exit(3)
        elif mode == "base_exception":
            raise GeneratorExit("closed")
        elif mode == "interrupt":
            raise KeyboardInterrupt
        elif mode == "swallow":  # catches whatever stops it, and answers late
            try:
                time.sleep(60)
            except BaseException:
                pass
        return Measurement(values={"v": 1.0})


OBJECTIVE = Modes
"""


@pytest.fixture
def modes(tmp_path):
    (tmp_path / "runner_modes.py").write_text(MODES)
    (tmp_path / "modes.yaml").write_text("parameters:\n  mode: {type: categorical, "
                                         "choices: [noise, exit]}\n")  # fmt: skip
    return str(tmp_path / "runner_modes.py")


def test_what_a_worker_prints_goes_to_stderr_not_to_the_drivers_stdout(modes, capfd):
    with IsolatedRunner(modes, {}, timeout_s=60) as runner:
        assert runner.evaluate({"mode": "noise"}).ok
    out, err = capfd.readouterr()
    assert "NOISE" not in out
    for where in ("print", "fd 1", "a child"):
        assert f"NOISE from {where}" in err


def test_what_an_in_process_trial_prints_goes_to_stderr_and_stdout_comes_back(modes, capfd):
    import os

    runner = InProcessRunner(modes, {})
    assert runner.evaluate({"mode": "noise"}).ok
    print("RESULT")  # the driver's own stdout is its own again
    os.write(1, b"RESULT fd\n")
    out, err = capfd.readouterr()
    assert "NOISE" not in out and "RESULT\n" in out and "RESULT fd\n" in out
    for where in ("print", "fd 1", "a child"):
        assert f"NOISE from {where}" in err
    assert "RESULT" not in err


def test_in_process_runner_records_system_exit_and_base_exceptions_as_crashed(modes):
    runner = InProcessRunner(modes, {})
    exited = runner.evaluate({"mode": "exit"})
    assert exited.status is TrialStatus.CRASHED and exited.reason == "SystemExit: 3"
    other = runner.evaluate({"mode": "base_exception"})
    assert other.status is TrialStatus.CRASHED and other.reason == "GeneratorExit: closed"
    assert runner.evaluate({"mode": "noise"}).ok  # the runner goes on
    with pytest.raises(KeyboardInterrupt):  # the sweep being stopped is not a trial's failure
        runner.evaluate({"mode": "interrupt"})


def test_a_time_limit_past_the_platform_s_timer_is_no_limit_not_a_crash():
    # 1e10 s overflowed setitimer's time_t: every trial of the sweep came back crashed
    runner = InProcessRunner("faults", {}, timeout_s=1e10)
    assert runner.evaluate({"fault": "none", "score": 2.0}).ok


def test_in_process_runner_stops_a_trial_at_its_timeout(modes):
    import signal
    import time

    runner = InProcessRunner(modes, {}, timeout_s=0.5)
    started = time.monotonic()
    hung = InProcessRunner("faults", {}, timeout_s=0.5).evaluate({"fault": "hang"})  # 3600 s
    assert hung.status is TrialStatus.TIMEOUT
    assert hung.reason == "no result after 0.5 s; evaluate stopped"
    # an objective that catches the stop and answers anyway is still out of time
    swallowed = runner.evaluate({"mode": "swallow"})
    assert swallowed.status is TrialStatus.TIMEOUT and swallowed.measurement is None
    assert time.monotonic() - started < 20
    before = signal.getsignal(signal.SIGALRM)
    assert runner.evaluate({"mode": "noise"}).ok  # the next trial runs
    # no timer left armed, and SIGALRM's handler is what it was
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


SLOW_TO_BUILD = """
import multiprocessing
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class SlowToBuild(Objective):
    name = "slow-to-build"
    space = "s.yaml"
    directions = {"v": "maximize"}

    def __init__(self, problem):
        super().__init__(problem)
        if multiprocessing.current_process().name != "MainProcess":  # only in the worker
            time.sleep(1000)

    def evaluate(self, config, report=None):
        return Measurement(values={"v": 1.0})


OBJECTIVE = SlowToBuild
"""


def test_a_worker_still_starting_when_the_time_budget_ends_is_stopped_then(tmp_path):
    # a 20-s budget ran 183 s: a worker's start waited out its own 180-s limit
    import time

    (tmp_path / "slow.py").write_text(SLOW_TO_BUILD)
    (tmp_path / "s.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 2}\n")
    with IsolatedRunner(str(tmp_path / "slow.py"), {}, timeout_s=60) as runner:
        # any budget that ends before the worker's start does (never: it sleeps in it)
        runner.budget_ends = time.monotonic() + 1.5
        started = time.monotonic()
        result = runner.evaluate({"x": 1})
    assert time.monotonic() - started < 1.5 + 2.0
    assert result.status is TrialStatus.INTERRUPTED
    assert "time budget ended while its worker started" in result.reason


STARTS_A_CHILD = """
import os
import subprocess
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class StartsAChild(Objective):
    name = "starts-a-child"
    space = "s.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        child = subprocess.Popen(["sleep", "300"])  # a server, a helper: the trial's own
        with open(os.environ["CHILD_PID_FILE"], "w") as f:
            f.write(str(child.pid))
        time.sleep(100)  # hangs: the trial timeout kills the worker
        return Measurement(values={"v": 1.0})


OBJECTIVE = StartsAChild
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie nobody reaped yet is not)."""
    from pathlib import Path

    status = Path(f"/proc/{pid}/status")
    try:
        state = next(line for line in status.read_text().splitlines() if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return False
    return "zombie" not in state and "(Z)" not in state


def test_what_a_killed_trial_started_ends_with_its_worker(tmp_path, monkeypatch):
    # a trial's `sleep 300` outlived the worker the timeout killed (on a GPU, a server holding
    # the device and its memory)
    import time

    (tmp_path / "child.py").write_text(STARTS_A_CHILD)
    (tmp_path / "s.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 2}\n")
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("CHILD_PID_FILE", str(pid_file))
    # the child starts and its pid is written in the trial's first milliseconds
    with IsolatedRunner(str(tmp_path / "child.py"), {}, timeout_s=2.0) as runner:
        result = runner.evaluate({"x": 1})
        assert result.status is TrialStatus.TIMEOUT
        child = int(pid_file.read_text())
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)


def test_what_a_trial_started_ends_when_its_driver_is_killed(tmp_path, monkeypatch):
    import os
    import signal
    import time

    (tmp_path / "child.py").write_text(STARTS_A_CHILD)
    (tmp_path / "s.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 2}\n")
    pid_file = tmp_path / "child.pid"
    monkeypatch.setenv("CHILD_PID_FILE", str(pid_file))
    driver = subprocess.Popen([sys.executable, "-c", (
        "from autotune.runners.worker import IsolatedRunner\n"
        f"IsolatedRunner({str(tmp_path / 'child.py')!r}, {{}}, timeout_s=600).evaluate({{'x': 1}})"
    )])  # fmt: skip
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and driver.poll() is None
        time.sleep(0.05)
    child = int(pid_file.read_text())
    driver.send_signal(signal.SIGKILL)  # nothing tells the worker, nor its child
    driver.wait(timeout=30)
    deadline = time.monotonic() + 15
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _running(child):
        os.kill(child, signal.SIGKILL)
        pytest.fail("the trial's child outlived its driver")


def test_a_close_that_takes_long_is_cut_at_the_time_budget(tmp_path):
    # close() that sleeps kept the sweep 10 s past its budget's end
    import time

    source = SLOW_TO_BUILD.replace("if multiprocessing", "if False and multiprocessing")
    (tmp_path / "lingers.py").write_text(
        source + "\nSlowToBuild.close = lambda self: time.sleep(1000)\n"
    )
    (tmp_path / "s.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 2}\n")
    runner = IsolatedRunner(str(tmp_path / "lingers.py"), {}, timeout_s=60)
    assert runner.evaluate({"x": 1}).ok
    runner.budget_ends = time.monotonic() + 0.5
    started = time.monotonic()
    runner.close()
    assert time.monotonic() - started < 1.0 + 3.0


def test_a_ctrl_c_while_a_worker_starts_is_the_driver_s_alone(capfd):
    # a Ctrl-C in a sweep's first seconds reached the worker while Python's spawn imported,
    # before it could ignore it: a KeyboardInterrupt traceback and a dead worker
    import multiprocessing.context

    process_class = multiprocessing.context.SpawnProcess
    start = process_class.start

    def start_then_ctrl_c(self):
        start(self)
        os.kill(self.pid, signal.SIGINT)  # as a terminal's Ctrl-C reaches the whole group

    process_class.start = start_then_ctrl_c
    try:
        with IsolatedRunner("faults", {}, timeout_s=60) as runner:
            result = runner.evaluate({"fault": "none", "score": 0.5})
    finally:
        process_class.start = start
    assert result.ok, result.reason
    assert "KeyboardInterrupt" not in capfd.readouterr().err
