import optuna
import pytest

from autotune.driver import Sweep, SweepSettings, study_setup
from autotune.driver.enumeration import features, is_enumerable
from autotune.driver.grid_sampler import GridBayesSampler
from autotune.driver.novelty import config_key
from autotune.driver.samplers import SamplerError, make_sampler, resolve_sampler
from autotune.space import Param, Space, load_space

HOPPER = {"type": "cuda", "max_shared_memory": 232448}


def test_auto_is_bo_for_discrete_spaces_bo_pareto_for_several_objectives_and_tpe_otherwise():
    assert resolve_sampler("auto", load_space("matmul")) == "bo"
    assert resolve_sampler("auto", load_space("train_step")) == "bo"
    assert resolve_sampler("auto", load_space("matmul"), n_objectives=2) == "bo-pareto"
    assert resolve_sampler("auto", load_space("faults"), n_objectives=2) == "tpe"
    assert resolve_sampler("auto", load_space("faults")) == "tpe"  # a float parameter
    assert resolve_sampler("auto", load_space("llm_projections")) == "tpe"  # 288 parameters
    assert not is_enumerable(load_space("llm_projections"))
    with pytest.raises(SamplerError, match="one objective"):
        make_sampler("bo", space=load_space("matmul"), n_objectives=2)


def test_the_default_portfolio_lists_and_featurises_the_space_once_for_both_members():
    space, problem = load_space("matmul"), {"M": 64, "N": 4096, "K": 4096}
    members = make_sampler("bo", space=space, problem=problem, device=HOPPER).members
    first, second = members["global"], members["local"]
    assert first._grid is second._grid and first._features is second._features
    configs = list(space.grid(problem, HOPPER))
    assert first._configs == configs
    assert (first._features == features(space, configs)).all()


def test_it_proposes_every_feasible_config_once_and_no_other():
    space = load_space("matmul")
    # small tiles, and K=60 bf16 rows are not 16-byte aligned for TMA: the tiled schedule only,
    # 80 configs (each ask fits a GP on all the trials told so far; without the dtype the
    # constraints over it are skipped and the persistent schedules made it 560, 74 s)
    problem = {"M": 16, "N": 64, "K": 60, "dtype": "bf16"}
    feasible = {config_key(c) for c in space.grid(problem, HOPPER)}
    sampler = GridBayesSampler(space, problem, HOPPER, seed=0)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    seen = []
    for _ in range(len(feasible)):
        trial = study.ask()
        config = space.sample(trial, problem, HOPPER)
        trial.set_user_attr("status", "ok")
        study.tell(trial, config["BLOCK_N"] * config["num_stages"] / config["BLOCK_M"])
        seen.append(config_key(config))
    assert len(set(seen)) == len(seen) == len(feasible) == sampler.feasible_configs
    assert set(seen) == feasible


def test_a_config_that_came_back_infeasible_is_not_proposed_again():
    space = Space("s", [Param("x", "pow2", low=1, high=8), Param("y", "bool")])
    sampler = GridBayesSampler(space, seed=1, n_startup_trials=2)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    seen = []
    for _ in range(8):
        trial = study.ask()
        config = space.sample(trial)
        trial.set_user_attr("status", "infeasible" if config["y"] else "ok")
        study.tell(trial, float(config["x"]))
        seen.append(config_key(config))
    assert len(set(seen)) == 8


def _tell(study, space, config, status, value=0.0):
    study.enqueue_trial(config)
    trial = study.ask()
    space.sample(trial)
    trial.set_user_attr("status", status)
    study.tell(trial, value)


@pytest.mark.parametrize("member", ["global", "local"])
@pytest.mark.parametrize("status", ["out_of_resources", "oom"])
def test_configs_that_dominate_a_resource_failure_wait_until_no_other_is_left(status, member):
    space = Space("s", [Param("tile", "pow2", low=16, high=128),
                        Param("stages", "int", low=1, high=4)])  # fmt: skip
    sampler = make_sampler("bo", space=space, seed=0).members[member]
    study = optuna.create_study(direction="maximize", sampler=sampler)
    _tell(study, space, {"tile": 16, "stages": 1}, "ok", 1.0)
    _tell(study, space, {"tile": 16, "stages": 2}, "ok", 2.0)
    _tell(study, space, {"tile": 32, "stages": 3}, status)  # so every tile >= 32, stages >= 3
    doomed = {(t, s) for t in (32, 64, 128) for s in (3, 4)} - {(32, 3)}
    proposed = []
    for _ in range(16 - 3):
        trial = study.ask()
        config = space.sample(trial)
        trial.set_user_attr("status", "ok")
        study.tell(trial, float(config["tile"] * config["stages"]))  # the model would go there
        proposed.append((config["tile"], config["stages"]))
    others = len(proposed) - len(doomed)
    assert not doomed & set(proposed[:others])
    assert set(proposed[others:]) == doomed  # proposed once nothing else is left


def test_other_failures_say_nothing_of_the_configs_that_dominate_them():
    space = Space("s", [Param("tile", "pow2", low=16, high=64)])
    sampler = GridBayesSampler(space, seed=0, n_startup_trials=0, failures="classifier")
    study = optuna.create_study(direction="maximize", sampler=sampler)
    _tell(study, space, {"tile": 16}, "ok", 1.0)
    _tell(study, space, {"tile": 32}, "compile_error")
    seen = sampler._observations(study)
    assert seen.failed and not seen.short_of_resources


