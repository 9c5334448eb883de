"""The report is data, never markup: a metric's name, a study's name or an infinite value
cannot run a script in the page nor break its JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("plotly")


def _replayed(tmp_path: Path, metric: str, name: str, rows: list[tuple[int, float]]):
    from autotune.driver import Sweep, SweepSettings
    from autotune.objectives.replay import load_table, space_from_table

    table = tmp_path / "t.csv"
    table.write_text(f"a,{metric}\n" + "".join(f"{a},{v}\n" for a, v in rows))
    settings = SweepSettings(
        workload="replay", problem={"table": str(table), "params": ["a"], "metric": metric},
        space=space_from_table(load_table(str(table)), ["a"], str(table)),
        objectives={metric: "maximize"}, baseline={"a": rows[0][0]}, seed=0,
        n_trials=len(rows), storage="memory", study_name=name, executor="inline",
        warm_start="off", finish_top=2, finish_rounds=2,
    )  # fmt: skip
    return Sweep(settings).run().study


def _page_data(page: str) -> dict:
    found = re.search(r'<script id="autotune-data" type="application/json">(.*?)</script>',
                      page, re.S)  # fmt: skip
    assert found, "no data element"
    return json.loads(found.group(1))


def test_a_metric_named_as_markup_is_shown_as_text(tmp_path):
    # its unit (the name's last word) reached the finish table and the default's line raw:
    # <img src=x onerror=...> ran in the page
    from autotune.report import report_html

    metric = "<img src=x onerror=alert(9)>_per_s"
    page = report_html(_replayed(tmp_path, metric, "s", [(1, 10.0), (2, 20.0), (3, 30.0)]))
    assert "<img src=x" not in page
    assert "&lt;img src=x onerror=alert(9)&gt;" in page


def test_a_study_name_that_opens_a_comment_and_an_infinite_value_keep_the_data_json():
    # '<!--<script>' made the browser read past the data element's end; Infinity is no JSON
    import optuna

    from autotune.report import report_html

    study = optuna.create_study(study_name="<!--<script>", direction="maximize")
    dist = {"x": optuna.distributions.IntDistribution(0, 9)}
    for x, value in enumerate([1.0, float("inf"), 2.0]):
        study.add_trial(optuna.trial.create_trial(params={"x": x}, distributions=dist,
                                                  value=value))  # fmt: skip
    page = report_html(study)
    inside = page.split('<script id="autotune-data" type="application/json">', 1)[1]
    assert "<!--" not in inside.split("</script>", 1)[0]
    data = _page_data(page)
    assert data["study"] == "<!--<script>" and "Infinity" not in json.dumps(data)


def test_a_study_of_many_parameters_draws_a_panel_for_the_most_important_only():
    # 2,000 parameters drew 2,000 panels twice over: 3 minutes for a 7 MB page
    import random

    import optuna

    from autotune.report import MOST_PANELS, Report

    rng = random.Random(0)
    study = optuna.create_study(direction="maximize")
    dist = {f"p{i}": optuna.distributions.IntDistribution(0, 3) for i in range(200)}
    for _ in range(30):
        params = {n: rng.randint(0, 3) for n in dist}
        value = 10.0 * params["p150"] + rng.random()
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dist, value=value))
    report = Report(study)
    assert report.importances() is not None
    scores = report.data["importances"]
    slices = report.slices()
    titles = [a.text for a in slices.layout.annotations]
    assert (
        len(titles) == MOST_PANELS
        and [scores[p] for p in titles] == sorted(scores.values(), reverse=True)[:MOST_PANELS]
    )  # the most important, first (ties in either order)
    assert "(30 of 200 parameters, the most important)" in slices.layout.title.text
    assert len(report.failures().layout.annotations) == MOST_PANELS + 1  # and trials by state
    assert len(report.parallel().data[0].dimensions) == MOST_PANELS + 1  # and the metric
