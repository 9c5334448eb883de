"""The report of a study without a successful trial says why there is no winner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("plotly")


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                          text=True, timeout=240, cwd=cwd)  # fmt: skip


def test_a_failed_sweep_s_report_names_its_failures_and_an_empty_one_says_none_ran(tmp_path):
    # both pages said only "No trial succeeded.": the failed sweep's with no reason (the
    # command's own last line gives one), the empty study's of trials that never ran
    import optuna

    (tmp_path / "fails.yaml").write_text(
        "name: fails\nworkload: faults\nparameters:\n"
        "  fault: {type: categorical, choices: [compile_error, exception]}\n"
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    swept = _cli("tune", "faults", "--space", "fails.yaml", "--trials", "2", "--seed", "0",
                 "--executor", "inline", "--storage", url, "--study", "f",
                 cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 1, swept.stderr
    optuna.create_study(study_name="empty", storage=url)
    pages = {}
    for name in ("f", "empty"):
        done = _cli("report", "--storage", url, "--study", name, "--output", f"{name}.html",
                    cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        pages[name] = (tmp_path / f"{name}.html").read_text()
    said = pages["f"].split("<p class='no-winner'>")[1].split("</p>")[0]
    assert said.startswith("No trial succeeded: ") and " 1 of 2 launched; #" in said, said
    # each failure's reason as the trials listing has it
    assert "injected compile error" in said or "injected failure" in said, said
    assert "<p class='no-winner'>No trial has run yet.</p>" in pages["empty"]
