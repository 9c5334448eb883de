"""Decode-shaped matmuls (M = 1, 16, 64; N = K = 4096 bf16) under both timing protocols.

For each shape, candidate configs of our kernel are measured through the real objective
(`MatmulObjective.evaluate`: fresh inputs, the correctness gate, the kernel, cuBLAS and a copy
of B interleaved in one process), once with one input set and L2 flushed between runs
(`do_bench`, the protocol of every figure before 2026-12-02 late) and once streamed: launches
back to back from a CUDA graph over rotated input sets that together span 4 L2 caches
(`objectives/kernel.py`, `input_sets`). A scan of each shape's grid runs one round per config;
the best five and the previous sessions' winners are then re-measured with the full protocol
(3 rounds) under both. Also printed: the card's L2 size and a 1 GiB device copy's bandwidth.

``--wide`` scans a wider grid (BLOCK_N up to 256, 4 or 8 warps, 3-5 stages) at the shapes
given with ``--shapes``; ``--deep`` a grid of deeper pipelines (4-8 stages) around the decode
defaults, with the persistent (TMA) schedule too; ``--streamed-only`` leaves out the flushed
re-measurements.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/skinny_protocol.py OUT [--shapes 1,16,64] [--wide] [--streamed-only]
        [--n N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

import torch
import triton.testing

from autotune.kernels import matmul_triton as mt
from autotune.objectives import kernel as kernel_objective
from autotune.objectives.matmul import MatmulObjective

ARGS = argparse.ArgumentParser()
ARGS.add_argument("out", type=Path)
ARGS.add_argument("--shapes", default="1,16,64")
ARGS.add_argument("--wide", action="store_true")
ARGS.add_argument("--deep", action="store_true")
ARGS.add_argument(
    "--tiles", default="", help="BMxBNxBKxSPLITxWARPSxSTAGES,... scan these tiled configs instead"
)
ARGS.add_argument("--streamed-only", action="store_true")
ARGS.add_argument("--n", type=int, default=4096, help="N of every shape (K stays 4096)")
BASE = {"GROUP_M": 1, "SCHEDULE": "tiled", "num_warps": 4}
#: the winners of the suite's sweeps on 2026-12-02 (benchmarks/results/h200-2026-12-02)
PREVIOUS = {
    1: {"BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "SPLIT_K": 8,
        "SCHEDULE": "tiled", "num_warps": 8, "num_stages": 5},
    16: {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 1, "SPLIT_K": 4,
         "SCHEDULE": "tiled", "num_warps": 4, "num_stages": 5},
    64: {"BLOCK_M": 32, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 1, "SPLIT_K": 4,
         "SCHEDULE": "tiled", "num_warps": 4, "num_stages": 5},
}  # fmt: skip


def grid(m: int, wide: bool) -> list[dict]:
    block_m = [16] if m <= 16 else ([64] if wide else [32, 64])
    block_n, splits = ([32, 64, 128, 256], [1, 2, 4]) if wide else ([32, 64, 128], [1, 2, 4, 8])
    warps, stages = ([4, 8], [3, 4, 5]) if wide else ([4], [4])
    configs = []
    for bm, bn, bk, split, w, st in itertools.product(
        block_m, block_n, [64, 128], splits, warps, stages
    ):
        if bm * bn > 128 * 32 * w:  # the space's accumulator_registers constraint
            continue
        configs.append({**BASE, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split,
                        "num_warps": w, "num_stages": st})  # fmt: skip
    return configs


def deep_grid(m: int) -> list[dict]:
    """Pipelines 4-8 deep around the decode defaults, tiled (split K) and persistent (TMA,
    unsplit), within the shared memory of an H200 (232448 bytes)."""
    bm = 16 if m <= 16 else 64
    tiled = itertools.product([bm], [64, 128] if m <= 16 else [32, 64], [64, 128],
                              [2, 4] if m <= 16 else [1, 2], [4, 6, 8] if m <= 16 else [5, 6, 7, 8],
                              ["tiled"])  # fmt: skip
    persistent = itertools.product([bm], [32, 64], [64, 128], [1], [4, 5, 6, 8], ["persistent"])
    configs = []
    for bm_, bn, bk, split, st, schedule in [*tiled, *persistent]:
        smem = (bm_ * bk + bk * bn) * 2 * st + (bm_ * bn * 2 if schedule != "tiled" else 0)
        if smem > 232448:
            continue
        configs.append({**BASE, "BLOCK_M": bm_, "BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": split,
                        "SCHEDULE": schedule, "num_stages": st})  # fmt: skip
    return configs


def listed(tiles: str) -> list[dict]:
    """Tiled configs spelled BMxBNxBKxSPLITxWARPSxSTAGES, e.g. 64x32x256x1x4x3."""
    keys = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_warps", "num_stages")
    return [{**BASE, **dict(zip(keys, (int(x) for x in t.split("x")), strict=True))}
            for t in tiles.split(",")]  # fmt: skip


def measure(m: int, config: dict, streamed: bool, rounds: int, n: int = 4096) -> dict:
    kernel_objective.GPU_TIMING["rounds"] = rounds
    obj = MatmulObjective({"M": m, "N": n, "K": 4096, "dtype": "bf16"})
    obj.streams = streamed
    try:
        meas = obj.evaluate(config)
    except Exception as exc:  # noqa: BLE001 - a config that fails is a row too
        return {"error": f"{type(exc).__name__}: {str(exc)[:120]}"}
    finally:
        obj.close()
    mt = meas.metrics
    return {"ratio": meas.values["ratio_to_cublas"], "roofline": mt.get("roofline_fraction"),
            "cublas_roofline": mt.get("cublas_roofline_fraction"), "us": mt["ms"] * 1e3,
            "cublas_us": mt["cublas_ms"] * 1e3, "copy_gbps": mt.get("copy_gbps"),
            "sets": mt.get("input_sets"), "protocol": mt.get("timing_protocol")}  # fmt: skip


def big_copy_gbps() -> float:
    src = torch.empty(2**29, dtype=torch.bfloat16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=20, rep=200)
    return 2 * src.numel() * 2 / ms / 1e6


def main() -> None:
    args = ARGS.parse_args()
    props = torch.cuda.get_device_properties(0)
    print(
        f"{props.name}: L2 {props.L2_cache_size / 2**20:.1f} MiB, "
        f"{props.multi_processor_count} SMs; 1 GiB copy {big_copy_gbps():.0f} GB/s"
    )
    results: dict = {}
    for m in (int(x) for x in args.shapes.split(",")):
        started = time.perf_counter()
        scan = []
        configs = (listed(args.tiles) if args.tiles else deep_grid(m) if args.deep
                   else grid(m, args.wide))  # fmt: skip
        for cfg in configs:
            row = measure(m, cfg, streamed=True, rounds=1, n=args.n)
            scan.append((cfg, row))
            print(f"scan M={m} {cfg} {row.get('ratio', row.get('error'))}", flush=True)
        ok = sorted((r for r in scan if "ratio" in r[1]), key=lambda r: -r[1]["ratio"])
        top = [cfg for cfg, _ in ok[:5]]
        for known in (PREVIOUS.get(m), mt.default_config(m, args.n, 4096)):
            if known is not None and known not in top:
                top.append(known)
        final = []
        for cfg in top:
            flushed = ({"error": "not run"} if args.streamed_only
                       else measure(m, cfg, False, 3, args.n))  # fmt: skip
            final.append({"config": cfg, "streamed": measure(m, cfg, True, 3, args.n),
                          "flushed": flushed})  # fmt: skip
        results[m] = {"scan": [{"config": c, **r} for c, r in scan], "final": final}
        print(
            f"\nM={m}: scan of {len(scan)} configs ({len(ok)} ok), "
            f"{time.perf_counter() - started:.0f} s"
        )
        print(
            f"{'config':44} {'streamed: x cuBLAS':>18} {'roofline':>8} {'cuBLAS rf':>9} "
            f"{'us':>6} | {'flushed: x cuBLAS':>17} {'roofline':>8} {'us':>6}"
        )
        for row in final:
            c = row["config"]
            name = (
                f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} s{c['SPLIT_K']} "
                f"w{c['num_warps']} st{c['num_stages']} g{c['GROUP_M']} {c['SCHEDULE']}"
            )
            s, f = row["streamed"], row["flushed"]
            if "ratio" not in s:
                print(f"{name:44} {s.get('error', '')}")
                continue
            flushed = (f"{f['ratio']:17.3f} {f['roofline']:8.3f} {f['us']:6.1f}" if "ratio" in f
                       else f.get("error", ""))  # fmt: skip
            print(
                f"{name:44} {s['ratio']:18.3f} {s['roofline']:8.3f} {s['cublas_roofline']:9.3f} "
                f"{s['us']:6.1f} | {flushed}"
            )
        print(f"  streamed: {final[0]['streamed'].get('protocol')}")
    kind = "_tiles" if args.tiles else "_deep" if args.deep else "_wide" if args.wide else ""
    name = f"skinny_protocol{kind}{'' if args.n == 4096 else f'_n{args.n}'}.json"
    (args.out / name).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
