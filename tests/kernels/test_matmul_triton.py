"""Tests of the Triton matmul kernel: real runs (the interpreter on a CPU machine), no mocks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from autotune.kernels import matmul_triton as mt

DEVICE = "cpu" if mt.INTERPRETED else "cuda"
SMALL = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 1, "num_warps": 1, "num_stages": 1}


def _rand(*shape: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(dtype).to(DEVICE)


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


@pytest.mark.skipif(not mt.INTERPRETED, reason="CUDA present: the kernel is compiled")
def test_module_switches_on_the_interpreter_without_cuda() -> None:
    assert os.environ.get("TRITON_INTERPRET") == "1"
    assert type(mt.matmul_tiled_kernel).__name__ == "InterpretedFunction"


@pytest.mark.skipif(not mt.INTERPRETED, reason="CUDA present: the kernel is compiled")
def test_switch_works_even_when_triton_was_imported_first() -> None:
    # A fresh process with TRITON_INTERPRET unset imports triton, then the kernel module.
    script = textwrap.dedent(
        """
        import os, triton, torch
        assert "TRITON_INTERPRET" not in os.environ
        from autotune.kernels import matmul_triton as mt
        a = torch.randn(20, 18).half()
        c = mt.matmul(a, a.t(), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
        ref = mt.reference_matmul(a, a.t())
        err = float((c.float() - ref).norm() / ref.norm())
        print(mt.INTERPRETED, os.environ["TRITON_INTERPRET"], err < 2e-3)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1", "True"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize(
    ("M", "N", "K", "config"),
    [
        (67, 45, 33, SMALL),  # nothing is a multiple of 16: every edge is masked
        (67, 45, 33, {**SMALL, "BLOCK_M": 32, "BLOCK_K": 32, "GROUP_M": 2}),  # 3 tile-rows
        (80, 48, 40, {**SMALL, "GROUP_M": 3}),  # 5 tile-rows in bands of 3: the last is short
        (64, 64, 64, {**SMALL, "BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 32}),  # unmasked path
        (1, 1, 1, SMALL),
        (9, 200, 17, {**SMALL, "GROUP_M": 8}),  # one tile-row, GROUP_M larger than the grid
    ],
)
def test_matches_reference(M: int, N: int, K: int, config: dict, dtype: torch.dtype) -> None:
    a, b = _rand(M, K, dtype=dtype, seed=1), _rand(K, N, dtype=dtype, seed=2)
    out = torch.full((M, N), float("nan"), dtype=dtype, device=DEVICE)  # poisoned
    c = mt.matmul(a, b, out=out, **config)
    assert c is out and c.dtype == dtype
    assert torch.isfinite(c).all(), "some outputs were never written"
    assert _rel_error(c, mt.reference_matmul(a, b)) < (1e-2 if dtype == torch.bfloat16 else 2e-3)


def test_strided_operands() -> None:
    # transposed views: A's and B's K dimension is the strided one
    at = _rand(33, 67, dtype=torch.bfloat16, seed=3)
    bt = _rand(45, 33, dtype=torch.bfloat16, seed=4)
    c = mt.matmul(at.t(), bt.t(), **SMALL)
    assert c.shape == (67, 45)
    assert _rel_error(c, mt.reference_matmul(at.t(), bt.t())) < 1e-2


def test_default_config_and_empty_k() -> None:
    a, b = _rand(64, 64, dtype=torch.bfloat16, seed=5), _rand(64, 64, dtype=torch.bfloat16, seed=6)
    assert _rel_error(mt.matmul(a, b), mt.reference_matmul(a, b)) < 1e-2
    # K = 0: the sum is empty, every output is 0
    z = mt.matmul(a[:, :0], b[:0], **SMALL)
    assert z.shape == (64, 64) and bool((z == 0).all())


def test_launcher_reuses_its_setup() -> None:
    a, b = _rand(20, 30, dtype=torch.float16, seed=7), _rand(30, 40, dtype=torch.float16, seed=8)
    out = torch.empty(20, 40, dtype=torch.float16, device=DEVICE)
    run = mt.launcher(a, b, out, **SMALL)
    run()
    first = out.clone()
    out.fill_(float("nan"))
    run()
    assert torch.equal(out, first)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"BLOCK_K": 48}, "BLOCK_K=48 must be a power of two >= 16"),
        ({"BLOCK_M": 8}, "BLOCK_M=8 must be a power of two >= 16"),
        ({"num_warps": 3}, "num_warps=3"),
        ({"num_warps": 64}, "num_warps=64"),
        ({"GROUP_M": 0}, "GROUP_M=0"),
        ({"num_stages": 0}, "num_stages=0"),
    ],
)
def test_check_config_rejects(change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mt.check_config(**{**mt.DEFAULT_CONFIG, **change})


def test_operand_checks() -> None:
    a = _rand(4, 5, dtype=torch.bfloat16, seed=9)
    with pytest.raises(ValueError, match="inner sizes differ"):
        mt.matmul(a, a, **SMALL)
    with pytest.raises(ValueError, match="bf16, fp16 or fp8"):
        mt.matmul(a.float(), a.t().float(), **SMALL)
    with pytest.raises(ValueError, match="bf16, fp16 or fp8"):
        mt.matmul(a, a.t().half(), **SMALL)
    with pytest.raises(ValueError, match="out must be"):
        mt.matmul(a, a.t(), out=torch.empty(4, 5, dtype=torch.bfloat16, device=DEVICE), **SMALL)


def test_shared_memory_estimate() -> None:
    # num_stages * (BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N) * 2 bytes
    assert mt.shared_memory_bytes(128, 256, 64, 4, "bf16") == 4 * (128 * 64 + 64 * 256) * 2
    assert mt.shared_memory_bytes(64, 64, 32, 2, torch.float16) == 2 * (64 * 32 + 32 * 64) * 2


def test_compile_only() -> None:
    cfg = {**mt.DEFAULT_CONFIG, "BLOCK_N": 64}
    kernel = mt.compile_only(256, 256, 256, "fp16", **cfg)
    if mt.INTERPRETED:
        assert kernel is None  # nothing to compile under the interpreter
    else:
        assert kernel.metadata.shared == mt.shared_memory_bytes(128, 64, 64, 3, "fp16")
    with pytest.raises(ValueError):
        mt.compile_only(256, 256, 256, "fp16", **{**cfg, "BLOCK_K": 24})


@pytest.mark.parametrize("split_k", [2, 3, 8])
@pytest.mark.parametrize(("M", "N", "K"), [(1, 40, 200), (20, 33, 130), (16, 64, 64)])
def test_split_k_matches_reference_and_its_counters_reset(M, N, K, split_k) -> None:
    # K=200 in 32-steps: 7 steps, the last partial; with 8 splits one split gets no step at all
    a, b = _rand(M, K, dtype=torch.bfloat16, seed=11), _rand(K, N, dtype=torch.bfloat16, seed=12)
    out = torch.empty(M, N, dtype=torch.bfloat16, device=DEVICE)
    cfg = {**SMALL, "BLOCK_K": 32, "SPLIT_K": split_k}
    run = mt.launcher(a, b, out, **cfg)
    for _ in range(2):  # the second launch finds the tile counters reset by the first
        out.fill_(float("nan"))
        run()
        assert torch.isfinite(out).all()
        assert _rel_error(out, mt.reference_matmul(a, b)) < 1e-2


@pytest.mark.parametrize("subtile", [0, 1])
@pytest.mark.parametrize("schedule", ["persistent", "persistent_flat", "stream_k"])
@pytest.mark.parametrize("kmajor", [False, True])
@pytest.mark.parametrize(("M", "N", "K"), [(64, 64, 64), (72, 40, 56), (8, 136, 200)])
def test_persistent_schedule_matches_reference(M, N, K, kmajor, schedule, subtile) -> None:
    # ragged edges: the descriptors zero-fill reads past them and clip the writes (a subtiled
    # epilogue's second half too, which at N=40 lies wholly past the edge of the last tile)
    a = _rand(M, K, dtype=torch.float16, seed=13)
    b = (
        _rand(N, K, dtype=torch.float16, seed=14).t()
        if kmajor
        else _rand(K, N, dtype=torch.float16, seed=14)
    )
    cfg = {**SMALL, "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "SCHEDULE": schedule,
           "EPILOGUE_SUBTILE": subtile}  # fmt: skip
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device=DEVICE)
    mt.matmul(a, b, out=out, **cfg)
    assert torch.isfinite(out).all()
    assert _rel_error(out, mt.reference_matmul(a, b)) < 2e-3


