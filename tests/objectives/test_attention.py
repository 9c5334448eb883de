"""The attention workload end to end on the CPU (interpreter): gate, resource model, a sweep."""

import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.failures import Infeasible, WrongResult
from autotune.kernels import attention_triton
from autotune.objectives import get_objective
from autotune.objectives.attention import AttentionObjective
from autotune.space import load_space

PROBLEM = {"B": 1, "H": 4, "H_KV": 2, "S": 40, "D": 32, "causal": True, "dtype": "bf16"}
SMALL = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
HOPPER = {"type": "cuda", "max_shared_memory": 232448}


def test_registered_with_its_space_and_directions():
    cls = get_objective("attention")
    assert cls is AttentionObjective and cls.space == "attention.yaml"
    assert cls.directions == {"ratio_to_sdpa": "maximize", "tflops": "maximize"}
    assert cls.default_problem({"type": "cuda"}) == {
        "B": 1, "H": 32, "H_KV": 8, "S": 4096, "D": 128, "causal": True, "dtype": "bf16"
    }  # fmt: skip


@pytest.mark.parametrize(("causal", "tma"), [(True, 0), (False, 0), (True, 1)])
def test_a_trial_checks_then_measures_against_sdpa(causal, tma):
    objective = AttentionObjective({**PROBLEM, "causal": causal, "dtype": "fp16"})
    m = objective.evaluate({**SMALL, "TMA": tma})
    assert set(m.values) == {"ratio_to_sdpa", "tflops"} and m.values["tflops"] > 0
    assert m.metrics["rel_error"] < 2e-3 and m.metrics["fastest_sdpa"] == "sdpa_math"
    assert m.values["ratio_to_sdpa"] == pytest.approx(m.metrics["sdpa_math_ms"] / m.metrics["ms"])
    # FLOPs: 4 * B * H * S^2 * D, half of it when causal; TFLOP/s = flops / ms / 1e9
    flops = 4 * 1 * 4 * 40 * 40 * 32 // (2 if causal else 1)
    assert m.values["tflops"] == pytest.approx(flops / m.metrics["ms"] / 1e9)
    assert m.metrics["sdpa_math_tflops"] == pytest.approx(flops / m.metrics["sdpa_math_ms"] / 1e9)
    assert "not a GPU figure" in m.metrics["timing_protocol"]


def test_an_inexpressible_config_is_infeasible():
    with pytest.raises(Infeasible, match="BLOCK_M=48"):
        AttentionObjective(PROBLEM).evaluate({**SMALL, "BLOCK_M": 48})
    with pytest.raises(ValueError, match="multiple of H_KV"):
        AttentionObjective({**PROBLEM, "H": 3})


def test_a_kernel_that_skips_query_blocks_fails_the_gate(monkeypatch):
    # a real defect: the grid covers the first half of the query rows only
    real = attention_triton.launcher

    def half_the_rows(q, k, v, out, **kwargs):
        half = q.shape[2] // 2
        return real(q[:, :, :half], k[:, :, :half], v[:, :, :half], out[:, :, :half], **kwargs)

    monkeypatch.setattr(attention_triton, "launcher", half_the_rows)
    with pytest.raises(WrongResult, match="NaN or inf"):
        AttentionObjective(PROBLEM).evaluate(SMALL)


def test_a_kernel_that_drops_the_causal_mask_fails_the_gate(monkeypatch):
    real = attention_triton.launcher

    def no_mask(q, k, v, out, **kwargs):
        return real(q, k, v, out, **{**kwargs, "causal": False})

    monkeypatch.setattr(attention_triton, "launcher", no_mask)
    with pytest.raises(WrongResult, match="relative error"):
        AttentionObjective(PROBLEM).evaluate(SMALL)


def test_the_space_rejects_what_does_not_fit_and_accepts_the_defaults():
    space = load_space("attention")
    big = AttentionObjective.default_problem({"type": "cuda"})
    # (256*128 + 4 * 2 * 256*128) * 2 = 589824 bytes of shared memory > 232448
    huge = {"BLOCK_M": 256, "BLOCK_N": 256, "num_warps": 8, "num_stages": 4, "TMA": 0}
    assert "shared_memory" in space.violations(huge, big, HOPPER)
    # (128*128 + 128*128) fp32 values over 128 threads = 256 registers each > 192
    assert space.violations({**huge, "BLOCK_N": 128, "num_warps": 4, "num_stages": 1},
                            big, HOPPER) == ["accumulator_registers"]  # fmt: skip
    assert "block_m_fits" in space.violations(SMALL | {"BLOCK_M": 128}, PROBLEM, HOPPER)
    # TMA's barriers: 128x128 in 3 stages fits with them (230400 bytes on sm_90), in 4 not
    tma = {"BLOCK_M": 128, "BLOCK_N": 128, "num_warps": 8, "num_stages": 3, "TMA": 1}
    assert not space.violations(tma, big, HOPPER)
    assert space.violations({**tma, "num_stages": 4}, big, HOPPER) == ["shared_memory"]
    for problem in (big, AttentionObjective.default_problem({"type": "cpu"}), PROBLEM,
                    {**big, "D": 256}):  # fmt: skip
        assert not space.violations(AttentionObjective(problem).default_config(), problem, HOPPER)


def test_a_sweep_of_the_new_workload_runs_with_the_default_first():
    objective = get_objective("attention")
    problem = objective.default_problem({"type": "cpu"})
    settings = SweepSettings(
        workload="attention", problem=problem, space=load_space(objective.space),
        objectives={"ratio_to_sdpa": "maximize"}, n_trials=4, seed=0, storage="memory",
        executor="inline", device={"type": "cpu", "max_shared_memory": 232448},
        baseline=objective(problem).default_config(),
    )  # fmt: skip
    study = Sweep(settings).run().study
    assert [t.user_attrs["status"] for t in study.trials] == ["ok"] * 4
    assert study.trials[0].params == {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4,
                                      "num_stages": 2, "TMA": 0}  # fmt: skip
