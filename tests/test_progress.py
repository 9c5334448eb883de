"""The sweep's printed progress and its closing line."""

import io
from collections import Counter

import optuna
import pytest
from rich.console import Console

from autotune.driver.settings import SweepSummary
from autotune.progress import ProgressDisplay


@pytest.mark.parametrize(("slots", "ran", "says"), [(100, 2, "up to 2 at a time"),
                                                    (4, 30, "up to 4 at a time"),
                                                    (8, 1, None)])  # fmt: skip
def test_the_closing_line_counts_no_more_slots_than_trials_could_fill(slots, ran, says):
    out = io.StringIO()
    summary = SweepSummary(
        study=optuna.create_study(), study_name="s", trials_run=ran, trials_total=ran,
        failures=Counter(), best=[], stopped_by="trials", elapsed_s=1.0, in_flight=slots,
    )  # fmt: skip
    ProgressDisplay(Console(file=out, width=300)).on_end(summary)
    line = out.getvalue()
    assert line.startswith(f"done: {ran} trial{'' if ran == 1 else 's'} in ")  # ('1 trials')
    assert ("at a time" in line) == (says is not None)
    assert says is None or says in line


@pytest.mark.parametrize(
    ("workers", "capacity", "says"),
    [(8, 2, " x2 (8 asked; the cluster holds 2) |"), (2, 2, " x2 |"), (None, 1, " |")],
)
def test_the_header_shows_the_slots_the_executor_holds_not_only_those_asked(
    workers, capacity, says
):
    # --workers 8 on a Ray cluster of 2 CPUs ran 2 trials at a time under a header of 'x8'
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    settings = SweepSettings(
        workload="faults", problem={}, space=Space("s", [Param("x", "int", low=1, high=2)]),
        objectives={"score": "maximize"}, executor="ray", workers=workers,
    )  # fmt: skip
    out = io.StringIO()
    ProgressDisplay(Console(file=out, width=400)).on_start(
        settings, optuna.create_study(), 0, capacity
    )
    assert f"executor ray{says}" in out.getvalue()


def test_the_header_shows_no_missing_value_as_none():
    # a sweep without --seed said 'sampler auto, seed None', and a problem value left unset
    # (a workload file's default of None) 'N=None'
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    settings = SweepSettings(
        workload="w.py", problem={"M": 4, "N": None}, objectives={"score": "maximize"},
        space=Space("s", [Param("x", "int", low=1, high=2)]), executor="inline",
    )  # fmt: skip
    out = io.StringIO()
    ProgressDisplay(Console(file=out, width=400)).on_start(settings, optuna.create_study(), 0)
    header = out.getvalue()
    assert "None" not in header and "autotune w.py M=4 on " in header, header
    assert "| sampler auto, no seed |" in header, header


@pytest.mark.parametrize("problem", [{}, {"table": "t.csv", "N": None, "K": ""}])
def test_the_header_of_a_sweep_with_no_problem_to_show_has_one_space_before_on(problem):
    # the faults workload (no problem) read 'autotune faults  on AMD EPYC | ...'
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    settings = SweepSettings(
        workload="faults", problem=problem, objectives={"score": "maximize"},
        space=Space("s", [Param("x", "int", low=1, high=2)]), executor="inline",
        device={"name": "AMD EPYC"},
    )  # fmt: skip
    out = io.StringIO()
    ProgressDisplay(Console(file=out, width=400)).on_start(settings, optuna.create_study(), 0)
    assert out.getvalue().startswith("autotune faults on AMD EPYC | executor inline |"), out


def test_a_long_reason_is_cut_with_an_ellipsis_on_its_one_line():
    # a reason past 100 characters was cut mid-word with nothing to say more was left out
    from autotune.driver.settings import SweepSettings, TrialRecord
    from autotune.space import Param, Space

    settings = SweepSettings(
        workload="faults", problem={}, space=Space("s", [Param("x", "int", low=1, high=2)]),
        objectives={"score": "maximize"}, n_trials=3,
    )  # fmt: skip
    out = io.StringIO()
    display = ProgressDisplay(Console(file=out, width=400))
    study = optuna.create_study()
    display.on_start(settings, study, 0, 1)
    reason = "CUDA error: an illegal memory access was encountered " * 4
    record = TrialRecord(number=0, status="crashed", reason=reason, config={"x": 1},
                         values=None, duration_s=0.1)  # fmt: skip
    display.on_trial(record, study, Counter(crashed=1))
    line = out.getvalue().splitlines()[-1]
    outcome = line.split(" #0 ", 1)[1].split(" | ", 1)[0]
    assert outcome.startswith("crashed: CUDA error") and outcome.endswith("…")
    assert 90 < len(outcome) <= 100


