"""``decode_tile`` (16 x 64, K-blocks of 128 for groups of 128, 3 stages, two programs an SM;
chosen on the 7b preset's linears at one row) on linears it was not chosen on: the 1b and
760m presets' qkv, out, gate_up and down, at 1 and 16 decode rows, int4 and int8, against
the tiles the defaults took before session 37's change of rule (the serving engine's 16 x 64
x 64; the objective's 16 x 64 x 128 with 4 stages for groups of 128, 16 x 128 x 64 split for
one program an SM otherwise) and, at one row, the one-row tile on the CUDA cores.

Timing as ``linear_graphs`` does it (one CUDA graph of the linear over distinct weights,
rotated rounds of ``do_bench_cudagraph``), medians of ``--rounds`` rounds beside bf16 cuBLAS;
every config checked against the dequantized reference first.

    python benchmarks/gpu/decode_tile_heldout.py [--models 1b,760m] [--out OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
from linear_graphs import dense_run, launch_all, preset_linears, rotated_rounds

from autotune.kernels import quant_matmul_triton as qm
from autotune.kernels.interpreter import sm_count
from autotune.kernels.llama_infer import _kernel_level


def configs(N: int, K: int, level: str, rows: int) -> dict[str, dict]:
    sms, bm = sm_count(), max(16, rows)
    if qm.group_size(level) == 128:
        before = qm.decode_config(N, K, 2 * sms, block_k=128)
    else:
        before = qm.decode_config(N, K, sms, block_n=128, block_k=64)
    out = {"decode_tile": {**qm.decode_tile(N, K, level, sms), "BLOCK_M": bm},
           "engine before": {**qm.decode_config(N, K, 2 * sms), "BLOCK_M": bm},
           "objective before": {**before, "BLOCK_M": bm, "num_stages": 4}}  # fmt: skip
    if rows == 1:
        out["one-row"] = qm.decode_config(N, K, 2 * sms, level=level)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="1b,760m")
    parser.add_argument("--rows", default="1,16")
    parser.add_argument("--levels", default="int4,int8")
    parser.add_argument("--layer-bytes", type=float, default=256e6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = []
    wins = {}
    for model in args.models.split(","):
        linears = preset_linears(model)
        for rows in (int(r) for r in args.rows.split(",")):
            for name, (N, K) in linears.items():
                gen = torch.Generator(device="cuda").manual_seed(0)
                w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=gen) / K**0.5
                x = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16, generator=gen)
                y = torch.empty(rows, N, device="cuda", dtype=torch.bfloat16)
                dense = [w.clone() for _ in range(max(2, int(args.layer_bytes // (N * K * 2))))]
                runs = {"cublas bf16": dense_run(x, dense, y)}
                counts = {"cublas bf16": len(dense)}
                counters = qm.tile_counters(N, rows=1, device="cuda")
                for level_name in args.levels.split(","):
                    level = _kernel_level(level_name, K)
                    q, s = qm.quantize(w.t(), level)
                    ref = qm.reference_quant_matmul(x, q, s)
                    copies = max(2, int(args.layer_bytes // qm.weight_bytes(q, s)))
                    qs = [(q.clone(), s.clone()) for _ in range(copies)]
                    for cname, cfg in configs(N, K, level, rows).items():
                        got = qm.quant_matmul(x, q, s, counters=counters, **cfg)
                        err = ((got.float() - ref).norm() / ref.norm()).item()
                        if err > 1e-2:
                            raise SystemExit(f"{model} {name} {level} {cname}: rel error {err}")
                        launches = [qm.launcher(x, qq, ss, y, counters=counters, **cfg)
                                    for qq, ss in qs]  # fmt: skip
                        runs[f"{level} {cname}"] = launch_all(launches)
                        counts[f"{level} {cname}"] = copies
                times = rotated_rounds(runs, counts, list(runs), args.rounds)
                us = {k: statistics.median(v) for k, v in times.items()}
                cb = us["cublas bf16"]
                print(f"\n{model} {rows} rows {name} (K={K} -> N={N}): cuBLAS {cb:.2f} us")
                for key in runs:
                    print(f"  {key:32s} {us[key]:8.2f} us {cb / us[key]:6.3f}x cuBLAS")
                for level_name in args.levels.split(","):
                    level = _kernel_level(level_name, K)
                    mine = [k for k in us if k.startswith(level + " ")]
                    best = min(mine, key=us.get)
                    wins.setdefault(best.split(" ", 1)[1], []).append(f"{model}/{rows}/{name}")
                results.append({"model": model, "rows": rows, "linear": name, "N": N, "K": K,
                                "us": us, "readings_us": times})  # fmt: skip
    print("\nfastest config per (model, rows, linear, level):")
    for cname, where in wins.items():
        print(f"  {cname}: {len(where)}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "decode_tile_heldout.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
