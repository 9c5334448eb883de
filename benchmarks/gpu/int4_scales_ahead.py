"""The int4 tensor-core tile with a K-block's scales loaded one block ahead, side by side with
loading them in the block's own iteration (``quant_matmul_triton.SCALES_AHEAD`` 1 against 0),
on a serving preset's linears or on ``--shapes``: the 64- and the 128-wide tile (``--scan``:
deeper pipelines, a split that fits one wave, a register cap), `decode_tile`'s marked. The
questions: did the scales' load latency, exposed once an iteration, bound the tile (it read
1.2-1.3 TB/s of weights where bf16 cuBLAS reads 3.3-4.1; ``--ahead both``), and where does
the 128-wide tile win?

Timing as ``linear_graphs`` does it (one CUDA graph of the linear over distinct weights,
rotated rounds of ``do_bench_cudagraph``), microseconds a linear; every config checked against
the dequantized reference first.

    python benchmarks/gpu/int4_scales_ahead.py [--models 7b,1b] [--rows 1,16] [--scan]
        [--ahead rule|both] [--out OUT]
    python benchmarks/gpu/int4_scales_ahead.py --models '' --shapes 28672:4096,15360:5120
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from linear_graphs import Int4Linear, preset_linears, rotated_rounds

from autotune.kernels import quant_matmul_triton as qm
from autotune.kernels.interpreter import sm_count


def tiles(N: int, K: int, level: str, rows: int, scan: bool) -> dict[str, dict]:
    """The 64-wide tile of `decode_config` and the 128-wide one (K split for two programs an
    SM), the one `decode_tile` takes marked; with ``scan`` deeper and more split ones too."""
    sms = sm_count()
    bm = max(16, rows)
    block_k = qm.decode_tile(N, K, level, sms)["BLOCK_K"]
    narrow = {**qm.decode_config(N, K, 2 * sms, block_k=block_k), "BLOCK_M": bm}
    out = {"64 wide": narrow}
    if qm.group_size(level) % 128 == 0:
        out["128 wide"] = {**qm.decode_config(N, K, 2 * sms, block_n=128, block_k=128),
                           "BLOCK_M": bm}  # fmt: skip
    if scan:
        for stages in (4, 6):
            out[f"64 wide s{stages}"] = {**narrow, "num_stages": stages}
        if "128 wide" in out:
            wide = out["128 wide"]
            fit = dict(wide)  # K split less until the programs fit 3 an SM (147 registers)
            while fit["SPLIT_K"] > 1 and -(-N // 128) * fit["SPLIT_K"] > 3 * sms:
                fit["SPLIT_K"] //= 2
            if fit != wide:
                out[f"128 wide split{fit['SPLIT_K']}"] = fit
            out["128 wide maxnreg128"] = {**wide, "maxnreg": 128}  # 4 an SM
    rule = {**qm.decode_tile(N, K, level, sms), "BLOCK_M": bm}
    return {f"{name} (decode_tile)" if cfg == rule else name: cfg for name, cfg in out.items()}


_MAXNREG: list[int] = []  # a register cap for the launcher being built (--scan)
_checked = qm._checked


def _checked_with_cap(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
    tunables = _checked(*args, **kwargs)
    return {**tunables, "maxnreg": _MAXNREG[0]} if _MAXNREG else tunables


qm._checked = _checked_with_cap


def linears(models: str, shapes: str) -> list[tuple[str, str, int, int]]:
    """(model, name, N, K) of each preset's linears and each ``N:K`` of ``shapes``."""
    out = [(m, name, N, K) for m in models.split(",") if m
           for name, (N, K) in preset_linears(m).items()]  # fmt: skip
    for shape in (s for s in shapes.split(",") if s):
        N, K = (int(v) for v in shape.split(":"))
        out.append(("shape", f"{N}x{K}", N, K))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="7b,1b")
    parser.add_argument("--shapes", default="", help="N:K,... (beside the presets)")
    parser.add_argument("--rows", default="1,16")
    parser.add_argument("--scan", action="store_true")
    parser.add_argument(
        "--ahead",
        choices=("rule", "both"),
        default="rule",
        help="scales ahead as SCALES_AHEAD's rule has it, or both ways",
    )
    parser.add_argument("--layer-bytes", type=float, default=256e6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    results = []
    for rows in (int(r) for r in args.rows.split(",")):
        for model, name, N, K in linears(args.models, args.shapes):
            case = Int4Linear(N, K, rows, args.layer_bytes)
            level, runs = case.level, case.runs
            configs = {}
            for cname, cfg in tiles(N, K, level, rows, args.scan).items():
                for ahead in (None,) if args.ahead == "rule" else (False, True):
                    qm.SCALES_AHEAD = ahead
                    key = cname if ahead is None else f"{cname} ahead{int(ahead)}"
                    run_cfg = dict(cfg)
                    _MAXNREG[:] = [run_cfg.pop("maxnreg")] if "maxnreg" in run_cfg else []
                    err = case.error(run_cfg)
                    if err > 1e-2:
                        raise SystemExit(f"{model} {name} {key}: rel error {err}")
                    case.add(key, run_cfg)
                    configs[key] = cfg
            times = rotated_rounds(runs, case.counts, list(runs), args.rounds)
            us = {k: statistics.median(v) for k, v in times.items()}
            print(f"\n{model} {rows} rows, {name} (K={K} -> N={N}, {level}): cuBLAS bf16 "
                  f"{us['cublas bf16']:.2f} us")  # fmt: skip
            for key in runs:
                if key == "cublas bf16":
                    continue
                gbps = qm.weight_bytes(case.q, case.s) / (us[key] * 1e-6) / 1e9
                print(f"  {key:28s} {us[key]:8.2f} us {us['cublas bf16'] / us[key]:6.3f}x "
                      f"cuBLAS {gbps:6.0f} GB/s")  # fmt: skip
            results.append({"model": model, "rows": rows, "linear": name, "N": N, "K": K,
                            "level": level, "configs": configs, "us": times})  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "int4_scales_ahead.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