@pytest.mark.parametrize("ran", [0, 3])
def test_the_closing_line_of_a_run_of_no_trial_gives_no_share_of_the_slots_time(ran):
    # a resume with nothing left to run read 'search overhead 100.0% of the slots' wall time'
    out = io.StringIO()
    summary = SweepSummary(
        study=optuna.create_study(), study_name="s", trials_run=ran, trials_total=3,
        failures=Counter(), best=[], stopped_by="trials", elapsed_s=0.01, in_flight=1,
    )  # fmt: skip
    ProgressDisplay(Console(file=out, width=400)).on_end(summary)
    line = out.getvalue()
    assert line.startswith(f"done: {ran} trials") and "3 launched in study s" in line
    assert ("search overhead" in line) == bool(ran)
    assert ("compiling held slots" in line) == bool(ran)


@pytest.mark.parametrize("ran", [0, 3])
def test_the_closing_line_of_a_replay_of_no_trial_gives_no_milliseconds_a_trial(ran):
    # a replay's resume with none to run read 'a replay measures nothing: the sweep took
    # 0.0 ms a trial (the sampler 0.0 ms of it)', a figure of no trial
    out = io.StringIO()
    summary = SweepSummary(
        study=optuna.create_study(), study_name="s", trials_run=ran, trials_total=3,
        failures=Counter(), best=[], stopped_by="trials", elapsed_s=0.03, in_flight=1,
        measured=False,
    )  # fmt: skip
    ProgressDisplay(Console(file=out, width=400)).on_end(summary)
    line = out.getvalue()
    assert line.startswith(f"done: {ran} trials") and "3 launched in study s" in line
    assert ("ms a trial" in line) == bool(ran), line
    assert "search overhead" not in line


def test_the_header_shows_a_replays_parameters_as_a_list_not_python_repr():
    # the header read "autotune replay params=['BLOCK_M', 'BLOCK_N'],metric=tflops", then
    # "params=(BLOCK_M, BLOCK_N),metric=tflops": its items and the list's told apart by
    # nothing but a blank; they are joined as a report's heading and a group's line join them
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    settings = SweepSettings(
        workload="replay", space=Space("s", [Param("BLOCK_M", "int", low=1, high=2)]),
        problem={"table": "/t.csv", "params": ["BLOCK_M", "BLOCK_N"], "metric": "tflops"},
        objectives={"tflops": "maximize"},
    )  # fmt: skip
    out = io.StringIO()
    ProgressDisplay(Console(file=out, width=400)).on_start(settings, optuna.create_study(), 0)
    header = out.getvalue().splitlines()[0]
    assert header.startswith("autotune replay params=(BLOCK_M, BLOCK_N), metric=tflops on ")
    assert "[" not in header.split(" on ")[0] and "'" not in header


@pytest.mark.parametrize("stopped_by", ["every config tried", "no unvisited config left"])
def test_a_resume_of_an_exhausted_grid_says_nothing_ran_and_whose_counts_it_gives(stopped_by):
    # it read 'done: 0 trials in 0.0 s (stopped by every config tried); 4 launched in study
    # g2; failed: oom 1', the oom an earlier run's
    out = io.StringIO()
    summary = SweepSummary(
        study=optuna.create_study(), study_name="g2", trials_run=0, trials_total=4,
        failures=Counter(), best=[], stopped_by=stopped_by, elapsed_s=0.01, in_flight=1,
        study_failures=Counter(oom=1), trials_stored=4,
    )  # fmt: skip
    ProgressDisplay(Console(file=out, width=400)).on_end(summary)
    assert out.getvalue().strip() == (
        "done: nothing ran: every config of the space was tried before this run (the grid is "
        "exhausted); study g2 holds 4 launched trials from earlier runs (failed: oom 1)"
    )


