"""The Ray Tune searcher's suggest/on_trial_complete called directly (no Ray cluster)."""

import os
import time

import optuna
import pytest

from autotune.space import Param, Space

pytest.importorskip("ray.tune")
from autotune.integrations.ray_tune import AutotuneSearcher  # noqa: E402


def _searcher(choices: list[int], sampler: str = "auto") -> AutotuneSearcher:
    space = Space("tiny", [Param("a", "categorical", choices=choices)])
    return AutotuneSearcher(space, metric="m", mode="max", seed=0, sampler=sampler)


def test_suggest_waits_while_the_configs_left_run_and_finishes_once_all_are_measured():
    searcher = _searcher([1, 2])
    first, second = searcher.suggest("t1"), searcher.suggest("t2")
    assert {first["a"], second["a"]} == {1, 2}

    started = time.perf_counter()
    assert searcher.suggest("t3") is None  # both configs run in Tune: ask again later
    assert time.perf_counter() - started < 1.0  # was minutes: 10,000 rejected trials
    assert len(searcher.study.trials) == 2  # no junk trial per rejection

    searcher.on_trial_complete("t1", {"m": 1.0})
    assert searcher.suggest("t4") is None  # the other config still runs
    searcher.on_trial_complete("t2", {"m": 2.0})
    assert searcher.suggest("t5") == "FINISHED"
    states = [t.state for t in searcher.study.trials]
    assert states == [optuna.trial.TrialState.COMPLETE] * 2


def test_suggest_serves_every_config_once_while_all_of_them_run():
    searcher = _searcher(list(range(8)), sampler="tpe")  # TPE re-proposes running configs
    configs = [searcher.suggest(f"t{i}") for i in range(8)]
    assert sorted(c["a"] for c in configs) == list(range(8))
    assert searcher.suggest("t8") is None
    trials = searcher.study.trials
    running = [t for t in trials if t.state is optuna.trial.TrialState.RUNNING]
    assert len(running) == 8  # Tune's eight trials; no other trial left open
    assert len(trials) < 16  # a pick of a running config is steered to one left


def test_suggest_without_a_metric_and_mode_says_so_rather_than_wait_for_ever():
    # a Tuner without param_space never calls set_search_properties: its TuneConfig's metric
    # and mode never reach the searcher, and a None from suggest had Tune wait for ever
    searcher = AutotuneSearcher(Space("tiny", [Param("a", "categorical", choices=[1, 2])]))
    with pytest.raises(ValueError, match="no metric and mode: pass metric= and mode="):
        searcher.suggest("t1")
    assert searcher.set_search_properties("m", "max", {"a": 1})  # Tune with a param_space
    assert searcher.suggest("t2")["a"] in (1, 2)


def test_a_metric_reported_as_a_numpy_scalar_is_a_measurement_not_a_crash():
    np = pytest.importorskip("numpy")
    searcher = _searcher([1, 2])
    searcher.suggest("t1"), searcher.suggest("t2")
    # np.float32 (a tensor's .numpy(), a mean of a float32 array) is no Python float
    searcher.on_trial_complete("t1", {"m": np.float32(2.5), "loss": np.float32(0.25)})
    searcher.on_trial_complete("t2", {"m": np.int64(3), "steps": np.int64(7)})
    done = sorted(searcher.study.trials, key=lambda t: t.number)
    assert [t.state for t in done] == [optuna.trial.TrialState.COMPLETE] * 2
    assert sorted(t.values[0] for t in done) == [2.5, 3.0]
    assert searcher.study.best_value == 3.0


def test_trials_a_dead_tune_run_left_running_are_interrupted_when_the_study_opens(tmp_path):
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 's.db'}"
    # a Tune driver that dies with two trials running (Tune's strict metric check, Ctrl-C)
    dying = (
        "import os\nfrom autotune.space import Param, Space\n"
        "from autotune.integrations.ray_tune import AutotuneSearcher\n"
        "space = Space('tiny', [Param('a', 'categorical', choices=[1, 2, 3])])\n"
        f"s = AutotuneSearcher(space, metric='m', mode='max', storage={url!r}, study_name='t')\n"
        "s.suggest('t1'); s.suggest('t2'); os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-P", "-c", dying], check=True, timeout=120)
    again = AutotuneSearcher(
        Space("tiny", [Param("a", "categorical", choices=[1, 2, 3])]),
        metric="m", mode="max", storage=url, study_name="t",
    )  # fmt: skip
    states = [t.state for t in again.study.trials]
    # they stayed RUNNING (autotune trials showed them running) with no driver to reap them
    assert optuna.trial.TrialState.RUNNING not in states
    assert [t.user_attrs.get("status") for t in again.study.trials] == ["interrupted"] * 2
    live = again.suggest("t3")
    mine = [t for t in again.study.trials if t.state is optuna.trial.TrialState.RUNNING]
    assert live is not None and mine[0].user_attrs["driver"]["pid"] == os.getpid()


def test_the_searcher_prints_the_samplers_note_as_a_sweep_does(capsys):
    # `autotune tune --sampler cmaes` over a space with a categorical parameter says that CMA-ES
    # draws it at random; the searcher of the same sampler and space said nothing
    space = Space("mixed", [Param("a", "categorical", choices=[1, 2]),
                            Param("x", "float", low=0.0, high=1.0)])  # fmt: skip
    searcher = AutotuneSearcher(space, metric="m", mode="max", seed=0, sampler="cmaes")
    note = "cmaes searches the int and float parameters (x); the other 1 (a) is drawn at random"
    assert searcher.notes == [note]
    assert capsys.readouterr().err.splitlines()[-1] == f"note: {note}"
    assert set(searcher.suggest("t1")) == {"a", "x"}
    # a sampler with nothing to say prints nothing; set by Tune later, the note comes then
    quiet = AutotuneSearcher(space, seed=0, sampler="tpe")
    assert quiet.notes == [] and "note:" not in capsys.readouterr().err
    later = AutotuneSearcher(space, seed=0, sampler="cmaes")
    assert later.notes == [] and later.set_search_properties("m", "min", {})
    assert later.notes == [note]
