"""The int4 weight-only kernel before and after a change, side by side with bf16 cuBLAS: the
previous version is loaded from a file (``OLD``, e.g. from ``git show
REV:kernels/quant_matmul_triton.py``), both run at the same configs on the same quantized
weights, streamed over rotated input sets from a CUDA graph (`autotune.timing.bench_streamed`,
the objective's protocol), 5 interleaved rounds, the order rotated.

Run (GPU machine, after benchmarks/gpu/setup.sh): python benchmarks/gpu/int4_side_by_side.py OLD
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import quant_matmul_triton as new  # noqa: E402
from autotune.timing import interleaved  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

old = load_module(sys.argv[1], "quant_old")

CONFIGS = {  # the best int4 configs of the 2026-12-02-late scan (tensor cores)
    "int4-g64": dict(BLOCK_M=16, BLOCK_N=128, BLOCK_K=64, SPLIT_K=8, num_warps=4, num_stages=4),
    "int4-g128": dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, SPLIT_K=8, num_warps=4, num_stages=4),
}
SETS = 28  # 28 x 8.8 MB of int4 weights: four 60 MiB L2 caches

print(
    f"{'M':>3} {'level':10} {'old us':>7} {'new us':>7} {'new/old speed':>13} "
    f"{'old x cuBLAS':>12} {'new x cuBLAS':>12} {'new rel err':>11}"
)
for m in (1, 16):
    for level, cfg in CONFIGS.items():
        gen = torch.Generator(device="cuda").manual_seed(m)
        fns: dict[str, list] = {"old": [], "new": [], "cublas": []}
        errors = []
        for _ in range(SETS):
            x = torch.randn(m, 4096, generator=gen, device="cuda").bfloat16()
            w = torch.randn(4096, 4096, generator=gen, device="cuda").bfloat16()
            q, s = new.quantize(w, level)
            y_old, y_new, y_ref = (torch.empty(m, 4096, dtype=torch.bfloat16, device="cuda")
                                   for _ in range(3))  # fmt: skip
            fns["old"].append(old.launcher(x, q, s, y_old, **cfg))
            fns["new"].append(new.launcher(x, q, s, y_new, **cfg))
            fns["cublas"].append(lambda x=x, w=w, y=y_ref: torch.matmul(x, w, out=y))
            if len(errors) < 2:
                fns["new"][-1]()
                ref = new.reference_quant_matmul(x, q, s)
                errors.append(float((y_new.float() - ref).norm() / ref.norm()))
        t = interleaved(fns, device_type="cuda", rounds=5, rep_ms=3.0)
        o, n, c = (t[k].median_ms * 1e3 for k in ("old", "new", "cublas"))
        print(
            f"{m:3d} {level:10} {o:7.2f} {n:7.2f} {o / n:13.3f} {c / o:12.3f} {c / n:12.3f} "
            f"{max(errors):11.2e}"
        )