def test_a_first_run_that_launched_nothing_keeps_its_closing_line():
    out = io.StringIO()
    summary = SweepSummary(
        study=optuna.create_study(), study_name="s", trials_run=0, trials_total=0,
        failures=Counter(), best=[], stopped_by="every config tried", elapsed_s=0.01,
    )  # fmt: skip
    ProgressDisplay(Console(file=out, width=400)).on_end(summary)
    assert out.getvalue().startswith("done: 0 trials in 0.0 s (stopped by every config tried)")


def test_a_resumes_closing_line_gives_this_runs_failures_then_the_studys(tmp_path):
    # a resume that ran 1 trial closed with 'done: 1 trials ...; 3 launched in study w;
    # failed: wrong_result 3', the earlier runs' 2 failures read as this run's (and '1 trials')
    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    space = Space("w", [Param("fault", "categorical", choices=["wrong_result"]),
                        Param("score", "float", low=0.0, high=1.0)])  # fmt: skip

    def run(trials: int) -> tuple[SweepSummary, str]:
        out = io.StringIO()
        settings = SweepSettings(
            workload="faults", problem={}, space=space, objectives={"score": "maximize"},
            n_trials=trials, seed=0, storage=f"sqlite:///{tmp_path / 'w.db'}", study_name="w",
            executor="inline", device={"type": "cpu"},
        )  # fmt: skip
        summary = Sweep(settings, ProgressDisplay(Console(file=out, width=1000))).run()
        return summary, out.getvalue().splitlines()[-1]

    first, line = run(2)
    assert (
        line.startswith("done: 2 trials")
        and "; 2 launched in study w; failed: wrong_result 2;" in line
    )
    resumed, line = run(3)
    assert resumed.failures == {"wrong_result": 1}
    assert resumed.study_failures == {"wrong_result": 3}
    assert line.startswith("done: 1 trial in ") and "; this run: failed: wrong_result 1; " in line
    assert line.endswith(
        "; study w in all (earlier runs included): 3 launched; failed: wrong_result 3"
    )


@pytest.mark.parametrize("sampler", ["bo", "grid"])
def test_a_resumes_header_says_when_every_config_was_tried_before_it(tmp_path, sampler):
    # a resume of a study whose 3 configs were all tried said 'budget 10 trials (7 to run)'
    # and then ran none
    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    space = Space("c", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "categorical", choices=[0.5, 1.0, 2.0])])  # fmt: skip

    def header(trials: int) -> str:
        out = io.StringIO()
        settings = SweepSettings(
            workload="faults", problem={}, space=space, objectives={"score": "maximize"},
            n_trials=trials, seed=0, storage=f"sqlite:///{tmp_path / 'c.db'}", study_name="c",
            executor="inline", device={"type": "cpu"}, sampler=sampler,
        )  # fmt: skip
        Sweep(settings, ProgressDisplay(Console(file=out, width=1000))).run()
        return out.getvalue().splitlines()[0]

    assert header(2).endswith("| study c (0 trials stored) | budget 2 trials")
    assert header(10).endswith(
        "| study c (2 trials stored) | budget 10 trials (8 to run; only 1 config of the space "
        "left untried)"
    )
    assert header(10).endswith(
        "| study c (3 trials stored) | budget 10 trials (none to run: every config of the space "
        "was tried)"
    )


def test_a_resumes_header_leaves_the_count_to_run_where_the_sampler_cannot_tell(tmp_path):
    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    space = Space("c", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "categorical", choices=[0.5, 1.0])])  # fmt: skip
    lines = []
    for trials in (2, 5):
        out = io.StringIO()
        settings = SweepSettings(
            workload="faults", problem={}, space=space, objectives={"score": "maximize"},
            n_trials=trials, seed=0, storage=f"sqlite:///{tmp_path / 't.db'}", study_name="t",
            executor="inline", device={"type": "cpu"}, sampler="tpe",
        )  # fmt: skip
        Sweep(settings, ProgressDisplay(Console(file=out, width=1000))).run()
        lines.append(out.getvalue().splitlines()[0])
    assert lines[1].endswith("| study t (2 trials stored) | budget 5 trials (3 to run)")


STOPPED_ONCE = """import os
import signal
import time
from pathlib import Path

from autotune.measurement import Measurement
from autotune.objectives.base import Objective

MARK = Path(__file__).with_name("stop-once")


class StoppedOnce(Objective):
    name, space, directions = "stopped", "stopped.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        if MARK.exists():  # Ctrl-C while the first trial runs, then never again
            MARK.unlink()
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = StoppedOnce
"""


