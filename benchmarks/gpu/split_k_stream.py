"""K-split decode products, streamed, with the fp32 workspace shared by every launcher on the
stream (the launchers' default) and with one of their own (``shared_workspace=False``; the
code before the change), side by side with cuBLAS and a copy of B. bf16 matmuls (M = 1, 16, 64;
N = K = 4096, each shape's default config and two more) also run the previous module (``OLD``,
a copy of ``kernels/matmul_triton.py`` before the change). Weight-only products (int8 and int4,
one and 16 rows, the 7b preset's qkv, out and down shapes) run the serving engine's configs
(``decode_config``).

Every candidate runs over the same rotated input sets (spanning 4 L2 caches, as the objective's
streamed protocol), launched back to back from a CUDA graph; ``--rounds`` rounds, the order
rotated; medians of round medians. Each output is checked against its reference first.
Printed: microseconds, x bf16 cuBLAS, and the fraction of a copy's bandwidth (the bytes read
and written over the copy's 2 x B bytes a second), as the objective reports them.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/split_k_stream.py OLD [--rounds 5] [--shapes 1,16,64] [--quant]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from streamed_bf16 import StreamedProduct  # beside this file

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import matmul_triton as new  # noqa: E402
from autotune.kernels import quant_matmul_triton as qm  # noqa: E402
from autotune.kernels.interpreter import sm_count  # noqa: E402
from autotune.objectives.kernel import input_sets  # noqa: E402
from autotune.timing import interleaved  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

ARGS = argparse.ArgumentParser()
ARGS.add_argument("old")
ARGS.add_argument("--rounds", type=int, default=5)
ARGS.add_argument("--shapes", default="1,16,64")
ARGS.add_argument("--quant", action="store_true", help="the weight-only products too")
#: configs besides each bf16 shape's default (BM, BN, BK, split, warps, stages)
EXTRA = {16: [(16, 64, 128, 4, 4, 4), (16, 128, 128, 2, 4, 4)],
         64: [(64, 64, 128, 2, 4, 5), (64, 128, 64, 4, 4, 4)]}  # fmt: skip
#: the 7b preset's linears (K, N) and the levels the engine gives them
QUANT = [(4096, 12288), (4096, 4096), (10944, 4096)]


def config(spec: tuple[int, ...]) -> dict:
    bm, bn, bk, split, warps, stages = spec
    return {**new.DEFAULT_CONFIG, "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 1,
            "SPLIT_K": split, "num_warps": warps, "num_stages": stages}  # fmt: skip


def report(title: str, times: dict, footprints: dict, copy_bytes: int) -> None:
    copy_gbps = copy_bytes / times["copy"].median_ms / 1e6
    print(f"\n{title}; copy {copy_gbps:.0f} GB/s")
    print(f"{'candidate':40s} {'us':>8s} {'spread':>7s} {'x cuBLAS':>9s} {'of copy':>8s}")
    for name, t in times.items():
        gbps = footprints.get(name, footprints["cublas"]) / t.median_ms / 1e6
        print(
            f"{name:40s} {t.median_ms * 1e3:8.2f} {t.spread:7.1%} "
            f"{times['cublas'].median_ms / t.median_ms:9.3f} {gbps / copy_gbps:8.3f}"
        )


def checked(runs: list, out: torch.Tensor, ref: torch.Tensor, tol: float) -> bool:
    out.fill_(float("nan"))
    runs[0]()
    torch.cuda.synchronize()
    return bool((out.float() - ref).abs().max().item() <= tol * ref.abs().max().item())


def bf16_shape(M: int, old, l2: int, rounds: int) -> None:
    N = K = 4096
    problem = StreamedProduct.make(M, N, K, l2)
    footprint, sets, ref = problem.footprint, len(problem.inputs), problem.ref
    inputs, outs = problem.inputs, problem.outs
    fns: dict = problem.baselines()
    for spec in [None] + EXTRA.get(M, []):
        cfg = new.default_config(M, N, K) if spec is None else config(spec)
        label = "default" if spec is None else "x".join(map(str, spec))
        for tag, make in (
            ("previous", lambda a, b, c, cfg=cfg: old.launcher(a, b, c, **cfg)),
            ("own", lambda a, b, c, cfg=cfg: new.launcher(a, b, c, shared_workspace=False, **cfg)),
            ("shared", lambda a, b, c, cfg=cfg: new.launcher(a, b, c, **cfg)),
        ):
            runs = [make(a, b, c) for (a, b), c in zip(inputs, outs, strict=True)]
            if checked(runs, outs[0], ref, 0.01):
                fns[f"{label} {tag}"] = runs
            else:
                print(f"M={M} {label} {tag}: wrong result")
    times = interleaved(fns, device_type="cuda", rounds=rounds, warmup_ms=0, rep_ms=3.0)
    report(f"M={M}, N=K={N} bf16, {sets} input sets", times, {"cublas": footprint}, 4 * K * N)


def quant_shape(M: int, K: int, N: int, l2: int, rounds: int) -> None:
    level = "int4-g128" if K % 128 == 0 else "int4-g64"
    gen = torch.Generator(device="cuda").manual_seed(K + N)
    w = torch.randn(K, N, generator=gen, device="cuda")
    packs = {lv: qm.quantize(w, lv) for lv in ("int8", level)}
    sets = input_sets(2 * K * N, l2)
    xs = [torch.randn(M, K, generator=gen, device="cuda").bfloat16() for _ in range(sets)]
    ws = [w.bfloat16()] + [torch.randn(K, N, generator=gen, device="cuda").bfloat16()
                           for _ in range(sets - 1)]  # fmt: skip
    outs = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    copies = [torch.empty_like(b) for b in ws]
    fns: dict = {
        "cublas": [lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)
                   for a, b, c in zip(xs, ws, outs, strict=True)],
        "copy": [lambda b=b, d=d: d.copy_(b) for b, d in zip(ws, copies, strict=True)],
    }  # fmt: skip
    footprints = {"cublas": 2 * (M * K + K * N + M * N)}
    programs = 2 * sm_count()
    for lv, (q, s) in packs.items():
        q_sets = [q] + [qm.quantize(b.float(), lv)[0] for b in ws[1:]]
        ref = xs[0].float() @ qm.dequantize(q, s).float()
        cfg = qm.decode_config(N, K, programs, level=lv if M == 1 else None)
        if M > 1:
            cfg["BLOCK_M"] = max(16, M)
        footprint = qm.weight_bytes(q, s) + 2 * (M * K + M * N)
        for tag, shared in (("own", False), ("shared", True)):
            runs = [qm.launcher(x, qq, s, y, shared_workspace=shared, **cfg)
                    for x, qq, y in zip(xs, q_sets, outs, strict=True)]  # fmt: skip
            name = f"{lv} split {cfg['SPLIT_K']} {tag}"
            if checked(runs, outs[0], ref, 0.02):
                fns[name] = runs
                footprints[name] = footprint
            else:
                print(f"{M}x{N}x{K} {name}: wrong result")
    times = interleaved(fns, device_type="cuda", rounds=rounds, warmup_ms=0, rep_ms=3.0)
    report(f"weight-only {M}x{N}x{K} (x @ W, W {K}x{N}), {sets} input sets", times,
           footprints, 4 * K * N)  # fmt: skip


def main() -> None:
    args = ARGS.parse_args()
    old = load_module(args.old, "matmul_old")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(f"{torch.cuda.get_device_name()}, L2 {l2 / 2**20:.0f} MiB; {args.rounds} rounds")
    if args.quant:
        for M in (1, 16):
            for K, N in QUANT:
                quant_shape(M, K, N, l2, args.rounds)
    for M in (int(m) for m in args.shapes.split(",")):
        bf16_shape(M, old, l2, args.rounds)


if __name__ == "__main__":
    main()
