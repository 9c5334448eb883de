import threading

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.finish import keep_default, summarise_samples
from autotune.driver.trial_attrs import FINISH
from autotune.executors.base import Executor
from autotune.executors.inline import InlineExecutor
from autotune.executors.local import LocalExecutor
from autotune.export import best_record
from autotune.space import Param, Space, load_space


def test_within_noise_when_medians_differ_less_than_the_spread():
    rows = summarise_samples(
        {1: [100.0, 104.0, 98.0], 2: [97.0, 99.0, 101.0], 3: [90.0, 91.0]}, maximize=True
    )
    assert [r.trial for r in rows] == [1, 2, 3]
    assert rows[0].median == 100.0 and rows[0].spread == 0.06
    assert [r.within_noise for r in rows] == [True, True, False]  # 1% apart vs 6% spread; 9.5%
    minimize = summarise_samples({1: [5.0, 5.0], 2: [4.0, 4.0]}, maximize=False)
    assert [r.trial for r in minimize] == [2, 1]
    assert minimize[1].within_noise is False  # no spread at all: any gap is real


def test_a_default_many_times_slower_is_told_apart_however_noisy_its_own_readings():
    # the finish of an H100 serving sweep (tokens/s of goodput, 2 rounds): the default, over
    # the SLO, served 21 and 65 tokens/s (a 102% spread) against the winner's 2578; the gap was
    # measured against the winner's median and the spread against the default's, and the
    # default read "within noise of the winner"
    rows = summarise_samples({20: [2578.0, 2578.4], 0: [21.2, 65.2]}, maximize=True)
    assert [(r.trial, r.within_noise) for r in rows] == [(20, True), (0, False)]
    # a latency 10x the winner's, whose own readings range over 100 ms, is no closer
    rows = summarise_samples({1: [9.0, 11.0], 2: [50.0, 150.0]}, maximize=False)
    assert [(r.trial, r.within_noise) for r in rows] == [(1, True), (2, False)]


def test_rounds_pair_the_readings_a_config_that_wins_every_round_clearly_beats_the_default():
    # the finish of an H200 sweep at 8192x14336x4096 (ratios to cuBLAS, 3 interleaved rounds):
    # trial 38 wins each round by 6-10% although its own spread (3.6%) is larger than its lead
    # over trial 34's noisy median; trial 34 won its first round by 0.3% only
    samples = {0: [0.884, 0.903, 0.903], 34: [0.887, 1.018, 1.010], 38: [0.957, 0.991, 0.961]}
    rows = summarise_samples(samples, maximize=True)
    for row in rows:
        row.baseline = row.trial == 0
    rows = keep_default(rows, maximize=True)
    assert [r.trial for r in rows] == [38, 34, 0]
    assert [r.within_noise for r in rows] == [True, True, False]
    # readings from different rounds cannot be paired: then the medians' gap (0.903 / 0.957,
    # 5.6%) must clear the larger spread (6.9%), and it does not, so the default stays
    unpaired = summarise_samples(
        {0: [0.884, 0.903, 0.903], 38: [0.957, 0.991, 0.925]}, maximize=True,
        rounds={0: [0, 1, 2], 38: [3, 4, 5]},
    )  # fmt: skip
    for row in unpaired:
        row.baseline = row.trial == 0
    assert [r.trial for r in keep_default(unpaired, maximize=True)] == [0, 38]