@pytest.mark.parametrize("subtile", [0, 1])
@pytest.mark.parametrize(
    ("M", "N", "K"),
    [
        (80, 48, 128),  # 15 tiles on 4 programs: 3 left over, 8 steps each, shares of 6
        (80, 48, 32),  # 2 steps a tile, shares of 2: each left-over tile is one program's
        (36, 40, 200),  # 9 tiles: 1 left over, its 13 steps (the last partial) in 4 shares
        (16, 48, 64),  # 3 tiles, fewer than programs: their 12 steps shared by all 4
        (8, 16, 200),  # 1 tile (a decode row): its 13 steps in 4 shares
        (64, 32, 128),  # 8 tiles on 4 programs: whole waves only
    ],
)
def test_stream_k_matches_reference_repeatably(M, N, K, subtile) -> None:
    # the interpreter runs 4 programs (mt._INTERPRETER_PROGRAMS), so the small shapes above
    # leave the last wave partial; a second launch finds the counters reset and gives the same
    # bits (the partials are added in a fixed order whoever finishes last)
    a, b = _rand(M, K, dtype=torch.float16, seed=21), _rand(K, N, dtype=torch.float16, seed=22)
    cfg = {**SMALL, "SCHEDULE": "stream_k", "EPILOGUE_SUBTILE": subtile}
    out = torch.empty(M, N, dtype=torch.float16, device=DEVICE)
    run = mt.launcher(a, b, out, **cfg)
    results = []
    for _ in range(2):
        out.fill_(float("nan"))
        run()
        results.append(out.clone())
    assert torch.isfinite(results[0]).all()
    assert _rel_error(results[0], mt.reference_matmul(a, b)) < 2e-3
    assert torch.equal(results[0], results[1])


