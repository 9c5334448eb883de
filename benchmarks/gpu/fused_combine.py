"""Decode steps with the paged kernel's shares combined by a second kernel a layer, and by the
last program of each row's shares (``InferenceModel.fused_combine``), side by side (GPU).

For each ``--models`` entry (preset:weights, e.g. 7b:int4), one model and one KV cache (context
``--context``) and two :class:`DecodeGraphs`, captured with ``fused_combine`` off and on; the
rounds rotate the two, each round the median of ``--steps`` whole steps (host fill + graph
replay + logits, as the engine runs them) and of as many bare replays. The batches are the
ones whose attention is cut in shares (few sequences: flash-decoding). The logits of both are
compared first (same chunks). Printed: medians over rounds, fused / second kernel, and the
bytes a step must read over the step as a fraction of a 1 GiB copy's bandwidth.

    python benchmarks/gpu/fused_combine.py [--models 7b:bf16,7b:int4,1b:bf16] [--batches 1,4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

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

VARIANTS = ("second kernel", "fused combine")


def side_by_side(model: InferenceModel, batch: int, args: argparse.Namespace, copy_bps: float):
    """Both variants at one batch: prints a row each."""
    length = args.context + 1  # every step decodes position ``context`` again: the same work
    cache = filled_cache(model, batch, length, spare=len(VARIANTS))
    runners = {}
    for name in VARIANTS:
        model.fused_combine = name == "fused combine"  # read when a graph is captured
        runners[name] = DecodeGraphs(model, cache, batch)
    chunks = [Chunk(seq, args.context, [1]) for seq in range(batch)]
    logits = [runners[name](chunks).float() for name in VARIANTS]
    gap = float((logits[0] - logits[1]).abs().max() / logits[0].abs().max())
    step_ms: dict[str, list[float]] = {n: [] for n in VARIANTS}
    replay_ms: dict[str, list[float]] = {n: [] for n in VARIANTS}
    for r in range(args.rounds):
        for name in rotated(list(VARIANTS), r):
            runner = runners[name]
            graph = runner.graphs[next(b for b in runner.buckets if b >= batch)][0]
            step_ms[name].append(median_ms(lambda runner=runner: runner(chunks), args.steps))
            replay_ms[name].append(median_ms(graph.replay, args.steps))
    need = decode_step_bytes(model, batch, length)
    first = statistics.median(step_ms[VARIANTS[0]])
    print(f"\nbatch {batch}: {need / 1e9:.2f} GB a step; logits max gap {gap:.1e} of the largest")
    for name in VARIANTS:
        med, spread, ratio, roofline = step_summary(step_ms[name], first, need, copy_bps)
        print(f"  {name:14s} step {med:7.3f} ms ({spread:5.1%}) replay "
              f"{statistics.median(replay_ms[name]):7.3f} ms  x second kernel {ratio:6.3f}  "
              f"of copy bw {roofline:5.3f}")  # fmt: skip
    del runners, cache
    torch.cuda.empty_cache()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="7b:bf16,7b:int4,1b:bf16")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--batches", default="1,4")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    device = torch.device("cuda")
    copy_bps = copy_bandwidth(device)
    print(f"{torch.cuda.get_device_name()}, copy {copy_bps / 1e9:.0f} GB/s, context "
          f"{args.context}, {args.rounds} rounds x {args.steps} steps")  # fmt: skip
    for entry in args.models.split(","):
        preset, weights = entry.split(":")
        cfg = LlamaConfig(**MODEL_PRESETS[preset], seq_len=args.context + 64)
        torch.manual_seed(0)
        with torch.device(device):
            model = InferenceModel(Llama(cfg), weights, "paged")
        print(f"\n##### {preset}, {weights} weights")
        for batch in (int(b) for b in args.batches.split(",")):
            side_by_side(model, batch, args, copy_bps)
        del model
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
