"""The last line of a sweep whose launched trials all failed."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from autotune.no_success import none_succeeded


def test_the_most_common_failure_is_named_with_a_trial_s_reason() -> None:
    line = none_succeeded(Counter({"oom": 1, "crashed": 2, "infeasible": 5}),
                          (3, "SIGSEGV"), {})  # fmt: skip
    assert line == ("no trial succeeded: crashed 2 of 3 launched; #3: SIGSEGV (`autotune "
                    "trials` lists them)")  # fmt: skip


def test_an_slo_is_named_only_where_every_launched_trial_broke_it() -> None:
    mixed = none_succeeded(Counter({"slo_violated": 2, "oom": 1}), None, {"ms": 2.0})
    assert mixed.startswith("no trial succeeded: slo_violated 2 of 3 launched")
    every = none_succeeded(Counter({"slo_violated": 2}), None, {"ms": 2.0, "spread": 0.05})
    assert every.startswith("no trial succeeded: every trial of this run broke --slo "
                            "ms=2,spread=0.05 (slo_violated 2 of 2); loosen")  # fmt: skip


def test_a_run_that_launched_nothing_keeps_the_bare_line() -> None:
    assert none_succeeded(Counter({"infeasible": 3}), None, {}) == (
        "no trial succeeded: nothing to report (see `autotune trials`)"
    )


SLEEPS = """import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Sleeps(Objective):
    name = "sleeps"
    space = "sleeps.yaml"
    directions = {"v": "maximize"}

    def default_config(self):
        return {"x": 1}

    def evaluate(self, config, report=None):
        time.sleep(60)
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Sleeps
"""


def test_a_budget_shorter_than_one_trial_names_the_trial_it_stopped(tmp_path: Path) -> None:
    # the line quoted the config asked for ahead and never launched ('#1: asked for but never
    # launched: the sweep stopped (time)') as the one launched trial's failure (10 s: the
    # budget counts the set-up, seconds on a loaded machine, and the trial must launch)
    (tmp_path / "sleeps.py").write_text(SLEEPS)
    (tmp_path / "sleeps.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", str(tmp_path / "sleeps.py"),
         "--time-budget", "10s", "--seed", "0", "--study", "s", "--storage",
         f"sqlite:///{tmp_path / 's.db'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    # (while it ran, or while its worker started on a loaded machine)
    assert last.startswith("no trial succeeded: interrupted 1 of 1 launched; #0: the sweep's "
                           "time budget ended while"), last  # fmt: skip
