"""The tiled matmul before and after a change, and the Triton tutorial's kernel, side by side
with cuBLAS on large shapes: the previous version of ``kernels/matmul_triton.py`` is loaded from
a file (``OLD``, e.g. from ``git show REV:kernels/matmul_triton.py``), the tutorial kernel from
another (``TUTORIAL``: a transcription of Triton's ``03-matrix-multiplication.py`` kernel, kept
out of the repository; its ``matmul_kernel`` is launched here with the same tile). All run at
the same configs, interleaved in one process with ``torch.matmul`` (`autotune.timing.
interleaved`, L2 flushed before each launch as the objective times large shapes), 5 rounds, the
order rotated. Every candidate's output is compared with cuBLAS's first.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/matmul_side_by_side.py OLD TUTORIAL [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import triton

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import matmul_triton as new  # noqa: E402
from autotune.timing import interleaved  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

ARGS = argparse.ArgumentParser()
ARGS.add_argument("old")
ARGS.add_argument("tutorial")
ARGS.add_argument("--rounds", type=int, default=5)
ARGS.add_argument(
    "--variant",
    action="append",
    default=[],
    help="NAME=FILE: another version of kernels/matmul_triton.py, run at both tiles",
)
SHAPES = [(8192, 8192, 8192, "bf16"), (8192, 8192, 8192, "fp16"), (8192, 4096, 4096, "bf16"),
          (8192, 14336, 4096, "bf16")]  # fmt: skip
TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1,
        "SCHEDULE": "tiled", "num_warps": 4, "num_stages": 3}  # the tutorial's form  # fmt: skip
WIDE = {**TILE, "BLOCK_N": 256, "num_warps": 8, "num_stages": 4}  # the recorded grids' best


def tutorial_launcher(tut, a, b, c, cfg):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)

    def run() -> None:
        tut.matmul_kernel[grid](
            a,
            b,
            c,
            M,
            N,
            K,
            a.stride(0),
            a.stride(1),
            b.stride(0),
            b.stride(1),
            c.stride(0),
            c.stride(1),
            BLOCK_SIZE_M=cfg["BLOCK_M"],
            BLOCK_SIZE_N=cfg["BLOCK_N"],
            BLOCK_SIZE_K=cfg["BLOCK_K"],
            GROUP_SIZE_M=cfg["GROUP_M"],
            ACTIVATION="",
            num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"],
        )

    return run


def main() -> None:
    args = ARGS.parse_args()
    old = load_module(args.old, "matmul_old")
    tut = load_module(args.tutorial, "tutorial_matmul")
    modules = {"old": old, "new": new}
    for spec in args.variant:
        name, path = spec.split("=", 1)
        modules[name] = load_module(path, f"matmul_{name}")
    print(f"{torch.cuda.get_device_name()}; {args.rounds} interleaved rounds, L2 flushed")
    for M, N, K, dtype in SHAPES:
        dt = new.DTYPES[dtype]
        gen = torch.Generator(device="cuda").manual_seed(M + N + K)
        a = torch.randn(M, K, generator=gen, device="cuda").to(dt)
        b = torch.randn(K, N, generator=gen, device="cuda").to(dt)
        ref = torch.matmul(a, b).float()
        fns, errors = {}, {}
        candidates = [(tag, label, cfg) for tag in modules
                      for label, cfg in (("tile", TILE), ("wide", WIDE))]  # fmt: skip
        candidates.append(("tutorial", "tile", TILE))
        for tag, label, cfg in candidates:
            name = f"{tag} {label}"
            c = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            try:
                run = (tutorial_launcher(tut, a, b, c, cfg) if tag == "tutorial"
                       else modules[tag].launcher(a, b, c, **cfg))  # fmt: skip
                run()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a config that fails is a row too
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:100]}")
                continue
            errors[name] = float((c.float() - ref).norm() / ref.norm())
            fns[name] = run
        out = torch.empty(M, N, device="cuda", dtype=dt)
        fns["cublas"] = lambda a=a, b=b, out=out: torch.matmul(a, b, out=out)
        times = interleaved(fns, device_type="cuda", rounds=args.rounds)
        flops = 2 * M * N * K
        cublas = times["cublas"].median_ms
        print(f"\n{M}x{N}x{K} {dtype}; tile = 128x128x64 G8 4 warps 3 stages, wide = 128x256x64 "
              f"8 warps 4 stages")  # fmt: skip
        print(f"  {'candidate':18} {'ms':>8} {'spread':>7} {'TFLOP/s':>8} {'x cuBLAS':>9} "
              f"{'rel err':>8}")  # fmt: skip
        for name, t in sorted(times.items(), key=lambda kv: kv[1].median_ms):
            err = f"{errors[name]:8.1e}" if name in errors else ""
            tflops, ratio = flops / t.median_ms / 1e9, cublas / t.median_ms
            print(f"  {name:18} {t.median_ms:8.3f} {t.spread:7.1%} {tflops:8.1f} {ratio:9.3f} "
                  f"{err}")  # fmt: skip


if __name__ == "__main__":
    main()
