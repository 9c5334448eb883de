"""Tests of the Triton matmul kernel: real runs (the interpreter on a CPU machine), no mocks."""

from __future__ import annotations

import json
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
    assert type(mt._matmul_kernel).__name__ == "InterpretedFunction"


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
    with pytest.raises(ValueError, match="bf16 or fp16"):
        mt.matmul(a.float(), a.t().float(), **SMALL)
    with pytest.raises(ValueError, match="bf16 or fp16"):
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


# Compiles the real kernel for sm_90 with Triton's compiler, which needs no GPU, in a process
# where the interpreter is off. Tells apart a kernel that fails to compile (a bug here) from a
# change in Triton's internal compile API (skipped).
_SM90_SCRIPT = """
import json, os, sys
os.environ["TRITON_INTERPRET"] = "0"
from autotune.kernels import matmul_triton as mt
from autotune.triton_failures import compile_failure
from triton.compiler.errors import CompilationError
try:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
except Exception as exc:
    print(json.dumps({"api": repr(exc)})); sys.exit()

def compile_sm90(BM, BN, BK, stages, masked, dt):
    fn = mt._matmul_kernel
    values = [None] * 7 + [1, None, 1, None, 1, BM, BN, BK, 8, masked, False]
    sig, constexprs = {}, {}
    for i, (name, value) in enumerate(zip(fn.arg_names, values)):
        sig[name] = ("*" + dt) if i < 3 else "i32" if value is None else "constexpr"
        if value is not None:
            constexprs[(i,)] = value
    attrs = {(i,): [["tt.divisibility", 16]] for i in (0, 1, 2, 3, 4, 5, 6, 8, 10)}
    src = ASTSource(fn, sig, constexprs, attrs)
    opts = {"num_warps": 4, "num_stages": stages}
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)

result = {"shared": [], "bad": None}
for cfg in [(128, 128, 64, 3, False, "bf16"), (64, 32, 32, 2, True, "fp16")]:
    try:
        kernel = compile_sm90(*cfg)
    except CompilationError as exc:
        print(json.dumps({"kernel_bug": str(exc)})); sys.exit()
    except Exception as exc:
        print(json.dumps({"api": repr(exc)[:300]})); sys.exit()
    result["shared"].append([kernel.metadata.shared, mt.shared_memory_bytes(*cfg[:4], cfg[5])])
try:
    compile_sm90(64, 32, 8, 2, False, "bf16")  # tl.dot needs K >= 16
except Exception as exc:
    failure = compile_failure(exc)
    result["bad"] = [failure.status.value, str(failure)]
print(json.dumps(result))
"""


@pytest.mark.slow
@pytest.mark.skipif(
    not mt.INTERPRETED, reason="on a GPU machine test_compile_only compiles for real"
)
def test_compiles_for_sm90_without_a_gpu(tmp_path) -> None:
    env = {**os.environ, "TRITON_INTERPRET": "0", "TRITON_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _SM90_SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if "api" in result:
        pytest.skip(f"Triton's compile API differs from 3.7's: {result['api']}")
    assert "kernel_bug" not in result, result.get("kernel_bug")
    # the estimate is exactly what Triton allocates for these tiles on sm_90
    for compiled, estimated in result["shared"]:
        assert compiled == estimated
    status, message = result["bad"]
    assert status == "compile_error" and "K >= 16" in message
