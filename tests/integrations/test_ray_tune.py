"""The Ray Tune searcher drives a real tune.Tuner (the documented example, run as a user would)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from autotune.driver.trial_attrs import WORKER, is_launched, trial_status
from autotune.space import load_space
from autotune.units import readable

pytest.importorskip("ray.tune")
ROOT = Path(__file__).resolve().parents[2]


def test_the_example_tuner_runs_autotunes_search_and_the_cli_reads_its_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ray_tune_searcher.py"), "--samples", "6",
         "--storage", url],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "REPLAY of matmul_4096_h200.csv: 6 Ray Tune trials suggested by autotune" in done.stdout

    (name,) = optuna.get_all_study_names(url)
    study = optuna.load_study(study_name=name, storage=url)
    launched = [t for t in study.trials if is_launched(t)]
    assert len(launched) == 6 and all(trial_status(t) == "ok" for t in launched)
    assert all(t.user_attrs[WORKER].startswith("ray tune trial ") for t in launched)
    configs = [tuple(sorted(t.params.items())) for t in launched]
    assert len(set(configs)) == 6  # no config suggested twice
    space = load_space(str(ROOT / "benchmarks" / "data" / "matmul_tiled_grid.yaml"))
    device = json.loads((ROOT / "benchmarks" / "data" / "device_h200.json").read_text())
    problem = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}
    assert all(not space.violations(t.params, problem, device) for t in launched)

    best = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "best", "--storage", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert best.returncode == 0, best.stderr
    top = max(t.values[0] for t in launched)
    assert f"{readable('tflops', top)}" in best.stderr  # e.g. 705 TFLOP/s
