import io
from pathlib import Path

import optuna
import pytest
from rich.console import Console

from autotune.driver import Sweep, SweepSettings, study_setup
from autotune.driver.study_setup import StudyMismatch
from autotune.driver.warm_start import similarity, top_configs
from autotune.objectives.replay import load_table, space_from_table
from autotune.progress import ProgressDisplay

TABLE = str(Path(__file__).parents[2] / "benchmarks" / "data" / "matmul_4096_h200.csv")
PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]


def replay_settings(url: str, name: str, **overrides) -> SweepSettings:
    base = dict(
        workload="replay",
        problem={"table": TABLE, "params": PARAMS, "metric": "tflops"},
        space=space_from_table(load_table(TABLE), PARAMS, TABLE),
        objectives={"tflops": "maximize"},
        seed=0,
        n_trials=30,
        storage=url,
        study_name=name,
        executor="inline",
    )
    return SweepSettings(**(base | overrides))


def test_similarity_of_problems():
    assert similarity({"M": 64, "N": 4096}, {"M": 64, "N": 4096}) == 1.0
    assert similarity({"M": 64, "N": 4096}, {"M": 128, "N": 2048}) == 0.25
    assert similarity({"M": 64}, {"M": 64, "K": 1}) == 0.0


def test_a_named_warm_start_begins_with_the_sources_best_configs(sqlite_url):
    source = Sweep(replay_settings(sqlite_url, "source")).run().study
    queued = study_setup.WARM_START_CONFIGS
    expected = top_configs(source, "maximize", queued)
    target = (
        Sweep(replay_settings(sqlite_url, "target", n_trials=5, seed=7, warm_start="source"))
        .run()
        .study
    )
    assert [t.params for t in target.trials[:queued]] == expected
    assert all(t.user_attrs["warm_start"] == "source" for t in target.trials[:queued])
    assert target.user_attrs["warm_start"] == {
        "source": "source", "similarity": 1.0, "configs": queued,
    }  # fmt: skip
    source_best = max(t.values[0] for t in source.trials if t.user_attrs["status"] == "ok")
    target_best = max(t.values[0] for t in target.trials if t.user_attrs["status"] == "ok")
    assert target_best >= source_best  # its best config, measured again by replay


def test_a_warm_start_begins_with_the_winner_of_the_sources_finish(sqlite_url):
    # it began with the source's highest single sweep reading, not the answer its finish chose
    source = Sweep(replay_settings(sqlite_url, "source", n_trials=8)).run().study
    ok = sorted((t for t in source.trials if t.user_attrs["status"] == "ok"),
                key=lambda t: t.values[0])  # fmt: skip
    winner, over = ok[0], ok[-2]  # the finish: the lowest reading won, one other was over
    rows = [{"trial": over.number, "median": 9e9, "spread": 0.0, "samples": [9e9],
             "over_slo": True},
            {"trial": winner.number, "median": 1.0, "spread": 0.0, "samples": [1.0]}]  # fmt: skip
    source.set_user_attr("finish", {"metric": "tflops", "rows": rows})
    target = Sweep(replay_settings(sqlite_url, "target", n_trials=3, warm_start="source"))
    first = target.run().study.trials[0]
    assert first.params == winner.params and first.user_attrs["warm_start"] == "source"
    assert top_configs(source, "maximize", 99)[-1] == over.params  # over the SLO: last


def test_auto_picks_a_related_sweep_and_off_does_not(sqlite_url):
    Sweep(replay_settings(sqlite_url, "first", n_trials=10)).run()
    auto = Sweep(replay_settings(sqlite_url, "second", n_trials=3)).run().study
    assert auto.user_attrs["warm_start"]["source"] == "first"
    off = Sweep(replay_settings(sqlite_url, "third", n_trials=3, warm_start="off")).run().study
    assert "warm_start" not in off.user_attrs


def test_unknown_source_is_a_one_line_error_and_stores_nothing(sqlite_url):
    with pytest.raises(StudyMismatch, match="no study named 'nope'"):
        Sweep(replay_settings(sqlite_url, "x", warm_start="nope")).run()
    assert optuna.get_all_study_names(sqlite_url) == []  # no empty study left to resume


def test_a_source_of_another_objective_or_workload_is_refused(sqlite_url):
    Sweep(replay_settings(sqlite_url, "fast", n_trials=4)).run()
    slow = replay_settings(sqlite_url, "slow", objectives={"tflops": "minimize"}, warm_start="fast")
    with pytest.raises(StudyMismatch, match="it maximizes tflops; this sweep minimizes tflops"):
        Sweep(slow).run()
    other = replay_settings(sqlite_url, "other", workload="faults", warm_start="fast")
    with pytest.raises(StudyMismatch, match="it holds a replay sweep; this one tunes faults"):
        Sweep(other).run()
    assert optuna.get_all_study_names(sqlite_url) == ["fast"]


