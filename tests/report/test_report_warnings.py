"""`autotune report` says what it wrote and nothing else: no library's warning (a multi-line
text naming its own source file) reaches the terminal."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tests.cli_in_process import autotune_in_process

pytest.importorskip("plotly")


def _replayed(tmp_path: Path, rows: str, trials: int):
    from autotune.driver import Sweep, SweepSettings
    from autotune.objectives.replay import load_table, space_from_table

    table = tmp_path / "t.csv"
    table.write_text(rows)
    settings = SweepSettings(
        workload="replay",
        problem={"table": str(table), "params": ["a"], "metric": "m"},
        space=space_from_table(load_table(str(table)), ["a"], str(table)),
        objectives={"m": "maximize"},
        seed=0,
        n_trials=trials,
        storage="memory",
        study_name="s",
        executor="inline",
        warm_start="off",
    )
    return Sweep(settings).run().study


@pytest.mark.parametrize(
    ("rows", "trials"),
    [("a,m\n1,5\n2,5\n3,5\n4,5\n", 4), ("a,m\n1,5\n2,5\n", 2), ("a,m\n1,1\n2,2\n", 1),
     ("a,m\n1,1\n2,2\n3,3\n", 3)],
)  # fmt: skip
def test_a_report_of_equal_values_or_few_trials_warns_nothing(tmp_path, rows, trials):
    """Every measured value equal: Optuna's PED-ANOVA warned "Target and region quantiles
    select the same set of trials" from its own file, printed under `autotune report`."""
    from autotune.report import report_html

    study = _replayed(tmp_path, rows, trials)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        page = report_html(study)
    assert [str(w.message) for w in caught] == []
    assert "<html" in page.lower()


def test_the_report_command_prints_one_line_for_a_study_of_equal_values(tmp_path):
    (tmp_path / "eq.csv").write_text("a,m\n1,5\n2,5\n3,5\n4,5\n")
    url = f"sqlite:///{tmp_path / 'w.db'}"

    def autotune(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "autotune.cli", *args, "--storage", url]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)

    tuned = autotune("tune", "--replay", "eq.csv", "--params", "a", "--metric", "m",
                     "--trials", "4", "--study", "E")  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    # in this process a warning is not printed but recorded (pytest's own filters are set
    # aside for a fresh process's: its ignored categories ignored, any other shown)
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                       ResourceWarning):  # fmt: skip
            warnings.simplefilter("ignore", hidden)
        done = autotune_in_process("report", "--study", "E", "--output", "e.html", "--storage",
                                   url, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["wrote e.html"], done.stderr
    assert [str(w.message) for w in caught] == []
    assert (tmp_path / "e.html").is_file()
