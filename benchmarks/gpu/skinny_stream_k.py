"""Decode products (M = 1, 16, 64; N = K = 4096 bf16) under the ``stream_k`` schedule, whose
programs now number one per SM even when there are fewer tiles than SMs (every tile's K-steps
shared out evenly), beside cuBLAS, a copy of B, each shape's untuned default and the kernel
suite's last winners (K-split tiles); or (``--grid deep``) tiled configs past the shipped
space's limits.

Every candidate runs over the same rotated input sets (spanning 4 L2 caches, the objective's
streamed protocol), launched back to back from a CUDA graph; ``--rounds`` rounds, the order
rotated; medians of round medians. Each output is checked against cuBLAS's first; a config the
compiler refuses (shared memory) is listed and left out. Printed per shape: microseconds,
x cuBLAS and the fraction of a copy's bandwidth (bytes read and written over the copy's
2 x B bytes a second, as the objective reports it), best first.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/skinny_stream_k.py [--rounds 5] [--shapes 1,16,64] [--grid deep]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

import torch
from streamed_bf16 import StreamedProduct  # beside this file

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import matmul_triton as mt  # noqa: E402
from autotune.timing import interleaved  # noqa: E402

N = K = 4096
#: the kernel suite's winners on the final code of session 35 (s35 call 5)
WINNERS = {
    1: {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 4, "num_stages": 4},
    16: {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64, "SPLIT_K": 4, "num_stages": 4},
    64: {"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 128, "SPLIT_K": 1, "num_stages": 6},
}


def stream_k_grid(M: int) -> list[dict]:
    """The stream_k configs scanned at M rows: the smallest tile height that covers M."""
    bm = 16 if M <= 16 else 64
    grid = []
    for bn, bk, stages, warps in itertools.product((32, 64, 128, 256), (64, 128), (3, 4, 6),
                                                    (4, 8)):  # fmt: skip
        if warps == 8 and bn < 128:
            continue
        grid.append({**mt.DEFAULT_CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                     "GROUP_M": 1, "SCHEDULE": "stream_k", "EPILOGUE_SUBTILE": 0,
                     "num_warps": warps, "num_stages": stages})  # fmt: skip
    return grid


def deep_grid(M: int) -> list[dict]:
    """Tiled configs past the shipped space's limits (BLOCK_K 256, up to 8 stages, BLOCK_N 16):
    more bytes of B in flight a program, or (BLOCK_N 16) two programs an SM at M = 64."""
    if M <= 16:  # (BLOCK_N, BLOCK_K, SPLIT_K, stages)
        specs = [(128, 64, 4, 6), (128, 64, 4, 8), (128, 128, 4, 4), (128, 128, 4, 6),
                 (128, 256, 4, 3), (128, 256, 4, 4), (64, 128, 4, 6), (64, 128, 8, 6),
                 (64, 256, 8, 4), (256, 64, 8, 4)]  # fmt: skip
        bm = 16
    else:
        specs = [(32, 128, 1, 7), (32, 128, 1, 8), (32, 256, 1, 3), (32, 256, 1, 4),
                 (16, 128, 1, 6), (16, 128, 1, 8), (16, 256, 1, 4), (64, 256, 2, 3)]  # fmt: skip
        bm = 64
    return [{**mt.DEFAULT_CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 1,
             "SPLIT_K": split, "num_warps": 4, "num_stages": stages}
            for bn, bk, split, stages in specs]  # fmt: skip


GRIDS = {"stream_k": stream_k_grid, "deep": deep_grid}


def label(cfg: dict) -> str:
    return (f"{cfg['SCHEDULE']} {cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} "
            f"s{cfg['SPLIT_K']} w{cfg['num_warps']} st{cfg['num_stages']}")  # fmt: skip


def shape(M: int, l2: int, rounds: int, grid: str) -> None:
    problem = StreamedProduct.make(M, N, K, l2)
    footprint, sets, ref = problem.footprint, len(problem.inputs), problem.ref
    inputs, outs = problem.inputs, problem.outs
    fns: dict = problem.baselines()
    configs = {
        "default": mt.default_config(M, N, K),
        "winner": {**mt.DEFAULT_CONFIG, "GROUP_M": 1, "num_warps": 4, **WINNERS[M]},
    }
    configs.update({label(c): c for c in GRIDS[grid](M)})
    refused = []
    for name, cfg in configs.items():
        try:
            runs = [mt.launcher(a, b, c, **cfg) for (a, b), c in zip(inputs, outs, strict=True)]
            outs[0].fill_(float("nan"))
            runs[0]()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 (a refused config is reported, not fatal)
            refused.append(f"{name}: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}")
            continue
        err = (outs[0].float() - ref).abs().max().item() / ref.abs().max().item()
        if err <= 0.01:
            fns[name] = runs
        else:
            refused.append(f"{name}: wrong result ({err:.3g})")
    times = interleaved(fns, device_type="cuda", rounds=rounds, warmup_ms=0, rep_ms=3.0)
    copy_gbps = 4 * K * N / times["copy"].median_ms / 1e6
    print(f"\nM={M}, N=K={N} bf16, {sets} input sets, {rounds} rounds; copy {copy_gbps:.0f} GB/s")
    print(f"{'candidate':40s} {'us':>8s} {'spread':>7s} {'x cuBLAS':>9s} {'of copy':>8s}")
    for name, t in sorted(times.items(), key=lambda kv: kv[1].median_ms):
        of_copy = (4 * K * N if name == "copy" else footprint) / t.median_ms / 1e6 / copy_gbps
        print(f"{name:40s} {t.median_ms * 1e3:8.2f} {t.spread:7.1%} "
              f"{times['cublas'].median_ms / t.median_ms:9.3f} {of_copy:8.3f}")  # fmt: skip
    for line in refused:
        print(f"  left out: {line}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default="1,16,64")
    parser.add_argument("--grid", choices=sorted(GRIDS), default="stream_k")
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    print(f"{props.name}, {props.multi_processor_count} SMs")
    for M in map(int, args.shapes.split(",")):
        shape(M, props.L2_cache_size, args.rounds, args.grid)


if __name__ == "__main__":
    main()