@pytest.mark.parametrize("workers", [1, 3])
def test_the_driver_asks_for_the_next_config_while_trials_run(monkeypatch, workers):
    """The pipeline: when trial n+1 is asked for, the trials in flight are still running (not
    told), so the sampler sees them as pending; with every slot busy it asks one ahead."""
    running_at_ask = []

    class Watching(optuna.samplers.RandomSampler):
        def before_trial(self, study, trial):
            running = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
            running_at_ask.append(len(running) - 1)  # the trial being asked for is running

    monkeypatch.setattr(study_setup, "make_sampler", lambda *a, **k: Watching(0))
    space = Space("s", [Param("fault", "categorical", choices=["none"]),
                        Param("score", "float", low=0.0, high=1.0)])  # fmt: skip
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        n_trials=8, seed=0, storage="memory", executor="inline", workers=workers,
        device={"type": "cpu"},
    )  # fmt: skip
    summary = Sweep(settings).run()
    assert summary.trials_run == 8
    # each ask finds every slot's trial in flight, plus none ahead (one is asked ahead at most)
    assert running_at_ask == [min(i, workers) for i in range(len(running_at_ask))]


def test_a_config_whose_trial_was_stopped_from_outside_is_proposed_again():
    # a trial stopped by the budget's end, Ctrl-C or a killed driver (told FAIL) measured
    # nothing: its config counted as visited, and a resume never measured it
    space = Space("s", [Param("x", "pow2", low=1, high=8)])
    sampler = GridBayesSampler(space, seed=1, n_startup_trials=2)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    stopped = study.ask()
    stopped_x = space.sample(stopped, {}, {})["x"]
    study.tell(stopped, state=optuna.trial.TrialState.FAIL)
    seen = []
    for _ in range(4):
        assert not sampler.is_exhausted(study)  # the stopped config is left to measure
        trial = study.ask()
        config = space.sample(trial, {}, {})
        trial.set_user_attr("status", "ok")
        study.tell(trial, float(config["x"]))
        seen.append(config["x"])
    assert sorted(seen) == [1, 2, 4, 8] and stopped_x in seen


#: three scores, one of two delays: a 2-s trial is the one a short budget stops mid-way
SLOW_OR_NOT = Space("d", [Param("fault", "categorical", choices=["none"]),
                          Param("score", "categorical", choices=[0.1, 0.2, 0.9]),
                          Param("delay", "categorical", choices=[0.0, 2.0])])  # fmt: skip


def _slow_or_not(url: str, **settings) -> SweepSettings:
    return SweepSettings(
        workload="faults", problem={}, space=SLOW_OR_NOT, objectives={"score": "maximize"},
        storage=url, study_name="s", executor="inline", warm_start="off", seed=0, **settings,
    )  # fmt: skip


def test_a_resume_measures_the_untuned_default_whose_trial_was_stopped(tmp_path):
    """The budget's end stopped trial 0, the untuned default, mid-measurement: the resume
    queues it again, so the answer is never worse than it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    default = {"fault": "none", "score": 0.9, "delay": 2.0}
    first = Sweep(_slow_or_not(url, baseline=default, n_trials=None, time_budget_s=0.5)).run()
    assert first.study.trials[0].user_attrs["status"] == "interrupted"
    resumed = Sweep(_slow_or_not(url, baseline=default, n_trials=4)).run().study
    defaults = [t for t in resumed.trials if t.user_attrs.get("baseline")]
    assert [t.user_attrs["status"] for t in defaults] == ["interrupted", "ok"]
    assert resumed.best_value == 0.9


def test_optunas_grid_measures_a_point_whose_trial_was_stopped_on_resume(tmp_path):
    """--sampler grid: the budget's end stopped a grid point's trial mid-measurement; the
    resume measures it (Optuna's grid counts a FAIL trial's point as visited, and its grid
    index follows a shuffle by the seed, which moves on at a resume)."""
    url = f"sqlite:///{tmp_path / 'g.db'}"
    first = Sweep(_slow_or_not(url, sampler="grid", n_trials=None, time_budget_s=3.0)).run()
    stopped = [t.params for t in first.study.trials
               if t.user_attrs.get("status") == "interrupted"]  # fmt: skip
    assert stopped, "the budget stopped no trial: nothing to resume"
    resumed = Sweep(_slow_or_not(url, sampler="grid", n_trials=None)).run()
    assert resumed.stopped_by == "every config tried"
    measured = [t.params for t in resumed.study.trials if t.user_attrs.get("status") == "ok"]
    assert all(params in measured for params in stopped)
    assert len({tuple(sorted(p.items())) for p in measured}) == 6  # the whole grid
    assert len(measured) == 6  # and none twice
    assert resumed.study.best_value == 0.9


@pytest.mark.parametrize("params", [
    [Param("n", "int", low=1, high=10**9)],
    [Param(f"p{i}", "int", low=1, high=8) for i in range(41)],
])  # fmt: skip
def test_a_grid_too_large_to_list_is_refused_before_it_fills_the_memory(params):
    # Optuna's grid sampler listed every config: a MemoryError traceback, or the OOM killer
    with pytest.raises(SamplerError, match=r"this space has .* \(more than 1,000,000\)"):
        make_sampler("grid", seed=0, space=Space("s", params))
    assert make_sampler("grid", seed=0, space=Space("s", [Param("n", "int", low=1, high=1000)]))
