import random

from autotune.driver import Sweep, SweepSettings
from autotune.driver.novelty import config_key, unvisited_config
from autotune.space import Param, Space


def small_space() -> Space:
    return Space(
        "small",
        [
            Param("x", "pow2", low=16, high=256),
            Param("score", "categorical", choices=[0.1, 0.2, 0.3]),
        ],
    )


def test_unvisited_config_prefers_a_neighbour_of_the_best():
    space = small_space()
    best = {"x": 64, "score": 0.2}
    neighbour = unvisited_config(space, best, {config_key(best)}, random.Random(1))
    moved = [k for k in best if neighbour[k] != best[k]]
    assert len(moved) == 1
    name = moved[0]
    values = space[name].values()
    assert abs(values.index(neighbour[name]) - values.index(best[name])) == 1


def test_unvisited_config_respects_constraints_and_gives_up_when_all_are_known():
    space = Space("c", [Param("x", "pow2", low=16, high=64)], constraints_from={"c": "x != 32"})
    assert unvisited_config(space, {"x": 16}, {config_key({"x": 16})}, random.Random(0)) == {
        "x": 64
    }
    every = {config_key({"x": v}) for v in (16, 32, 64)}
    assert unvisited_config(space, {"x": 16}, every, random.Random(0)) is None


def test_repeats_are_answered_from_the_study_and_cost_no_trial():
    settings = SweepSettings(
        workload="faults",
        problem={},
        space=small_space(),
        objectives={"score": "maximize"},
        sampler="tpe",
        seed=0,
        n_trials=12,
        storage="memory",
        executor="inline",
    )
    summary = Sweep(settings).run()
    trials = summary.study.trials
    launched = [t for t in trials if "repeat_of" not in t.user_attrs]
    repeats = [t for t in trials if "repeat_of" in t.user_attrs]
    assert len(launched) == 12
    assert len({config_key(t.params) for t in launched}) == 12  # every launch a new config
    for t in repeats:
        original = trials[t.user_attrs["repeat_of"]]
        assert t.params == original.params and t.values == original.values
        assert t.user_attrs["duration_s"] == 0.0
