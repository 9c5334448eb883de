"""A step with a prefill chunk from the CUDA graphs against the same step through the forward.

The graphs replay a step's hundreds of kernels in one launch; the forward launches them from
Python but lays a chunk's rows out per sequence. For one chunk of ``n`` tokens from position
``start`` (with and without 32 decode tokens of other sequences at context 1024 in the same
step), this times the engine's whole step both ways, side by side and alternating, on a paged
760m model, with the key reads a layer's attention would make if each of the chunk's rows read
its keys alone ("per-row MiB": what the graphs did before their attention read tiles of rows).

Each shape's first step also compares the two ways' logits (``max |graphs - forward|``): a
step the graphs cannot capture or run fails here rather than timing nothing.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/graph_chunk_crossover.py OUT [--model 760m] [--rounds 7]
        [--max-tokens 2048] [--lengths 16,64,...] [--starts 0,1024,4096] [--decodes 0,32]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.objectives.train_step import MODEL_PRESETS

STARTS = (0, 1024, 4096)
LENGTHS = (16, 64, 128, 256, 512, 1024, 2048)
DECODES = (0, 32)
DECODE_CONTEXT = 1024
MAX_TOKENS = 2048  # the serving default's step budget
CHUNK_SEQ = 10_000


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def _timed_ms(run: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", default="760m")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS,
                        help="the graphs' step budget (their largest bucket)")  # fmt: skip
    parser.add_argument("--lengths", type=_ints, default=LENGTHS)
    parser.add_argument("--starts", type=_ints, default=STARTS)
    parser.add_argument("--decodes", type=_ints, default=DECODES)
    args = parser.parse_args()
    context = max(args.starts) + max(args.lengths)
    cfg = LlamaConfig(**MODEL_PRESETS[args.model], seq_len=max(8192, context))
    torch.manual_seed(0)
    model = InferenceModel(Llama(cfg).to("cuda"), attention_reads="paged")
    per_seq = -(-cfg.seq_len // 16)
    decodes_most = max(args.decodes)
    blocks = per_seq + decodes_most * -(-(DECODE_CONTEXT + 1) // 16) + 1
    cache = model.new_cache(blocks, 16, "bf16")
    graphs = DecodeGraphs(model, cache, decodes_most + 1, max_tokens=args.max_tokens)
    key_bytes = 2 * cache.k[0][0, 0].numel() * cache.k[0].element_size()  # K and V, all heads
    for seq in range(decodes_most):
        cache.allocate(seq, DECODE_CONTEXT + 1)
    rows = []
    for decodes in args.decodes:
        for start in args.starts:
            for n in args.lengths:
                if n + decodes > args.max_tokens:
                    continue
                cache.allocate(CHUNK_SEQ, start + n)
                chunk = Chunk(CHUNK_SEQ, start, torch.randint(0, cfg.vocab, (n,)).tolist())
                chunks = [chunk] + [Chunk(s, DECODE_CONTEXT, [1]) for s in range(decodes)]
                ways = {"graphs": lambda c=chunks: graphs(c),
                        "forward": lambda c=chunks: model.forward(c, cache)}  # fmt: skip
                difference = (graphs(chunks) - model.forward(chunks, cache)).abs().max().item()
                taken: dict[str, list[float]] = {name: [] for name in ways}
                for round_ in range(args.rounds + 2):  # two warm-up rounds
                    order = list(ways) if round_ % 2 == 0 else list(reversed(ways))
                    for name in order:
                        ms = _timed_ms(ways[name])
                        if round_ >= 2:
                            taken[name].append(ms)
                cache.free(CHUNK_SEQ)
                row = {"start": start, "n": n, "decodes": decodes,
                       "per_row_mib": (start * n + n * (n + 1) // 2) * key_bytes / 2**20,
                       "max_logit_difference": difference,
                       **{f"{k}_ms": statistics.median(v) for k, v in taken.items()}}  # fmt: skip
                row["graphs_over_forward"] = row["graphs_ms"] / row["forward_ms"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    rows.sort(key=lambda r: r["per_row_mib"])
    print(f"\n{args.model}, paged bf16 cache, medians of {args.rounds} alternating rounds of the "
          "engine's whole step (host inputs, kernels, logits)")  # fmt: skip
    print("| per-row MiB a layer | start | chunk | decode rows | graphs ms | forward ms | graphs / "
          "forward |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for r in rows:
        print(
            f"| {r['per_row_mib']:.1f} | {r['start']} | {r['n']} | {r['decodes']} "
            f"| {r['graphs_ms']:.2f} | {r['forward_ms']:.2f} | {r['graphs_over_forward']:.2f} |"
        )
    slower = [r for r in rows if r["graphs_over_forward"] >= 1]
    print(
        f"graphs slower than the forward in {len(slower)} of {len(rows)} steps; largest "
        f"max |graphs - forward| logit: {max(r['max_logit_difference'] for r in rows):.3g}"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "graph_chunk_crossover.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
