"""The roofline of a matmul study's report: its ceilings as measured, at any scale."""

from __future__ import annotations

import optuna
import pytest

pytest.importorskip("plotly")


def _matmul_study(cublas_tflops: float, copy_ms: float) -> optuna.Study:
    """A stored matmul sweep of one trial, its metrics as a trial records them."""
    from autotune.driver.trial_attrs import STUDY

    study = optuna.create_study(direction="maximize")
    study.set_user_attr(STUDY, {"workload": "matmul",
                                "problem": {"M": 16, "N": 64, "K": 32, "dtype": "bf16"},
                                "objectives": {"ratio_to_cublas": "maximize"}})  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params={"BLOCK_M": 16}, value=0.5,
        user_attrs={"status": "ok", "metrics": {"ms": 0.05, "cublas_tflops": cublas_tflops,
                                                "copy_ms": copy_ms}},
        distributions={"BLOCK_M": optuna.distributions.CategoricalDistribution([16])},
    ))  # fmt: skip
    return study


def _names(page: str) -> str:
    """The page with the slashes plotly's JSON escapes as ``\\u002f`` written plainly."""
    return page.replace("\\u002f", "/")


def test_a_small_ceiling_is_named_with_its_figure_not_as_zero() -> None:
    # a CPU sweep (Triton's interpreter) or any ceiling under 0.5 TFLOP/s was drawn as
    # "compute ceiling: cuBLAS, 0 TFLOP/s" and "bandwidth ceiling: copy, 0.00 TB/s"
    from autotune.report import report_html

    page = _names(report_html(_matmul_study(cublas_tflops=0.0123, copy_ms=2.0)))
    assert "compute ceiling: cuBLAS, 0.0123 TFLOP/s" in page
    # B of 32x64 bf16 read and written in 2 ms: 8192 bytes / 2e-3 s = 4.1e-6 TB/s
    assert "bandwidth ceiling: copy, 4.1e-06 TB/s" in page
    assert "0 TFLOP/s" not in page and "0.00 TB/s" not in page
    large = _names(report_html(_matmul_study(cublas_tflops=757.4, copy_ms=1e-6)))
    assert "compute ceiling: cuBLAS, 757 TFLOP/s" in large  # as before
    assert "bandwidth ceiling: copy, 8.19 TB/s" in large
