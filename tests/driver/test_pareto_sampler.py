"""Two objectives on the recorded training-step landscape (REPLAY): ParEGO's front against
random search's, by hypervolume."""

import statistics
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*; last, so that
# the repository's kernels/ never stands in for the installed `kernels` package

from benchmarks.search.multi_objective import run  # noqa: E402


def test_parego_covers_more_of_the_front_than_random_search_at_30_trials():
    parego = [run("autotune ParEGO (bo-pareto)", s, 30) for s in range(6)]
    random_search = [run("random (no repeats)", s, 30) for s in range(6)]
    assert statistics.mean(parego) > statistics.mean(random_search) + 0.01
    assert all(0 < v <= 1.0 for v in parego)