class OrderRecorder(LocalExecutor):
    """A real local executor that also notes the order configs were submitted in."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.order = []

    def submit(self, ticket, config, should_prune=lambda s, v: False):
        self.order.append(config["delay"])
        super().submit(ticket, config, should_prune)


def test_finish_remeasures_the_top_configs_interleaved_in_rotated_order_in_a_fresh_process():
    space = Space("d", [Param("delay", "categorical", choices=[0.0, 0.05, 0.1, 0.15, 0.2])])
    settings = SweepSettings(
        workload="faults",
        problem={},
        space=space,
        objectives={"latency_s": "minimize"},
        sampler="grid",
        n_trials=5,
        storage="memory",
        executor="local",
    )
    recorders: list[OrderRecorder] = []

    def fresh_recorder(s: SweepSettings, workers: int | None = None) -> Executor:
        recorders.append(OrderRecorder(s.workload, s.problem, workers=workers, timeout_s=30))
        return recorders[-1]

    sweep = Sweep(settings, executor_factory=fresh_recorder)
    study = sweep.run().study
    rows = sweep.finish(study, top=3, rounds=2)

    finish_runner = recorders[-1]
    assert len(recorders) == 2 and finish_runner.workers_started == 1  # a fresh process
    assert finish_runner.order == [0.0, 0.05, 0.1, 0.05, 0.1, 0.0]  # A B C, then B C A
    assert [r.config["delay"] for r in rows] == [0.0, 0.05, 0.1]
    assert all(len(r.samples) == 2 for r in rows)
    assert not rows[1].within_noise  # 50 ms apart: far beyond the timing noise
    record = best_record(study)
    assert record["config"] == {"delay": 0.0}
    assert record["finish"]["rows"][0]["median"] == rows[0].median


def _sweep_with_default(objective: str, choices: list, default: dict, top: int) -> tuple:
    space = Space("d", [Param("delay", "categorical", choices=choices)])
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={objective: "maximize"
        if objective == "score" else "minimize"}, sampler="grid", n_trials=len(choices),
        storage="memory", executor="inline", baseline=default, warm_start="off",
    )  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    return study, sweep.finish(study, top=top, rounds=2)


def test_the_untuned_default_is_remeasured_and_stays_unless_beaten_beyond_the_noise():
    # every config scores the same: the "best" is no better than the default, which stays
    study, rows = _sweep_with_default("score", [0.0, 0.02], {"delay": 0.02}, top=2)
    assert rows[0].baseline and rows[0].config == {"delay": 0.02}
    assert study.user_attrs["finish"]["default_kept"] is True
    assert best_record(study)["config"] == {"delay": 0.02}
    # 100 ms slower than the best, far beyond the noise: the tuned config wins
    study, rows = _sweep_with_default("latency_s", [0.0, 0.1], {"delay": 0.1}, top=1)
    assert rows[0].config == {"delay": 0.0} and not rows[0].baseline
    assert [r.baseline for r in rows] == [False, True]  # re-measured beside it
    assert study.user_attrs["finish"]["default_kept"] is False


def test_a_time_budget_bounds_the_sweep_and_its_finish_together():
    import time

    space = Space("d", [Param("score", "float", low=0.0, high=1.0),
                        Param("delay", "categorical", choices=[0.25])])  # fmt: skip
    # in-process trials: the finish's cost is its measurements alone, whatever the machine's
    # load (a worker's start, torch's import, took 4-9 s on a loaded 2-core machine)
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="random", n_trials=None, time_budget_s=8.0, seed=0, storage="memory",
        executor="inline", finish_top=3, finish_rounds=2, warm_start="off",
    )  # fmt: skip
    started = time.monotonic()
    sweep = Sweep(settings)
    summary = sweep.run()
    sweep.finish(summary.study)
    total = time.monotonic() - started
    assert summary.stopped_by == "time"
    # the sweep held back (3 + 1) x 2 x 0.25 s for the finish, so that the two end near the
    # budget rather than the finish's 2 s past it
    assert summary.elapsed_s < 8.0 - 1.5
    assert total < 8.0 + 1.0


def _swept(delays: list[float]):
    """A finished 2-trial grid sweep of the faults workload's ``delay`` (seconds a trial)."""
    space = Space("d", [Param("delay", "categorical", choices=delays)])
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"latency_s": "minimize"},
        sampler="grid", n_trials=2, storage="memory", executor="inline", warm_start="off",
    )  # fmt: skip
    sweep = Sweep(settings)
    return sweep, sweep.run().study


def test_no_round_starts_after_the_deadline_but_the_first():
    import time

    sweep, study = _swept([0.0, 0.05])
    rows = sweep.finish(study, top=2, rounds=3, deadline=time.monotonic())  # already past
    # the first round starts, but the executor ends a measurement running past the deadline:
    # on a loaded machine the first one is stopped before it reads (failed twice in a run),
    # so the first round measures one config at most, and no other round starts
    assert all(len(r.samples) == 1 for r in rows) and len(rows) <= 1
    assert study.user_attrs["finish"]["rounds"] == len(rows)


