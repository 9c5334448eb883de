"""Weight-only quantized decode products (M = 1 and 16, N = K = 4096 bf16): a grid of configs,
tensor cores (BLOCK_M >= 16, ``tl.dot``) against CUDA cores (BLOCK_M < 16), each measured
through the real objective (`QuantMatmulObjective.evaluate`: fresh inputs, both gates, the
kernel and bf16 cuBLAS interleaved, streamed over rotated input sets from a CUDA graph), one
round a config; the best six per shape then re-measured in 3 rounds. Prints a table last.

The first grid's CUDA-core rows (BLOCK_M = 1) were measured (2026-12-02 late) with the
kernel variant of benchmarks/results/h200-2026-12-02-late/quant_cuda_core_variant.patch, which
was slower than the tensor-core path at every shape and was not kept.

``--gemv`` scans the kernel's one-row path (BLOCK_M = 1: CUDA cores, a (k, n) accumulator in
the weight tile's own layout, summed once) at M = 1: every level, wider tiles and more
K-splits; one or two K-blocks in flight (num_stages; session 27 pipelined 1 or 4 deep); the
best five re-measured in 3 rounds beside the objective's default.

``--deep`` scans int4 alone at M = 1 (tensor cores): fewer K-splits (2-8) and deeper
pipelines (4-8 stages) than the first grid's (8-16 splits, 4 stages); the best five re-measured.

``--rows16`` scans int4-g64 at M = 16 around session 21's best (16x64x64, split 8, 2 warps,
5 stages: 1.019x) with the objective's default beside it; the best five and the default
re-measured.

``--blocks`` measures one-row tiles loading one K-block an iteration against two (their
``num_stages``: both blocks' loads in flight before either is used) on the best one-row
configs of the --gemv scans and the objective's default, alternating config and way in 5
rounds (one objective evaluation each: fresh inputs, both gates, bf16 cuBLAS in the same
round); the table gives each pair's median ratio to cuBLAS. (Session 28 measured the 2^23
mantissa trick against int-to-float conversion the same way: no steady gain,
benchmarks/results/h200-2026-12-03-s28.)

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/quant_decode_scan.py OUT [--deep | --rows16 | --gemv | --blocks]
        [--shape=NxK]
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path

from quant_eval import evaluate

from autotune.objectives.quant_matmul import QuantMatmulObjective

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
DEEP = "--deep" in sys.argv[2:]
ROWS16 = "--rows16" in sys.argv[2:]
GEMV = "--gemv" in sys.argv[2:]
BLOCKS = "--blocks" in sys.argv[2:]
#: ``--shape NxK`` (default 4096x4096): the weight's output and input sizes
SHAPE = next((a.split("=")[1] for a in sys.argv[2:] if a.startswith("--shape=")), "4096x4096")
N, K = (int(v) for v in SHAPE.split("x"))
#: the best int4 config of the first grid at M = 1 (benchmarks/results/h200-2026-12-02-late)
PREVIOUS_INT4 = {"weights": "int4-g64", "BLOCK_M": 16, "BLOCK_N": 128, "BLOCK_K": 64,
                 "SPLIT_K": 8, "num_warps": 4, "num_stages": 4}  # fmt: skip


def grid(m: int) -> list[dict]:
    configs = []
    block_m = [1, 16] if m == 1 else [16]
    for level, bm, bn, bk, split, warps in itertools.product(
        ["int4-g64", "int4-g128", "int8"], block_m, [64, 128, 256], [64, 128], [8, 16], [4, 8]
    ):
        if level == "int4-g64" and bk > 64:
            continue
        if bm < 16 and bm * bk * bn > 64 * 32 * warps:
            continue
        configs.append({"weights": level, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk,
                        "SPLIT_K": split, "num_warps": warps, "num_stages": 4})  # fmt: skip
    return configs


def deep_grid() -> list[dict]:
    configs = []
    for level, bn, bk, split, stages in itertools.product(
        ["int4-g64", "int4-g128"], [64, 128], [64, 128], [2, 4, 8], [4, 6, 8]
    ):
        if level == "int4-g64" and bk > 64:
            continue
        configs.append({"weights": level, "BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk,
                        "SPLIT_K": split, "num_warps": 4, "num_stages": stages})  # fmt: skip
    return configs


def gemv_grid() -> list[dict]:
    configs = []
    for level, bk, split, warps, stages in itertools.product(
        ["int4-g64", "int4-g128", "int8"], [64, 128], [4, 8, 16], [4, 8], [1, 2]
    ):
        depth = bk if level == "int8" else bk // 2  # weight rows a block loads
        if (level == "int4-g64" and bk > 64) or depth * 128 > 64 * 32 * warps:
            continue
        configs.append({"weights": level, "BLOCK_M": 1, "BLOCK_N": 128, "BLOCK_K": bk,
                        "SPLIT_K": split, "num_warps": warps, "num_stages": stages})  # fmt: skip
    return configs


def rows16_grid() -> list[dict]:
    configs = []
    for bn, split, warps, stages in itertools.product([64, 128], [4, 8, 16], [2, 4], [4, 5, 6]):
        configs.append({"weights": "int4-g64", "BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": 64,
                        "SPLIT_K": split, "num_warps": warps, "num_stages": stages})  # fmt: skip
    return configs


def measure(m: int, config: dict, rounds: int) -> dict:
    return evaluate({"M": m, "N": N, "K": K, "dtype": "bf16"}, config, rounds)


def name(c: dict) -> str:
    return (f"{c['weights']:9} {c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} s{c['SPLIT_K']} "
            f"w{c['num_warps']} st{c['num_stages']}")  # fmt: skip


def one_row(level: str, bk: int, split: int, warps: int, blocks: int = 1) -> dict:
    return {"weights": level, "BLOCK_M": 1, "BLOCK_N": 128, "BLOCK_K": bk, "SPLIT_K": split,
            "num_warps": warps, "num_stages": blocks}  # fmt: skip


def blocks() -> None:
    """One K-block an iteration against two, interleaved, 5 rounds."""
    default = QuantMatmulObjective({"M": 1, "N": N, "K": K, "dtype": "bf16"}).default_config()
    configs = [one_row("int4-g128", 128, 8, 8), one_row("int4-g64", 64, 16, 4),
               one_row("int4-g128", 128, 4, 8), one_row("int4-g64", 64, 8, 4),
               one_row("int8", 64, 8, 8), one_row("int8", 64, 4, 8)]  # fmt: skip
    configs += [default] if default not in configs else []
    readings: dict[tuple[int, int], list[dict]] = {}
    for round_ in range(5):
        for i, c in enumerate(configs):
            for way in (1, 2) if round_ % 2 == 0 else (2, 1):
                r = measure(1, {**c, "num_stages": way}, 1)
                readings.setdefault((i, way), []).append(r)
                print(f"round {round_} {name(c)} blocks {way} {r}", flush=True)
    print(f"\nM=1 N={N} K={K}, 5 rounds, streamed: config / blocks an iteration / median x bf16 "
          "cuBLAS (min-max) / median us")  # fmt: skip
    rows = []
    for (i, way), rs in sorted(readings.items()):
        ok = [r for r in rs if "ratio" in r]
        if not ok:
            print(f"  {name(configs[i]):36} {way} {rs[0]['error']}")
            continue
        ratios = sorted(r["ratio"] for r in ok)
        us = statistics.median(r["us"] for r in ok)
        print(f"  {name(configs[i]):36} {way} {statistics.median(ratios):6.3f} "
              f"({ratios[0]:.3f}-{ratios[-1]:.3f}) {us:6.1f}")  # fmt: skip
        rows.append({"config": configs[i], "blocks": way, "readings": rs})
    (OUT / f"quant_decode_blocks_{SHAPE}.json").write_text(json.dumps(rows, indent=1))


def main() -> None:
    if BLOCKS:
        blocks()
        return
    results = {}
    for m in (1,) if DEEP or GEMV else (16,) if ROWS16 else (1, 16):
        configs = (deep_grid() if DEEP else rows16_grid() if ROWS16 else gemv_grid() if GEMV
                   else grid(m))  # fmt: skip
        scan = [(c, measure(m, c, 1)) for c in configs]
        for c, r in scan:
            print(f"scan M={m} {name(c)} {r}", flush=True)
        ok = sorted((x for x in scan if "ratio" in x[1]), key=lambda x: -x[1]["ratio"])
        best = {}
        for c, _ in ok:  # the best three on CUDA cores and the best three with tl.dot
            best.setdefault(c["BLOCK_M"] < 16, [])
            if len(best[c["BLOCK_M"] < 16]) < (5 if DEEP or ROWS16 or GEMV else 3):
                best[c["BLOCK_M"] < 16].append(c)
        chosen = [c for group in best.values() for c in group]
        if DEEP and PREVIOUS_INT4 not in chosen:  # the first grid's best int4, side by side
            chosen.append(PREVIOUS_INT4)
        if ROWS16 or GEMV:  # the objective's default beside the scan's best
            default = QuantMatmulObjective({"M": m, "N": N, "K": K,
                                            "dtype": "bf16"}).default_config()  # fmt: skip
            chosen = [c for c in chosen if c != default] + [default]
        final = [(c, measure(m, c, 3)) for c in chosen]
        results[m] = {"scan": [{"config": c, **r} for c, r in scan],
                      "final": [{"config": c, **r} for c, r in final]}  # fmt: skip
        print(
            f"\nM={m} N={N} K={K}, 3 rounds, streamed: config / x bf16 cuBLAS / us / GB/s / "
            "quant error"
        )
        for c, r in final:
            if "ratio" in r:
                print(
                    f"  {name(c):36} {r['ratio']:6.3f} {r['us']:6.1f} {r['gbps']:7.0f} "
                    f"{r['quant_error']:.3f}"
                )
            else:
                print(f"  {name(c):36} {r['error']}")
    name_ = (
        "quant_decode_scan_deep.json"
        if DEEP
        else "quant_decode_rows16.json"
        if ROWS16
        else f"quant_decode_gemv_{SHAPE}.json"
        if GEMV
        else "quant_decode_scan.json"
    )
    (OUT / name_).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
