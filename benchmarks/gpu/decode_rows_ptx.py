"""The weight-only kernel before and after session 37 (nibbles to bf16 in inline PTX, weights
stored K-major) on the serving engine's linears of a model preset (7b: qkv 4096 -> 12288, out
4096 -> 4096, gate_up 4096 -> 21888, down 10944 -> 4096), at one decode row and at 16, with
bf16 cuBLAS (``F.linear``, the engine's bf16 path) beside them: which tile a decode row
should take now (the one-row tile on the CUDA cores, or the 16-row tensor-core tile).

Timing as ``linear_graphs`` does it (one CUDA graph of the linear over ``--layer-bytes`` of
distinct weights, rotated rounds of ``do_bench_cudagraph``); medians of ``--rounds`` rounds,
microseconds a linear. The previous
kernel is the module file given by ``--previous`` (``git show af14ed1:kernels/
quant_matmul_triton.py > FILE``), fed the N-major weights it was written for; every config is
checked against the dequantized reference first.

    python benchmarks/gpu/decode_rows_ptx.py --previous FILE [--model 7b] [--out OUT]
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import statistics
from pathlib import Path

import torch
from linear_graphs import dense_run, launch_all, preset_linears, rotated_rounds

from autotune.kernels import quant_matmul_triton as new_kernel
from autotune.kernels.interpreter import sm_count
from autotune.kernels.llama_infer import _kernel_level


def _module_from(path: str):  # noqa: ANN202
    loader = importlib.machinery.SourceFileLoader("previous_quant_matmul", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _configs(kern, N: int, K: int, level: str, rows: int) -> dict[str, dict]:  # noqa: ANN001
    """The serving engine's untuned tiles (``QuantLinear``): one-row and 16-row."""
    programs = 2 * sm_count()
    out = {"16-row": {**kern.decode_config(N, K, programs), "BLOCK_M": max(16, rows)}}
    if rows == 1:
        out["one-row"] = kern.decode_config(N, K, programs, level=level)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--previous", required=True)
    parser.add_argument("--model", default="7b")
    parser.add_argument("--levels", default="int4,int8")
    parser.add_argument("--rows", default="1,16")
    parser.add_argument("--layer-bytes", type=float, default=256e6)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    old_kernel = _module_from(args.previous)
    shapes = preset_linears(args.model)
    print(f"{torch.cuda.get_device_name()}, {args.model}: medians of {args.rounds} rotated "
          f"rounds, us a linear (weights read from HBM)")  # fmt: skip
    out_rows = []
    for rows in (int(r) for r in args.rows.split(",")):
        for name, (N, K) in shapes.items():
            gen = torch.Generator(device="cuda").manual_seed(0)
            w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16, generator=gen) / K**0.5
            x = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16, generator=gen)
            copies = max(2, int(args.layer_bytes // (N * K * 2)))
            dense = [w.clone() for _ in range(copies)]
            y = torch.empty(rows, N, device="cuda", dtype=torch.bfloat16)
            runs = {"cublas bf16": dense_run(x, dense, y)}
            counts = {"cublas bf16": copies}
            for level_name in args.levels.split(","):
                level = _kernel_level(level_name, K)
                q, s = new_kernel.quantize(w.t(), level)
                ref = new_kernel.reference_quant_matmul(x, q, s)
                layer_copies = max(2, int(args.layer_bytes // new_kernel.weight_bytes(q, s)))
                for tag, kern in (("new", new_kernel), ("previous", old_kernel)):
                    weights = q if tag == "new" else q.contiguous()  # N-major, as it was
                    qs = [(weights.clone(), s.clone()) for _ in range(layer_copies)]
                    counters = kern.tile_counters(N, rows=1, device="cuda")
                    for vname, config in _configs(kern, N, K, level, rows).items():
                        got = kern.quant_matmul(x, weights, s, counters=counters, **config)
                        err = ((got.float() - ref).norm() / ref.norm()).item()
                        if err > 1e-2:
                            raise SystemExit(f"{tag} {level} {config}: rel error {err}")
                        launches = [kern.launcher(x, qq, ss, y, counters=counters, **config)
                                    for qq, ss in qs]  # fmt: skip
                        key = f"{level} {tag} {vname}"
                        runs[key] = launch_all(launches)
                        counts[key] = layer_copies
            keys = list(runs)
            times = rotated_rounds(runs, counts, keys, args.rounds)
            us = {k: statistics.median(v) for k, v in times.items()}
            print(f"\n{rows} rows, {name} (K={K} -> N={N}): cuBLAS bf16 {us['cublas bf16']:.2f} us")
            for key in keys:
                print(f"  {key:28s} {us[key]:8.2f} us  {us['cublas bf16'] / us[key]:6.3f}x cuBLAS")
            out_rows.append({"rows": rows, "linear": name, "N": N, "K": K, "us": us,
                             "readings_us": times})  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "decode_rows_ptx.json").write_text(json.dumps(out_rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