def test_auto_passes_over_a_sweep_of_another_objective(sqlite_url):
    Sweep(replay_settings(sqlite_url, "fast", n_trials=4)).run()
    slow = Sweep(replay_settings(sqlite_url, "slow", n_trials=2,
                                 objectives={"tflops": "minimize"})).run().study  # fmt: skip
    assert "warm_start" not in slow.user_attrs


def _xy_settings(tmp_path: Path, url: str, name: str, **overrides) -> SweepSettings:
    """A replay of a small table whose parameters (x, y) are none of TABLE's."""
    table = tmp_path / "xy.csv"
    table.write_text("x,y,tflops\n1,1,5\n1,2,6\n2,1,7\n2,2,8\n")
    problem = {"table": str(table), "params": ["x", "y"], "metric": "tflops"}
    space = space_from_table(load_table(str(table)), ["x", "y"], str(table))
    return replay_settings(url, name, problem=problem, space=space, **overrides)


def test_a_named_source_with_no_parameter_in_common_is_refused_and_stores_nothing(
    tmp_path, sqlite_url
):
    """`--warm-start A` from a sweep of other parameters was taken: an empty config was queued
    and trial 0 shown as "warm start from A" (all() over no parameters is True), and A's
    measurements were set as the sampler's prior."""
    Sweep(replay_settings(sqlite_url, "A", n_trials=3)).run()
    with pytest.raises(StudyMismatch) as refused:
        Sweep(_xy_settings(tmp_path, sqlite_url, "C", n_trials=2, warm_start="A")).run()
    assert str(refused.value) == (
        "--warm-start A: it tunes BLOCK_K, BLOCK_M, BLOCK_N, GROUP_M, num_stages, num_warps; "
        "no parameter in common with this sweep's space (x, y), so nothing of it to start from"
    )
    assert optuna.get_all_study_names(sqlite_url) == ["A"]  # nothing stored for C


def test_a_named_source_with_no_trial_is_refused(tmp_path, sqlite_url):
    optuna.create_study(study_name="empty", storage=sqlite_url)
    empty = optuna.load_study(study_name="empty", storage=sqlite_url)
    empty.set_user_attr("autotune", {"workload": "replay", "objectives": {"tflops": "maximize"}})
    with pytest.raises(StudyMismatch, match="--warm-start empty: it holds no trial yet; no "):
        Sweep(replay_settings(sqlite_url, "t", n_trials=2, warm_start="empty")).run()
    assert optuna.get_all_study_names(sqlite_url) == ["empty"]


def test_auto_takes_nothing_from_a_related_sweep_of_other_parameters(sqlite_url):
    """The most similar sweep found by problem alone may tune none of this space's parameters:
    it queues no (empty) config and sets no prior."""
    from autotune.storage import open_storage

    settings = replay_settings(sqlite_url, "narrow", n_trials=2)
    source = optuna.create_study(study_name="wide", storage=sqlite_url, direction="maximize")
    record = {"workload": "replay", "problem": settings.problem, "device": {},
              "objectives": {"tflops": "maximize"}}  # fmt: skip
    source.set_user_attr("autotune", record)
    source.enqueue_trial({"other": 1})
    trial = source.ask({"other": optuna.distributions.IntDistribution(0, 4)})
    source.tell(trial, 5.0)  # measured (complete), as another Optuna program tells it
    study = study_setup.open_study(settings, open_storage(sqlite_url), in_flight=1)
    assert "warm_start" not in study.user_attrs
    assert study.get_trials(deepcopy=False) == []  # nothing queued


def test_a_warm_start_config_stopped_before_it_measured_runs_again_on_resume(sqlite_url):
    # a resume after Ctrl-C never measured the source's best again: its answer was worse
    Sweep(replay_settings(sqlite_url, "source")).run()
    target = replay_settings(sqlite_url, "target", n_trials=3, seed=7, warm_start="source")
    study = study_setup.open_study(target, optuna.storages.RDBStorage(sqlite_url), 1)
    first = study.ask()  # the untuned default (none here) or the warm start's config
    assert first.user_attrs.get("warm_start") == "source"
    study.tell(first, state=optuna.trial.TrialState.FAIL)  # stopped from outside
    assert study_setup.requeue_stopped_default(study)
    again = study.ask()
    assert again.params == first.params and again.user_attrs["warm_start"] == "source"
    assert not study_setup.requeue_stopped_default(study)  # it runs now: queued once


def test_a_study_autotune_did_not_write_is_no_warm_start_source(sqlite_url):
    plain = optuna.create_study(study_name="plain", storage=sqlite_url, direction="maximize")
    plain.optimize(lambda t: t.suggest_int("BLOCK_M", 16, 256), n_trials=2)
    with pytest.raises(StudyMismatch, match="--warm-start plain: it is no autotune sweep"):
        Sweep(replay_settings(sqlite_url, "x", warm_start="plain")).run()