def test_a_resumes_header_counts_the_trial_stopped_as_it_ran_as_the_closing_line_did(tmp_path):
    # Ctrl-C during a sweep's one trial closed '1 launched in study s; failed: interrupted 1',
    # and the same command's resume then said 'study s (0 trials stored)'
    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import load_space

    (tmp_path / "stopped.py").write_text(STOPPED_ONCE)
    (tmp_path / "stopped.yaml").write_text("parameters:\n  x: {type: int, low: 0, high: 9}\n")
    (tmp_path / "stop-once").touch()

    def run() -> list[str]:
        out = io.StringIO()
        settings = SweepSettings(
            workload=str(tmp_path / "stopped.py"), problem={},
            space=load_space(tmp_path / "stopped.yaml"), objectives={"v": "maximize"},
            n_trials=2, seed=0, storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s",
            executor="inline", device={"type": "cpu"}, warm_start="off",
        )  # fmt: skip
        Sweep(settings, ProgressDisplay(Console(file=out, width=1000))).run()
        return out.getvalue().splitlines()

    first = run()
    assert "; 1 launched in study s; failed: interrupted 1" in first[-1], first
    resumed = run()
    assert resumed[0].endswith(
        "| study s (1 trial stored: 1 interrupted, not in the budget) | budget 2 trials (2 to run)"
    ), resumed[0]
    assert resumed[-1].endswith(
        "; study s in all (earlier runs included): 3 launched; failed: interrupted 1"
    ), resumed[-1]


def test_a_replay_s_closing_line_gives_the_search_s_milliseconds_a_trial_not_a_share(tmp_path):
    # an inline replay read 'search overhead 99.2% of the slots' wall time (the sampler's 58.9%
    # runs while trials measure)': its trials look figures up in no time, nothing measures
    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.objectives.replay import load_table, space_from_table

    table = tmp_path / "t.csv"
    table.write_text("BM,gbps\n" + "".join(f"{b},{b / 10}\n" for b in range(16, 272, 16)))
    settings = SweepSettings(
        workload="replay", problem={"table": str(table), "params": ["BM"], "metric": "gbps"},
        space=space_from_table(load_table(str(table)), ["BM"]), objectives={"gbps": "maximize"},
        sampler="random", n_trials=10, seed=0, storage="memory", executor="inline",
    )  # fmt: skip
    out = io.StringIO()
    summary = Sweep(settings, ProgressDisplay(Console(file=out, width=400))).run()
    line = out.getvalue().splitlines()[-1]
    assert "search overhead" not in line and "compiling held slots" not in line, line
    ms = 1000 * summary.elapsed_s / 10
    assert f"; a replay measures nothing: the sweep took {ms:.1f} ms a trial (the sampler " in line
    stored = summary.study.user_attrs["last_run"]
    assert stored["search_overhead"] is None
    assert stored["ms_per_trial"] == round(ms, 3)


@pytest.mark.parametrize("sampler", ["bo", "grid"])
def test_a_first_runs_header_says_when_the_space_holds_fewer_configs_than_its_trials(
    tmp_path, sampler
):
    # a first run of --trials 10 over 3 configs said 'budget 10 trials' and ran 3; a resume
    # said how few were left, a first run nothing
    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import Param, Space

    space = Space("c", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "categorical", choices=[0.5, 1.0, 2.0])])  # fmt: skip

    def header(trials: int, name: str) -> str:
        out = io.StringIO()
        settings = SweepSettings(
            workload="faults", problem={}, space=space, objectives={"score": "maximize"},
            n_trials=trials, seed=0, storage=f"sqlite:///{tmp_path / 'f.db'}", study_name=name,
            executor="inline", device={"type": "cpu"}, sampler=sampler,
        )  # fmt: skip
        Sweep(settings, ProgressDisplay(Console(file=out, width=1000))).run()
        return out.getvalue().splitlines()[0]

    assert header(10, "f").endswith(
        "| study f (0 trials stored) | budget 10 trials (only 3 configs in the space)"
    )
    assert header(3, "g").endswith("| study g (0 trials stored) | budget 3 trials")
    # one of each said '(1 trials stored) | budget 1 trials'
    assert header(1, "h").endswith("| study h (0 trials stored) | budget 1 trial")
    assert header(2, "h").endswith("| study h (1 trial stored) | budget 2 trials (1 to run)")


