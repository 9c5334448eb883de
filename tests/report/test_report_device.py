"""Where a sweep ran, as the report says it: the device's fields that it has, and no others."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("plotly")


def _swept_on(tmp_path: Path, device: dict):
    from autotune.driver import Sweep, SweepSettings
    from autotune.objectives.replay import load_table, space_from_table

    table = tmp_path / "t.csv"
    table.write_text("a,tflops\n1,10.0\n2,20.0\n")
    settings = SweepSettings(
        workload="replay", problem={"table": str(table), "params": ["a"], "metric": "tflops"},
        space=space_from_table(load_table(str(table)), ["a"], str(table)),
        objectives={"tflops": "maximize"}, seed=0, n_trials=2, storage="memory",
        study_name="s", executor="inline", warm_start="off", device=device,
    )  # fmt: skip
    return Sweep(settings).run().study


def test_a_cpu_is_named_without_the_empty_fields_of_a_gpu(tmp_path):
    # a CPU read 'device: AMD EPYC (compute capability , driver )'
    from autotune.report import report_html

    cpu = {"type": "cpu", "name": "AMD EPYC", "compute_capability": "", "driver": ""}
    assert "<li>device: AMD EPYC</li>" in report_html(_swept_on(tmp_path, cpu))
    gpu = {"type": "cuda", "name": "NVIDIA H200", "compute_capability": "9.0", "driver": ""}
    page = report_html(_swept_on(tmp_path, gpu))
    assert "<li>device: NVIDIA H200 (compute capability 9.0)</li>" in page
    full = {**gpu, "driver": "580.1"}
    page = report_html(_swept_on(tmp_path, full))
    assert "<li>device: NVIDIA H200 (compute capability 9.0, driver 580.1)</li>" in page
