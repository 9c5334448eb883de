"""Where a decode step's time goes on a GPU: the engine's whole step (host fill + graph replay +
logits copy), the graph replay alone, and the kernels of three replays by name (torch.profiler,
CUDA activity), per batch and weight level, with the kernels' time summed by kind (linears,
attention, norms, ...); 760m preset, context 1024, paged reads, bf16 weights by default.

    python benchmarks/gpu/decode_profile.py [--model 7b] [--weights bf16,int4] [--batches 1]
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels.decode_graphs import DecodeGraphs  # noqa: E402
from autotune.kernels.llama import Llama, LlamaConfig  # noqa: E402
from autotune.kernels.llama_infer import Chunk, InferenceModel  # noqa: E402
from autotune.objectives.train_step import MODEL_PRESETS  # noqa: E402
from benchmarks.serving import median_ms  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="760m")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--weights", default="bf16", help="Comma-separated levels: bf16,int8,int4.")
    parser.add_argument("--batches", default="1,32,256")
    args = parser.parse_args()
    cfg = LlamaConfig(**MODEL_PRESETS[args.model], seq_len=args.context + 64)
    for weights in args.weights.split(","):
        torch.manual_seed(0)
        with torch.device("cuda"):  # built there: a 7b model's fp32 weights skip the host
            model = InferenceModel(Llama(cfg), weights, attention_reads="paged")
        print(f"\n##### {args.model}, {weights} weights, context {args.context}")
        _profile(model, cfg, args.context, [int(b) for b in args.batches.split(",")])
        del model
        torch.cuda.empty_cache()
    return 0


#: kernel-name fragments -> the kind a kernel's time is summed under (the first match wins)
KINDS: tuple[tuple[str, str], ...] = (
    ("quant_matmul", "quantized linears"),
    ("_int4", "quantized linears"),
    ("_int8", "quantized linears"),
    ("gemm", "cuBLAS linears"),
    ("gemv", "cuBLAS linears"),
    ("sm90_xmma", "cuBLAS linears"),
    ("nvjet", "cuBLAS linears"),
    ("splitkreduce", "cuBLAS linears"),
    ("cutlass", "cuBLAS linears"),
    ("paged_attention", "attention"),
    ("_combine", "attention"),
    ("rmsnorm", "norms"),
    ("rotary", "rotary + KV write"),
    ("swiglu", "SwiGLU"),
    ("silu", "SwiGLU"),
)


def kind_of(name: str) -> str:
    """The kind a kernel's time counts under, by its name.

    Example:
        >>> kind_of("quant_matmul_kernel"), kind_of("_rmsnorm_fwd"), kind_of("elementwise_kernel")
        ('quantized linears', 'norms', 'other')
    """
    lowered = name.lower()
    return next((kind for part, kind in KINDS if part in lowered), "other")


def _profile(model: InferenceModel, cfg: LlamaConfig, context: int, batches: list[int]) -> None:
    for batch in batches:
        cache = model.new_cache(batch * -(-(context + 40) // 16) + 1, 16, "bf16")
        runner = DecodeGraphs(model, cache, batch)
        for seq in range(batch):
            cache.allocate(seq, context + 40)
        chunks = [Chunk(seq, context, [1]) for seq in range(batch)]
        step_ms = median_ms(functools.partial(runner, chunks), 20)
        graph = runner.graphs[next(b for b in runner.buckets if b >= batch)][0]
        replay_ms = median_ms(graph.replay, 20)
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
        kv = batch * (context + 1) * cfg.n_layers * 2 * cfg.d_model * 2
        print(f"\n== batch {batch}: step {step_ms:.3f} ms, replay {replay_ms:.3f} ms, "
              f"kernels {kernels_us / 1e3:.3f} ms in {sum(n for n, _ in per.values()) // 3} "
              f"launches; {(model.weight_bytes() + kv) / 1e9:.3f} GB to read")  # fmt: skip
        kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        for name, (n, us) in per.items():
            kinds[kind_of(name)][0] += n
            kinds[kind_of(name)][1] += us
        for kind, (n, us) in sorted(kinds.items(), key=lambda item: -item[1][1]):
            print(f"{us / 3:10.1f} us  {n // 3:5d}x  [{kind}]")
        for name, (n, us) in sorted(per.items(), key=lambda item: -item[1][1])[:20]:
            print(f"{us / 3:10.1f} us  {n // 3:5d}x  {name}")
        del runner, cache
        torch.cuda.empty_cache()


if __name__ == "__main__":
    raise SystemExit(main())
