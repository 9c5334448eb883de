"""The sampler registry and auto's policy."""

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.samplers import (
    SAMPLERS,
    SamplerError,
    SamplerSpec,
    is_exhausted,
    make_sampler,
    register,
    registered,
)
from autotune.driver.samplers.policy import AUTO_RULES
from autotune.space import Param, Space


def test_every_registered_sampler_builds_for_a_discrete_space():
    space = Space("s", [Param("x", "pow2", low=1, high=8), Param("y", "bool")])
    for name, spec in registered().items():
        objectives = 2 if name in ("bo-pareto", "nsga2") else 1
        sampler = make_sampler(name, seed=0, space=space, n_objectives=objectives)
        assert isinstance(sampler, optuna.samplers.BaseSampler), name
        assert spec.summary
    assert SAMPLERS[0] == "auto" and set(AUTO_RULES) <= set(SAMPLERS)


def test_a_sampler_that_cannot_serve_says_why_and_an_unknown_one_lists_the_choices():
    with pytest.raises(SamplerError, match="bo-pareto: it is for several objectives"):
        make_sampler("bo-pareto", space=Space("s", [Param("x", "bool")]))
    with pytest.raises(SamplerError, match="unknown sampler 'nope'; choose one of auto, bo"):
        make_sampler("nope")


def test_a_new_sampler_is_one_registration_and_the_sweep_asks_it_whether_it_is_done():
    class OneShot(optuna.samplers.RandomSampler):
        def is_exhausted(self, study):
            return len(study.trials) >= 2

    register(SamplerSpec("one-shot-test", lambda ctx: OneShot(seed=ctx.seed), "test only"))
    assert is_exhausted(OneShot(), optuna.create_study()) is False
    space = Space("s", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "float", low=0.0, high=1.0)])  # fmt: skip
    summary = Sweep(SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="one-shot-test", n_trials=10, seed=0, storage="memory", executor="inline",
        device={"type": "cpu"},
    )).run()  # fmt: skip
    assert summary.stopped_by == "every config tried"
    assert len(summary.study.trials) == 2


def test_bo_stops_the_sweep_once_every_feasible_config_was_tried():
    space = Space("s", [Param("fault", "categorical", choices=["none"]),
                        Param("x", "pow2", low=1, high=8)])  # fmt: skip
    summary = Sweep(SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        n_trials=50, seed=0, storage="memory", executor="inline", device={"type": "cpu"},
    )).run()  # fmt: skip
    assert summary.stopped_by in ("every config tried", "no unvisited config left")
    assert summary.trials_total == 4


def test_cmaes_says_which_parameters_it_draws_at_random(tmp_path):
    # `--sampler cmaes` on matmul searched num_stages alone, the tiles drawn at random by
    # Optuna's independent sampler, with its warning turned off: nothing said so
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "matmul", "--sampler", "cmaes",
         "--trials", "1", "--finish-top", "0", "--storage", "memory"],
        capture_output=True, text=True, timeout=240, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (
        "note: cmaes searches the int and float parameters (num_stages); the other 8 "
        "(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, ...) are drawn at random"
    ) in done.stderr


def test_cmaes_s_note_of_one_parameter_drawn_at_random_reads_as_one():
    # 'the other 1 (a) are drawn at random'
    from autotune.driver.samplers import sampler_note
    from autotune.space import Param, Space

    x = Param("x", "float", low=0.0, high=1.0)
    one = Space("s", [Param("a", "categorical", choices=[1, 2]), x])
    two = Space("s", [Param("a", "categorical", choices=[1, 2]), Param("b", "bool"), x])
    assert sampler_note("cmaes", one) == (
        "cmaes searches the int and float parameters (x); the other 1 (a) is drawn at random"
    )
    assert sampler_note("cmaes", two).endswith("; the other 2 (a, b) are drawn at random")
