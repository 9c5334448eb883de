"""Every strategy over the committed H200 landscape (replay); the default must not fall behind
off-the-shelf Optuna TPE. The figures come from benchmarks/search_quality.py."""

import importlib.util
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location(
    "search_quality", ROOT / "benchmarks/search_quality.py"
)
search_quality = importlib.util.module_from_spec(spec)
sys.modules["search_quality"] = search_quality  # dataclasses look their module up there
spec.loader.exec_module(search_quality)

SEEDS = range(10)
TRIALS = 50


def score(strategy: str, landscape) -> tuple[float, dict]:
    """Mean fraction of the optimum over the 10-, 20- and 50-trial marks, and the row."""
    curves = [search_quality.STRATEGIES[strategy](landscape, s, TRIALS) for s in SEEDS]
    row = search_quality.summarise(curves, landscape.optimum())
    return statistics.mean(row[n][0] for n in (10, 20, 50)), row


@pytest.fixture(scope="module", params=search_quality.LANDSCAPES, ids=search_quality.short_name)
def landscape(request):
    return request.param


def test_default_strategy_does_not_fall_behind_plain_tpe(landscape):
    default, _ = score("autotune (default)", landscape)
    plain, _ = score("optuna-tpe", landscape)
    random_search, _ = score("random", landscape)
    assert default >= plain
    assert plain > random_search


def test_default_strategy_reaches_the_issue_targets_within_50_trials(landscape):
    """Issue 3's targets: mean >= 0.98 of the optimum and worst seed >= 0.95 within 50."""
    _, row = score("autotune (default)", landscape)
    mean, worst = row[50]
    assert mean >= 0.98 and worst >= 0.95


@pytest.mark.parametrize("sampler", ["tpe", "bo", "random", "gp", "cmaes", "grid"])
def test_every_autotune_sampler_runs_over_the_landscape(sampler):
    landscape = search_quality.LANDSCAPES[1]
    curve = search_quality.autotune_sampler(sampler)(landscape, 0, 20)
    assert len(curve) == 20
    assert 0.3 < curve[-1] / landscape.optimum() <= 1.0
