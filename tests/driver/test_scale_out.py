"""Many trials in flight: the same trials through every executor, concurrent writers on one
study, stale trials of dead drivers, N in flight in replay."""

import os
import subprocess
import sys
import uuid
from collections import Counter
from dataclasses import replace
from pathlib import Path

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.liveness import reap_stale_trials
from autotune.driver.trial_attrs import DRIVER, WORKER, is_launched, trial_status
from autotune.space import load_space
from autotune.storage import open_storage

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]
H200 = {"type": "cuda", "name": "NVIDIA H200", "max_shared_memory": 232448}


def replay(executor: str, **overrides) -> SweepSettings:
    problem = {"table": str(DATA / "matmul_4096_h200.csv"), "params": PARAMS,
               "metric": "tflops", "M": 4096, "N": 4096, "K": 4096}  # fmt: skip
    base = dict(
        workload="replay", problem=problem, space=load_space(str(DATA / "matmul_tiled_grid.yaml")),
        objectives={"tflops": "maximize"}, n_trials=12, seed=0, storage="memory",
        executor=executor, workers=1, device=H200,
    )  # fmt: skip
    return SweepSettings(**(base | overrides))


def trials_of(study: optuna.Study) -> list[tuple]:
    return [(t.number, t.params, t.values, trial_status(t)) for t in study.trials]


def test_a_replay_sweep_runs_the_same_trials_inline_and_in_local_workers():
    inline = Sweep(replay("inline")).run().study
    local = Sweep(replay("local")).run().study
    assert trials_of(local) == trials_of(inline)
    assert {t.user_attrs[WORKER] for t in local.trials} == {"local worker 0"}


def test_a_training_step_sweep_runs_the_same_configs_inline_and_in_local_workers(
    train_step_settings,
):
    runs = {e: Sweep(train_step_settings(e)).run().study for e in ("inline", "local")}
    configs = {e: [t.params for t in s.trials] for e, s in runs.items()}
    assert configs["local"] == configs["inline"] and len(configs["inline"]) == 5
    for study in runs.values():  # measured for real: throughput differs run to run
        assert all(trial_status(t) == "ok" and t.values[0] > 0 for t in study.trials)


def check_none_lost_or_duplicated(url: str, name: str, budget: int, drivers: int = 1) -> None:
    study = optuna.load_study(study_name=name, storage=url)
    states = Counter(t.state.name for t in study.trials)
    # nothing left running; a WAITING trial is a config queued for the next run (a steer
    # after a repeat), not a trial that ran
    assert states["RUNNING"] == 0, states
    launched = [t for t in study.trials if is_launched(t)]
    # several drivers check the budget apart: each may start one trial the other counted
    assert budget <= len(launched) <= budget + drivers - 1
    numbers = [t.number for t in study.trials]
    assert numbers == list(range(len(numbers)))  # every trial recorded once
    configs = Counter(tuple(sorted(t.params.items())) for t in launched)
    assert max(configs.values()) == 1  # no config measured twice
    assert all(trial_status(t) == "ok" and t.values for t in launched)


STORAGES = ["sqlite"] + (["postgresql"] if os.environ.get("AUTOTUNE_TEST_POSTGRES_URL") else [])


def storage_url(kind: str, tmp_path: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'many.db'}"
    return os.environ["AUTOTUNE_TEST_POSTGRES_URL"]


@pytest.mark.parametrize("kind", STORAGES)
def test_two_workers_60_trials_none_lost_or_duplicated(tmp_path, kind):
    url = storage_url(kind, tmp_path)
    name = f"workers-{uuid.uuid4().hex[:12]}"  # a PostgreSQL database outlives tmp_path
    settings = replay("local", workers=2, n_trials=60, storage=url, study_name=name)
    summary = Sweep(settings).run()
    assert summary.trials_run == 60 and summary.in_flight == 2
    check_none_lost_or_duplicated(url, name, 60)
    study = optuna.load_study(study_name=name, storage=url)
    assert {t.user_attrs[WORKER] for t in study.trials} == {"local worker 0", "local worker 1"}


@pytest.mark.parametrize("kind", STORAGES)
def test_four_drivers_side_by_side_on_one_study_40_trials(tmp_path, kind):
    """Four sweeps started at once on one study (as four machines would), 40 trials: none
    lost or duplicated. TPE, whose asks take milliseconds, keeps the storage busier than the
    default's GP would (and the test shorter)."""
    drivers, budget = 4, 40
    url = storage_url(kind, tmp_path)
    name = f"pair-{uuid.uuid4().hex[:12]}"
    command = [
        sys.executable, "-m", "autotune.cli", "tune", "--replay",
        str(DATA / "matmul_4096_h200.csv"), "--params", ",".join(PARAMS), "--metric", "tflops",
        "--trials", str(budget), "--storage", url, "--study", name, "--executor", "inline",
        "--seed", "0", "--warm-start", "off", "--sampler", "tpe",
    ]  # fmt: skip
    # the others join once the study exists (they resume it, as other machines would)
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(drivers)]  # fmt: skip
    outputs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0] * drivers, [o[1][-2000:] for o in outputs]
    check_none_lost_or_duplicated(url, name, budget, drivers=drivers)
    study = optuna.load_study(study_name=name, storage=url)
    pids = Counter(t.user_attrs[DRIVER]["pid"] for t in study.trials if is_launched(t))
    # every driver did its share
    assert len(pids) == drivers and min(pids.values()) >= budget // drivers // 5


def test_a_dead_drivers_running_trial_is_reaped_a_live_ones_is_not(tmp_path):
    url = f"sqlite:///{tmp_path / 'stale.db'}"
    storage = open_storage(url)
    study = optuna.create_study(storage=storage, study_name="s")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    host = os.uname().nodename
    orphan, alive = study.ask(), study.ask()
    orphan.set_user_attr(DRIVER, {"host": host, "pid": int(dead.stdout)})
    alive.set_user_attr(DRIVER, {"host": host, "pid": os.getppid()})  # a live process
    assert reap_stale_trials(study, storage) == [orphan.number]
    states = {t.number: (t.state.name, trial_status(t)) for t in study.trials}
    assert states == {0: ("FAIL", "interrupted"), 1: ("RUNNING", "running")}


def test_a_running_trial_that_never_named_its_driver_does_not_count_against_the_budget(tmp_path):
    """A driver that lost the storage between creating a trial and naming itself leaves a
    RUNNING trial with no driver; a sweep resumed at once still runs its full budget."""
    url = f"sqlite:///{tmp_path / 'orphan.db'}"
    settings = replay("inline", storage=url, n_trials=3, study_name="orphan")
    Sweep(settings).run()
    optuna.load_study(study_name=settings.study_name, storage=url).ask()  # the orphan
    Sweep(replace(settings, n_trials=6)).run()
    study = optuna.load_study(study_name=settings.study_name, storage=url)
    assert sum(1 for t in study.trials if is_launched(t)) == 6


def test_replay_with_four_in_flight_finds_the_optimum_like_one_in_flight():
    optimum = 730.6  # the recorded grid's best (benchmarks/data/README.md)
    fractions = {}
    for workers in (1, 4):
        best = [
            Sweep(replay("inline", workers=workers, n_trials=50, seed=seed)).run().best[0].values[0]
            for seed in range(3)
        ]
        fractions[workers] = sum(b / optimum for b in best) / len(best)
    assert fractions[4] >= fractions[1] - 0.01 and fractions[4] > 0.98