def test_the_prior_leaves_out_source_configs_with_values_this_space_lacks(sqlite_url):
    # a wider source's x=64 reached the model as this space's lowest value, x=1
    from autotune.space import Param, Space

    source = optuna.create_study(study_name="wide", storage=sqlite_url, direction="maximize")
    for x in (1, 16, 64, 8):
        source.enqueue_trial({"x": x, "y": "b"})

    def measured(t: optuna.Trial) -> float:
        t.set_user_attr("status", "ok")
        return t.suggest_int("x", 1, 64) + len(t.suggest_categorical("y", ["b"]))

    source.optimize(measured, n_trials=4)
    narrow = Space("narrow", [Param("x", "pow2", low=1, high=8),
                              Param("y", "categorical", choices=["a", "b"])])  # fmt: skip
    settings = replay_settings(sqlite_url, "t", space=narrow)

    class Recorder:
        def set_prior(self, configs, values, maximize):
            self.configs, self.values = configs, values

    sampler = Recorder()
    study_setup._set_prior(settings, sampler, source)
    assert sampler.configs == [{"x": 1, "y": "b"}, {"x": 8, "y": "b"}]
    assert sampler.values == [2.0, 9.0]


def test_top_configs_of_every_trial_of_a_large_study_is_linear_and_keeps_each_config_once():
    """The warm start asks for every trial's config (``len(source.trials)``): each was
    looked for in the list of those kept, 3.6 s for a source of 20,000 distinct configs;
    one set look-up each now, the order and the repeats left out as before."""
    import time

    from optuna.distributions import CategoricalDistribution, IntDistribution

    study = optuna.create_study(direction="maximize")
    dists = {"a": IntDistribution(0, 199), "b": IntDistribution(0, 99),
             "c": CategoricalDistribution(["x", "y"])}  # fmt: skip
    params = [{"a": i % 200, "b": (i // 200) % 100, "c": "xy"[i % 2]} for i in range(20_000)]
    params += [params[5], params[7]]  # repeats, read lower than their first reading
    study.add_trials([optuna.trial.create_trial(params=p, distributions=dists, value=float(-i))
                      for i, p in enumerate(params)])  # fmt: skip
    every = len(study.get_trials(deepcopy=False))
    started = time.perf_counter()
    configs = top_configs(study, "maximize", every)
    took = time.perf_counter() - started
    assert configs == params[:20_000]  # best first: the trials in order, each config once
    assert took < 1.0, f"{took:.2f} s"


def test_a_named_source_with_no_config_of_the_space_says_the_sweep_starts_cold(
    tmp_path, sqlite_url
):
    # a source whose every config lies outside the space (x 1-2 against 3-4) queued nothing
    # and set no prior: the sweep ran cold, and nothing said so
    Sweep(_xy_settings(tmp_path, sqlite_url, "low", n_trials=2)).run()
    high = tmp_path / "high.csv"
    high.write_text("x,y,tflops\n3,1,5\n3,2,6\n4,1,7\n4,2,8\n")
    problem = {"table": str(high), "params": ["x", "y"], "metric": "tflops"}
    space = space_from_table(load_table(str(high)), ["x", "y"], str(high))
    settings = replay_settings(sqlite_url, "high", problem=problem, space=space, n_trials=2,
                               warm_start="low")  # fmt: skip
    display = ProgressDisplay(Console(file=io.StringIO(), width=300))
    Sweep(settings, display).run()
    assert settings.study_notes == [
        f"warm start from low: it holds no successful config of {high}, so nothing of it runs "
        "first or guides the sampler (the sweep starts cold)"
    ]
    printed = display.console.file.getvalue()
    assert printed.startswith(f"note: {settings.study_notes[0]}\nautotune replay")
    # a source with a config of the space: its trials say so, no note
    again = _xy_settings(tmp_path, sqlite_url, "again", n_trials=2, warm_start="low")
    assert Sweep(again).run().study.trials[0].user_attrs["warm_start"] == "low"
    assert again.study_notes == []


def test_a_resume_that_names_another_warm_start_says_it_keeps_how_the_study_began(
    tmp_path, sqlite_url
):
    # `--warm-start A` on a resume of a study begun cold was dropped without a word
    Sweep(_xy_settings(tmp_path, sqlite_url, "A", n_trials=2)).run()
    Sweep(_xy_settings(tmp_path, sqlite_url, "B", n_trials=2, warm_start="off")).run()
    resume = _xy_settings(tmp_path, sqlite_url, "B", n_trials=4, warm_start="A")
    study = Sweep(resume).run().study
    assert resume.study_notes == [
        "--warm-start A: study B resumes as it started (cold); a warm start is a new study's "
        "first trials"
    ]
    assert len(study.trials) == 4 and "warm_start" not in study.user_attrs
    # a resume as the study began (the command as typed, --study added) says nothing
    Sweep(_xy_settings(tmp_path, sqlite_url, "C", n_trials=1, warm_start="A")).run()
    same = _xy_settings(tmp_path, sqlite_url, "C", n_trials=2, warm_start="A")
    Sweep(same).run()
    assert same.study_notes == []