def test_the_closing_lines_study_totals_count_every_drivers_failures(tmp_path):
    # with a second driver on the study, the closing line read '6 launched in study w; failed:
    # wrong_result 4': the launched were every driver's, the failures only those stored when
    # this run began and its own
    import subprocess
    import sys

    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import load_space

    space_file = tmp_path / "w.yaml"
    space_file.write_text("name: w\nworkload: faults\nparameters:\n"
                          "  fault: {type: categorical, choices: [wrong_result]}\n"
                          "  score: {type: float, low: 0.0, high: 1.0}\n")  # fmt: skip
    url = f"sqlite:///{tmp_path / 'w.db'}"

    class OtherDriver(ProgressDisplay):
        """After this driver's first trial, another driver runs the study to 4 trials."""

        def on_trial(self, record, study, counts):  # noqa: ANN001, ANN202
            super().on_trial(record, study, counts)
            if record.number == 0:
                subprocess.run(
                    [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space",
                     str(space_file), "--trials", "4", "--study", "w", "--storage", url,
                     "--executor", "inline", "--finish-top", "0", "--seed", "1"],
                    capture_output=True, text=True, timeout=120, check=False,
                )  # fmt: skip

    out = io.StringIO()
    settings = SweepSettings(
        workload="faults", problem={}, space=load_space(str(space_file)),
        objectives={"score": "maximize"}, n_trials=6, seed=0, storage=url, study_name="w",
        executor="inline", device={"type": "cpu"}, warm_start="off",
    )  # fmt: skip
    summary = Sweep(settings, OtherDriver(Console(file=out, width=1000))).run()
    assert summary.trials_total == 6 and summary.trials_run == 4, out.getvalue()
    assert summary.failures == {"wrong_result": 4}
    assert summary.study_failures == {"wrong_result": 6}
    line = out.getvalue().splitlines()[-1]
    assert "; this run: failed: wrong_result 4; " in line, line
    assert line.endswith(
        "; study w in all (other drivers' included): 6 launched; failed: wrong_result 6"
    ), line


def test_a_shared_resume_of_a_study_of_interrupted_trials_credits_earlier_runs_too(tmp_path):
    # an earlier run whose one trial was interrupted (0 launched trials stored), resumed while
    # another driver ran the study: its totals were said to hold 'other drivers'' alone
    import subprocess
    import sys

    from autotune.driver import Sweep
    from autotune.driver.settings import SweepSettings
    from autotune.space import load_space

    (tmp_path / "stopped.py").write_text(STOPPED_ONCE)
    (tmp_path / "stopped.yaml").write_text("parameters:\n  x: {type: int, low: 0, high: 9}\n")
    (tmp_path / "stop-once").touch()
    url = f"sqlite:///{tmp_path / 's.db'}"

    class OtherDriver(ProgressDisplay):
        """After this driver's first trial, another driver runs the study to 3 trials."""

        def on_trial(self, record, study, counts):  # noqa: ANN001, ANN202
            super().on_trial(record, study, counts)
            if record.number == 1:  # the resume's first (trial 0 was interrupted)
                subprocess.run(
                    [sys.executable, "-m", "autotune.cli", "tune", str(tmp_path / "stopped.py"),
                     "--space", str(tmp_path / "stopped.yaml"), "--trials", "3", "--study", "s",
                     "--storage", url, "--executor", "inline", "--finish-top", "0", "--seed",
                     "1"], capture_output=True, text=True, timeout=120, check=False,
                )  # fmt: skip

    def run(display: type[ProgressDisplay], trials: int) -> list[str]:
        out = io.StringIO()
        settings = SweepSettings(
            workload=str(tmp_path / "stopped.py"), problem={},
            space=load_space(tmp_path / "stopped.yaml"), objectives={"v": "maximize"},
            n_trials=trials, seed=0, storage=url, study_name="s", executor="inline",
            device={"type": "cpu"}, warm_start="off",
        )  # fmt: skip
        Sweep(settings, display(Console(file=out, width=1000))).run()
        return out.getvalue().splitlines()

    first = run(ProgressDisplay, 1)
    assert "; 1 launched in study s; failed: interrupted 1" in first[-1], first
    resumed = run(OtherDriver, 4)
    closing = resumed[-1]
    assert "; study s in all (earlier runs' and other drivers' included): " in closing, closing
