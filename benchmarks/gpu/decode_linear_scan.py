"""The serving engine's linears at decode batch sizes on a GPU: cuBLAS (``F.linear``, the
engine's path) against the kernel suite's Triton matmul at its untuned default, with the weight
as the engine holds it ((N, K), read K-major) and transposed to (K, N). Each figure is one CUDA
graph of the linear over ``--layers`` distinct weights (a decode step reads each layer's once,
so nothing stays in L2), timed by Triton's ``do_bench_cudagraph``; medians of ``--rounds``
interleaved rounds, in microseconds a linear, with the weight bytes over it.

    python benchmarks/gpu/decode_linear_scan.py [--model 760m] [--batches 1,16]
"""

from __future__ import annotations

import argparse
import functools
import statistics

import torch
import torch.nn.functional as F
from triton.testing import do_bench_cudagraph

from autotune.kernels import matmul_triton
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.objectives.train_step import MODEL_PRESETS


def _cublas(x: torch.Tensor, weights: list[torch.Tensor], out: torch.Tensor) -> None:
    for w in weights:
        torch.matmul(x, w.t(), out=out)


def _triton(x: torch.Tensor, bs: list[torch.Tensor], out: torch.Tensor, config: dict) -> None:
    for b in bs:
        matmul_triton.matmul(x, b, out=out, **config)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="760m")
    parser.add_argument("--batches", default="1,16")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cfg = LlamaConfig(**MODEL_PRESETS[args.model], seq_len=2048)
    block = Llama(LlamaConfig(**{**MODEL_PRESETS[args.model], "n_layers": 1})).blocks[0]
    shapes = {
        "qkv": block.attn.qkv.weight.shape,
        "out": block.attn.out.weight.shape,
        "gate_up": block.mlp.gate_up.weight.shape,
        "down": block.mlp.down.weight.shape,
    }
    print(f"{torch.cuda.get_device_name()}, {args.model} (d_model {cfg.d_model}), "
          f"{args.layers} weights a graph, {args.rounds} rounds")  # fmt: skip
    print(
        f"{'linear':8s} {'M':>3s} {'N x K':>12s} {'cuBLAS us':>9s} {'triton NK':>9s} "
        f"{'triton KN':>9s} {'x cuBLAS':>8s} {'x (KN)':>7s} {'cuBLAS GB/s':>11s} config"
    )
    for name, (N, K) in shapes.items():
        weights = [torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K**0.5
                   for _ in range(args.layers)]  # fmt: skip
        transposed = [w.t().contiguous() for w in weights]
        for M in [int(b) for b in args.batches.split(",")]:
            x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            config = matmul_triton.default_config(M, N, K)
            out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
            ref = F.linear(x, weights[0])
            for b in (weights[0].t(), transposed[0]):
                got = matmul_triton.matmul(x, b, **config)
                assert (got.float() - ref.float()).abs().max() < 0.05 * ref.abs().max()

            runs = {
                "cublas": functools.partial(_cublas, x, weights, out),
                "nk": functools.partial(_triton, x, [w.t() for w in weights], out, config),
                "kn": functools.partial(_triton, x, transposed, out, config),
            }
            times: dict[str, list[float]] = {k: [] for k in runs}
            for r in range(args.rounds):
                order = list(runs)[r % 3 :] + list(runs)[: r % 3]
                for key in order:
                    times[key].append(do_bench_cudagraph(runs[key], rep=50) * 1e3 / args.layers)
            us = {k: statistics.median(v) for k, v in times.items()}
            gbps = N * K * 2 / (us["cublas"] * 1e-6) / 1e9
            print(f"{name:8s} {M:3d} {f'{N}x{K}':>12s} {us['cublas']:9.2f} {us['nk']:9.2f} "
                  f"{us['kn']:9.2f} {us['cublas'] / us['nk']:8.3f} {us['cublas'] / us['kn']:7.3f} "
                  f"{gbps:11.0f} {config}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
