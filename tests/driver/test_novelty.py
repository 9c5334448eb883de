import random

from autotune.driver import Sweep, SweepSettings
from autotune.driver.novelty import config_key, unvisited_config
from autotune.space import Expression, Param, Space


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


def test_a_float_active_in_some_configs_gives_an_unvisited_config_at_a_fresh_value():
    # steering gave up at the first active float: with the discrete configs measured, the
    # space was taken as measured completely
    space = Space(
        "conditional",
        [
            Param("opt", "categorical", choices=["sgd", "adam", "lion"]),
            Param(
                "lr", "float", low=1e-4, high=0.1, log=True, condition=Expression("opt == 'adam'")
            ),
        ],
    )
    seen = [{"opt": "sgd"}, {"opt": "lion"}, {"opt": "adam", "lr": 0.01}]
    visited = {config_key(c) for c in seen}
    for seed in range(5):
        steer = unvisited_config(space, seen[2], visited, random.Random(seed))
        assert steer is not None and config_key(steer) not in visited
        assert steer["opt"] == "adam" and 1e-4 <= steer["lr"] <= 0.1


def test_a_float_fixed_by_its_bounds_gives_no_unvisited_config_once_measured():
    space = Space(
        "fixed", [Param("x", "pow2", low=16, high=32), Param("s", "float", low=0.5, high=0.5)]
    )
    visited = {config_key({"x": x, "s": 0.5}) for x in (16, 32)}
    assert unvisited_config(space, {"x": 16, "s": 0.5}, visited, random.Random(0)) is None


def test_a_float_of_the_best_config_moves_where_the_constraints_forbid_every_other_move():
    # with every discrete neighbour forbidden, only random draws were left: 1 in 1000 passes
    ints = [Param(name, "int", low=0, high=9) for name in "ABCD"]
    space = Space(
        "thin",
        [*ints, Param("x", "float", low=0.0, high=1.0)],
        constraints_from={"thin": "A == B and B == C and C == D"},
    )
    best = {"A": 3, "B": 3, "C": 3, "D": 3, "x": 0.25}
    for seed in range(5):
        steer = unvisited_config(space, best, {config_key(best)}, random.Random(seed))
        assert steer is not None and steer["x"] != 0.25
        assert [steer[n] for n in "ABCD"] == [3, 3, 3, 3]


def test_a_space_too_large_to_list_gives_an_unvisited_config_its_draws_miss():
    # 10 configs of 10**6 (a replay table's rows of a large product, say): the 200 random
    # draws missed them, and steering gave up (the sampler's proposals missed them as often)
    space = Space("thin", [Param(n, "int", low=0, high=9) for n in "abcdef"],
                  constraints_from={"ab": "a == b", "bc": "b == c", "cd": "c == d",
                                    "de": "d == e", "ef": "e == f"})  # fmt: skip
    visited = {config_key(dict.fromkeys("abcdef", v)) for v in range(9)}
    steer = unvisited_config(space, dict.fromkeys("abcdef", 0), visited, random.Random(0))
    assert steer == dict.fromkeys("abcdef", 9)
    visited.add(config_key(steer))
    assert unvisited_config(space, steer, visited, random.Random(0)) is None
