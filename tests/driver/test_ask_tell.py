"""The in-process search's rules: repeats and constraint rejections cost no measurement."""

import optuna

from autotune.driver.ask_tell import STUCK, AskTellSearch
from autotune.driver.novelty import config_key
from autotune.failures import TrialStatus
from autotune.space import Param, Space


def test_a_sampler_that_repeats_itself_still_measures_each_config_once():
    space = Space("s", [Param("x", "pow2", low=1, high=16)])
    measured = []

    class Repeating(optuna.samplers.RandomSampler):
        def sample_independent(self, study, trial, name, distribution):
            return 4

    search = AskTellSearch(space, lambda c: measured.append(c) or float(c["x"]),
                           sampler=Repeating(seed=0), seed=0)  # fmt: skip
    for _ in range(5):
        search.step()
    assert search.measurements == len(measured) == 5  # repeats answered; after STUCK, a draw
    assert len({m["x"] for m in measured}) == 5 and search.best_config == {"x": 16}
    assert len(search.study.trials) >= 5 + 3 * STUCK  # the repeats were told, not measured


def test_a_failed_measurement_keeps_its_failure_state_for_the_sampler():
    space = Space("s", [Param("x", "pow2", low=1, high=4)])
    outcome = {1: 1.0, 2: TrialStatus.OUT_OF_RESOURCES, 4: None}
    search = AskTellSearch(space, lambda c: outcome[c["x"]], sampler="random", seed=0)
    for _ in range(3):
        search.step()
    told = {t.params["x"]: t.user_attrs["status"] for t in search.study.trials}
    assert told == {1: "ok", 2: "out_of_resources", 4: "failed"}
    assert search.best_config == {"x": 1} and search.seen[config_key({"x": 2})] is None
