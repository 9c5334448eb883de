"""Decode steps of the serving engine, old and new code side by side in one process (GPU).

Each variant is a :class:`DecodeGraphs` over the same model and KV cache (760m preset, context
``--context``), captured with the named pieces swapped in; the rounds interleave the variants
in a rotated order and each round takes the median of ``--steps`` whole steps (host fill +
graph replay + logits copy, as the engine runs them) and of as many bare replays. Printed: the
median over rounds of each, the step against the first variant's, and bytes a step must read
(weights + every sequence's keys and values) over the step, as a fraction of a 1 GiB copy's
bandwidth measured in the same run.

    python benchmarks/gpu/decode_side_by_side.py --old-attention OLD.py --old-graphs OLD.py

``--graphs-only``: two variants, the old graphs and the new, both over the new attention and
fused SwiGLU (``--old-attention`` is then not read).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import decode_graphs, paged_attention_triton  # noqa: E402
from autotune.kernels.llama import Llama, LlamaConfig  # noqa: E402
from autotune.kernels.llama_infer import Chunk, InferenceModel  # noqa: E402
from autotune.objectives.train_step import MODEL_PRESETS  # noqa: E402
from autotune.timing import rotated  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402
from benchmarks.serving import (  # noqa: E402
    copy_bandwidth,
    decode_step_bytes,
    filled_cache,
    median_ms,
    step_summary,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old-attention", type=Path)
    parser.add_argument("--graphs-only", action="store_true")
    parser.add_argument("--old-graphs", type=Path, required=True)
    parser.add_argument("--model", default="760m")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--batches", default="1,32,256")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    new_attention = paged_attention_triton.paged_attention
    old_attention = new_attention
    if not args.graphs_only:
        old_attention = load_module(args.old_attention, "paged_attention_old").paged_attention
    old_graphs = load_module(args.old_graphs, "decode_graphs_old").DecodeGraphs
    new_graphs = decode_graphs.DecodeGraphs
    # name: (attention, fused SwiGLU, graphs class)
    variants = {
        "before": (old_attention, False, old_graphs),
        "+ split-KV attention": (new_attention, False, old_graphs),
        "+ fused SwiGLU": (new_attention, True, old_graphs),
        "+ host fill (all new)": (new_attention, True, new_graphs),
    }
    if args.graphs_only:
        variants = {"old graphs": (new_attention, True, old_graphs),
                    "new graphs": (new_attention, True, new_graphs)}  # fmt: skip
    device = torch.device("cuda")
    copy_bps = copy_bandwidth(device)
    cfg = LlamaConfig(**MODEL_PRESETS[args.model], seq_len=2048)
    torch.manual_seed(0)
    with torch.device(device):
        llama = Llama(cfg)
    models = {fused: InferenceModel(llama, "bf16", "paged", fused_swiglu=fused)
              for fused in (False, True)}  # fmt: skip
    print(f"{torch.cuda.get_device_name()}, copy {copy_bps / 1e9:.0f} GB/s, {args.model}, "
          f"context {args.context}, {args.rounds} rounds x {args.steps} steps")  # fmt: skip
    for batch in [int(b) for b in args.batches.split(",")]:
        model = models[True]
        length = args.context + 1  # every step decodes position ``context`` again: same work
        cache = filled_cache(model, batch, length, spare=len(variants))
        runners = {}
        for name, (attention, fused, graphs_class) in variants.items():
            paged_attention_triton.paged_attention = attention  # read when a graph is captured
            runners[name] = graphs_class(models[fused], cache, batch)
        paged_attention_triton.paged_attention = new_attention
        step_ms: dict[str, list[float]] = {n: [] for n in variants}
        replay_ms: dict[str, list[float]] = {n: [] for n in variants}
        names = list(variants)
        chunks = [Chunk(seq, args.context, [1]) for seq in range(batch)]
        for r in range(args.rounds):
            for name in rotated(names, r):
                runner = runners[name]
                step_ms[name].append(median_ms(functools.partial(runner, chunks), args.steps))
                bucket = next(b for b in runner.buckets if b >= batch)
                replay_ms[name].append(median_ms(runner.graphs[bucket][0].replay, args.steps))
        need = decode_step_bytes(model, batch, args.context + 1)
        first = statistics.median(step_ms[names[0]])
        print(f"\nbatch {batch}: {need / 1e9:.2f} GB a step")
        print(f"{'variant':24s} {'step ms':>8s} {'spread':>7s} {'replay ms':>9s} "
              f"{'x before':>8s} {'of copy bw':>10s}")  # fmt: skip
        for name in names:
            med, spread, ratio, roofline = step_summary(step_ms[name], first, need, copy_bps)
            print(f"{name:24s} {med:8.3f} {spread:6.1%} {statistics.median(replay_ms[name]):9.3f} "
                  f"{ratio:8.3f} {roofline:10.3f}")  # fmt: skip
        del runners, cache
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
