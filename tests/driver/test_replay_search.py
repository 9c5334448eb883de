"""The driver over replay of a grid recorded on an H200 (benchmarks/data, see its README)."""

import statistics
from pathlib import Path

import pytest

from autotune.driver import Sweep, SweepSettings, trials_frame
from autotune.objectives.replay import load_table, space_from_table

TABLE = str(Path(__file__).parents[2] / "benchmarks" / "data" / "matmul_4096_h200.csv")
PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]


def replay_sweep(sampler: str, seed: int, trials: int) -> Sweep:
    return Sweep(
        SweepSettings(
            workload="replay",
            problem={"table": TABLE, "params": PARAMS, "metric": "tflops"},
            space=space_from_table(load_table(TABLE), PARAMS, TABLE),
            objectives={"tflops": "maximize"},
            sampler=sampler,
            seed=seed,
            n_trials=trials,
            storage="memory",
            executor="inline",
        )
    )


def fraction_of_optimum(sampler: str, seed: int, trials: int) -> float:
    summary = replay_sweep(sampler, seed, trials).run()
    return summary.best[0].values[0] / load_table(TABLE)["tflops"].max()


def test_recorded_table_is_a_real_h200_grid():
    table = load_table(TABLE)
    assert len(table) >= 500
    assert set(table["status"]) == {"ok"}
    assert table["telemetry.sm_clock_mhz"].between(300, 2100).all()
    assert 0.85 < table["ratio_to_cublas"].max() < 1.1
    assert "interleaved" in table["timing_protocol"].iloc[0]


def test_the_default_and_seeded_tpe_beat_random_search_without_repeats():
    seeds = range(10)
    default = [fraction_of_optimum("auto", seed, 30) for seed in seeds]
    tpe = [fraction_of_optimum("tpe", seed, 30) for seed in seeds]
    random = [fraction_of_optimum("random", seed, 30) for seed in seeds]
    assert statistics.mean(default) > statistics.mean(random) + 0.03
    assert statistics.mean(tpe) > statistics.mean(random) + 0.01
    assert fraction_of_optimum("tpe", 3, 30) == tpe[3]  # the same seed, the same answer


def test_absent_configs_cost_no_trial():
    # the table holds 784 of its columns' 960 configs: its space keeps to them, so a config
    # it lacks is never launched (it was launched and came back infeasible before)
    frame = trials_frame(replay_sweep("random", 0, 20).run().study)
    assert (frame["status"] == "ok").sum() == 20
    assert set(frame["status"]) == {"ok"}
    assert frame["m.replay"].dropna().all()


@pytest.mark.parametrize("sampler", ["gp", "cmaes"])
def test_other_samplers_search_the_recorded_table(sampler):
    assert fraction_of_optimum(sampler, 0, 15) > 0.5
