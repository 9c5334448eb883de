"""One reading of a weight-only config through the real objective, for the GPU scripts that
compare such configs (`quant_decode_scan.py`, `swap_ab_scan.py`, `int4_rows_default.py`):
fresh inputs, both gates, bf16 cuBLAS in the same round(s), streamed where the problem fits in
two L2 caches.

Example (under the CPU's interpreter, a tiny problem):
    >>> r = evaluate({"M": 2, "N": 32, "K": 64, "dtype": "bf16"},
    ...              {"weights": "int8", "BLOCK_M": 16, "BLOCK_N": 32, "BLOCK_K": 32,
    ...               "SPLIT_K": 1, "num_warps": 4, "num_stages": 2}, rounds=1)
    >>> sorted(r)
    ['gbps', 'quant_error', 'ratio', 'us']
"""

from __future__ import annotations

from autotune.objectives import kernel as kernel_objective
from autotune.objectives.quant_matmul import QuantMatmulObjective


def evaluate(problem: dict, config: dict, rounds: int) -> dict:
    """``{"ratio": x bf16 cuBLAS, "us", "gbps", "quant_error"}``, or ``{"error": why}`` for a
    config that failed (a failing config is a reading too)."""
    kernel_objective.GPU_TIMING["rounds"] = rounds
    obj = QuantMatmulObjective(problem)
    try:
        meas = obj.evaluate(config)
    except Exception as exc:  # noqa: BLE001 - reported as the config's reading
        return {"error": f"{type(exc).__name__}: {str(exc)[:100]}"}
    finally:
        obj.close()
    return {"ratio": meas.values["ratio_to_cublas"], "us": meas.metrics["ms"] * 1e3,
            "gbps": meas.metrics["gbps"], "quant_error": meas.metrics["quant_error"]}  # fmt: skip
