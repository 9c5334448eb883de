from autotune.executors.inline import InlineExecutor
from autotune.failures import TrialStatus


def test_trials_come_back_in_the_order_their_durations_say(tmp_path):
    import pandas as pd

    table = tmp_path / "t.csv"
    pd.DataFrame(
        {"x": [1, 2, 3, 4], "v": [1.0, 2.0, 3.0, 4.0], "duration_s": [5.0, 1.0, 1.0, 0.5],
         "status": ["ok"] * 4}
    ).to_csv(table, index=False)  # fmt: skip
    problem = {"table": str(table), "params": ["x"], "metric": "v"}
    with InlineExecutor("replay", problem, capacity=2) as executor:
        executor.submit(1, {"x": 1})  # 0 -> 5 s
        executor.submit(2, {"x": 2})  # 0 -> 1 s
        assert executor.free == 0
        assert [f.ticket for f in executor.wait_any()] == [2]
        executor.submit(3, {"x": 3})  # 1 -> 2 s
        assert [f.ticket for f in executor.wait_any()] == [3]
        executor.submit(4, {"x": 4})  # 2 -> 2.5 s
        assert [f.ticket for f in executor.wait_any()] == [4]
        assert [f.ticket for f in executor.wait_any()] == [1]
        assert executor.clock_s == 5.0 and executor.in_flight == 0


def test_one_slot_returns_trials_in_submission_order_and_failures_as_results():
    with InlineExecutor("faults", {}) as executor:
        executor.submit(7, {"fault": "wrong_result"})
        (finished,) = executor.wait_any()
        assert finished.ticket == 7 and finished.result.status is TrialStatus.WRONG_RESULT
        assert "relative error" in finished.result.reason


EXITS = """import sys

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Exits(Objective):
    name, space, directions = "exits", "exits.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        if config["x"] == 2:
            sys.exit(3)
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Exits
"""


def test_a_system_exit_in_evaluate_is_a_crashed_trial_and_the_next_runs(tmp_path):
    (tmp_path / "inline_exits.py").write_text(EXITS)
    (tmp_path / "exits.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 3}\n")
    with InlineExecutor(str(tmp_path / "inline_exits.py"), {}) as executor:
        executor.submit(0, {"x": 2})
        (exited,) = executor.wait_any()
        executor.submit(1, {"x": 3})
        (after,) = executor.wait_any()
    assert exited.result.status is TrialStatus.CRASHED
    assert exited.result.reason == "SystemExit: 3"
    assert after.result.ok and after.result.measurement.values == {"v": 3.0}


def test_a_trial_past_its_timeout_comes_back_timeout_and_the_next_runs():
    import time

    started = time.monotonic()
    with InlineExecutor("faults", {}, timeout_s=0.5) as executor:
        executor.submit(0, {"fault": "hang", "seconds": 600})
        (hung,) = executor.wait_any()
        executor.submit(1, {"fault": "none", "score": 2.0})
        (after,) = executor.wait_any()
    assert time.monotonic() - started < 20  # not the 600 s the trial asked for
    assert hung.result.status is TrialStatus.TIMEOUT
    assert hung.result.reason == "no result after 0.5 s; evaluate stopped"
    assert after.result.ok and after.result.measurement.values["score"] == 2.0


