"""Experiment (issue 8, M=1 on an H100): a one-row bf16 product on the CUDA cores (a GEMV: each
weight loaded once, multiplied in fp32 where it was loaded, the K-split partials summed by the
last split) against cuBLAS, a copy of B, and the matmul kernel's default and session 62's
winner, streamed as the objective streams decode products (input sets spanning four L2
caches, launches back to back from a CUDA graph, rotated rounds, medians of round medians).

The tile suite's M=1 product pads its row to a 16-row tensor-core tile and reads the weights
through shared memory: on an H100 it reached 0.80 of a copy's bandwidth where cuBLAS reads
them at about 0.87 (session 62: 0.924x cuBLAS). This asks whether a plain GEMV does better,
before it is worth a schedule of the matmul kernel.

Run (GPU machine, after the wheel is installed):
    python benchmarks/gpu/gemv_one_row.py [--rounds 5] [--shapes 4096x4096,14336x4096]
CPU check of the kernel (the Triton interpreter):
    TRITON_INTERPRET=1 python benchmarks/gpu/gemv_one_row.py --check-only
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # streamed_bf16 beside this file

from autotune.kernels import interpreter  # noqa: E402,F401 - the interpreter switch, before triton

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ARGS = argparse.ArgumentParser()
ARGS.add_argument("--rounds", type=int, default=5)
ARGS.add_argument("--shapes", default="4096x4096,14336x4096,4096x14336",
                  help="NxK of y[1,N] = x[1,K] @ W[K,N]")  # fmt: skip
ARGS.add_argument("--check-only", action="store_true")
#: (BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages) scanned at every shape
GRID = [
    (bn, bk, split, warps, stages)
    for bn, bk in ((128, 64), (256, 32), (256, 64), (512, 16), (512, 32), (1024, 16))
    for split in (2, 4, 8, 16)
    for warps in (4, 8)
    for stages in (1, 3)
]


@triton.jit
def gemv_kernel(
    x_ptr, w_ptr, y_ptr, ws_ptr, lock_ptr, N, K, stride_wk,
    BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr,
    NUM_STAGES: tl.constexpr,
):  # fmt: skip
    # one program: BLOCK_N columns of y over one of SPLIT_K contiguous shares of K; each thread
    # keeps its products in fp32 where it loaded the weights and they are summed once at the end
    tile, split = tl.program_id(0), tl.program_id(1)
    cols = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    share = tl.cdiv(tl.cdiv(K, SPLIT_K), BLOCK_K) * BLOCK_K
    k0 = split * share
    acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
    for kb in tl.range(0, share, BLOCK_K, num_stages=NUM_STAGES):
        k = k0 + kb + tl.arange(0, BLOCK_K)
        k_ok = k < K
        x = tl.load(x_ptr + k, mask=k_ok, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + k[:, None] * stride_wk + cols[None, :],
                    mask=k_ok[:, None] & col_ok[None, :], other=0.0)  # fmt: skip
        acc += x[:, None] * w.to(tl.float32)
    out = tl.sum(acc, axis=0)
    if SPLIT_K == 1:
        tl.store(y_ptr + cols, out.to(y_ptr.dtype.element_ty), mask=col_ok)
    else:
        partial = ws_ptr + cols
        tl.store(partial + split * N, out, mask=col_ok)
        tl.debug_barrier()
        ticket = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel")
        if ticket == SPLIT_K - 1:
            total = tl.zeros((BLOCK_N,), dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):
                total += tl.load(partial + s * N, mask=col_ok, other=0.0, cache_modifier=".cg")
            tl.store(y_ptr + cols, total.to(y_ptr.dtype.element_ty), mask=col_ok)
            tl.atomic_xchg(lock_ptr + tile, 0)


def gemv_launcher(x, w, y, ws, locks, cfg):
    """A function that computes y[1, N] = x[1, K] @ w[K, N] with ``cfg``
    (BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)."""
    bn, bk, split, warps, stages = cfg
    K, N = w.shape
    grid = (triton.cdiv(N, bn), split)

    def run() -> None:
        gemv_kernel[grid](x, w, y, ws, locks, N, K, w.stride(0), BLOCK_N=bn, BLOCK_K=bk,
                          SPLIT_K=split, NUM_STAGES=stages, num_warps=warps)  # fmt: skip

    return run


def check_on_cpu() -> None:
    """Every split and a ragged N and K against torch, under the interpreter."""
    gen = torch.Generator().manual_seed(0)
    for (N, K), cfg in itertools.product(((96, 80), (64, 64)), ((32, 16, 1, 4, 1),
                                                                 (32, 16, 3, 4, 1))):  # fmt: skip
        x = torch.randn(1, K, generator=gen).bfloat16()
        w = torch.randn(K, N, generator=gen).bfloat16()
        y = torch.full((1, N), float("nan")).bfloat16()
        ws = torch.empty(cfg[2] * N)
        locks = torch.zeros(triton.cdiv(N, cfg[0]), dtype=torch.int32)
        gemv_launcher(x, w, y, ws, locks, cfg)()
        ref = x.float() @ w.float()
        err = (y.float() - ref).abs().max().item()
        assert err <= 0.02 * ref.abs().max().item(), (N, K, cfg, err)
        assert int(locks.sum()) == 0
    print("gemv kernel: correct under the interpreter")


def main() -> None:
    args = ARGS.parse_args()
    if args.check_only or os.environ.get("TRITON_INTERPRET") == "1":
        check_on_cpu()
        return
    from streamed_bf16 import StreamedProduct

    from autotune.kernels import matmul_triton as mm
    from autotune.timing import interleaved

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{torch.cuda.get_device_name()}, L2 {l2 / 2**20:.0f} MiB; {args.rounds} rounds")
    for shape in args.shapes.split(","):
        N, K = (int(v) for v in shape.split("x"))
        problem = StreamedProduct.make(1, N, K, l2)
        fns = problem.baselines()
        default = mm.default_config(1, N, K)
        fns["tile default " + "x".join(str(default[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K",
                                                                 "SPLIT_K"))] = [
            mm.launcher(a, b, c, **default) for (a, b), c in problem.pairs()]  # fmt: skip
        ws = torch.empty(16 * N, device="cuda")
        scanned = {}
        for cfg in GRID:
            locks = torch.zeros(triton.cdiv(N, cfg[0]), dtype=torch.int32, device="cuda")
            runs = [gemv_launcher(a[0], b, c[0], ws, locks, cfg) for (a, b), c in problem.pairs()]
            out = problem.outs[0]
            out.fill_(float("nan"))
            try:
                runs[0]()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a config that does not compile is skipped
                print(f"{cfg}: {type(exc).__name__}")
                continue
            err = (out.float() - problem.ref).abs().max().item()
            if not err <= 0.01 * problem.ref.abs().max().item():
                print(f"{cfg}: wrong result ({err})")
                continue
            scanned["gemv " + "x".join(map(str, cfg))] = runs
        # a first pass of the whole grid (one round), then the best 6 beside the baselines
        first = interleaved({**fns, **scanned}, device_type="cuda", rounds=1, warmup_ms=0,
                            rep_ms=2.0)  # fmt: skip
        best = sorted(scanned, key=lambda n: first[n].median_ms)[:6]
        times = interleaved({**fns, **{n: scanned[n] for n in best}}, device_type="cuda",
                            rounds=args.rounds, warmup_ms=0, rep_ms=3.0)  # fmt: skip
        copy_gbps = 4 * K * N / times["copy"].median_ms / 1e6
        print(f"\n1x{N}x{K} bf16, {len(problem.inputs)} input sets; copy {copy_gbps:.0f} GB/s")
        print(f"{'candidate':32s} {'us':>8s} {'spread':>7s} {'x cuBLAS':>9s} {'of copy':>8s}")
        for name, t in times.items():
            gbps = problem.footprint / t.median_ms / 1e6
            ratio = times["cublas"].median_ms / t.median_ms
            print(f"{name:32s} {t.median_ms * 1e3:8.2f} {t.spread:7.1%} {ratio:9.3f} "
                  f"{gbps / copy_gbps:8.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
