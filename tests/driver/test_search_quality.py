"""Search strategies over recorded H200 landscapes (REPLAY, benchmarks/search), under the
benchmark's one set of rules. The figures in the README come from benchmarks/search_quality.py
with 30 seeds; these tests replay fewer."""

import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT))  # benchmarks.*; last: see tests/driver/test_grouped.py

from benchmarks.search.landscapes import DATA, Landscape, available, by_name  # noqa: E402
from benchmarks.search.strategies import STOCK_TPE, STRATEGIES  # noqa: E402

SEEDS = range(10)


def mean_at(strategy: str, landscape: Landscape, trials: int) -> float:
    curves = [STRATEGIES[strategy](landscape, s, trials) for s in SEEDS]
    return statistics.mean(c[trials - 1] for c in curves) / landscape.optimum()


RAW = by_name("raw_8192")
# the same raw table searched the constrained way: the workload's space with its resource
# model, so its feasible set is the part of the raw grid the constraints allow
CONSTRAINED = Landscape(
    "raw_8192_constrained", "matmul 8192^3, constrained", RAW.table, RAW.params, "tflops",
    str(DATA / "matmul_tiled_grid.yaml"), RAW.problem, "development",
)  # fmt: skip


@pytest.mark.parametrize("landscape", [RAW, CONSTRAINED], ids=["raw", "constrained"])
def test_the_default_beats_random_search_on_a_raw_table_searched_raw_and_constrained(landscape):
    assert len(landscape.feasible()) < (960 if landscape is CONSTRAINED else 961)
    default = mean_at("autotune default", landscape, 30)
    random_search = mean_at("random (no repeats)", landscape, 30)
    assert default > random_search + 0.02


@pytest.mark.parametrize("key", ["4096", "decode", "train_step", "raw_mlp"])
def test_the_default_is_not_below_stock_tpe_at_50_trials(key):
    landscape = by_name(key)
    assert mean_at("autotune default", landscape, 50) >= mean_at(STOCK_TPE, landscape, 50)


def test_every_landscape_is_complete_and_each_split_is_named():
    for landscape in available():
        feasible = landscape.feasible()  # raises if a feasible config was not recorded
        assert len(feasible) >= 100 and landscape.split in ("development", "held-out")
        assert landscape.first_config() in feasible


def test_raw_landscapes_hold_the_failures_and_cliffs_constraints_remove():
    frame = RAW.frame
    assert len(frame) == 960 and (frame["status"] == "out_of_resources").sum() > 50
    ok = frame[frame["status"] == "ok"]
    assert ok["tflops"].min() < 0.1 * ok["tflops"].max()  # register spills: a cliff


@pytest.mark.parametrize(
    "strategy",
    ["kernel_tuner genetic_algorithm", "optuna TPE univariate", "autotune gp-ei (earlier default)"],
)
def test_peers_run_under_the_same_rules(strategy):
    landscape = by_name("decode")
    curve = STRATEGIES[strategy](landscape, 0, 20)
    first = landscape.lookup(landscape.first_config())[1]
    assert len(curve) == 20 and curve[0] == first  # the same trial 0 for everybody
    assert curve == sorted(curve) and curve[-1] <= landscape.optimum()
