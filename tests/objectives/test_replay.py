"""Replay of a recorded table: the tables `autotune record` writes (a status per row) and
tables measured by hand (no status column)."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.failures import Crashed, Infeasible
from autotune.objectives.replay import ReplayObjective

HAND_TABLE = "BM,BN,tflops\n64,64,410.5\n64,128,522.0\n128,128,\n128,256,oom?\n"


@pytest.fixture
def hand_table(tmp_path: Path) -> Path:
    path = tmp_path / "by_hand.csv"
    path.write_text(HAND_TABLE)
    return path


def _objective(path: Path) -> ReplayObjective:
    return ReplayObjective({"table": str(path), "params": ["BM", "BN"], "metric": "tflops"})


def test_a_table_without_status_takes_every_row_as_a_measurement(hand_table):
    objective = _objective(hand_table)
    assert objective.evaluate({"BM": 64, "BN": 128}).values == {"tflops": 522.0}
    assert objective.evaluate({"BM": 64, "BN": 64}).metrics["replay"] is True


@pytest.mark.parametrize(("config", "cell"), [({"BM": 128, "BN": 128}, "nan"),
                                             ({"BM": 128, "BN": 256}, "'oom?'")])  # fmt: skip
def test_a_blank_or_a_word_in_a_hand_table_is_a_config_that_did_not_run(hand_table, config, cell):
    with pytest.raises(Crashed, match=re.escape(f"no tflops recorded: {cell} (replay)")):
        _objective(hand_table).evaluate(config)


def test_a_recorded_ok_row_without_a_figure_stays_infeasible(tmp_path):
    path = tmp_path / "recorded.csv"
    path.write_text("BM,tflops,status\n64,,ok\n128,600.0,ok\n")
    objective = ReplayObjective({"table": str(path), "params": ["BM"], "metric": "tflops"})
    with pytest.raises(Infeasible, match="recorded tflops is nan"):
        objective.evaluate({"BM": 64})
    with pytest.raises(Infeasible, match="not in the recorded table"):
        objective.evaluate({"BM": 32})


def test_the_cli_tunes_a_hand_table_and_counts_its_blanks_as_failures(hand_table, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(hand_table), "--params",
         "BM,BN", "--metric", "tflops", "--storage", "memory", "--seed", "0", "--output",
         "best.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "522 TFLOP/s" in done.stdout
    assert json.loads((tmp_path / "best.json").read_text())["config"] == {"BM": 64, "BN": 128}
    assert "failed: crashed 2" in done.stderr  # the progress lines


def test_a_config_recorded_more_than_once_replays_the_median_of_its_ok_readings(tmp_path):
    path = tmp_path / "repeated.csv"
    path.write_text("BM,tflops,status\n64,400.0,ok\n64,,oom\n64,900.0,ok\n64,500.0,ok\n"
                    "128,,oom\n128,,oom\n256,300.0,ok\n")  # fmt: skip
    objective = ReplayObjective({"table": str(path), "params": ["BM"], "metric": "tflops"})
    repeated = objective.evaluate({"BM": 64})
    assert repeated.values == {"tflops": 500.0}  # the median of 400, 900, 500; not the first
    assert repeated.metrics["replay_readings"] == 3
    assert "replay_readings" not in objective.evaluate({"BM": 256}).metrics
    with pytest.raises(Exception, match="recorded oom"):
        objective.evaluate({"BM": 128})  # no ok reading: its first row's failure
