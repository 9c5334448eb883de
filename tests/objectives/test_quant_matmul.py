"""The quant-matmul workload end to end on the CPU (interpreter): both gates, the space, a sweep."""

import pytest
import torch

from autotune.device import detect_device
from autotune.driver import Sweep, SweepSettings
from autotune.failures import Infeasible, WrongResult
from autotune.kernels import quant_matmul_triton, split_k_workspace
from autotune.objectives import get_objective
from autotune.space import load_space

PROBLEM = {"M": 4, "N": 64, "K": 256, "dtype": "bf16", "max_error": 0.2}
CONFIG = {"BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32, "SPLIT_K": 2, "num_warps": 4,
          "num_stages": 2}  # fmt: skip


@pytest.mark.parametrize(
    ("level", "low", "high"),
    [("int8", 0.002, 0.03), ("int4-g128", 0.05, 0.2), ("int4-g64", 0.05, 0.2)],
)
def test_a_trial_checks_both_gates_then_measures_against_cublas(level, low, high):
    objective = get_objective("quant-matmul")(PROBLEM)
    m = objective.evaluate({**CONFIG, "weights": level})
    assert m.values["ratio_to_cublas"] > 0 and m.values["tflops"] > 0
    assert m.metrics["rel_error"] < 1e-2  # the kernel against its dequantized weights
    assert low < m.metrics["quant_error"] < high  # the weights against the real ones
    assert m.metrics["gbps"] > 0 and m.metrics["cublas_ms"] > 0
    # int8: 256 x 64 bytes + 64 fp16 scales; int4-gG: 128 x 64 bytes + 256/G x 64 scales
    assert m.metrics["weight_bytes"] == {"int8": 16512, "int4-g128": 8448, "int4-g64": 8704}[level]
    assert ("not a GPU figure" in m.metrics["timing_protocol"]) == quant_matmul_triton.INTERPRETED


def test_a_strict_max_error_refuses_int4_and_keeps_int8():
    objective = get_objective("quant-matmul")({**PROBLEM, "max_error": 0.02})
    for level in ("int4-g128", "int4-g64"):
        with pytest.raises(WrongResult, match=rf"{level} weights: quantization error 0\.\d+"):
            objective.evaluate({**CONFIG, "weights": level})
    assert objective.evaluate({**CONFIG, "weights": "int8"}).metrics["quant_error"] < 0.02


def test_an_fp16_problem_runs_on_fp16_weights():
    objective = get_objective("quant-matmul")({**PROBLEM, "dtype": "fp16", "M": 1})
    m = objective.evaluate({**CONFIG, "weights": "int4-g64", "SPLIT_K": 4})
    assert m.metrics["rel_error"] < 2e-3 and m.metrics["quant_error"] < 0.2


def test_a_kernel_that_skips_the_scales_fails_the_correctness_gate(monkeypatch):
    # a real defect: the kernel is handed scales of 1, so it multiplies by the raw integers;
    # the correctness gate (against float64 x @ dequantize(q, s)) catches it first
    real = quant_matmul_triton.launcher

    def no_scales(x, q, s, y, **config):
        return real(x, q, torch.ones_like(s), y, **config)

    monkeypatch.setattr(quant_matmul_triton, "launcher", no_scales)
    with pytest.raises(WrongResult, match="relative error"):
        get_objective("quant-matmul")(PROBLEM).evaluate({**CONFIG, "weights": "int8"})


def test_a_kernel_that_skips_half_the_columns_fails_the_gate(monkeypatch):
    real = quant_matmul_triton.launcher

    def half_the_columns(x, q, s, y, **config):
        half = q.shape[1] // 2
        return real(x, q[:, :half], s[:, :half], y[:, :half], **config)

    monkeypatch.setattr(quant_matmul_triton, "launcher", half_the_columns)
    with pytest.raises(WrongResult, match="NaN or inf"):
        get_objective("quant-matmul")(PROBLEM).evaluate({**CONFIG, "weights": "int4-g128"})


def test_infeasible_configs_are_refused_by_the_kernel_and_the_space():
    objective = get_objective("quant-matmul")(PROBLEM)
    for bad in ({"BLOCK_N": 48}, {"weights": "int4-g128", "BLOCK_K": 256},
                {"weights": "int4-g64", "BLOCK_K": 128}, {"weights": "int3"}):  # fmt: skip
        with pytest.raises(Infeasible):
            objective.evaluate({**CONFIG, "weights": "int8", **bad})
    with pytest.raises(Infeasible, match="not a multiple"):  # K = 192 holds no group of 128
        get_objective("quant-matmul")({**PROBLEM, "K": 192}).evaluate(
            {**CONFIG, "weights": "int4-g128"}
        )
    space = load_space(objective.space)
    device = detect_device().as_dict()
    problem = {"M": 16, "N": 4096, "K": 4096}
    ok = {"weights": "int4-g128", "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 4,
          "num_warps": 4, "num_stages": 3}  # fmt: skip
    assert not space.violations(ok, problem, device)
    assert space.violations({**ok, "BLOCK_K": 256}, problem, device) == ["block_in_group"]
    assert space.violations({**ok, "weights": "int4-g64"}, problem, device) == ["block_in_group"]
    assert not space.violations({**ok, "weights": "int8", "BLOCK_K": 256}, problem, device)
    assert "split_fits_k" in space.violations({**ok, "SPLIT_K": 16}, {**problem, "K": 1024}, device)
    assert "whole_groups" in space.violations(ok, {**problem, "K": 4032}, device)
    assert "tile_fits_m" in space.violations({**ok, "BLOCK_M": 32}, problem, device)
    big = {**ok, "weights": "int8", "BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 256,
           "num_warps": 8, "num_stages": 4}  # fmt: skip
    assert "shared_memory" in space.violations(big, {**problem, "M": 64}, device)