def test_no_round_starts_that_would_end_past_the_deadline():
    # rounds of two 0.3 s trials: a second round starting before a deadline 1 s out would end
    # past it (in the H200's 1b sweep the finish's third round ran 20 s past the budget)
    import time

    sweep, study = _swept([0.3, 0.31])
    rows = sweep.finish(study, top=2, rounds=3, deadline=time.monotonic() + 1.0)
    assert all(len(r.samples) == 1 for r in rows)
    assert study.user_attrs["finish"]["rounds"] == 1


def test_the_time_budget_holds_back_at_most_a_third_for_the_finish():
    # trials of 0.5 s with a finish of (3 + 1) x 3 rounds: 6 s of reserve in a 3 s budget would
    # stop the search after its first trial; a third of it leaves room for more
    space = Space("d", [Param("delay", "categorical", choices=[0.5, 0.51, 0.52, 0.53, 0.54])])
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"latency_s": "minimize"},
        sampler="grid", time_budget_s=3.0, storage="memory", executor="inline",
        warm_start="off", finish_top=3, finish_rounds=3,
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.stopped_by == "time"
    assert summary.trials_run >= 3


@pytest.mark.parametrize("executor", ["local", "inline"])
def test_a_trial_running_when_the_budget_ends_is_stopped_there(executor):
    import time

    space = Space("d", [Param("delay", "categorical", choices=[0.0, 30.0])])
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"latency_s": "minimize"},
        sampler="grid", n_trials=2, time_budget_s=4.0, storage="memory", executor=executor,
        warm_start="off", baseline={"delay": 30.0}, trial_timeout_s=120,
    )  # fmt: skip
    started = time.monotonic()
    summary = Sweep(settings).run()
    assert time.monotonic() - started < 30  # not the 30 s the trial would have taken
    first = summary.study.trials[0]
    assert first.user_attrs["status"] == "interrupted"
    assert "time budget ended" in first.user_attrs["reason"]


def test_a_default_over_the_slo_is_remeasured_as_the_reference_but_never_chosen():
    # the default scores as well as the best, but runs over the latency limit: the sweep marks
    # it slo_violated; the finish measures it beside the winner, last, and never keeps it
    space = Space("d", [Param("delay", "categorical", choices=[0.0, 0.1]),
                        Param("score", "categorical", choices=[1.0, 5.0])])  # fmt: skip
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="grid", n_trials=4, storage="memory", executor="inline",
        baseline={"delay": 0.1, "score": 5.0}, warm_start="off", slo={"latency_s": 0.05},
    )  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    assert study.trials[0].user_attrs["status"] == "slo_violated"
    rows = sweep.finish(study, top=2, rounds=2)
    assert [r.config for r in rows][0] == {"delay": 0.0, "score": 5.0}
    assert rows[-1].baseline and rows[-1].over_slo and rows[-1].config["delay"] == 0.1
    assert rows[-1].samples == [5.0, 5.0]  # measured, as the reference
    assert not any(r.over_slo for r in rows[:-1])
    assert study.user_attrs["finish"]["default_kept"] is False
    assert best_record(study)["config"] == {"delay": 0.0, "score": 5.0}


