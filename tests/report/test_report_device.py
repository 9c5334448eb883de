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


def test_the_winner_s_telemetry_reads_as_readings_or_none_recorded(tmp_path):
    # a CPU sweep (no NVML) read "the winner's telemetry: {}", and a GPU's as the JSON
    # of its record, a reading NVML could not take as NaN
    import optuna

    from autotune.driver.trial_attrs import TELEMETRY
    from autotune.report import report_html

    cpu = {"type": "cpu", "name": "AMD EPYC", "compute_capability": "", "driver": ""}
    study = _swept_on(tmp_path, cpu)
    page = report_html(study)
    assert "<li>the winner's telemetry: none recorded</li>" in page
    assert "telemetry: {}" not in page
    # the same sweep, its trials stored again with a GPU's readings
    gpu_study = optuna.create_study(study_name="s", direction="maximize")
    for key, value in study.user_attrs.items():
        gpu_study.set_user_attr(key, value)
    readings = {"sm_clock_mhz": 1980, "power_w": 350.25, "temperature_c": None,
                "mem_clock_mhz": "nan", "throttle_reasons": "0x0"}  # fmt: skip
    for trial in study.trials:
        attrs = {**trial.user_attrs, TELEMETRY: readings}
        gpu_study.add_trial(optuna.trial.create_trial(
            params=trial.params, distributions=trial.distributions, values=trial.values,
            user_attrs=attrs, system_attrs=trial.system_attrs,
        ))  # fmt: skip
    page = report_html(gpu_study)
    assert ("<li>the winner's telemetry: sm_clock_mhz 1980 MHz, power_w 350 W, "
            "throttle_reasons 0x0</li>") in page  # fmt: skip
