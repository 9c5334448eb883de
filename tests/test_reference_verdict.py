"""The verdict that the library kernel beat the sweep's best config: judged on the finish's
median when there is one, said on the command line and carried by every export."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from autotune.reference_verdict import describe, reference_faster


def _record(value, finish_median=None, metric="ratio_to_sdpa", direction="maximize"):
    record = {"objectives": {metric: direction, "tflops": "maximize"},
              "values": {metric: value, "tflops": 400.0}}  # fmt: skip
    if finish_median is not None:
        record["finish"] = {"metric": metric, "rows": [{"trial": 3, "median": finish_median}]}
    return record


def test_a_best_below_the_reference_is_called_out_with_the_reference_named():
    verdict = reference_faster(_record(0.79))
    assert verdict == {"reference": "sdpa", "ratio": 0.79, "measured_by": "sweep"}
    assert describe(verdict).endswith("keep sdpa for this problem")


def test_the_fastest_of_several_library_kernels_is_named():
    # attention's reference is the fastest SDPA backend, which the objective names per trial
    record = {**_record(0.79), "metrics": {"fastest_sdpa": "sdpa_cudnn", "sdpa_cudnn_tflops": 600}}
    verdict = reference_faster(record)
    assert verdict["fastest"] == "sdpa_cudnn"
    assert describe(verdict).endswith("keep sdpa (sdpa_cudnn the fastest here) for this problem")


@pytest.mark.parametrize("value", [1.0, 1.3])
def test_a_best_at_or_above_the_reference_has_no_verdict(value):
    assert reference_faster(_record(value)) is None


def test_the_finish_median_overrules_the_sweeps_single_reading():
    # one lucky reading of 1.04 that the re-measured median (0.97) did not hold up
    verdict = reference_faster(_record(1.04, finish_median=0.97))
    assert verdict == {"reference": "sdpa", "ratio": 0.97, "measured_by": "finish"}
    assert "the finish's median" in describe(verdict)
    # and the other way round: a low reading the finish found to beat the reference
    assert reference_faster(_record(0.98, finish_median=1.01)) is None


def test_metrics_that_are_not_a_ratio_to_a_reference_have_no_verdict():
    assert reference_faster(_record(0.5, metric="tflops")) is None
    assert reference_faster(_record(0.5, direction="minimize")) is None  # not a speed-up
    assert reference_faster({"objectives": {}, "values": {}}) is None
    assert reference_faster({"objectives": {"ratio_to_cublas": "maximize"}, "values": {}}) is None


def _sweep(tmp_path: Path, best_ratio: float) -> tuple[subprocess.CompletedProcess, Path, Path]:
    # a recorded table whose column is a ratio to cuBLAS, replayed end to end on SQLite
    rows = [{"BM": bm, "BN": bn, "ratio_to_cublas": best_ratio * (bm + bn) / 512, "status": "ok"}
            for bm in (64, 128, 256) for bn in (64, 128, 256)]  # fmt: skip
    table = tmp_path / "grid.csv"
    pd.DataFrame(rows).to_csv(table, index=False)
    url = f"sqlite:///{tmp_path / 'v.db'}"
    best = tmp_path / "best.json"
    cli = [sys.executable, "-m", "autotune.cli"]
    tuned = subprocess.run(
        [*cli, "tune", "--replay", str(table), "--params", "BM,BN", "--metric",
         "ratio_to_cublas", "--maximize", "--sampler", "grid", "--storage", url, "--study", "v",
         "--output", str(best)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    module = tmp_path / "configs.py"
    exported = subprocess.run(
        [*cli, "export", "--to", "triton", "--storage", url, "--study", "v", "--output",
         str(module)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    return tuned, best, module


def test_the_command_line_and_every_export_say_when_the_reference_is_faster(tmp_path):
    tuned, best, module = _sweep(tmp_path, best_ratio=0.8)
    assert "note: cublas is faster than the best config found: it runs at 0.800x" in tuned.stderr
    assert json.loads(best.read_text())["reference_faster"]["reference"] == "cublas"
    assert "Note: cublas is faster than the best config found" in module.read_text()
    page = tmp_path / "report.html"
    reported = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "report", "--storage",
         f"sqlite:///{tmp_path / 'v.db'}", "--study", "v", "--output", str(page)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert reported.returncode == 0, reported.stderr
    assert "<p class='reference-faster'>cublas is faster than the best config" in page.read_text()


def test_nothing_is_said_when_the_best_config_beats_the_reference(tmp_path):
    tuned, best, module = _sweep(tmp_path, best_ratio=1.2)
    assert "is faster than the best config" not in tuned.stdout + tuned.stderr
    assert "reference_faster" not in json.loads(best.read_text())
    assert "is faster than the best config" not in module.read_text()
