"""The weight-only default for 2-16 decode rows (int4-g128, 16x64x128, split for two programs
an SM; chosen on 16x4096x4096 and 16x14336x4096) against the default before it (int4-g64,
16x128x64, split for one program an SM) on shapes it was not chosen on: M = 2, 4, 8 and 16,
three projections of a 7-8B decoder (4096x4096, 14336x4096, 4096x14336). Through the real
objective (`QuantMatmulObjective.evaluate`: fresh inputs, both gates, bf16 cuBLAS in the same
round, streamed), the two configs alternating, 3 rounds; medians of the ratio to cuBLAS.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/int4_rows_default.py OUT
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from quant_eval import evaluate

from autotune.kernels import quant_matmul_triton as kern
from autotune.objectives.quant_matmul import QuantMatmulObjective

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336)]


def previous_default(obj: QuantMatmulObjective) -> dict:
    """The default for 2-16 rows before session 30 (objectives/quant_matmul.py of f48020e)."""
    config = kern.decode_config(obj.N, obj.K, obj.sms, block_n=128)
    return {"weights": "int4-g64", **config, "BLOCK_K": 64, "num_stages": 4}


def measure(problem: dict, config: dict) -> float | None:
    reading = evaluate(problem, config, rounds=1)
    if "error" in reading:
        print(f"  {config}: {reading['error']}", flush=True)
    return reading.get("ratio")


def main() -> None:
    rows = []
    print("M x N x K: new default / previous default, median x bf16 cuBLAS (3 rounds)")
    for m in (2, 4, 8, 16):
        for n, k in SHAPES:
            problem = {"M": m, "N": n, "K": k, "dtype": "bf16", "max_error": 0.2}
            obj = QuantMatmulObjective(problem)
            configs = {"new": obj.default_config(), "previous": previous_default(obj)}
            readings: dict[str, list[float]] = {"new": [], "previous": []}
            for round_ in range(3):
                for way in ("new", "previous") if round_ % 2 == 0 else ("previous", "new"):
                    ratio = measure(problem, configs[way])
                    if ratio is not None:
                        readings[way].append(ratio)
            med = {w: statistics.median(r) if r else None for w, r in readings.items()}
            print(f"{m:>2} x {n:>5} x {k:>5}: {med['new']} / {med['previous']}", flush=True)
            rows.append({"M": m, "N": n, "K": k, "configs": configs, "readings": readings})
    (OUT / "int4_rows_default.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
