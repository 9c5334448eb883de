from pathlib import Path

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings, study_setup
from autotune.driver.study_setup import StudyMismatch
from autotune.driver.warm_start import similarity, top_configs
from autotune.objectives.replay import load_table, space_from_table

TABLE = str(Path(__file__).parents[2] / "benchmarks" / "data" / "matmul_4096_h200.csv")
PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]


def replay_settings(url: str, name: str, **overrides) -> SweepSettings:
    base = dict(
        workload="replay",
        problem={"table": TABLE, "params": PARAMS, "metric": "tflops"},
        space=space_from_table(load_table(TABLE), PARAMS, TABLE),
        objectives={"tflops": "maximize"},
        seed=0,
        n_trials=30,
        storage=url,
        study_name=name,
        executor="inline",
    )
    return SweepSettings(**(base | overrides))


def test_similarity_of_problems():
    assert similarity({"M": 64, "N": 4096}, {"M": 64, "N": 4096}) == 1.0
    assert similarity({"M": 64, "N": 4096}, {"M": 128, "N": 2048}) == 0.25
    assert similarity({"M": 64}, {"M": 64, "K": 1}) == 0.0


def test_a_named_warm_start_begins_with_the_sources_best_configs(sqlite_url):
    source = Sweep(replay_settings(sqlite_url, "source")).run().study
    queued = study_setup.WARM_START_CONFIGS
    expected = top_configs(source, "maximize", queued)
    target = (
        Sweep(replay_settings(sqlite_url, "target", n_trials=5, seed=7, warm_start="source"))
        .run()
        .study
    )
    assert [t.params for t in target.trials[:queued]] == expected
    assert all(t.user_attrs["warm_start"] == "source" for t in target.trials[:queued])
    assert target.user_attrs["warm_start"] == {
        "source": "source", "similarity": 1.0, "configs": queued,
    }  # fmt: skip
    source_best = max(t.values[0] for t in source.trials if t.user_attrs["status"] == "ok")
    target_best = max(t.values[0] for t in target.trials if t.user_attrs["status"] == "ok")
    assert target_best >= source_best  # its best config, measured again by replay


def test_auto_picks_a_related_sweep_and_off_does_not(sqlite_url):
    Sweep(replay_settings(sqlite_url, "first", n_trials=10)).run()
    auto = Sweep(replay_settings(sqlite_url, "second", n_trials=3)).run().study
    assert auto.user_attrs["warm_start"]["source"] == "first"
    off = Sweep(replay_settings(sqlite_url, "third", n_trials=3, warm_start="off")).run().study
    assert "warm_start" not in off.user_attrs


def test_unknown_source_is_a_one_line_error_and_stores_nothing(sqlite_url):
    with pytest.raises(StudyMismatch, match="no study named 'nope'"):
        Sweep(replay_settings(sqlite_url, "x", warm_start="nope")).run()
    assert optuna.get_all_study_names(sqlite_url) == []  # no empty study left to resume


def test_a_source_of_another_objective_or_workload_is_refused(sqlite_url):
    Sweep(replay_settings(sqlite_url, "fast", n_trials=4)).run()
    slow = replay_settings(sqlite_url, "slow", objectives={"tflops": "minimize"}, warm_start="fast")
    with pytest.raises(StudyMismatch, match="it maximizes tflops; this sweep minimizes tflops"):
        Sweep(slow).run()
    other = replay_settings(sqlite_url, "other", workload="faults", warm_start="fast")
    with pytest.raises(StudyMismatch, match="it holds a replay sweep; this one tunes faults"):
        Sweep(other).run()
    assert optuna.get_all_study_names(sqlite_url) == ["fast"]


def test_auto_passes_over_a_sweep_of_another_objective(sqlite_url):
    Sweep(replay_settings(sqlite_url, "fast", n_trials=4)).run()
    slow = Sweep(replay_settings(sqlite_url, "slow", n_trials=2,
                                 objectives={"tflops": "minimize"})).run().study  # fmt: skip
    assert "warm_start" not in slow.user_attrs