def test_a_sweep_of_the_new_workload_runs_with_the_default_first():
    objective = get_objective("quant-matmul")
    problem = objective.default_problem({"type": "cpu"})
    settings = SweepSettings(
        workload="quant-matmul", problem=problem, space=load_space(objective.space),
        objectives={"ratio_to_cublas": "maximize"}, n_trials=4, seed=0, storage="memory",
        executor="inline", device=detect_device().as_dict(),
        baseline=objective(problem).default_config(),
    )  # fmt: skip
    study = Sweep(settings).run().study
    launched = [t for t in study.trials if t.user_attrs["status"] != "infeasible"]
    assert [t.user_attrs["status"] for t in launched] == ["ok"] * 4
    # a decode problem (4 rows): int4 in groups of 128, K unsplit (2 K-steps of 128)
    assert study.trials[0].params == {
        "weights": "int4-g128", "BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "SPLIT_K": 1,
        "num_warps": 4, "num_stages": 3,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("problem", "level", "split", "width", "rows"),
    [
        # one row: the 16-row tile too, 64 tiles x 8 = 512 programs (two per SM asked: 264)
        ({"M": 1, "N": 4096, "K": 4096}, "int4-g128", 8, 64, 16),
        # no room for int4: the same 64 tiles x 8, K-blocks of 64
        ({"M": 16, "N": 4096, "K": 4096, "max_error": 0.05}, "int8", 8, 64, 16),
        ({"M": 1, "N": 4096, "K": 4000}, "int8", 8, 64, 16),  # K not whole groups of 64
        ({"M": 2, "N": 4096, "K": 4096}, "int4-g128", 8, 64, 16),
        ({"M": 16, "N": 4096, "K": 4032}, "int4-g64", 8, 64, 16),  # not whole groups of 128
    ],
)
def test_the_decode_default_takes_int4_where_the_gate_allows_and_passes_the_space(
    problem, level, split, width, rows
):
    full = {"dtype": "bf16", "max_error": 0.2, **problem}
    config = get_objective("quant-matmul")(full).default_config()
    assert (config["weights"], config["SPLIT_K"], config["BLOCK_N"]) == (level, split, width)
    assert config["BLOCK_M"] == rows
    device = {"type": "cuda", "max_shared_memory": 232448}
    assert not load_space("quant_matmul").violations(config, full, device)


def test_more_rows_than_a_decode_take_int8_in_one_tile_row_with_k_split():
    # 64 rows of 4096 x 4096: one 64-row tile-row of 64 tiles, K split for two programs an SM
    # (unsplit, 64 programs on 132 SMs read 0.34x bf16 cuBLAS on the H200; split 8, 0.64x)
    full = {"M": 64, "N": 4096, "K": 4096, "dtype": "bf16", "max_error": 0.2}
    config = get_objective("quant-matmul")(full).default_config()
    assert (config["weights"], config["BLOCK_M"], config["BLOCK_N"], config["SPLIT_K"]) == (
        "int8", 64, 64, 8)  # fmt: skip
    device = {"type": "cuda", "max_shared_memory": 232448}
    assert not load_space("quant_matmul").violations(config, full, device)


def test_a_counter_an_earlier_trial_left_off_zero_does_not_fail_the_next():
    # every K-split launcher of a stream shares its tile counters; a counter left at 1 (a
    # launch that never finished a tile) made every later launch over that tile skip or
    # garble its sum, trial after trial. A trial now starts from zeroed counters.
    objective = get_objective("quant-matmul")(PROBLEM)
    objective.evaluate({**CONFIG, "weights": "int8"})
    for _, counters in split_k_workspace._BUFFERS.values():
        counters.fill_(1)
    m = objective.evaluate({**CONFIG, "weights": "int8"})
    assert m.metrics["rel_error"] < 1e-2
    assert split_k_workspace.counters_off_zero("cpu") == 0


def test_timed_launches_that_leave_a_counter_off_zero_fail_the_trial(monkeypatch):
    # a defect injected after the checked launch: each timed launch leaves tile 0's counter
    # one up, as a launch that never summed its tile would; its timings are not of the whole
    # product, so the trial fails instead of reporting them
    real = quant_matmul_triton.launcher

    def leaves_a_tile(x, q, s, y, **config):
        run = real(x, q, s, y, **config)
        calls = []

        def launch() -> None:
            run()
            calls.append(1)
            if len(calls) > 1:
                for _, counters in split_k_workspace._BUFFERS.values():
                    counters[0] += 1

        return launch

    monkeypatch.setattr(quant_matmul_triton, "launcher", leaves_a_tile)
    with pytest.raises(WrongResult, match="counters left off zero"):
        get_objective("quant-matmul")(PROBLEM).evaluate({**CONFIG, "weights": "int8"})
    assert split_k_workspace.counters_off_zero("cpu") == 0  # and the next trial starts clean
