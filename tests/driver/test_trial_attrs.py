"""A study's finish record and a trial's metrics another program wrote (or damaged): every
command that reads them passes them over, as if there were none, rather than end in a
traceback."""

from __future__ import annotations

import json

import optuna
import pytest
import yaml

from autotune.driver.results import trials_frame
from autotune.driver.trial_attrs import FINISH, METRICS, STUDY, stored_finish, trial_metrics
from autotune.export import export_text
from autotune.report import report_html
from autotune.triton_table import triton_table_export

ROW = {"trial": 0, "median": 1.1, "spread": 0.01, "samples": [1.1, 1.1, 1.09]}
DAMAGED_FINISHES = [
    "junk",
    {"rows": [1]},
    {"rows": "rows"},
    {"rows": [{**ROW, "median": None}]},
    {"rows": [{k: v for k, v in ROW.items() if k != "samples"}]},
    {"rows": [{**ROW, "trial": "0"}]},
    {"metric": 3, "rows": [ROW]},
]


@pytest.fixture
def damaged(tmp_path):
    """A stored matmul sweep of one measured trial, its records damaged as asked."""

    def make(finish: object = None, metrics: object = None) -> optuna.Study:
        study = optuna.create_study(study_name="d", storage=f"sqlite:///{tmp_path / 'd.db'}",
                                    direction="maximize")  # fmt: skip
        study.set_user_attr(STUDY, {"workload": "matmul",
                                    "problem": {"M": 32, "N": 32, "K": 32, "dtype": "bf16"},
                                    "objectives": {"ratio_to_cublas": "maximize"}})  # fmt: skip
        params = {"BLOCK_M": 16, "num_warps": 4}
        study.add_trial(optuna.trial.create_trial(
            params=params, value=1.2,
            user_attrs={"status": "ok", **({} if metrics is None else {METRICS: metrics})},
            distributions={k: optuna.distributions.CategoricalDistribution([v])
                           for k, v in params.items()},
        ))  # fmt: skip
        if finish is not None:
            study.set_user_attr(FINISH, finish)
        return study

    return make


@pytest.mark.parametrize("finish", DAMAGED_FINISHES)
def test_a_damaged_finish_is_passed_over_by_every_reader(damaged, finish):
    # AttributeError, TypeError, KeyError: each reader read the record unchecked
    study = damaged(finish=finish)
    assert stored_finish(study.user_attrs) == {}
    record = json.loads(export_text(study, "json"))
    assert record["trial"] == 0 and "finish" not in record
    assert yaml.safe_load(export_text(study, "yaml"))["config"] == {"BLOCK_M": 16, "num_warps": 4}
    assert "one sweep reading" in export_text(study, "triton")
    table = triton_table_export([study], ["M", "N", "K"])
    assert "no noise-aware finish ran" in table
    assert list(trials_frame(study)["trial"]) == [0]
    assert "<html" in report_html(study)


@pytest.mark.parametrize("metrics", ["x", [1, 2], 3])
def test_damaged_metrics_are_treated_as_absent(damaged, metrics):
    study = damaged(finish={"metric": "ratio_to_cublas", "rows": [ROW]}, metrics=metrics)
    assert trial_metrics(study.trials[0]) == {}
    record = json.loads(export_text(study, "json"))
    assert record["metrics"] == {} and record["finish"]["rows"] == [ROW]
    assert "finish median 1.1" in export_text(study, "triton")
    assert "finish median 1.1" in triton_table_export([study], ["M", "N", "K"])
    frame = trials_frame(study)
    assert not [c for c in frame.columns if c.startswith("m.")]
    assert "<html" in report_html(study)


def test_a_run_stopped_in_its_finish_is_told_from_one_that_finished():
    """The sweep records the finish it asks for; the finish marks it done once it ran."""
    from autotune.driver.settings import SweepSettings
    from autotune.driver.sweep import Sweep
    from autotune.driver.trial_attrs import LAST_RUN, finish_pending
    from autotune.space import load_space

    settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
                             objectives={"score": "maximize"}, n_trials=3, seed=0,
                             storage="memory", executor="inline", device={"type": "cpu"},
                             finish_top=1)  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    assert finish_pending(study.user_attrs)  # stopped here, the finish never ran
    sweep.finish(study, rounds=1)
    assert not finish_pending(study.user_attrs)
    assert study.user_attrs[LAST_RUN]["stopped_by"] == "trials"
    settings.finish_top = 0
    assert not finish_pending(Sweep(settings).run().study.user_attrs)  # none asked