class SlowToStart(InlineExecutor):
    """A real in-process executor whose first trial also pays a worker's start, as a fresh
    worker process's first trial does (torch's import, the device's start)."""

    def __init__(self, *args, start_s: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.start_s, self.started = start_s, False

    def submit(self, ticket, config, should_prune=lambda s, v: False):
        if not self.started:
            import time

            time.sleep(self.start_s)
            self.started = True
        super().submit(ticket, config, should_prune)


def test_the_workers_start_does_not_count_against_the_rounds_after_the_first():
    # rounds of two 0.1 s trials after a 2.5 s start, 4 s to the deadline: the first round
    # took 2.7 s, the next ones take 0.2 s (an H100 suite's short rows got one round, not 3)
    import time

    from autotune.driver.finish import finish

    _, study = _swept([0.1, 0.11])
    executor = SlowToStart("faults", {}, start_s=2.5)
    rows = finish(study, "latency_s", "minimize", executor, top=2, rounds=3,
                  deadline=time.monotonic() + 4.0)  # fmt: skip
    assert study.user_attrs["finish"]["rounds"] == 3
    assert all(len(r.samples) == 3 for r in rows)


class PressesCtrlC(InlineExecutor):
    """A real in-process executor during whose first measurement Ctrl-C is pressed, its
    KeyboardInterrupt dropped by CPython (``press``: a weakref callback's SIGINT)."""

    def __init__(self, *args, press, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.press, self.submitted = press, 0

    def submit(self, ticket, config, should_prune=lambda s, v: False):
        self.submitted += 1
        super().submit(ticket, config, should_prune)
        if self.submitted == 1:
            self.press()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers can only be set in the main thread")  # fmt: skip
def test_a_ctrl_c_whose_keyboard_interrupt_cpython_dropped_still_stops_the_finish(
    dropped_ctrl_c,
):
    """Ctrl-C in the finish that landed in a garbage collector's callback was lost: the
    finish ran all its rounds and the command exited 0; the recorded signal now stops it at
    its next measurement, as a KeyboardInterrupt that was raised does, no record stored."""
    from autotune.driver.finish import finish
    from autotune.driver.signals import stop_signals_recorded

    _, study = _swept([0.0, 0.01])
    executor = PressesCtrlC("faults", {}, press=dropped_ctrl_c.press_ctrl_c_in_a_gc_callback)
    with (stop_signals_recorded(), dropped_ctrl_c.dropped() as dropped,
          pytest.raises(KeyboardInterrupt)):  # fmt: skip
        finish(study, "latency_s", "minimize", executor, top=2, rounds=3)
    assert dropped == [KeyboardInterrupt]  # the handler's own was lost
    assert executor.submitted == 1  # stopped before its second measurement
    assert study.user_attrs.get(FINISH) is None  # a finish stopped in it: no record


def test_a_config_that_served_in_every_round_beats_a_default_that_served_nothing():
    """Rounds where the default read 0 are the most decisive, not ones to pass over: a noisy
    CPU goodput of 20-110 tokens/s against 0 in every round is a win, not 'within noise'."""
    from autotune.driver.finish import FinishRow, keep_default

    default = FinishRow(0, {}, 0.0, 0.0, [0.0, 0.0, 0.0], baseline=True)
    served = FinishRow(5, {}, 50.0, 1.8, [20.0, 50.0, 110.0])
    assert [r.trial for r in keep_default([served, default], maximize=True)] == [5, 0]
    idle = FinishRow(6, {}, 0.0, 0.0, [0.0, 0.0, 0.0])  # 0 against 0: a tie, no win
    assert [r.trial for r in keep_default([idle, default], maximize=True)][0] == 0


def test_a_resumed_sweep_that_adds_trials_drops_the_earlier_finish(tmp_path):
    # the first run's finish named its winner among 3 trials; the resume finds a better one:
    # best, export and report answered the old winner over it
    space = Space("d", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "categorical", choices=[0.1, 0.2, 0.3, 0.9])])  # fmt: skip

    def run(trials: int) -> optuna.Study:
        settings = SweepSettings(
            workload="faults", problem={}, space=space, objectives={"score": "maximize"},
            sampler="grid", n_trials=trials, storage=f"sqlite:///{tmp_path / 's.db'}",
            study_name="s", executor="inline", warm_start="off", seed=0,
        )  # fmt: skip
        return Sweep(settings).run().study

    first = run(1)
    Sweep(SweepSettings(workload="faults", problem={}, space=space,
                        objectives={"score": "maximize"}, executor="inline")).finish(
        first, top=1, rounds=1)  # fmt: skip
    old_winner = best_record(first)["config"]["score"]
    assert first.user_attrs[FINISH]["rows"]
    resumed = run(4)
    assert not resumed.user_attrs[FINISH]  # no finish of this run yet: the sweep's best
    assert best_record(resumed)["config"]["score"] == 0.9 != old_winner
    assert "finish" not in best_record(resumed)


