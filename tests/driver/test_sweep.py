import os
import re
import signal
import subprocess
import sys
import time

import optuna
import pytest

from autotune.driver import Sweep, SweepObserver, SweepSettings, best_trials, trials_frame
from autotune.space import load_space


def settings(space, **overrides) -> SweepSettings:
    base = dict(
        workload="faults",
        problem={},
        space=space,
        objectives={"score": "maximize"},
        n_trials=10,
        seed=0,
        storage="memory",
        executor="inline",
        device={"type": "cpu"},
    )
    return SweepSettings(**(base | overrides))


def load(url, name):
    return optuna.load_study(study_name=name, storage=url)


def test_every_failure_is_recorded_and_the_sweep_goes_on(sqlite_url):
    # 11 trials at seed 0: an OOM, a divergence, three hangs and a segfault among them (each
    # hang and crash costs a worker's restart, torch imported again: the test's time)
    space = load_space("faults")
    summary = Sweep(
        settings(
            space,
            n_trials=11,
            storage=sqlite_url,
            study_name="f",
            executor="local",
            trial_timeout_s=1.0,
        )
    ).run()
    assert summary.trials_run == 11
    frame = trials_frame(load(sqlite_url, "f"))
    assert len(frame) == 11
    assert set(frame["status"]) <= {"ok", "oom", "crashed", "timeout", "wrong_result", "diverged"}
    assert len(set(frame["status"])) >= 4  # several distinct real failures in one sweep
    failed = frame[frame["status"] != "ok"]
    assert (failed["reason"].str.len() > 0).all()
    assert failed["score"].isna().all()  # penalties told to Optuna are not shown as results
    study = load(sqlite_url, "f")
    for trial in study.trials:
        failed = trial.user_attrs["status"] != "ok"
        assert trial.constraints == {"failed": 1.0 if failed else 0.0}


def test_the_sampler_leaves_a_failing_region(write_space):
    # half of the space fails; told as infeasible, TPE stops proposing it after its start-up
    path = write_space(
        "parameters:\n  fault: {type: categorical, choices: [none, wrong_result, oom, exception]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
    )

    def failure_rate(sampler: str) -> float:
        rates = []
        for seed in range(3):
            study_name = f"{sampler}-{seed}"
            s = settings(
                load_space(path), sampler=sampler, n_trials=40, seed=seed, study_name=study_name
            )
            study = Sweep(s).run().study
            late = [t for t in study.trials if t.number >= 20]
            rates.append(sum(t.user_attrs["status"] != "ok" for t in late) / len(late))
        return sum(rates) / len(rates)

    # random keeps failing 3 times in 4; TPE, told the failures as infeasible, far less often
    tpe, random = failure_rate("tpe"), failure_rate("random")
    assert random > 0.6
    assert tpe < 0.75 * random


def test_static_constraints_are_never_launched(write_space):
    path = write_space(
        "parameters:\n  fault: {type: categorical, choices: [none, segfault]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
        "constraints:\n  safe: fault != 'segfault'\n"
    )
    s = settings(load_space(path), n_trials=12, sampler="random", executor="local")
    study = Sweep(s).run().study
    statuses = {t.params["fault"]: t.user_attrs["status"] for t in study.trials}
    assert statuses.get("segfault", "infeasible") == "infeasible"
    infeasible = [t for t in study.trials if t.user_attrs["status"] == "infeasible"]
    assert infeasible and all(t.user_attrs["duration_s"] == 0.0 for t in infeasible)
    assert all("violates safe" in t.user_attrs["reason"] for t in infeasible)


@pytest.mark.parametrize("sampler", ["tpe", "random", "gp", "cmaes", "grid"])
def test_every_sampler_runs_a_sweep(write_space, sampler):
    path = write_space(
        "parameters:\n  fault: {type: categorical, choices: [none, wrong_result]}\n"
        "  score: {type: categorical, choices: [0.1, 0.5, 0.9]}\n"
    )
    summary = Sweep(settings(load_space(path), sampler=sampler, n_trials=8)).run()
    assert summary.trials_run == 6  # all 6 configs, each measured once, then the sweep stops
    assert summary.stopped_by in ("every config tried", "no unvisited config left")
    assert summary.best[0].params["fault"] == "none"


