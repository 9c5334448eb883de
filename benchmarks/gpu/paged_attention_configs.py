"""The paged-attention kernel's tiles at decode on a GPU, then whole decode steps with the best.

Part 1 times the kernel alone, as a decode step reads the cache: one CUDA graph of it over
``--layers`` distinct caches (the ``--model`` preset's heads, 760m's 16 x 96 by default; context
``--context``), each ``BLOCK_N`` x ``num_warps`` x ``num_stages`` x shares (``--splits``: ``rule``
is :func:`decode_splits`'s; ``BLOCK_M`` stays 16, the graphs' tile of rows), at the ``--scan``
batches; medians of ``--rounds``
interleaved rounds, in GB/s of keys and values. Part 2 takes the ``--top`` configs by their
geometric-mean speed over those batches and times the engine's whole decode step (host fill,
graph replay, logits) with each against the default, side by side in rotated rounds, at
``--batches``; the step against the default's and the bytes a step must read over a 1 GiB
copy's bandwidth measured in the same run.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/paged_attention_configs.py [--scan 32,256] [--batches 1,32,256]
    python benchmarks/gpu/paged_attention_configs.py --model 7b --scan 1 --batches 1 \
        --block-n 16,32,64 --warps 1,2,4 --stages 1,2,3 --splits rule,8,16,32
"""

from __future__ import annotations

import argparse
import functools
import itertools
import math
import statistics
import sys
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
    median_ms,
    step_summary,
)

PAGE = 16


def _layers(q, caches, tables, positions, **options) -> None:  # noqa: ANN001, ANN003
    for k, v in caches:
        kernel.paged_attention(q, k, v, tables, positions, **options)


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def configs_of(args: argparse.Namespace) -> dict[str, dict]:
    """The scanned configs by name: the default, then the product of the axes.

    Example:
        >>> ns = argparse.Namespace(block_n="64", warps="2,4", stages="2", splits="rule,16")
        >>> list(configs_of(ns))[:3]
        ['default', 'BLOCK_N 64, 2 warps, 2 stages', 'BLOCK_N 64, 2 warps, 2 stages, 16 shares']
    """
    configs: dict[str, dict] = {"default": {}}
    axes = (_ints(args.block_n), _ints(args.warps), _ints(args.stages), args.splits.split(","))
    for bn, warps, stages, splits in itertools.product(*axes):
        name = f"BLOCK_N {bn}, {warps} warps, {stages} stages"
        options = {"BLOCK_N": bn, "num_warps": warps, "num_stages": stages}
        if splits != "rule":
            name, options["splits"] = f"{name}, {splits} shares", int(splits)
        configs[name] = options
    return configs


def scan(configs: dict[str, dict], batches: list[int], context: int, layers: int, rounds: int,
         H: int, D: int) -> dict[str, dict]:  # fmt: skip
    """GB/s of each config at each batch (median of rounds); configs that fail are left out."""
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
          count: int, preset: str) -> None:  # fmt: skip
    """Whole decode steps of the paged engine (bf16) with each config, side by side."""
    device = torch.device("cuda")
    copy_bps = copy_bandwidth(device)
    cfg = LlamaConfig(**MODEL_PRESETS[preset], seq_len=context + 64)
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
                taken[name].append(median_ms(functools.partial(runners[name], chunks), count))
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
    parser.add_argument("--model", default="760m", help="The preset whose heads are read.")
    parser.add_argument("--block-n", default="32,64,128")
    parser.add_argument("--warps", default="2,4,8")
    parser.add_argument("--stages", default="1,2,3,4")
    parser.add_argument("--splits", default="rule", help="Shares: rule (decode_splits) or counts.")
    args = parser.parse_args()
    scanned = _ints(args.scan)
    preset = MODEL_PRESETS[args.model]
    H, D = preset["n_heads"], preset["d_model"] // preset["n_heads"]
    print(f"{torch.cuda.get_device_name()}: {args.model}, {H} heads x {D}, context "
          f"{args.context}, {args.layers} caches a graph, {args.rounds} rounds; default "
          f"{kernel.DEFAULT_CONFIG}")  # fmt: skip
    table = scan(configs_of(args), scanned, args.context, args.layers, args.rounds, H, D)
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
          _ints(args.batches), args.context, args.rounds + 2, 20, args.model)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
