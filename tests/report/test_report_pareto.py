"""The report of a study of several objectives says which config of its front it heads."""

from __future__ import annotations

import optuna
import pytest

pytest.importorskip("plotly")


def test_the_winner_of_a_pareto_study_is_said_to_be_one_of_its_front() -> None:
    # "Winner: trial 3" headed the page with no word that two more were on the front
    from autotune.driver.trial_attrs import STUDY
    from autotune.report import report_html

    study = optuna.create_study(directions=["maximize", "minimize"])
    study.set_user_attr(STUDY, {"workload": "toy", "problem": {},
                                "objectives": {"tok_s": "maximize", "gb": "minimize"}})  # fmt: skip
    for x, values in ((1, [9.0, 4.0]), (2, [5.0, 1.0]), (3, [4.0, 2.0])):  # 3 is dominated
        study.add_trial(optuna.trial.create_trial(
            params={"x": x}, values=values, user_attrs={"status": "ok"},
            distributions={"x": optuna.distributions.IntDistribution(1, 3)},
        ))  # fmt: skip
    page = report_html(study)
    assert (
        "<h2>Winner: trial 0 (one of 2 on the Pareto front: the best by tok_s, the first "
        "objective)</h2>"
    ) in page


def test_the_heading_leaves_out_a_problem_value_left_unset() -> None:
    # a workload file's default problem of a value None headed the page 'w.py N=8, tag=None'
    from autotune.driver.trial_attrs import STUDY
    from autotune.report import report_html

    study = optuna.create_study(direction="maximize")
    study.set_user_attr(STUDY, {"workload": "w.py", "problem": {"N": 8, "tag": None, "K": ""},
                                "objectives": {"score": "maximize"}})  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params={"x": 1}, value=1.0, user_attrs={"status": "ok"},
        distributions={"x": optuna.distributions.IntDistribution(1, 3)},
    ))  # fmt: skip
    page = report_html(study)
    assert "<p>w.py N=8</p>" in page, page[page.index("<h1>") :][:300]


def test_the_winner_panel_shows_every_objective_s_value_with_its_unit() -> None:
    # a sweep of 'tok_s,peak_gb:min' read 'Winner: trial 0' then '9.00k tokens/s (tok_s, its
    # sweep reading)': its memory, the second objective, nowhere in the panel
    from autotune.driver.trial_attrs import BASELINE, STUDY
    from autotune.report import report_html

    study = optuna.create_study(directions=["maximize", "minimize"])
    objectives = {"tok_s": "maximize", "peak_gb": "minimize"}
    study.set_user_attr(STUDY, {"workload": "toy", "problem": {}, "objectives": objectives})
    for x, values in ((1, [4000.0, 2.5]), (2, [9000.0, 4.25])):
        study.add_trial(optuna.trial.create_trial(
            params={"x": x}, values=values, user_attrs={"status": "ok", BASELINE: x == 1},
            distributions={"x": optuna.distributions.IntDistribution(1, 3)},
        ))  # fmt: skip
    page = report_html(study)
    assert ("<p class='winner-value'>9.00k tokens/s, 4.25 GB (tok_s, peak_gb: its sweep "
            "readings)</p>") in page  # fmt: skip
    assert "<p>Untuned default (trial 0): 4.00k tokens/s, 2.50 GB</p>" in page
