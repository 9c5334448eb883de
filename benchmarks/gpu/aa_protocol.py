"""A/A check of the timing protocols on large GEMMs: identical kernels must read identical.

Our tiled matmul kernel and the Triton tutorial's compile to the same SASS at the wide tile
(128x256x64, 8 warps, 4 stages; checked on the CPU with autotune.cross_compile), yet the
kernel suite's tutorial row read them 1-3% apart (benchmarks/results/*/call8_kernels.jsonl).
This script times, at large shapes, our kernel (two launchers, two output buffers), the
tutorial kernel launched directly, and cuBLAS under three protocols:

- ``rounds``: the objective's protocol until session 34 (3 rounds of do_bench, 5 ms warm-up,
  15 ms of repeats, L2 flushed, the order rotated), run 3 times;
- ``rounds8``: the tutorial row's until session 34 (8 rounds, 10 / 30 ms);
- ``paired``: every launch timed on its own with L2 flushed before it, the candidates in a
  fresh random order each iteration, so neighbours in time are compared; a candidate's ratio is
  the median over iterations of cuBLAS's time in that iteration over its own;
- ``objective``: the objective's protocol since session 34 (autotune.timing.interleaved:
  alternating launch by launch, 5 ms warm-up, 45 ms of timed launches each; ratio of medians),
  run 3 times.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/aa_protocol.py TUTORIAL_KERNEL_FILE [--iterations 120]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics

import torch
import triton
import triton.language as tl

from autotune.kernels import matmul_triton as mt
from autotune.timing import bench, interleaved, rotated

WIDE = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8,
        "num_stages": 4}  # fmt: skip
SHAPES = [(8192, 8192, 8192, torch.float16), (8192, 14336, 4096, torch.bfloat16),
          (8192, 4096, 4096, torch.bfloat16)]  # fmt: skip


def rounds_of_do_bench(fns: dict, rounds: int, warmup_ms: float, rep_ms: float) -> dict:
    """The protocol before session 34: do_bench per candidate per round, order rotated; each
    candidate's median of round medians."""
    pooled: dict[str, list[float]] = {n: [] for n in fns}
    for r in range(rounds):
        for name in rotated(list(fns), r):
            t = bench(fns[name], device_type="cuda", warmup_ms=warmup_ms, rep_ms=rep_ms)
            pooled[name].append(t.median_ms)
    medians = {n: statistics.median(v) for n, v in pooled.items()}
    return {n: medians["cublas"] / medians[n] for n in fns}


def paired(fns: dict, iterations: int, seed: int = 0) -> dict[str, float]:
    """Each candidate's median over iterations of (cuBLAS time / its time) in the same
    iteration; every launch after an L2 flush, the order shuffled per iteration."""
    cache = torch.empty(256 * 2**20, dtype=torch.int8, device="cuda")
    names = list(fns)
    for fn in fns.values():  # warm-up
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    rng = random.Random(seed)
    events: dict[str, list] = {n: [] for n in names}
    for _ in range(iterations):
        order = names[:]
        rng.shuffle(order)
        for name in order:
            cache.zero_()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fns[name]()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize()
    ms = {n: [s.elapsed_time(e) for s, e in evs] for n, evs in events.items()}
    return {n: statistics.median(c / t for c, t in zip(ms["cublas"], ms[n], strict=True))
            for n in names}  # fmt: skip


def candidates(M: int, N: int, K: int, dtype: torch.dtype, tutorial) -> dict:
    """The tutorial kernel, ours twice and cuBLAS, each writing its own output."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(M, K, device="cuda", generator=gen).to(dtype)
    b = torch.randn(K, N, device="cuda", generator=gen).to(dtype)
    outs = [torch.empty(M, N, device="cuda", dtype=dtype) for _ in range(4)]
    grid = (triton.cdiv(M, 128) * triton.cdiv(N, 256),)

    def tut(c=outs[0]):
        tutorial[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                       c.stride(0), c.stride(1), BLOCK_SIZE_M=128, BLOCK_SIZE_N=256,
                       BLOCK_SIZE_K=64, GROUP_SIZE_M=8, ACTIVATION="", num_warps=8,
                       num_stages=4)  # fmt: skip

    fns = {"tutorial": tut, "ours": mt.launcher(a, b, outs[1], **WIDE),
           "ours_again": mt.launcher(a, b, outs[2], **WIDE),
           "cublas": lambda c=outs[3]: torch.matmul(a, b, out=c)}  # fmt: skip
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    return fns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("tutorial", help="the tutorial kernel's transcription (a def only)")
    parser.add_argument("--iterations", type=int, default=120)
    args = parser.parse_args()
    namespace = {"triton": triton, "tl": tl}
    with open(args.tutorial) as source:
        exec(compile(source.read(), args.tutorial, "exec"), namespace)
    tutorial = triton.jit(namespace["matmul_kernel"])
    for M, N, K, dtype in SHAPES:
        fns = candidates(M, N, K, dtype, tutorial)
        label = f"{M}x{N}x{K} {str(dtype).removeprefix('torch.')}"
        rows = []
        for rep in range(3):
            rows.append(("rounds", rep, rounds_of_do_bench(fns, 3, 5.0, 15.0)))
        rows.append(("rounds8", 0, rounds_of_do_bench(fns, 8, 10.0, 30.0)))
        for rep in range(2):
            rows.append(("paired", rep, paired(fns, args.iterations, seed=rep)))
        for rep in range(3):
            t = interleaved(fns, device_type="cuda", rounds=3, warmup_ms=5.0, rep_ms=15.0)
            rows.append(("objective", rep, {n: t["cublas"].median_ms / t[n].median_ms for n in t}))
        for protocol, rep, ratios in rows:
            cells = "  ".join(f"{n} {r:.3f}" for n, r in ratios.items() if n != "cublas")
            print(f"{label:26s} {protocol:12s} #{rep}  x cuBLAS: {cells}", flush=True)
            print(json.dumps({"shape": label, "protocol": protocol, "rep": rep, **ratios}))


if __name__ == "__main__":
    main()
