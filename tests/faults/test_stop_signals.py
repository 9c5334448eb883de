"""A sweep stopped by SIGTERM or SIGINT at any moment: every measured trial is kept, the trial in
flight is marked interrupted, no trial is left RUNNING, and the sweep resumes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from autotune.driver.trial_attrs import trial_status

SPACE = """name: slow
workload: faults
parameters:
  fault: {type: categorical, choices: [none]}
  score: {type: float, low: 0.0, high: 1.0}
  delay: {type: categorical, choices: [0.4]}
"""


def _sweep(tmp_path: Path, url: str) -> subprocess.Popen:
    space = tmp_path / "slow.yaml"
    space.write_text(SPACE)
    return subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", str(space),
         "--trials", "10", "--finish-top", "0",  # the finish is not what is tested
         "--storage", url, "--study", "s", "--sampler", "random", "--seed", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_for_trials(url: str, n: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            study = optuna.load_study(study_name="s", storage=url)
            if sum(trial_status(t) == "ok" for t in study.trials) >= n:
                return
        except KeyError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"fewer than {n} trials finished in {timeout_s} s")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_sweep_keeps_every_measured_trial_and_leaves_none_running(tmp_path, sig):
    """SIGTERM / SIGINT to a sweep mid-run: every measured trial kept, none left RUNNING, exit
    130, and the same command resumes it to its budget."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    proc = _sweep(tmp_path, url)
    _wait_for_trials(url, 3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    study = optuna.load_study(study_name="s", storage=url)
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.RUNNING not in states
    statuses = [trial_status(t) for t in study.trials]
    assert statuses.count("ok") >= 3 and set(statuses) <= {"ok", "interrupted"}
    for t in study.trials:  # every trial ends with a reason or a value
        assert t.value is not None or t.user_attrs.get("reason")
    # resumed: the same study goes on from where it stopped
    again = _sweep(tmp_path, url)
    again.wait(timeout=240)
    assert again.returncode == 0
    resumed = optuna.load_study(study_name="s", storage=url)
    assert sum(trial_status(t) == "ok" for t in resumed.trials) >= 10


def test_a_signal_while_the_storage_creates_a_trial_leaves_none_running(tmp_path, monkeypatch):
    """The window CI hit: SIGINT after the storage created a trial and before the driver knew
    it (Optuna's ``before_trial`` hook runs there, inside ``study.ask``). The trial must end
    interrupted, not RUNNING for good."""
    import os

    from autotune.driver import Sweep, SweepSettings
    from autotune.space import Param, Space

    original = optuna.samplers.RandomSampler.before_trial

    def before_trial(self, study, trial):  # noqa: ANN001, ANN202
        original(self, study, trial)
        if trial.number == 3:
            os.kill(os.getpid(), signal.SIGINT)  # a real signal, at that moment

    monkeypatch.setattr(optuna.samplers.RandomSampler, "before_trial", before_trial)
    url = f"sqlite:///{tmp_path / 'ask.db'}"
    space = Space("d", [Param("score", "float", low=0.0, high=1.0)])
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="random", n_trials=10, seed=0, storage=url, study_name="s", executor="inline",
        warm_start="off",
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.stopped_by == "interrupted"
    trials = optuna.load_study(study_name="s", storage=url).trials
    assert [t.state.name for t in trials][:2] == ["COMPLETE"] * 2
    assert optuna.trial.TrialState.RUNNING not in [t.state for t in trials], [
        (t.number, t.state.name, trial_status(t)) for t in trials
    ]
    assert trial_status(trials[3]) == "interrupted"


MIXED = """name: mixed
workload: faults
parameters:
  fault: {type: categorical, choices: [none]}
  delay: {type: categorical, choices: [0.0, 60.0]}
"""


def test_a_trial_interrupted_as_it_ran_keeps_where_it_ran(tmp_path):
    """SIGINT while a worker runs a trial (a 60-s delay, after a quick one finished): the
    interrupted trial keeps its worker, as the finished one does, and how long it ran."""
    space, url = tmp_path / "mixed.yaml", f"sqlite:///{tmp_path / 'm.db'}"
    space.write_text(MIXED)
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", str(space),
         "--trials", "2", "--finish-top", "0", "--storage", url, "--study", "s",
         "--sampler", "grid", "--seed", "1"],  # (seed 1: the quick config first)
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # a quick trial measured, the slow one running
        try:
            trials = optuna.load_study(study_name="s", storage=url).trials
        except KeyError:
            trials = []
        ok = any(trial_status(t) == "ok" for t in trials)
        slow = [t for t in trials if t.state.name == "RUNNING" and t.params.get("delay") == 60.0]
        if ok and slow:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        raise AssertionError("no quick trial measured and slow one running in 120 s")
    time.sleep(1.0)  # asked for (stored RUNNING, maybe ahead of its launch), then launched
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    trials = optuna.load_study(study_name="s", storage=url).trials
    done = next(t for t in trials if trial_status(t) == "ok")
    stopped = next(t for t in trials if t.number == slow[0].number)
    assert stopped.user_attrs["reason"] == "the sweep stopped (interrupted) while it ran"
    assert stopped.user_attrs.get("worker") == done.user_attrs["worker"] == "local worker 0"
    # from its launch to the stop: under the second slept here where it was stored before it
    # launched (asked ahead, as the quick trial ran), never the 60-s delay
    assert 0 < stopped.user_attrs.get("duration_s", 0) < 60


