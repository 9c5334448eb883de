"""The paged-attention kernel's tiles at decode on a GPU, then whole decode steps with the best.

Part 1 times the kernel alone, as a decode step reads the cache: one CUDA graph of it over
``--layers`` distinct caches (760m shapes: 16 heads x 96, context ``--context``), each
``BLOCK_N`` x ``num_warps`` x ``num_stages`` (``BLOCK_M`` stays 16, the graphs' tile of rows;
shares by :func:`decode_splits`), at the ``--scan`` batches; medians of ``--rounds``
interleaved rounds, in GB/s of keys and values. Part 2 takes the ``--top`` configs by their
geometric-mean speed over those batches and times the engine's whole decode step (host fill,
graph replay, logits) with each against the default, side by side in rotated rounds, at
``--batches``; the step against the default's and the bytes a step must read over a 1 GiB
copy's bandwidth measured in the same run.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/paged_attention_configs.py [--scan 32,256] [--batches 1,32,256]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from triton.testing import do_bench_cudagraph

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import paged_attention_triton as kernel  # noqa: E402
from autotune.kernels.decode_graphs import DecodeGraphs  # noqa: E402
from autotune.kernels.llama import Llama, LlamaConfig  # noqa: E402
from autotune.kernels.llama_infer import Chunk, InferenceModel  # noqa: E402
from autotune.objectives.train_step import MODEL_PRESETS  # noqa: E402
from autotune.timing import rotated  # noqa: E402
from benchmarks.serving import (  # noqa: E402
    copy_bandwidth,
    decode_step_bytes,
    filled_cache,
    step_summary,
)

PAGE, H, D = 16, 16, 96


def _layers(q, caches, tables, positions, **options) -> None:  # noqa: ANN001, ANN003
    for k, v in caches:
        kernel.paged_attention(q, k, v, tables, positions, **options)


def scan(batches: list[int], context: int, layers: int, rounds: int) -> dict[str, dict]:
    """GB/s of each config at each batch (median of rounds); configs that fail are left out."""
    configs = {"default": {}}
    for bn, warps, stages in itertools.product((32, 64, 128), (2, 4, 8), (1, 2, 3, 4)):
        configs[f"BLOCK_N {bn}, {warps} warps, {stages} stages"] = {
            "BLOCK_N": bn, "num_warps": warps, "num_stages": stages}  # fmt: skip
    speeds: dict[str, dict[int, float]] = {name: {} for name in configs}
    for batch in batches:
        per_seq = -(-(context + 1) // PAGE)
        blocks = batch * per_seq
        caches = [tuple(torch.randn(blocks, PAGE, H, D, device="cuda", dtype=torch.bfloat16)
                        for _ in range(2)) for _ in range(layers)]  # fmt: skip
        order = torch.randperm(blocks, device="cuda", dtype=torch.int64).to(torch.int32)
        tables = order.view(batch, per_seq).contiguous()
        positions = torch.full((batch, 1), context, device="cuda", dtype=torch.int32)
        q = torch.randn(batch, 1, H, D, device="cuda", dtype=torch.bfloat16)
        reference = kernel.paged_attention(q, *caches[0], tables, positions)
        runs = {}
        for name, options in configs.items():
            try:
                got = kernel.paged_attention(q, *caches[0], tables, positions, **options)
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a config that does not compile is a row
                print(f"batch {batch} {name}: {type(exc).__name__}", flush=True)
                continue
            assert (got.float() - reference.float()).abs().max() < 2e-2, name
            runs[name] = functools.partial(_layers, q, caches, tables, positions, **options)
        times: dict[str, list[float]] = {n: [] for n in runs}
        names = list(runs)
        for r in range(rounds):
            for name in rotated(names, r):
                times[name].append(do_bench_cudagraph(runs[name], rep=20) / layers)
        kv_bytes = 2 * batch * (context + 1) * H * D * 2
        for name in names:
            speeds[name][batch] = kv_bytes / (statistics.median(times[name]) * 1e-3) / 1e9
        del caches
        torch.cuda.empty_cache()
    return {name: {"options": configs[name], "gbps": s} for name, s in speeds.items()
            if len(s) == len(batches)}  # fmt: skip


def steps(variants: dict[str, dict], batches: list[int], context: int, rounds: int,
          count: int) -> None:  # fmt: skip
    """Whole decode steps of the paged 760m engine with each config, side by side."""
    device = torch.device("cuda")
    copy_bps = copy_bandwidth(device)
    cfg = LlamaConfig(**MODEL_PRESETS["760m"], seq_len=2048)
    torch.manual_seed(0)
    with torch.device(device):
        model = InferenceModel(Llama(cfg), "bf16", "paged")
    plain = kernel.paged_attention
    for batch in batches:
        length = context + 1  # every step decodes position ``context`` again: the same work
        cache = filled_cache(model, batch, length, spare=len(variants))
        runners = {}
        for name, options in variants.items():
            kernel.paged_attention = functools.partial(plain, **options)  # read at capture
            runners[name] = DecodeGraphs(model, cache, batch)
        kernel.paged_attention = plain
        taken: dict[str, list[float]] = {n: [] for n in variants}
        names = list(variants)
        chunks = [Chunk(seq, context, [1]) for seq in range(batch)]
        for r in range(rounds):
            for name in rotated(names, r):
                each = []
                for _ in range(count):
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    runners[name](chunks)
                    torch.cuda.synchronize()
                    each.append(time.perf_counter() - start)
                taken[name].append(statistics.median(each) * 1e3)
        need = decode_step_bytes(model, batch, length)
        first = statistics.median(taken[names[0]])
        print(f"\nbatch {batch}: {need / 1e9:.2f} GB a step, {rounds} rounds x {count} steps")
        for name in names:
            med, spread, ratio, roofline = step_summary(taken[name], first, need, copy_bps)
            print(f"  {name:32s} {med:8.3f} ms {spread:6.1%}  x default {ratio:6.3f}  "
                  f"of copy bw {roofline:6.3f}")  # fmt: skip
        del runners, cache
        torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scan", default="32,256")
    parser.add_argument("--batches", default="1,32,256")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=2)
    args = parser.parse_args()
    scanned = [int(b) for b in args.scan.split(",")]
    print(f"{torch.cuda.get_device_name()}: {H} heads x {D}, context {args.context}, "
          f"{args.layers} caches a graph, {args.rounds} rounds; default {kernel.DEFAULT_CONFIG}")
    table = scan(scanned, args.context, args.layers, args.rounds)
    base = table["default"]["gbps"]

    def gain(name: str) -> float:
        return math.prod(table[name]["gbps"][b] / base[b] for b in scanned) ** (1 / len(scanned))

    ranked = sorted(table, key=gain, reverse=True)
    print(f"\n{'config':32s} " + " ".join(f"{'batch ' + str(b):>12s}" for b in scanned)
          + "   x default (geomean)")  # fmt: skip
    for name in ranked:
        print(f"{name:32s} " + " ".join(f"{table[name]['gbps'][b]:7.0f} GB/s" for b in scanned)
              + f"   {gain(name):6.3f}")  # fmt: skip
    best = [n for n in ranked if n != "default"][: args.top]
    steps({"default": {}, **{n: table[n]["options"] for n in best}},
          [int(b) for b in args.batches.split(",")], args.context, args.rounds + 2, 20)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
