"""Weight-only decode products with the int4 nibbles turned into bf16 by inline PTX (a few
bit operations per pair of weights) or by Triton's own integer ops and conversion, and with
the packed weights stored N-major (``(K/2, N)`` contiguous, as ``quantize`` wrote them until
session 37) or K-major (the same logical tensor, K contiguous: the tensor cores' right
operand then reads whole words from shared memory instead of one byte a weight).

Through the real objective (`QuantMatmulObjective.evaluate`: fresh inputs, both gates, bf16
cuBLAS in the same round, streamed), every variant of a shape in one rotated alternation, 3
rounds; medians of the ratio to bf16 cuBLAS. The PTX switch and the layout are patched into
the installed module (``_constexprs`` and ``quantize``) for the variant being measured.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/int4_dequant_layout.py OUT
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from quant_eval import evaluate

from autotune.kernels import quant_matmul_triton as qm
from autotune.objectives.quant_matmul import QuantMatmulObjective

OUT = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
STATE = {"ptx": True, "kmajor": True}
_constexprs = qm._constexprs
_quantize = qm.quantize


def _patched_constexprs(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    values = _constexprs(*args, **kwargs)
    if "PTX" in values:
        values["PTX"] = STATE["ptx"]
    return values


def _patched_quantize(w, level):  # noqa: ANN001, ANN202
    q, s = _quantize(w, level)
    if STATE["kmajor"]:
        q = q.t().contiguous().t()
    elif q.stride(-1) != 1:  # the module under test may store K-major already
        q = q.contiguous()
    return q, s


qm._constexprs = _patched_constexprs
qm.quantize = _patched_quantize

WAYS = {"cvt n-major": (False, False), "ptx n-major": (True, False),
        "ptx k-major": (True, True), "cvt k-major": (False, True)}  # fmt: skip


def cases() -> list[tuple[dict, str, dict, list[str]]]:
    out = []
    for m, n, k in ((16, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336), (1, 4096, 4096)):
        problem = {"M": m, "N": n, "K": k, "dtype": "bf16", "max_error": 0.2}
        obj = QuantMatmulObjective(problem)
        if m == 1:
            out.append(
                (problem, "one-row default", obj.default_config(), ["cvt n-major", "cvt k-major"])
            )
            cfg = {
                "weights": "int4-g128",
                **qm.decode_config(n, k, 2 * obj.sms, block_n=64, block_k=128),
                "num_stages": 4,
            }
            out.append((problem, "16-row int4 default", cfg, list(WAYS)))
        else:
            out.append((problem, "int4 default", obj.default_config(), list(WAYS)))
    for m in (16, 64):
        problem = {"M": m, "N": 4096, "K": 4096, "dtype": "bf16", "max_error": 0.05}
        obj = QuantMatmulObjective(problem)
        out.append((problem, "int8 default", obj.default_config(), ["cvt n-major", "cvt k-major"]))
    return out  # fmt: skip


def check_fp16() -> None:
    """The PTX path in fp16 (the objective runs bf16): against the float64 reference."""
    import torch

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(16, 4096, generator=gen).cuda().half()
    q, s = _quantize(torch.randn(4096, 4096, generator=gen).cuda().half(), "int4-g128")
    ref = qm.reference_quant_matmul(x, q, s)
    for kmajor in (False, True):
        qq = q.t().contiguous().t() if kmajor else q.contiguous()
        y = qm.quant_matmul(x, qq, s, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, SPLIT_K=8)
        err = ((y.double() - ref).norm() / ref.norm()).item()
        print(f"fp16 int4 k-major={kmajor}: relative error {err:.2e}", flush=True)


def main() -> None:
    check_fp16()
    rows = []
    for problem, name, config, ways in cases():
        readings: dict[str, list[float]] = {w: [] for w in ways}
        errors: dict[str, str] = {}
        for round_ in range(3):
            order = ways[round_ % len(ways) :] + ways[: round_ % len(ways)]
            for way in order:
                STATE["ptx"], STATE["kmajor"] = WAYS[way]
                r = evaluate(problem, config, rounds=1)
                if "error" in r:
                    errors[way] = r["error"]
                else:
                    readings[way].append(r["ratio"])
        med = {w: (round(statistics.median(v), 4) if v else None) for w, v in readings.items()}
        shape = f"{problem['M']}x{problem['N']}x{problem['K']}"
        print(f"{shape} {name}: {med} {errors or ''}", flush=True)
        rows.append({"problem": problem, "name": name, "config": config, "readings": readings,
                     "median": med, "errors": errors})  # fmt: skip
        (OUT / "int4_dequant_layout.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