def test_a_trial_interrupted_as_it_ran_in_the_driver_keeps_where_it_ran(tmp_path):
    """The same with ``--executor inline``: SIGINT while the driver's own process runs the slow
    trial (a second after the quick one is told); it keeps ``inline``, as the finished trial
    does."""
    import os
    import threading

    from autotune.driver import Sweep, SweepSettings
    from autotune.driver.settings import SweepObserver
    from autotune.space import load_space

    class InterruptAfterTheFirst(SweepObserver):
        def on_trial(self, record, study, counts) -> None:  # noqa: ANN001
            if record.number == 0:
                threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()

    space_file, url = tmp_path / "mixed.yaml", f"sqlite:///{tmp_path / 'i.db'}"
    space_file.write_text(MIXED)
    settings = SweepSettings(
        workload="faults", problem={}, space=load_space(str(space_file)),
        objectives={"score": "maximize"}, sampler="grid", n_trials=2, seed=1, storage=url,
        study_name="s", executor="inline", warm_start="off",
    )  # fmt: skip
    summary = Sweep(settings, InterruptAfterTheFirst()).run()
    assert summary.stopped_by == "interrupted"
    done, stopped = optuna.load_study(study_name="s", storage=url).trials
    assert trial_status(done) == "ok" and trial_status(stopped) == "interrupted"
    assert stopped.params["delay"] == 60.0
    assert stopped.user_attrs.get("worker") == done.user_attrs["worker"] == "inline"
    assert 0.5 <= stopped.user_attrs.get("duration_s", 0) < 60


SLOW = """name: slow
workload: faults
parameters:
  fault: {type: categorical, choices: [none]}
  delay: {type: categorical, choices: [60.0]}
"""


@pytest.mark.parametrize("stop", ["SIGINT", "time"])
def test_the_closing_line_counts_a_trial_stopped_as_it_ran_as_launched(tmp_path, stop):
    """Ctrl-C while the one trial ran (a 60-s delay) closed 'done: 0 trials in 5.1 s
    (interrupted by a signal); 0 launched in study s; no failures', and the time budget's end
    'done: 1 trial in 4.0 s (stopped by time); 0 launched in study s; failed: interrupted 1':
    the trial ran, and is stored interrupted."""
    space, url = tmp_path / "slow.yaml", f"sqlite:///{tmp_path / 's.db'}"
    space.write_text(SLOW)
    budget = ["--time-budget", "6"] if stop == "time" else ["--trials", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", str(space), *budget,
         "--finish-top", "0", "--storage", url, "--study", "s", "--seed", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    if stop == "SIGINT":
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                trials = optuna.load_study(study_name="s", storage=url).trials
            except KeyError:
                trials = []
            if any(t.state.name == "RUNNING" and "driver" in t.user_attrs for t in trials):
                break
            time.sleep(0.2)
        time.sleep(1.5)  # launched on the worker, and running
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == (130 if stop == "SIGINT" else 1), err
    closing = next(line for line in err.splitlines() if line.startswith("done: "))
    why = "interrupted by a signal" if stop == "SIGINT" else "stopped by time"
    assert closing.startswith("done: 1 trial in ") and f"s ({why}); " in closing, closing
    assert "; 1 launched in study s; failed: interrupted 1; " in closing, closing
    stored = [t for t in optuna.load_study(study_name="s", storage=url).trials
              if t.user_attrs.get("duration_s") is not None]  # fmt: skip
    assert [trial_status(t) for t in stored] == ["interrupted"]
