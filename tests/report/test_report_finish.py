"""The report's finish table labels each re-measured config as the CLI does."""

from __future__ import annotations

import re

import optuna

from autotune.driver import Sweep, SweepSettings
from autotune.driver.trial_attrs import FINISH
from autotune.report_winner import winner_panel
from autotune.space import load_space

#: a workload whose fastest config (x=9) crashes on its third run: in the finish's second round
CRASHES_ON_ITS_THIRD_RUN = """
from pathlib import Path

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Third(Objective):
    name = "third"
    space = "third.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        runs = Path(__file__).parent / f"runs-{config['x']}"
        done = int(runs.read_text()) if runs.exists() else 0
        runs.write_text(str(done + 1))
        if config["x"] == 9 and done == 2:  # the sweep, the finish's first round, then this
            raise RuntimeError("illegal memory access")
        return Measurement(values={"v": 10.0 * config["x"]})


OBJECTIVE = Third
"""


def _finished(tmp_path, top: int = 2, rounds: int = 3) -> optuna.Study:
    """A sweep of x in 1, 5, 9 and its finish (of 3 rounds: 9 crashed once)."""
    (tmp_path / "third.py").write_text(CRASHES_ON_ITS_THIRD_RUN)
    (tmp_path / "third.yaml").write_text(
        "parameters:\n  x: {type: categorical, choices: [1, 5, 9]}\n"
    )
    settings = SweepSettings(
        workload=str(tmp_path / "third.py"), problem={}, space=load_space(tmp_path / "third.yaml"),
        objectives={"v": "maximize"}, sampler="grid", n_trials=3, seed=0, storage="memory",
        executor="inline", warm_start="off", baseline={"x": 1},
    )  # fmt: skip
    sweep = Sweep(settings)
    study = sweep.run().study
    sweep.finish(study, top=top, rounds=rounds)
    return study


def _row_tags(panel: str) -> dict[int, str]:
    """The finish table's last cell by trial."""
    table = panel.split("<table class='finish'>")[1].split("</table>")[0]
    cells = re.findall(r"<tr><td>(\d+)</td><td>[^<]*</td><td>[^<]*</td><td>([^<]*)</td></tr>",
                       table)  # fmt: skip
    return {int(trial): tag for trial, tag in cells}


def test_a_config_that_failed_a_round_of_the_finish_is_no_candidate_in_the_report(tmp_path):
    # the CLI said "failed in another: not a candidate"; the report's table called the same
    # row "within noise of the winner", as if it could have won
    study = _finished(tmp_path)
    record = study.user_attrs[FINISH]
    crashed = next(int(t) for t, why in record["failed"].items() if "illegal memory" in why)
    trials = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    panel, data = winner_panel(study, {}, trials, ["v"], True)
    tags = _row_tags(panel)
    assert data["winner_trial"] != crashed and set(tags) == {r["trial"] for r in record["rows"]}
    assert tags[crashed] == "median of the rounds it ran (failed in another: not a candidate)"
    assert "within noise" not in tags[crashed]


def test_a_finish_of_one_round_calls_no_row_within_noise(tmp_path):
    # one reading has no noise to be within: the CLI said nothing, the report "within noise of
    # the winner"
    study = _finished(tmp_path, top=3, rounds=1)
    rows = study.user_attrs[FINISH]["rows"]
    assert all(len(r["samples"]) == 1 for r in rows)
    assert any(r.get("within_noise") for r in rows[1:])  # what the finish stored for them
    panel, _ = winner_panel(study, {}, study.trials, ["v"], True)
    assert "within noise" not in " ".join(_row_tags(panel).values())