def test_a_config_that_kills_the_inline_driver_is_crashed_at_the_resume_not_tried_again(
    tmp_path,
):
    # its trial was found stale and recorded interrupted, so its config stayed unvisited: every
    # resume proposed it again, and died of it again
    import subprocess
    import sys

    import optuna

    from autotune.driver.trial_attrs import trial_status

    space = tmp_path / "f.yaml"
    space.write_text("name: f\nworkload: faults\nparameters:\n"
                     "  fault: {type: categorical, choices: [segfault, none]}\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 'f.db'}"
    sweep = [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", str(space),
             "--sampler", "grid", "--trials", "2", "--executor", "inline", "--storage", url,
             "--study", "f", "--finish-top", "0"]  # fmt: skip
    first = subprocess.run(sweep, capture_output=True, text=True, timeout=120)
    assert first.returncode in (-11, 139), first.stderr[-2000:]  # the segfault took the driver
    again = subprocess.run(sweep[:-4] + ["--study", "f"], capture_output=True, text=True,
                           timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    study = optuna.load_study(study_name="f", storage=url)
    outcome = {t.params["fault"]: trial_status(t) for t in study.trials}
    assert outcome == {"segfault": "crashed", "none": "ok"}
    crashed = next(t for t in study.trials if t.params["fault"] == "segfault")
    assert "ran in it (--executor inline)" in crashed.user_attrs["reason"]


def test_ctrl_c_keeps_every_trial_evaluated_while_others_wait_on_the_simulated_clock(
    tmp_path, logged_workload
):
    """Two in flight inline: each trial measured waits on the simulated clock while the next
    one is evaluated, so a Ctrl-C then found a measured trial not yet told. It was marked
    interrupted, its figure lost; every evaluated trial must be stored ok, the one cut
    mid-evaluation interrupted, none RUNNING."""
    import signal
    import subprocess
    import sys
    import time

    import optuna

    from autotune.driver.trial_attrs import trial_status

    workload, log = logged_workload
    url = f"sqlite:///{tmp_path / 's.db'}"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", str(workload),
         "--problem", f"log={log}", "--executor", "inline", "--workers", "2",
         "--trials", "40", "--finish-top", "0", "--storage", url, "--study", "s",
         "--sampler", "random", "--seed", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not (log.exists() and len(log.read_text().split()) >= 4):
        assert time.monotonic() < deadline and sweep.poll() is None, sweep.communicate()
        time.sleep(0.05)
    time.sleep(0.1)  # into the next evaluate: the trial before it waits on the clock
    sweep.send_signal(signal.SIGINT)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, err
    assert "Traceback" not in err
    trials = optuna.load_study(study_name="s", storage=url).trials
    statuses = {t.number: (t.state.name, trial_status(t)) for t in trials}
    measured = {int(x) for x in log.read_text().split()}
    stored_ok = {t.params["x"] for t in trials if trial_status(t) == "ok"}
    assert measured == stored_ok, statuses
    # the one cut mid-evaluation (the signal came during one, most likely) is interrupted
    assert set(statuses.values()) <= {("COMPLETE", "ok"), ("FAIL", "interrupted")}, statuses


def test_finished_at_stop_hands_back_every_evaluated_trial_in_finishing_order():
    with InlineExecutor("faults", {}, capacity=3) as executor:
        executor.submit(0, {"fault": "none", "delay": 0.05})
        executor.submit(1, {"fault": "none", "delay": 0.0})
        executor.submit(2, {"fault": "none", "delay": 0.02})
        (first,) = executor.wait_any()  # handed back, perhaps not told: handed again
        assert first.ticket == 1
        assert [f.ticket for f in executor.finished_at_stop()] == [1, 2, 0]
        assert executor.in_flight == 0 and executor.finished_at_stop() == []


WRAPS_CTRL_C = """import os
import signal
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Wraps(Objective):
    name, space, directions = "wraps", "wraps.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        try:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, while it runs
            time.sleep(config["x"])
        except KeyboardInterrupt as exc:  # as a compile pool or a library may
            raise RuntimeError("the compile workers stopped") from exc
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Wraps
"""


def test_ctrl_c_that_the_objective_turns_into_its_own_error_is_interrupted_not_crashed(tmp_path):
    # an objective (a library under it) that caught the Ctrl-C and raised its own error had
    # its trial recorded 'crashed' and its config blamed, the sweep running on
    import optuna

    from autotune.driver import Sweep, SweepSettings
    from autotune.driver.trial_attrs import trial_status
    from autotune.space import load_space

    (tmp_path / "wraps.py").write_text(WRAPS_CTRL_C)
    (tmp_path / "wraps.yaml").write_text("parameters:\n  x: {type: categorical, choices: [30]}\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    settings = SweepSettings(
        workload=str(tmp_path / "wraps.py"), problem={}, space=load_space(tmp_path / "wraps.yaml"),
        objectives={"v": "maximize"}, n_trials=3, seed=0, storage=url, study_name="s",
        executor="inline", warm_start="off",
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.stopped_by == "interrupted"
    trials = optuna.load_study(study_name="s", storage=url).trials
    assert [trial_status(t) for t in trials] == ["interrupted"], [t.user_attrs for t in trials]