@pytest.mark.parametrize("sampler", ["auto", "tpe", "random", "cmaes"])
@pytest.mark.parametrize("floats", [
    "  score: {type: float, low: 0.5, high: 0.5}\n",
    # a float active only where a constraint forbids it
    "  fused: {type: bool}\n  score: {type: float, low: 0, high: 1, when: fused}\n"
    "constraints:\n  never: not fused\n",
])  # fmt: skip
def test_a_space_whose_floats_cannot_vary_stops_once_measured(write_space, sampler, floats):
    # the sampler proposed repeats forever (about 50 a second stored), never reaching --trials
    path = write_space(
        "parameters:\n  fault: {type: categorical, choices: [none, wrong_result]}\n" + floats
    )
    started = time.monotonic()
    s = settings(load_space(path), sampler=sampler, n_trials=5, time_budget_s=20)
    summary = Sweep(s).run()
    assert summary.stopped_by == "no unvisited config left"
    assert summary.trials_run == 2 and time.monotonic() - started < 60
    repeats = [t for t in summary.study.trials if "repeat of" in t.user_attrs.get("reason", "")]
    assert len(repeats) <= 10


def test_a_resume_that_adds_or_drops_a_parameter_is_refused(write_space, sqlite_url):
    # it resumed, and answered a best config the space could not hold (the new knob missing)
    from autotune.driver.study_setup import StudyMismatch

    base = ("parameters:\n  fault: {type: categorical, choices: [none]}\n"
            "  score: {type: categorical, choices: [0.1, 0.5]}\n")  # fmt: skip
    Sweep(settings(load_space(write_space(base)), storage=sqlite_url, study_name="s",
                   n_trials=2)).run()  # fmt: skip
    for text, says in (
        (base + "  extra: {type: bool}\n", "parameters.extra: study 's' never swept it"),
        (base.replace("  score: {type: categorical, choices: [0.1, 0.5]}\n", ""),
         "study 's' swept parameter 'score', which this space does not have"),
    ):  # fmt: skip
        with pytest.raises(StudyMismatch, match=re.escape(says)):
            Sweep(settings(load_space(write_space(text, "other.yaml")), storage=sqlite_url,
                           study_name="s", n_trials=3)).run()  # fmt: skip
    # a conditional parameter may join: trials where it is inactive lack it anyway
    text = base + "  extra: {type: bool, when: score > 1}\n"
    resumed = Sweep(settings(load_space(write_space(text, "other.yaml")), storage=sqlite_url,
                             study_name="s", n_trials=3)).run()  # fmt: skip
    assert len(resumed.study.trials) >= 2


def test_multi_objective_lists_the_pareto_front(write_space):
    path = write_space(
        "parameters:\n  score: {type: float, low: 0, high: 1}\n"
        "  delay: {type: categorical, choices: [0.0, 0.02, 0.05]}\n"
    )
    s = settings(
        load_space(path), objectives={"score": "maximize", "latency_s": "minimize"}, n_trials=12
    )
    summary = Sweep(s).run()
    front = summary.best
    assert len(front) >= 1
    values = [t.values for t in front]
    for a in values:  # no member of the front dominates another
        assert not any(b[0] >= a[0] and b[1] <= a[1] and b != a for b in values)
    assert values == sorted(values, key=lambda v: -v[0])


def test_time_budget_stops_the_sweep(write_space):
    path = write_space(
        "parameters:\n  delay: {type: categorical, choices: [0.2]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
    )
    start = time.monotonic()
    summary = Sweep(settings(load_space(path), n_trials=None, time_budget_s=1.0)).run()
    assert summary.stopped_by == "time"
    assert 3 <= summary.trials_run <= 7
    assert time.monotonic() - start < 3.0


def test_time_budget_counts_from_budget_from(write_space):
    # the CLI starts the budget's clock at the command's start: time spent before the sweep
    # (imports, the space's enumeration, the storage) comes out of the trials' share
    path = write_space(
        "parameters:\n  delay: {type: categorical, choices: [0.2]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
    )
    setup_done_long_ago = time.monotonic() - 0.6
    summary = Sweep(settings(load_space(path), n_trials=None, time_budget_s=1.0,
                             budget_from=setup_done_long_ago)).run()  # fmt: skip
    assert summary.stopped_by == "time"
    assert summary.trials_run <= 2  # 0.4 s left of 1.0: two 0.2-s trials at most, not five


