"""Host time of a decode-graph step's input fill: ``DecodeGraphs._fill`` alone, which copies a
step's tokens, positions, slots and block tables into the graphs' static buffers before the
replay (so it adds to every decode step's time). Nothing is replayed: the model is tiny and runs
nowhere, the cache holds 1 layer of 1 head of 8, but the shapes that cost host time are real:
block size 16, tables 128 blocks wide (``seq_len`` 2048), contexts of 1024+ tokens.

Printed per batch (1, 32, 256): median microseconds per fill over decode steps in which every
sequence grows by one token (a sixteenth of them takes a new block each step), over the same
step with its rows shuffled each time, and over the first step after every sequence was freed
and re-allocated (every table new). ``--against FILE`` times another copy of decode_graphs.py
(e.g. ``git show HEAD:kernels/decode_graphs.py > /tmp/old.py``) side by side.

    python benchmarks/decode_fill.py [--steps 48] [--rounds 5] [--against FILE] [--device cpu]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune.kernels import decode_graphs  # noqa: E402
from autotune.kernels.llama import Llama, LlamaConfig  # noqa: E402
from autotune.kernels.llama_infer import Chunk, InferenceModel  # noqa: E402
from autotune.kernels.paged_kv import PagedKVCache  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

BATCHES, LARGEST, CONTEXT, BLOCK = (1, 32, 256), 256, 1024, 16


def build(module: ModuleType, device: torch.device) -> tuple[object, PagedKVCache]:
    """``module``'s DecodeGraphs (eager) over a cache with room for 256 x 1088 tokens."""
    cfg = LlamaConfig(vocab=64, d_model=8, n_layers=1, n_heads=1, seq_len=2048)
    with torch.device(device):
        model = InferenceModel(Llama(cfg))
    blocks = LARGEST * (CONTEXT + 64) // BLOCK + 1  # + the graphs' scratch block
    cache = PagedKVCache(1, blocks, BLOCK, 1, 8, torch.float32, device)
    return module.DecodeGraphs(model, cache, max_batch=LARGEST, capture=False), cache


def fill_us(graphs, chunks: list[Chunk]) -> float:
    bucket = next(size for size in graphs.buckets if size >= len(chunks))
    start = time.perf_counter()
    graphs._fill(chunks, bucket)
    if graphs.tables.is_cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6


def measure(graphs, cache: PagedKVCache, batch: int, steps: int, rounds: int) -> list[float]:
    """Median microseconds of a fill: decoding, shuffled, right after re-allocation."""
    decoding, shuffled, fresh = [], [], []
    for _ in range(rounds):
        for seq in range(LARGEST):  # staggered lengths: sequences take new blocks in turn
            cache.free(seq)
            cache.allocate(seq, CONTEXT + 1 + seq % BLOCK)
        for step in range(steps):
            chunks = [Chunk(s, CONTEXT + s % BLOCK + step, [1]) for s in range(batch)]
            for c in chunks:
                cache.allocate(c.seq, c.start + 1)
            (fresh if step == 0 else decoding).append(fill_us(graphs, chunks))
            random.shuffle(chunks)
            shuffled.append(fill_us(graphs, chunks))
    return [statistics.median(times) for times in (decoding, shuffled, fresh)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=48, help="decode steps a round (<= 48)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another copy of decode_graphs.py")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    random.seed(0)
    device = torch.device(args.device)
    modules = {"this": decode_graphs}
    if args.against:
        modules["against"] = load_module(args.against, "decode_graphs_against")
    print(f"{'code':8} {'batch':>5} {'decode us':>10} {'shuffled us':>12} {'fresh us':>9}")
    for name, module in modules.items():
        graphs, cache = build(module, device)
        for batch in BATCHES:
            times = measure(graphs, cache, batch, min(args.steps, 48), args.rounds)
            print(f"{name:8} {batch:5d} {times[0]:10.1f} {times[1]:12.1f} {times[2]:9.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
