"""Warp specialization in the persistent matmul, side by side with cuBLAS and the schedules the
suite's sweeps pick on large bf16 shapes.

``VARIANT`` is a copy of ``kernels/matmul_persistent.py`` whose ``matmul_persistent_kernel``
takes one more compile-time flag, ``WS``, passed to its tile loop as ``tl.range(...,
warp_specialize=WS)``: Triton then splits each program into a producer that brings A and B in
and consumer warp groups that multiply (at ``num_warps=4``, 12 warps a program on Hopper, cross-
compiled with Triton 3.7). The loop must not be flattened for the split to happen. Candidates
run launch by launch, shuffled, L2 flushed (`autotune.timing.interleaved`, as the kernel
objectives time large shapes), ``--repeats`` times with a fresh shuffle; every output is
compared with cuBLAS's first.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/matmul_warp_specialize.py VARIANT [--repeats 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import matmul_triton, tma  # noqa: E402
from autotune.timing import interleaved  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

ARGS = argparse.ArgumentParser()
ARGS.add_argument("variant")
ARGS.add_argument("--repeats", type=int, default=3)
ARGS.add_argument("--shapes", default="8192x14336x4096,8192x4096x4096,8192x8192x8192")
#: the sweeps' winners (README, kernel suite table) and the untuned default
OURS = {
    "flat 128x128x64 w4 st6": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1,
                                   SCHEDULE="persistent_flat", EPILOGUE_SUBTILE=0, num_warps=4,
                                   num_stages=6),
    "stream_k 128x128x64 w4 st5": dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8,
                                       SPLIT_K=1, SCHEDULE="stream_k", EPILOGUE_SUBTILE=0,
                                       num_warps=4, num_stages=5),
    "flat 128x256x64 w8 st4 sub": dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8,
                                       SPLIT_K=1, SCHEDULE="persistent_flat",
                                       EPILOGUE_SUBTILE=1, num_warps=8, num_stages=4),
}  # fmt: skip
#: (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, SUBTILE) of the warp-specialized kernel
WS = [(128, 256, 64, 4, 3, 0), (128, 256, 64, 4, 4, 1), (128, 256, 64, 4, 3, 1),
      (128, 128, 64, 4, 4, 0), (128, 128, 64, 4, 6, 0), (256, 128, 64, 4, 3, 0),
      (128, 128, 128, 4, 3, 0)]  # fmt: skip


def ws_launcher(mod, a, b, c, bm, bn, bk, warps, stages, sub, ws=True):
    """The variant's persistent kernel (not flattened) at one tile, with or without ``WS``."""
    M, K = a.shape
    N = b.shape[1]
    programs = matmul_triton.persistent_programs(M, N, bm, bn)
    tma.ensure_allocator()

    def run() -> None:
        mod.matmul_persistent_kernel[(programs,)](
            a, b, c, M, N, K, a.stride(0), b.stride(0), c.stride(0), programs,
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, B_KMAJOR=False, FLATTEN=False,
            UPCAST=matmul_triton._upcast(a.dtype), SUBTILE=bool(sub), WS=ws, num_warps=warps,
            num_stages=stages,
        )  # fmt: skip

    return run


def _makers(mod, a, b) -> dict:
    # name -> a function of the output tensor that returns its launcher
    makers = {name: functools.partial(_ours, a, b, cfg) for name, cfg in OURS.items()}
    for tile in WS:
        bm, bn, bk, w, st, sub = tile
        tag = f"{bm}x{bn}x{bk} w{w} st{st}{' sub' if sub else ''}"
        makers[f"WS {tag}"] = functools.partial(_ws, mod, a, b, tile, True)
        makers[f"no-WS {tag}"] = functools.partial(_ws, mod, a, b, tile, False)
    return makers


def _ours(a, b, cfg, c):
    return matmul_triton.launcher(a, b, c, **cfg)


def _ws(mod, a, b, tile, ws, c):
    return ws_launcher(mod, a, b, c, *tile, ws=ws)


def main() -> None:
    args = ARGS.parse_args()
    mod = load_module(args.variant, "matmul_persistent_ws")
    print(f"{torch.cuda.get_device_name()}; alternated launches, L2 flushed, "
          f"{args.repeats} repeats")  # fmt: skip
    for shape in args.shapes.split(","):
        M, N, K = (int(x) for x in shape.split("x"))
        gen = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randn(M, K, generator=gen, device="cuda").bfloat16()
        b = torch.randn(K, N, generator=gen, device="cuda").bfloat16()
        ref = torch.matmul(a, b).float()
        fns, errors = {}, {}
        makers = _makers(mod, a, b)
        for name, make in makers.items():
            c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
            try:
                run = make(c)
                run()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a config that fails is a row too
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:120]}")
                continue
            errors[name] = float((c.float() - ref).norm() / ref.norm())
            fns[name] = run
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        fns["cublas"] = lambda a=a, b=b, out=out: torch.matmul(a, b, out=out)
        ratios: dict[str, list[float]] = {name: [] for name in fns}
        ms: dict[str, list[float]] = {name: [] for name in fns}
        for _ in range(args.repeats):
            times = interleaved(fns, device_type="cuda", rounds=3)
            for name, t in times.items():
                ratios[name].append(times["cublas"].median_ms / t.median_ms)
                ms[name].append(t.median_ms)
        print(f"\n{M}x{N}x{K} bf16: x cuBLAS per repeat (median of each repeat's launches)")
        print(f"  {'candidate':30} {'ms':>8} {'TFLOP/s':>8} {'x cuBLAS':>9}  {'repeats':24} "
              f"{'rel err':>8}")  # fmt: skip
        for name in sorted(fns, key=lambda n: -statistics.median(ratios[n])):
            t = statistics.median(ms[name])
            each = " ".join(f"{r:.3f}" for r in ratios[name])
            err = f"{errors[name]:8.1e}" if name in errors else ""
            print(f"  {name:30} {t:8.3f} {2 * M * N * K / t / 1e9:8.1f} "
                  f"{statistics.median(ratios[name]):9.3f}  {each:24} {err}")  # fmt: skip


if __name__ == "__main__":
    main()
