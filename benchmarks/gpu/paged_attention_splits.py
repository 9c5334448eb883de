"""The paged-attention kernel at decode on a GPU, by how many shares each row's keys are cut
in (``splits``; ``auto`` is :func:`decode_splits`' choice) and ``BLOCK_N``: one CUDA graph of
the kernel over ``--layers`` distinct caches (as a decode step reads them), timed by Triton's
``do_bench_cudagraph``; medians of ``--rounds`` interleaved rounds, microseconds a layer, and
the keys and values read over it.

    python benchmarks/gpu/paged_attention_splits.py [--heads 16] [--head-dim 96]
"""

from __future__ import annotations

import argparse
import functools
import statistics

import torch
from triton.testing import do_bench_cudagraph

from autotune.kernels import paged_attention_triton as kernel
from autotune.timing import rotated


def _layers(q: torch.Tensor, caches: list, tables, positions, **options: object) -> None:  # noqa: ANN001
    for k, v in caches:
        kernel.paged_attention(q, k, v, tables, positions, **options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=96)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--batches", default="1,4,16,32")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    page, H, D = 16, args.heads, args.head_dim
    print(f"{torch.cuda.get_device_name()}: {H} heads x {D}, context {args.context}, "
          f"{args.layers} caches a graph, {args.rounds} rounds")  # fmt: skip
    for batch in [int(b) for b in args.batches.split(",")]:
        per_seq = -(-(args.context + 1) // page)
        blocks = batch * per_seq
        caches = [tuple(torch.randn(blocks, page, H, D, device="cuda", dtype=torch.bfloat16)
                        for _ in range(2)) for _ in range(args.layers)]  # fmt: skip
        order = torch.randperm(blocks, device="cuda", dtype=torch.int64).to(torch.int32)
        tables = order.view(batch, per_seq).contiguous()
        positions = torch.full((batch, 1), args.context, device="cuda", dtype=torch.int32)
        q = torch.randn(batch, 1, H, D, device="cuda", dtype=torch.bfloat16)
        variants = {"auto (BLOCK_N 64)": {}}
        for block_n in (32, 64):
            for splits in (1, 4, 8, 16, 32):
                variants[f"splits {splits}, BLOCK_N {block_n}"] = {
                    "splits": splits,
                    "BLOCK_N": block_n,
                }
        reference = kernel.paged_attention(q, *caches[0], tables, positions, splits=1)
        runs = {}
        for name, options in variants.items():
            got = kernel.paged_attention(q, *caches[0], tables, positions, **options)
            assert (got.float() - reference.float()).abs().max() < 2e-2, name
            runs[name] = functools.partial(_layers, q, caches, tables, positions, **options)
        times: dict[str, list[float]] = {n: [] for n in runs}
        names = list(runs)
        for r in range(args.rounds):
            for name in rotated(names, r):
                times[name].append(do_bench_cudagraph(runs[name], rep=30) * 1e3 / args.layers)
        kv_bytes = 2 * batch * (args.context + 1) * H * D * 2
        auto = kernel.decode_splits(batch * H, tables.shape[1] * page, 64, kernel.sm_count())
        print(f"\nbatch {batch}: {kv_bytes / 1e6:.1f} MB of keys and values a layer; auto = "
              f"{auto} splits")  # fmt: skip
        for name in names:
            us = statistics.median(times[name])
            print(f"  {name:24s} {us:8.2f} us  {kv_bytes / (us * 1e-6) / 1e9:7.0f} GB/s")
        del caches
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
