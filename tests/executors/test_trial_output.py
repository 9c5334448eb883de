"""What a trial prints never reaches the CLI's stdout, which holds the sweep's result (the
best config as JSON, for ``> best.json`` or ``| jq``), and an objective's ``sys.exit`` is its
trial's failure, on every executor that runs on this machine. A real sweep of an objective
file in a real process, as ``autotune tune ./modes.py`` runs it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

NOISY = """import os
import subprocess
import sys

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Noisy(Objective):
    name, space, directions = "noisy", "noisy.yaml", {"v": "maximize"}

    def default_config(self):
        return {"x": 1}

    def evaluate(self, config, report=None):
        for _ in range(1000):
            print("NOISE from print")
        os.write(1, b"NOISE from fd 1\\n")
        subprocess.run([sys.executable, "-c", "print('NOISE from a child')"], check=True)
        if config["x"] == 2:
            sys.exit(3)
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Noisy
"""


@pytest.mark.parametrize("executor", ["local", "inline"])
def test_trial_output_goes_to_stderr_and_stdout_stays_the_result(tmp_path: Path, executor):
    (tmp_path / "noisy.py").write_text(NOISY)
    (tmp_path / "noisy.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 3}\n")
    result = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "noisy.py", "--executor", executor,
         "--trials", "3", "--sampler", "grid", "--storage", "memory", "--finish-top", "0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "NOISE" not in result.stdout
    # the best config as JSON: nothing else (what it is goes to stderr)
    assert json.loads(result.stdout) == {"x": 3}, result.stdout
    assert "best config (trial " in result.stderr
    for where in ("print", "fd 1", "a child"):
        assert f"NOISE from {where}" in result.stderr
    assert result.stderr.count("NOISE from print") == 3000
    assert "crashed: SystemExit: 3" in result.stderr  # the sweep went on past it
    assert "failed: crashed 1" in result.stderr
