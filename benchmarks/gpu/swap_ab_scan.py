"""int4 weight-only decode products with the operands swapped (y^T = W^T x^T: the dequantized
weights as the tensor cores' left operand, taken from registers by Hopper's wgmma) against the
kernel's present tensor-core and one-row paths, through the real objective
(`QuantMatmulObjective.evaluate`: fresh inputs, both gates, bf16 cuBLAS in the same round,
streamed). A one-round scan of each way at M = 1 and 16 (N = K = 4096), then the best of each
way and the objective's defaults re-measured side by side, 3 rounds, at both shapes.

The swapped product is not in the kernel (it did not beat the present one:
benchmarks/results/h200-2026-12-03-s30); apply that folder's ``call1_swap_ab_variant.patch``
(a ``SWAP`` flag of the kernel) before building the wheel, or the "swap" rows repeat the
present kernel.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/swap_ab_scan.py OUT
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from pathlib import Path

from quant_eval import evaluate

from autotune.kernels import quant_matmul_triton as qm
from autotune.objectives.quant_matmul import QuantMatmulObjective

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
_constexprs = qm._constexprs
SWAP = {"on": False}


def _with_swap(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    values = _constexprs(*args, **kwargs)
    if "SWAP" in qm.quant_matmul_kernel.arg_names:
        values["SWAP"] = SWAP["on"]
    return values


qm._constexprs = _with_swap


def grid() -> list[dict]:
    configs = []
    for (level, bk), bn, split, stages in itertools.product(
        [("int4-g64", 64), ("int4-g128", 128)], [64, 128, 256], [4, 8, 16], [4]
    ):
        configs.append({"weights": level, "BLOCK_M": 16, "BLOCK_N": bn, "BLOCK_K": bk,
                        "SPLIT_K": split, "num_warps": 4, "num_stages": stages})  # fmt: skip
    return configs


def measure(m: int, n: int, k: int, config: dict, swap: bool, rounds: int) -> dict:
    SWAP["on"] = swap
    try:
        return evaluate({"M": m, "N": n, "K": k, "dtype": "bf16"}, config, rounds)
    finally:
        SWAP["on"] = False


def name(c: dict, swap: bool) -> str:
    return (f"{'swap' if swap else 'plain'} {c['weights']:9} {c['BLOCK_M']}x{c['BLOCK_N']}x"
            f"{c['BLOCK_K']} s{c['SPLIT_K']} w{c['num_warps']} st{c['num_stages']}")  # fmt: skip


def main() -> None:
    results: dict = {}
    for m in (1, 16):
        scan = [(c, swap, measure(m, 4096, 4096, c, swap, 1))
                for c in grid() for swap in (False, True)]  # fmt: skip
        for c, swap, r in scan:
            print(f"scan M={m} {name(c, swap)} {r}", flush=True)
        chosen = []
        for way in (False, True):
            ok = sorted((x for x in scan if x[1] == way and "ratio" in x[2]),
                        key=lambda x: -x[2]["ratio"])  # fmt: skip
            chosen += [(c, way) for c, _, _ in ok[: 3 if way else 2]]
        default = QuantMatmulObjective({"M": m, "N": 4096, "K": 4096, "dtype": "bf16"})
        chosen.append((default.default_config(), False))
        for n, k in ((4096, 4096), (14336, 4096)):
            readings = {i: [] for i in range(len(chosen))}
            for round_ in range(3):
                order = list(range(len(chosen)))
                order = order[round_ % len(order) :] + order[: round_ % len(order)]
                for i in order:
                    c, way = chosen[i]
                    readings[i].append(measure(m, n, k, c, way, 1))
            print(f"\nM={m} N={n} K={k}, 3 rounds, streamed: median x bf16 cuBLAS (min-max), us")
            rows = []
            for i, (c, way) in enumerate(chosen):
                ok = [r for r in readings[i] if "ratio" in r]
                if not ok:
                    print(f"  {name(c, way):48} {readings[i][0]}")
                    continue
                ratios = sorted(r["ratio"] for r in ok)
                us = statistics.median(r["us"] for r in ok)
                print(f"  {name(c, way):48} {statistics.median(ratios):6.3f} "
                      f"({ratios[0]:.3f}-{ratios[-1]:.3f}) {us:6.1f}", flush=True)  # fmt: skip
                rows.append({"config": c, "swap": way, "readings": readings[i]})
            results[f"{m}x{n}x{k}"] = rows
        results[f"scan_M{m}"] = [{"config": c, "swap": s, **r} for c, s, r in scan]
    (OUT / "swap_ab_scan.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
