"""The workload a run takes where the command leaves it out (autotune/group_resume.py)."""

from __future__ import annotations

import subprocess
import sys

from autotune.group_resume import declared_workload


def test_a_space_naming_a_workload_file_beside_it_tunes_that_file(tmp_path, steady_workload):
    # a space's workload: key may name a workload file relative to the space's folder: run
    # from another folder, the run tunes that file, not the default (train-step)
    (tmp_path / "s.yaml").write_text(
        "workload: steady.py\nparameters:\n  x: {type: int, low: 1, high: 6}\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--space", "../s.yaml", "--trials", "2",
         "--executor", "inline", "--storage", "memory", "--finish-top", "0"],
        capture_output=True, text=True, cwd=elsewhere, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "steady" in result.stderr and "train-step" not in result.stderr, result.stderr


def test_a_name_no_workload_runs_by_or_a_replay_keeps_the_default(tmp_path):
    # an objective's name alone (a file's 'softmax') runs nothing: the set-up's default and
    # its refusal naming both stay; a replay takes a space of any workload
    (tmp_path / "s.yaml").write_text(
        "workload: softmax\nparameters:\n  x: {type: int, low: 1, high: 6}\n"
    )
    asked = {"workload": None, "space": str(tmp_path / "s.yaml"), "replay": None}
    assert declared_workload(asked) is None
    assert declared_workload({**asked, "space": "matmul", "replay": "t.csv"}) is None
    assert declared_workload({**asked, "workload": "rmsnorm"}) == "rmsnorm"