def test_resume_after_a_killed_sweep_loses_no_finished_trial(tmp_path, write_space):
    path = write_space(
        "parameters:\n  score: {type: float, low: 0, high: 1}\n"
        "  delay: {type: categorical, choices: [0.3]}\n"
    )
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    command = [
        sys.executable,
        "-m",
        "autotune.cli",
        "tune",
        "faults",
        "--space",
        str(path),
        "--trials",
        "12",
        "--seed",
        "3",
        "--storage",
        url,
        "--study",
        "r",
        "--executor",  # (in the driver's process: no worker's start, torch's import, to wait)
        "inline",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + 60
    finished = []
    while time.monotonic() < deadline:
        time.sleep(0.2)
        try:
            study = load(url, "r")
        except Exception:  # noqa: BLE001 - the study is not created yet
            continue
        finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        if len(finished) >= 4:
            break
    os.killpg(process.pid, signal.SIGKILL)  # no chance to clean up: like a power cut
    process.wait()
    before = {
        t.number: t.values
        for t in load(url, "r").trials
        if t.state == optuna.trial.TrialState.COMPLETE
    }
    assert len(before) >= 4

    resumed = subprocess.run(  # (the finish is not what is tested)
        [*command[:5], *command[-2:], "--storage", url, "--study", "r", "--finish-top", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    study = load(url, "r")
    after = {
        t.number: t.values for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE
    }
    assert all(after[n] == v for n, v in before.items())  # every finished trial kept as is
    assert len(after) == 12  # the stored budget was reached, not restarted
    interrupted = [t for t in study.trials if t.user_attrs.get("status") == "interrupted"]
    # the trial in flight at the kill and the next one, already proposed, marked as such
    assert len(interrupted) <= 2
    assert best_trials(study)[0].values[0] == max(v[0] for v in after.values())


def test_a_resumed_seeded_study_does_not_repeat_its_proposals(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("parameters:\n  score: {type: float, low: 0, high: 1}\n")
    url = f"sqlite:///{tmp_path / 'seed.db'}"
    first = settings(load_space(path), sampler="random", n_trials=5, storage=url, study_name="s")
    Sweep(first).run()
    first.n_trials = 10
    study = Sweep(first).run().study
    scores = [t.params["score"] for t in study.trials]
    assert len(set(scores)) == 10  # the second run drew new configs, not the first five again
    again = settings(load_space(path), sampler="random", n_trials=5, storage="memory")
    assert [t.params["score"] for t in Sweep(again).run().study.trials] == scores[:5]


def test_search_overhead_is_measured_and_stored(write_space):
    path = write_space(
        "parameters:\n  delay: {type: categorical, choices: [0.05]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
    )
    summary = Sweep(settings(load_space(path), n_trials=6)).run()
    # 6 trials of 50 ms each: at least 0.3 s evaluating, and the rest is the driver's
    assert summary.evaluate_s >= 0.3
    assert 0.0 < summary.search_overhead < 1.0
    stored = summary.study.user_attrs["last_run"]
    assert stored["trials"] == 6 and stored["search_overhead"] == round(summary.search_overhead, 4)


def test_the_memory_model_rejects_what_would_not_fit_before_launching_it(write_space):
    import optuna

    from autotune.driver.memory_guard import MemoryGuard
    from autotune.driver.trial_attrs import LAST_RUN
    from autotune.objectives.train_step import TrainStepObjective

    from ..conftest import TINY_TRAIN_STEP  # noqa: TID252

    # the two parameters the memory model is told of here: 6 configs, not TRAIN_SPACE's 24
    # (each run a real training step)
    space = (
        "parameters:\n  micro_batch: {type: pow2, low: 1, high: 4}\n"
        "  precision: {type: categorical, choices: [fp32, bf16]}\n"
    )
    problem = {**TINY_TRAIN_STEP, "model": "", "check_numerics": False}
    predict = TrainStepObjective.predict_memory
    small = predict(problem, {"micro_batch": 1, "precision": "fp32"})
    large = predict(problem, {"micro_batch": 4, "precision": "fp32"})
    # a device whose memory holds a micro-batch of 1 or 2 but not of 4
    budget = (small + large) / 2 / 0.95
    settings = SweepSettings(
        workload="train-step", problem=problem, space=load_space(write_space(space)),
        objectives={"tokens_per_s": "maximize"}, sampler="grid", n_trials=None, seed=0,
        storage="memory", executor="inline",
        device={"type": "cuda", "total_memory": budget, "max_shared_memory": 232448},
    )  # fmt: skip
    summary = Sweep(settings).run()
    trials = summary.study.trials
    rejected = [t for t in trials if "predicted peak memory" in t.user_attrs.get("reason", "")]
    ran = [t for t in trials if t.user_attrs.get("status") == "ok"]
    # exactly the configs predicted over the budget were held back, and never launched
    assert rejected and ran
    assert all(predict(problem, t.params) > budget * 0.95 for t in rejected)
    assert all(predict(problem, t.params) <= budget * 0.95 for t in ran)
    assert {t.params["micro_batch"] for t in rejected} >= {4}
    assert {t.params["micro_batch"] for t in ran} >= {1}
    assert summary.memory["memory_rejected"] == len(rejected)
    assert summary.study.user_attrs[LAST_RUN]["memory_rejected"] == len(rejected)
    # the correction follows the measured peaks, and a config that ran out of memory caps it
    guard = MemoryGuard(lambda c: c["gb"] * 1e9, budget_bytes=100e9)
    study = optuna.create_study()
    dist = {"gb": optuna.distributions.FloatDistribution(0, 100)}
    for gb, measured in ((10, 12.0), (20, 24.0)):
        study.add_trial(optuna.trial.create_trial(
            params={"gb": gb}, distributions=dist, value=1.0, user_attrs={"status": "ok",
            "metrics": {"predicted_memory_gb": gb, "measured_memory_gb": measured}},
        ))  # fmt: skip
    assert guard.correction(study) == (1.2, 2)
    assert guard.check({"gb": 85}, study).startswith("predicted peak memory 102.0 GB")
    study.add_trial(optuna.trial.create_trial(
        params={"gb": 50}, distributions=dist, value=0.0, user_attrs={"status": "oom"},
    ))  # fmt: skip
    assert "ran out of memory" in guard.check({"gb": 60}, study)
    assert guard.check({"gb": 40}, study) is None


def test_a_config_found_infeasible_when_it_ran_is_not_launched_again(tmp_path):
    # train-step's micro_batch=3 passes the (replaced) space but the objective refuses it at
    # run time: the sweep must remember that and answer a repeat from the study
    space = tmp_path / "mb.yaml"
    space.write_text("parameters:\n  micro_batch: {type: categorical, choices: [3, 4]}\n")
    s = settings(load_space(space), workload="train-step", sampler="random", n_trials=8,
                 problem={"vocab": 64, "d_model": 32, "n_layers": 1, "n_heads": 2,
                          "seq_len": 8, "global_batch": 4, "steps": 1, "warmup_steps": 0,
                          "device": "cpu", "check_numerics": False})  # fmt: skip
    summary = Sweep(s).run()
    ran = [t for t in summary.study.trials if "worker" in t.user_attrs]
    assert sorted(t.params["micro_batch"] for t in ran) == [3, 4]  # each config ran once
    refused = [t for t in summary.study.trials if t.params.get("micro_batch") == 3]
    assert refused[0].user_attrs["status"] == "infeasible"
    assert all("repeat of trial" in t.user_attrs["reason"] for t in refused[1:])


def test_an_integer_parameter_stays_an_integer_beside_a_trial_that_lacks_it(write_space):
    # a sweep stopped between asking a trial and sampling its config leaves a row without
    # parameters or metrics: an integer column must not turn into floats ("4.0") around the
    # gap (the tile here, the worker's pid among the metrics)
    path = write_space("parameters:\n  tile: {type: categorical, choices: [16, 32, 64]}\n")
    study = Sweep(settings(load_space(path), n_trials=3, sampler="random")).run().study
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
    frame = trials_frame(study)
    assert len(frame) == 4 and frame["tile"].isna().sum() == 1
    values = frame.to_csv(index=False).splitlines()[1:]
    for column in ("tile", "m.pid"):
        assert frame[column].isna().sum() == 1
        assert all(".0" not in line.split(",")[frame.columns.get_loc(column)] for line in values)
    assert sorted(frame["tile"].dropna().tolist()) == sorted(
        t.params["tile"] for t in study.trials if t.params
    )


def test_the_untuned_defaults_the_trials_ran_are_stored_for_the_exports(tmp_path, write_space):
    """A space that tunes part of the default's knobs: the rest, what every trial ran, is stored
    with the study and rides in the exported record (a train-step space without precision ran
    bf16 on a GPU; its export must not write fp32)."""
    from autotune.export import best_record

    url = f"sqlite:///{tmp_path / 's.db'}"
    space = load_space(write_space("parameters:\n  score: {type: float, low: 0.0, high: 1.0}\n"))
    baseline = {"fault": "none", "score": 0.5, "shape": (1, 2)}  # a tuple is no stored value
    Sweep(settings(space, n_trials=2, storage=url, study_name="s", baseline=baseline)).run()
    record = best_record(load(url, "s"))
    assert record["untuned"] == {"fault": "none"}
    assert set(record["config"]) == {"score"}


def test_a_password_in_a_problem_value_reaches_neither_the_storage_nor_the_screen(
    tmp_path, write_space
):
    """A server's command template may hold a database URL: the sweep runs it as given, the
    study stores it (and the cache key's parts) with the password left out, the header shows
    it so, and a resume must be given the command again."""
    import io

    from rich.console import Console

    from autotune.progress import ProgressDisplay
    from autotune.sweep_setup import SetupError, build_settings
    from autotune.tuning_cache import fingerprint

    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    problem = {"command": "srv --db postgresql://bob:hunter2@db/prod"}
    space = load_space(write_space("parameters:\n  score: {type: float, low: 0.0, high: 1.0}\n"))
    out = io.StringIO()
    Sweep(
        settings(space, n_trials=1, storage=url, study_name="s", problem=problem,
                 fingerprint=fingerprint("faults", problem, {"name": "cpu"})),
        observer=ProgressDisplay(Console(file=out, width=300)),
    ).run()  # fmt: skip
    assert "hunter2" not in db.read_bytes().decode("latin-1") and "hunter2" not in out.getvalue()
    assert "postgresql://bob:***@db/prod" in out.getvalue()
    with pytest.raises(SetupError, match="stored command without its password; give --problem"):
        build_settings(workload=None, space=None, problem={}, objective=None, sampler="auto",
                       trials=2, time_budget_s=None, seed=None, storage=url, study="s",
                       trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None,
                       params=None, metric=None, maximize=True, command="x")  # fmt: skip


def test_a_space_whose_kernels_each_meet_their_constraints_rarely_together_still_sweeps(
    write_space,
):
    """Eight independent constraint groups that each hold for 15% of their configs hold
    together once in 4e6 proposals: the sweep ran out of rejections with no trial. A
    proposal repaired group by group (autotune/driver/constraint_repair.py) runs instead."""
    lines = ["parameters:", "  fault: {type: categorical, choices: [none]}"]
    rules = ["constraints:"]
    for i in range(8):
        lines += [f"  g{i}a: {{type: int, low: 1, high: 20}}",
                  f"  g{i}b: {{type: int, low: 1, high: 20}}"]  # fmt: skip
        rules.append(f"  fits{i}: 'g{i}a * g{i}b <= 12'")
    space = load_space(write_space("\n".join(lines + rules) + "\n"))
    summary = Sweep(settings(space, n_trials=3, sampler="tpe")).run()
    assert summary.trials_run == 3 and summary.stopped_by == "trials"
    for trial in summary.study.trials:
        if trial.user_attrs.get("status") == "ok":
            assert all(trial.params[f"g{i}a"] * trial.params[f"g{i}b"] <= 12 for i in range(8))


def test_the_inline_executor_holds_a_trial_to_the_trial_timeout(write_space):
    """--executor inline ran a hung evaluate for ever: --trial-timeout did not reach it."""
    space = load_space(write_space(
        "parameters:\n  fault: {type: categorical, choices: [hang]}\n"
        "  seconds: {type: categorical, choices: [600]}\n"
    ))  # fmt: skip
    summary = Sweep(settings(space, n_trials=1, trial_timeout_s=1.0)).run()
    assert summary.failures == {"timeout": 1}


class _RunningAbove(SweepObserver):
    """At each measured trial's telling: whether a later trial was RUNNING then (asked ahead
    and waiting for the slot the measured one held)."""

    def __init__(self) -> None:
        self.later_running: list[bool] = []

    def on_trial(self, record, study, counts) -> None:
        if record.status != "ok":
            return
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        self.later_running.append(any(t.number > record.number for t in running))


def test_a_trial_that_finishes_during_a_run_of_rejections_is_told_then(tmp_path, write_space):
    """TPE over a space whose constraint rejects 99 configs in 100: the driver asks on while a
    trial runs in a worker. The trial is told when it finishes, mid-run of rejections, not
    once the next feasible config is found (its slot idle and its result unseen till then)."""
    space = load_space(write_space(
        "parameters:\n  fault: {type: categorical, choices: [none]}\n"
        "  x: {type: int, low: 1, high: 1000}\n  score: {type: float, low: 0, high: 1}\n"
        "constraints:\n  - x % 100 == 0\n"
    ))  # fmt: skip
    observer = _RunningAbove()
    summary = Sweep(settings(space, executor="local", workers=1, sampler="tpe", n_trials=4,
                             storage=f"sqlite:///{tmp_path / 'r.db'}"), observer).run()  # fmt: skip
    assert summary.trials_run == 4 and summary.failures["infeasible"] > 50
    # told at once: no later trial was waiting for its slot (the last has none after it)
    assert observer.later_running[:-1].count(False) >= 2, observer.later_running


HUGE = """
from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Huge(Objective):
    name = "huge"
    space = "huge.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": 10**400 if config["x"] == 2 else float(config["x"])})


OBJECTIVE = Huge
"""


@pytest.mark.parametrize("executor", ["inline", "local"])
def test_a_figure_too_large_for_a_float_fails_its_trial_not_the_sweep(tmp_path, executor):
    # 10**400 from evaluate: an OverflowError traceback ended the sweep, and the trial left
    # behind made every resume end the same way
    (tmp_path / "huge.py").write_text(HUGE)
    (tmp_path / "huge.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 3}\n")
    summary = Sweep(settings(load_space(tmp_path / "huge.yaml"), workload=str(tmp_path / "huge.py"),
                             objectives={"v": "maximize"}, sampler="grid", n_trials=3,
                             executor=executor)).run()  # fmt: skip
    status = {t.params["x"]: t.user_attrs["status"] for t in summary.study.trials}
    assert status == {1: "ok", 2: "crashed", 3: "ok"}
    reason = next(t.user_attrs["reason"] for t in summary.study.trials if t.params["x"] == 2)
    assert "an int of 401 digits, too large for a float" in reason


def test_a_replay_s_compile_share_counts_no_recorded_compile_time(tmp_path):
    # the table's compile_s column (seconds of its recording) was counted as this sweep's:
    # "compiling held slots 345.1% of it" for a replay that compiled nothing
    from autotune.objectives.replay import load_table, space_from_table

    table = tmp_path / "t.csv"
    table.write_text("BM,compile_s,gbps\n16,40.0,1.0\n32,40.0,2.0\n64,40.0,3.0\n")

    problem = {"table": str(table), "params": ["BM"], "metric": "gbps"}
    for executor in ("inline", "local"):
        summary = Sweep(
            settings(
                space_from_table(load_table(str(table)), ["BM"]), workload="replay",
                problem=problem, objectives={"gbps": "maximize"}, n_trials=3,
                executor=executor,
            )
        ).run()  # fmt: skip
        assert summary.trials_run == 3
        assert (summary.trial_compile_s, summary.compile_share) == (0.0, 0.0), executor


def test_a_sweep_stopped_by_a_signal_counts_its_running_trials_as_filled_slots(write_space):
    import threading

    # two slots each running a 60 s trial when Ctrl-C comes: they were busy all along, yet
    # the overhead read ~97% (the trials in flight at the stop counted as idle slots)
    path = write_space(
        "parameters:\n  delay: {type: categorical, choices: [60]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
    )
    timer = threading.Timer(8.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        summary = Sweep(settings(load_space(path), executor="local", workers=2)).run()
    finally:
        timer.cancel()
    assert summary.stopped_by == "interrupted"
    assert summary.search_overhead < 0.5


def test_a_stop_while_a_config_is_asked_keeps_the_trial_a_worker_measured_meanwhile(
    tmp_path, monkeypatch, logged_workload
):
    """Local workers: a trial that finished while the driver asked the sampler for a config
    waited in the executor's queue; a Ctrl-C then marked it interrupted, its figure lost. It
    must be told ok at the stop."""
    from autotune.driver.trial_attrs import trial_status
    from autotune.space import Param, Space

    workload, log = logged_workload
    original = optuna.samplers.RandomSampler.before_trial

    def before_trial(self, study, trial):  # noqa: ANN001, ANN202
        original(self, study, trial)
        if trial.number == 2:  # asked ahead while trials 0 and 1 run: wait for one's result
            deadline = time.monotonic() + 60
            while not (log.exists() and log.read_text().split()) and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(0.3)  # its worker has handed it back
            os.kill(os.getpid(), signal.SIGINT)  # a real signal, while the config is asked

    monkeypatch.setattr(optuna.samplers.RandomSampler, "before_trial", before_trial)
    url = f"sqlite:///{tmp_path / 'ask.db'}"
    space = Space("logged", [Param("x", "int", low=0, high=1000000)])
    summary = Sweep(
        settings(space, workload=str(workload), problem={"log": str(log)},
                 objectives={"v": "maximize"}, sampler="random", storage=url, study_name="s",
                 executor="local", workers=2, warm_start="off")
    ).run()  # fmt: skip
    assert summary.stopped_by == "interrupted"
    trials = load(url, "s").trials
    measured = {int(x) for x in log.read_text().split()}
    stored_ok = {t.params["x"] for t in trials if trial_status(t) == "ok"}
    assert measured and measured <= stored_ok, [(t.number, trial_status(t)) for t in trials]
    assert optuna.trial.TrialState.RUNNING not in [t.state for t in trials]


def test_an_inline_sweep_of_several_in_flight_shares_one_slot_s_time(write_space):
    # --executor inline --workers 2 runs its trials one after another (the two slots are
    # simulated), yet the overhead divided two slots' time: never under 50%, 56% for a sweep
    # whose trials took nearly all of it
    path = write_space(
        "parameters:\n  delay: {type: categorical, choices: [0.2]}\n"
        "  score: {type: float, low: 0, high: 1}\n"
    )
    summary = Sweep(settings(load_space(path), n_trials=6, workers=2)).run()
    assert summary.in_flight == 2 and summary.evaluate_s >= 1.2
    assert summary.search_overhead < 0.4
    stored = summary.study.user_attrs["last_run"]
    assert stored["search_overhead"] == round(summary.search_overhead, 4)


def test_a_signal_while_the_runs_record_is_written_leaves_the_record(tmp_path):
    """Ctrl-C after every trial was closed, while the run's record was written: the command
    ended 130 without it. A resume that added trials to a finished study then left the
    earlier run's record ('trials', finish done) in place: the tuning cache answered with
    the new trials' winner, which no finish judged."""
    from autotune.driver.executor_choice import make_executor
    from autotune.driver.trial_attrs import finish_pending, last_run
    from autotune.space import Param, Space
    from autotune.storage import open_storage
    from autotune.tuning_cache import cached_study

    url = f"sqlite:///{tmp_path / 'r.db'}"
    space = Space("r", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "float", low=0.0, high=1.0)])  # fmt: skip

    def run_settings(trials: int) -> SweepSettings:
        return settings(space, n_trials=trials, storage=url, study_name="r", warm_start="off",
                        finish_top=1, finish_rounds=1, fingerprint={"key": "k"})  # fmt: skip

    first = Sweep(run_settings(2))
    first.finish(first.run().study, top=1, rounds=1)
    storage = open_storage(url)
    assert cached_study(storage, "k", "auto", 2, wants_finish=True) is not None

    def signalling(s, workers=None):  # noqa: ANN001, ANN202
        executor = make_executor(s, workers)

        class AtTheClose(type(executor)):
            @property
            def side_by_side(self) -> int:  # read for the closing summary
                os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C, at that moment
                return super().side_by_side

        executor.__class__ = AtTheClose
        return executor

    try:
        stopped_by = Sweep(run_settings(5), executor_factory=signalling).run().stopped_by
    except KeyboardInterrupt:  # (not up to pytest: it would end the whole session)
        stopped_by = "KeyboardInterrupt"  # the command ended 130
    study = load(url, "r")
    assert last_run(study.user_attrs)["trials"] == 3  # this run's, not the first run's 2
    assert finish_pending(study.user_attrs)  # its finish never ran
    assert cached_study(open_storage(url), "k", "auto", 5, wants_finish=True) is None
    # every trial ran and the record is written; the Ctrl-C, held meanwhile, is then passed on
    # to stop what follows (the finish), as one while the sweep closes its workers is
    assert stopped_by == "KeyboardInterrupt"