def test_stream_k_plans_a_slot_a_program_and_a_counter_a_left_over_tile(monkeypatch) -> None:
    # the plan's arithmetic for 4 programs, the interpreter's count, on a GPU too (its SMs)
    monkeypatch.setattr(mt, "_programs_available", lambda: mt._INTERPRETER_PROGRAMS)
    strides = {"a": (128, 1), "b": (48, 1), "c": (48, 1)}
    cfg = mt._checked({**SMALL, "SCHEDULE": "stream_k"})
    plan = mt._plan(80, 48, 128, torch.float16, strides, cfg)
    assert plan.grid == (4,) and plan.pointers == 5
    assert plan.workspace == ((4 + 3) * 16 * 16, 3)  # 15 tiles on 4 programs: 3 left over
    whole_waves = mt._plan(64, 32, 128, torch.float16, strides, cfg)  # 8 tiles on 4
    assert whole_waves.workspace == (0, 0)
    # fewer tiles than programs: every program takes a share of their K-steps (persistent
    # schedules would leave one idle)
    skinny = mt._plan(16, 48, 64, torch.float16, strides, cfg)  # 3 tiles x 4 steps
    assert skinny.grid == (4,) and skinny.workspace == ((4 + 3) * 16 * 16, 3)
    persistent = mt._plan(16, 48, 64, torch.float16, strides, {**cfg, "SCHEDULE": "persistent"})
    assert persistent.grid == (3,)
    one_step = mt._plan(16, 32, 16, torch.float16, strides, {**cfg, "BLOCK_K": 16})
    assert one_step.grid == (2,)  # 2 tiles x 1 step: no more programs than iterations


@pytest.mark.parametrize(("M", "N", "K"), [(64, 32, 128), (80, 48, 128)])
def test_stream_k_pointers_are_typed_with_or_without_a_partial_wave(M, N, K) -> None:
    # 8 tiles on 4 programs leave no shares, yet the kernel is compiled with its workspace and
    # counter pointers: an fp32 and an int32 one (a bf16 counter failed to compile on the H200:
    # "atomic_xchg does not support bf16")
    a = _rand(M, K, dtype=torch.bfloat16, seed=23)
    b = _rand(K, N, dtype=torch.bfloat16, seed=24)
    out = torch.empty(M, N, dtype=torch.bfloat16, device=DEVICE)
    cfg = mt._checked({**SMALL, "SCHEDULE": "stream_k"})
    strides = {"a": a.stride(), "b": b.stride(), "c": out.stride()}
    plan = mt._plan(M, N, K, a.dtype, strides, cfg)
    for shared in (True, False):
        pointers = mt._pointers(plan, a, b, out, cfg, shared_workspace=shared)
        assert [p.dtype for p in pointers] == [torch.bfloat16] * 3 + [torch.float32, torch.int32]


def test_persistent_schedule_refuses_rows_tma_cannot_address() -> None:
    a = _rand(16, 20, dtype=torch.float16, seed=15)  # rows of 40 bytes: not 16-byte aligned
    with pytest.raises(ValueError, match="16-byte aligned"):
        mt.matmul(a, _rand(20, 16, dtype=torch.float16, seed=16), SCHEDULE="persistent", **SMALL)


@pytest.mark.parametrize("schedule", ["tiled", "persistent"])
def test_fp8_operands_give_a_bf16_result(schedule) -> None:
    a = _rand(32, 64, dtype=torch.float32, seed=17).to(torch.float8_e4m3fn)
    b = _rand(48, 64, dtype=torch.float32, seed=18).to(torch.float8_e4m3fn).t()  # K-major
    c = mt.matmul(a, b, **{**SMALL, "BLOCK_K": 32, "SCHEDULE": schedule})
    assert c.dtype == torch.bfloat16
    # e4m3 values are exact in the reference; only the fp32 sum and the bf16 rounding differ
    assert _rel_error(c, mt.reference_matmul(a, b)) < 1e-2


def test_check_config_refuses_a_split_persistent_schedule() -> None:
    with pytest.raises(ValueError, match="needs the tiled schedule"):
        mt.check_config(**{**mt.DEFAULT_CONFIG, "SPLIT_K": 2, "SCHEDULE": "persistent"})
    with pytest.raises(ValueError, match="SCHEDULE='stream'"):
        mt.check_config(**{**mt.DEFAULT_CONFIG, "SCHEDULE": "stream"})
    with pytest.raises(ValueError, match="needs a persistent schedule"):
        mt.check_config(**{**mt.DEFAULT_CONFIG, "EPILOGUE_SUBTILE": 1})