FAILS_IN_THE_FINISH = """
from pathlib import Path

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Flaky(Objective):
    name = "flaky"
    space = "flaky.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        if (Path(__file__).parent / "fail-now").exists():  # the command's password echoed too
            raise RuntimeError("lost postgresql://tuner:" + "S3cret" + "PW@db.internal/s; "
                               "server said: password " + "Hunter" + "PW2 refused")
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Flaky
"""


def test_a_password_in_a_reason_the_finish_stores_is_left_out(tmp_path):
    """A config that measured in the sweep and fails when the finish re-measures it: the
    failure the finish stores in the study shows the URL's password as ``***``, and the
    problem's command's password too where the reason echoes it outside a URL."""
    (tmp_path / "flaky.py").write_text(FAILS_IN_THE_FINISH)
    (tmp_path / "flaky.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 9}\n")
    db = tmp_path / "s.db"
    settings = SweepSettings(
        workload=str(tmp_path / "flaky.py"),
        problem={"command": "srv --db postgresql://admin:" + "Hunter" + "PW2@db/prod"},
        space=load_space(tmp_path / "flaky.yaml"),
        objectives={"v": "maximize"}, sampler="random", n_trials=2, seed=0,
        storage=f"sqlite:///{db}", study_name="s", executor="inline", warm_start="off",
    )  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    (tmp_path / "fail-now").touch()
    sweep.finish(study, top=1, rounds=1)
    failed = optuna.load_study(study_name="s", storage=f"sqlite:///{db}").user_attrs[FINISH]
    (reason,) = failed["failed"].values()
    assert reason == (
        "crashed: RuntimeError: lost postgresql://tuner:***@db.internal/s; "
        "server said: password *** refused"
    )
    stored = db.read_bytes().decode("latin-1")
    assert "S3cret" + "PW" not in stored and "Hunter" + "PW2" not in stored


def test_a_finish_whose_every_measurement_failed_claims_no_round(tmp_path):
    # it stored "re-measured in 1 interleaved round" with no row: nothing had been measured
    (tmp_path / "flaky.py").write_text(FAILS_IN_THE_FINISH)
    (tmp_path / "flaky.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 9}\n")
    settings = SweepSettings(
        workload=str(tmp_path / "flaky.py"), problem={}, space=load_space(tmp_path / "flaky.yaml"),
        objectives={"v": "maximize"}, sampler="random", n_trials=3, seed=0, storage="memory",
        executor="inline", warm_start="off",
    )  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    (tmp_path / "fail-now").touch()
    assert sweep.finish(study, top=2, rounds=3) == []
    record = study.user_attrs[FINISH]
    assert record["rounds"] == 0 and record["rows"] == [] and record["failed"]
    assert "nothing re-measured" in record["protocol"]
    assert "interleaved round" not in record["protocol"]


@pytest.mark.parametrize(("direction", "best"), [("maximize", -1.0), ("minimize", -9.0)])
def test_a_negative_metric_keeps_its_best_config_in_the_finish(direction, best):
    # round ratios of two negative readings came out upside down: a config at -3 'measurably
    # beat' the default at -1 (maximize), and -5 beat -9 (minimize)
    scores = [best, -3.0, -5.0, -2.0]
    space = Space("d", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "categorical", choices=scores)])  # fmt: skip
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": direction},
        sampler="grid", n_trials=4, storage="memory", executor="inline", warm_start="off",
        baseline={"fault": "none", "score": best},
    )  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    rows = sweep.finish(study, top=3, rounds=3)
    assert rows[0].baseline and rows[0].median == best
    assert study.user_attrs[FINISH]["default_kept"] is True
    assert best_record(study)["config"]["score"] == best


def test_a_config_that_crashed_in_a_round_of_the_finish_is_not_its_winner(crashing_finish):
    # the fastest config crashed in the finish's second round, measured in the other two, and
    # was the winner `best` and every export handed on without a word of the crash
    study, rows = crashing_finish(top=2, rounds=3)
    record = study.user_attrs[FINISH]
    assert "illegal memory access" in next(iter(record["failed"].values()))
    assert [r.config["x"] for r in rows] == [5, 1, 9]  # 9 read 90 twice, yet 5 wins; 9 last
    assert best_record(study)["config"] == {"x": 5}
