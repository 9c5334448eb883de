"""The rmsnorm workload end to end on the CPU (interpreter): gate, resource model, a sweep."""

import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.failures import Infeasible, WrongResult
from autotune.kernels import rmsnorm_triton
from autotune.objectives import get_objective
from autotune.space import load_space

PROBLEM = {"M": 6, "N": 96, "dtype": "bf16", "residual": True, "eps": 1e-6}


def test_a_trial_checks_then_measures_against_torch_and_copy():
    objective = get_objective("rmsnorm")(PROBLEM)
    m = objective.evaluate({"BLOCK_N": 32, "ROWS": 2, "num_warps": 1})
    assert m.values["gbps"] > 0 and m.values["copy_fraction"] > 0
    assert m.metrics["rel_error"] < 1e-2 and m.metrics["ratio_to_torch"] > 0
    assert "not a GPU figure" in m.metrics["timing_protocol"]
    assert set(objective.slo_metrics()) <= set(m.all_metrics())  # what --slo may limit


def test_a_kernel_that_skips_rows_fails_the_gate(monkeypatch):
    # a real defect: the grid covers half the rows, so half the outputs keep their poison
    real = rmsnorm_triton.launcher

    def half_the_rows(x, weight, y, **kwargs):
        return real(x[: x.shape[0] // 2], weight, y[: y.shape[0] // 2], **{
            k: (v[: v.shape[0] // 2] if k in ("residual", "h") else v) for k, v in kwargs.items()
        })  # fmt: skip

    monkeypatch.setattr(rmsnorm_triton, "launcher", half_the_rows)
    with pytest.raises(WrongResult, match="NaN or inf"):
        get_objective("rmsnorm")(PROBLEM).evaluate({"BLOCK_N": 32, "ROWS": 1, "num_warps": 1})


def test_infeasible_configs_are_refused_by_the_kernel_and_the_space():
    with pytest.raises(Infeasible):
        get_objective("rmsnorm")(PROBLEM).evaluate({"BLOCK_N": 48, "ROWS": 1, "num_warps": 1})
    space = load_space("rmsnorm")
    problem = {"N": 4096}
    # the resource model: a one-pass row of 16384 fp32 values needs 8 warps' registers or more
    wide = {"N": 16384}
    assert space.violations({"BLOCK_N": 16384, "ROWS": 1, "num_warps": 4}, wide, {}) == [
        "registers"
    ]
    assert "block_fits_row" in space.violations(
        {"BLOCK_N": 16384, "ROWS": 1, "num_warps": 16}, problem, {}
    )
    assert "threads_busy" in space.violations(
        {"BLOCK_N": 256, "ROWS": 1, "num_warps": 16}, problem, {}
    )
    assert not space.violations({"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8}, problem, {})


def test_a_sweep_of_the_new_workload_runs_with_the_default_first():
    objective = get_objective("rmsnorm")
    problem = objective.default_problem({"type": "cpu"})
    settings = SweepSettings(
        workload="rmsnorm", problem=problem, space=load_space(objective.space),
        objectives={"copy_fraction": "maximize"}, n_trials=4, seed=0, storage="memory",
        executor="inline", device={"type": "cpu"}, baseline=objective(problem).default_config(),
    )  # fmt: skip
    study = Sweep(settings).run().study
    assert [t.user_attrs["status"] for t in study.trials] == ["ok"] * 4
    assert study.trials[0].params == {"BLOCK_N": 256, "ROWS": 1, "num_warps": 8}
