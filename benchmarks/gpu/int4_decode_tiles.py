"""Tiles for the 16-row int4 decode tile on the serving engine's linears (K-major weights, PTX
dequantization): a grid around the engine's tile (``default``: :func:`decode_tile`'s), one
round a config, then the best four and the default re-measured in ``--rounds`` rotated rounds
beside bf16 cuBLAS. The question (session 37, when the default was 16 x 64 x 64): how many
weight bytes a program should keep in flight (BLOCK_N x BLOCK_K / 2 a stage, times stages).

Timing as ``linear_graphs`` does it (one CUDA graph of the linear over distinct weights,
rotated rounds of ``do_bench_cudagraph``), microseconds a linear; every config checked against
the dequantized reference first.

    python benchmarks/gpu/int4_decode_tiles.py [--model 7b] [--rows 1,16] [--out OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from pathlib import Path

from linear_graphs import Int4Linear, preset_linears, rotated_rounds

from autotune.kernels import quant_matmul_triton as qm
from autotune.kernels.interpreter import sm_count


def grid(N: int, K: int, level: str, rows: int) -> dict[str, dict]:
    """The engine's tile (``default``) and tiles around it (name -> config)."""
    sms = sm_count()
    out = {"default": {**qm.decode_tile(N, K, level, sms), "BLOCK_M": max(16, rows)}}
    for bn, bk, stages, warps, per_sm in itertools.product(
        (64, 128), (64, 128), (3, 4, 6), (4, 8), (1, 2, 4)
    ):
        if qm.group_size(level) % bk:
            continue
        cfg = {**qm.decode_config(N, K, per_sm * sms, block_n=bn, block_k=bk),
               "BLOCK_M": max(16, rows), "num_warps": warps, "num_stages": stages}  # fmt: skip
        out[f"{bn}x{bk} s{stages} w{warps} split{cfg['SPLIT_K']}"] = cfg
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="7b")
    parser.add_argument("--rows", default="1,16")
    parser.add_argument("--linears", default="qkv,out,gate_up,down")
    parser.add_argument("--layer-bytes", type=float, default=256e6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    linears = preset_linears(args.model)
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        for name in args.linears.split(","):
            N, K = linears[name]
            case = Int4Linear(N, K, rows, args.layer_bytes)
            level, runs = case.level, case.runs
            configs = grid(N, K, level, rows)
            for cname, cfg in configs.items():
                try:
                    err = case.error(cfg)
                except Exception as exc:  # noqa: BLE001 - a config that does not run is a reading
                    print(f"  {cname}: {type(exc).__name__}", flush=True)
                    continue
                if err > 1e-2:
                    raise SystemExit(f"{name} {cname}: rel error {err}")
                case.add(cname, cfg)
            scan = rotated_rounds(runs, case.counts, list(runs), 1)
            ranked = sorted((k for k in scan if k not in ("cublas bf16", "default")),
                            key=lambda k: scan[k][0])  # fmt: skip
            finalists = ["cublas bf16", "default", *ranked[:4]]
            times = rotated_rounds(runs, case.counts, finalists, args.rounds)
            us = {k: statistics.median(v) for k, v in times.items()}
            print(f"\n{rows} rows, {name} (K={K} -> N={N}, {level}): cuBLAS bf16 "
                  f"{us['cublas bf16']:.2f} us; scan of {len(scan) - 1} configs")  # fmt: skip
            weight_bytes = qm.weight_bytes(case.q, case.s)
            for key in finalists:
                gbps = weight_bytes / (us[key] * 1e-6) / 1e9 if key != "cublas bf16" else 0
                print(f"  {key:30s} {us[key]:8.2f} us {us['cublas bf16'] / us[key]:6.3f}x cuBLAS"
                      f" {gbps:6.0f} GB/s")  # fmt: skip
            results.append({"rows": rows, "linear": name, "N": N, "K": K, "level": level,
                            "scan_us": {k: v[0] for k, v in scan.items()},
                            "configs": {k: configs[k] for k in finalists if k in configs},
                            "final_us": times})  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "int4_decode_tiles.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
