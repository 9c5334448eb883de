"""What a replay study's figures are, as its results and report say it."""

import shutil
from pathlib import Path

import optuna

from autotune.driver import Sweep
from autotune.sweep_setup import build_settings
from tests.cli_in_process import autotune_in_process

DATA = Path(__file__).parents[1] / "benchmarks" / "data"
#: a replay's label as studies created before it named the device stored it
OLD_LABEL = "REPLAY of t.csv: recorded measurements are looked up, nothing is measured"
COMPLETE = ("REPLAY of t.csv (measured on NVIDIA H100 80GB HBM3): recorded measurements are "
            "looked up, nothing is measured")  # fmt: skip


def _old_replay_study(tmp_path: Path) -> str:
    """A replay study of a table stamped with its device, its label stored the old way."""
    shutil.copy(DATA / "matmul_raw_sq5k_h100.csv", tmp_path / "t.csv")
    url = f"sqlite:///{tmp_path / 'old.db'}"
    settings = build_settings(
        workload=None, space=None, problem={}, objective=None, sampler="auto", trials=3,
        time_budget_s=None, seed=0, storage=url, study="old", trial_timeout_s=None,
        device={"type": "cpu", "name": "a CPU"}, replay=tmp_path / "t.csv",
        params="BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages", metric="tflops",
        maximize=True, command="autotune tune --replay t.csv", executor="inline",
    )  # fmt: skip
    Sweep(settings).run()
    study = optuna.load_study(study_name="old", storage=url)
    study.set_user_attr("autotune", {**study.user_attrs["autotune"], "label": OLD_LABEL})
    return url


def test_best_trials_and_the_report_of_an_old_replay_study_name_the_device(tmp_path):
    # a study created before the label named the device showed 'REPLAY of t.csv: ...' in
    # `autotune best`, `autotune trials` and the report, the device its trials record unsaid
    url = _old_replay_study(tmp_path)
    best = autotune_in_process("best", "--storage", url, "--study", "old")
    assert best.returncode == 0, best.stderr
    assert f"[{COMPLETE}]" in best.stderr
    trials = autotune_in_process("trials", "--storage", url, "--study", "old")
    assert trials.returncode == 0, trials.stderr
    assert trials.stdout.splitlines()[0] == COMPLETE
    page = tmp_path / "r.html"
    report = autotune_in_process("report", "--storage", url, "--study", "old", "--output",
                                 str(page))  # fmt: skip
    assert report.returncode == 0, report.stderr
    assert f'<p class="label">{COMPLETE}</p>' in page.read_text()
