"""The weight-only default for 17-64 rows (int8): one tile-row of up to 64 rows, 64 x 64
blocks, K unsplit (before session 37's change) against ``decode_tile``'s K split for two
programs an SM at the same tile, on 32 and 64 rows of three 7-8B projections. Through the
real objective (``QuantMatmulObjective.evaluate``: fresh inputs, both gates, bf16 cuBLAS in
the same round), the two alternating, 3 rounds; medians of the ratio to cuBLAS.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/quant_more_rows_default.py OUT
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from quant_eval import evaluate

from autotune.kernels import quant_matmul_triton as kern
from autotune.kernels.interpreter import pow2_at_least
from autotune.objectives.quant_matmul import QuantMatmulObjective

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]


def unsplit(obj: QuantMatmulObjective) -> dict:
    """The default for more than 16 rows before session 37."""
    return {"weights": "int8", **kern.DEFAULT_CONFIG,
            "BLOCK_M": min(64, max(16, pow2_at_least(obj.M))),
            "BLOCK_N": min(64, max(32, pow2_at_least(obj.N))),
            "BLOCK_K": 64 if obj.K >= 64 else 32}  # fmt: skip


def split(obj: QuantMatmulObjective) -> dict:
    return {**unsplit(obj), "SPLIT_K": kern.decode_tile(obj.N, obj.K, "int8", obj.sms)["SPLIT_K"]}


def main() -> None:
    rows = []
    print("M x N x K: split / unsplit, median x bf16 cuBLAS (3 rounds)")
    for m in (32, 64):
        for n, k in SHAPES:
            problem = {"M": m, "N": n, "K": k, "dtype": "bf16", "max_error": 0.05}
            obj = QuantMatmulObjective(problem)
            configs = {"split": split(obj), "unsplit": unsplit(obj)}
            readings: dict[str, list[float]] = {"split": [], "unsplit": []}
            for round_ in range(3):
                for way in ("split", "unsplit") if round_ % 2 == 0 else ("unsplit", "split"):
                    r = evaluate(problem, configs[way], rounds=1)
                    if "ratio" in r:
                        readings[way].append(r["ratio"])
                    else:
                        print(f"  {way}: {r['error']}", flush=True)
            med = {w: round(statistics.median(v), 4) if v else None for w, v in readings.items()}
            print(f"{m:>2} x {n:>5} x {k:>5}: {med['split']} / {med['unsplit']} "
                  f"(split {configs['split']['SPLIT_K']})", flush=True)  # fmt: skip
            rows.append({"M": m, "N": n, "K": k, "configs": configs, "readings": readings})
    (OUT / "quant_more_rows_default.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
