"""The report's finish table labels each re-measured config as the CLI does."""

from __future__ import annotations

import re

import optuna

from autotune.driver.trial_attrs import FINISH
from autotune.report_winner import winner_panel


def _row_tags(panel: str) -> dict[int, str]:
    """The finish table's last cell by trial."""
    table = panel.split("<table class='finish'>")[1].split("</table>")[0]
    cells = re.findall(r"<tr><td>(\d+)</td><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td></tr>",
                       table)  # fmt: skip
    return {int(trial): tag for trial, tag in cells}


def test_a_config_that_failed_a_round_of_the_finish_is_no_candidate_in_the_report(
    crashing_finish,
):
    # the CLI said "failed in another: not a candidate"; the report's table called the same
    # row "within noise of the winner", as if it could have won
    study, _ = crashing_finish(top=2, rounds=3)
    record = study.user_attrs[FINISH]
    crashed = next(int(t) for t, why in record["failed"].items() if "illegal memory" in why)
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    panel, data = winner_panel(study, {}, trials, ["v"], True)
    tags = _row_tags(panel)
    assert data["winner_trial"] != crashed and set(tags) == {r["trial"] for r in record["rows"]}
    assert tags[crashed] == "median of the rounds it ran (failed in another: not a candidate)"
    assert "within noise" not in tags[crashed]


def test_a_finish_of_one_round_calls_no_row_within_noise(crashing_finish):
    # one reading has no noise to be within: the CLI said nothing, the report "within noise of
    # the winner"
    study, _ = crashing_finish(top=3, rounds=1)
    rows = study.user_attrs[FINISH]["rows"]
    assert all(len(r["samples"]) == 1 for r in rows)
    assert any(r.get("within_noise") for r in rows[1:])  # what the finish stored for them
    panel, _ = winner_panel(study, {}, study.trials, ["v"], True)
    assert "within noise" not in " ".join(_row_tags(panel).values())
