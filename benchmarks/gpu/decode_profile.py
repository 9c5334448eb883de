"""Where a decode step's time goes on a GPU: the engine's whole step (host fill + graph replay +
logits copy), the graph replay alone, and the kernels of three replays by name (torch.profiler,
CUDA activity), per batch; 760m preset, context 1024, paged reads.

    python benchmarks/gpu/decode_profile.py [--model 760m] [--context 1024]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections import defaultdict
from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.objectives.train_step import MODEL_PRESETS


def _median_s(run: Callable[[], object], times: int = 20) -> float:
    taken = []
    for _ in range(times):
        torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        taken.append(time.perf_counter() - start)
    return statistics.median(taken)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="760m")
    parser.add_argument("--context", type=int, default=1024)
    args = parser.parse_args()
    cfg = LlamaConfig(**MODEL_PRESETS[args.model], seq_len=2048)
    torch.manual_seed(0)
    model = InferenceModel(Llama(cfg).to("cuda"), attention_reads="paged")
    for batch in (1, 32, 256):
        cache = model.new_cache(batch * -(-(args.context + 40) // 16) + 1, 16, "bf16")
        runner = DecodeGraphs(model, cache, batch)
        for seq in range(batch):
            cache.allocate(seq, args.context + 40)
        chunks = [Chunk(seq, args.context, [1]) for seq in range(batch)]
        step = _median_s(functools.partial(runner, chunks))
        graph = runner.graphs[next(b for b in runner.buckets if b >= batch)][0]
        replay = _median_s(graph.replay)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                graph.replay()
            torch.cuda.synchronize()
        per: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for event in prof.events():
            if event.device_type.name == "CUDA":
                per[event.name[:90]][0] += 1
                per[event.name[:90]][1] += event.device_time_total
        kernels_us = sum(us for _, us in per.values()) / 3
        kv = batch * (args.context + 1) * cfg.n_layers * 2 * cfg.d_model * 2
        print(f"\n== batch {batch}: step {step * 1e3:.3f} ms, replay {replay * 1e3:.3f} ms, "
              f"kernels {kernels_us / 1e3:.3f} ms in {sum(n for n, _ in per.values()) // 3} "
              f"launches; {(model.weight_bytes() + kv) / 1e9:.3f} GB to read")  # fmt: skip
        for name, (n, us) in sorted(per.items(), key=lambda item: -item[1][1])[:16]:
            print(f"{us / 3:10.1f} us  {n // 3:5d}x  {name}")
        del runner, cache
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
