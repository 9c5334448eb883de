"""Serving targets on one GPU: decode against the bandwidth roofline, int4 against bf16 decode,
and a tuned sweep's goodput against the default config's under an SLO.

1. Decode at batch 1, 32 and 256 (context ``--context`` tokens each, cache filled): the median
   step time over ``--steps`` steps, eager and replayed from decode CUDA graphs, through SDPA
   over the gathered blocks and through the paged kernel; bytes a step must read (weights +
   every sequence's keys and values) over it, as a fraction of a device copy's bandwidth
   measured in the same run.
2. int4 (and int8) weights against bf16 at batch 1: decode tokens/s, and the quality gate's KL.
3. ``autotune tune serving`` at ``--rate`` under ``--slo``: the finish's re-measured winner
   against the untuned default (its trial 0), goodput within the SLO.

    python benchmarks/serving.py --out DIR [--model 760m] [--batches 1,32,256]
        [--budget-s 240 (0: no sweep)]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.kernels.paged_kv import PagedKVCache
from autotune.objectives.train_step import MODEL_PRESETS

#: decode variants timed for bf16: (attention read, CUDA graphs, fused add + RMSNorm, fused
#: rotary + KV write); the unfused ones are the engine before each fusion, side by side in the
#: same run
VARIANTS = [("gather", False, True, False), ("gather", True, False, False),
            ("gather", True, True, False), ("gather", True, True, True),
            ("paged", True, True, False), ("paged", True, True, True)]  # fmt: skip
#: the variants quantized weights are timed in (at batch 1), against bf16 in the same one
QUANTIZED_VARIANTS = [("gather", True, True, False), ("paged", True, True, True)]


def _variant(row: dict[str, Any]) -> tuple[str, bool, bool, bool]:
    return (row["attention"], row["cuda_graphs"], row["fused_norm"], row["fused_rope"])


def copy_bandwidth(device: torch.device) -> float:
    """Bytes a second of a 1 GiB device-to-device copy (read + write), median of 10."""
    src = torch.empty(2**30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    times = []
    for _ in range(10):
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        dst.copy_(src)
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return 2 * src.numel() / statistics.median(times)


def median_ms(
    run: Callable[[], object], count: int, sync: Callable[[], object] = torch.cuda.synchronize
) -> float:
    """Median wall milliseconds of ``count`` calls of ``run``, each timed from one ``sync``
    (the GPU's queue drained: by default ``torch.cuda.synchronize``) to the next, so a call's
    time includes the device work it queued.

    Example:
        >>> median_ms(lambda: sum(range(1000)), 5, sync=lambda: None) < 100
        True
    """
    taken = []
    for _ in range(count):
        sync()
        start = time.perf_counter()
        run()
        sync()
        taken.append(time.perf_counter() - start)
    return statistics.median(taken) * 1e3


def decode_step_bytes(model: InferenceModel, batch: int, context: int) -> int:
    """Bytes a decode step must read, the roofline's numerator: the weights once, and the
    keys and values of ``context`` tokens of each of ``batch`` sequences (bf16, every head)."""
    cfg = model.cfg
    return model.weight_bytes() + batch * context * 2 * cfg.n_layers * cfg.d_model * 2


def step_summary(
    ms: list[float], first_ms: float, need: float, copy_bps: float
) -> tuple[float, float, float, float]:
    """Of one variant's step times over rounds (ms): the median, the spread (max - min over
    the median), the first variant's median over it, and the fraction of the roofline (``need``
    bytes at the copy's ``copy_bps``).

    Example:
        >>> [round(x, 3) for x in step_summary([2.0, 2.2, 2.1], 2.1, 4.2e9, 4e12)]
        [2.1, 0.095, 1.0, 0.5]
    """
    med = statistics.median(ms)
    return med, (max(ms) - min(ms)) / med, first_ms / med, need / (med / 1e3) / copy_bps


def filled_cache(model: InferenceModel, batch: int, tokens: int, spare: int = 1) -> PagedKVCache:
    """A bf16 cache of 16-token blocks holding ``batch`` sequences of ``tokens`` tokens of
    random keys and values (a prefilled context stands in), plus ``spare`` free blocks (each
    decode graphs' runner takes one for its scratch)."""
    cache = model.new_cache(batch * -(-tokens // 16) + spare, 16, "bf16")
    for seq in range(batch):
        cache.allocate(seq, tokens)
    for layer in range(len(cache.k)):
        cache.k[layer].normal_()
        cache.v[layer].normal_()
    return cache


def decode_step_s(
    model: InferenceModel, batch: int, context: int, steps: int, graphs: bool = False
) -> float:
    """Median seconds of a decode step of ``batch`` sequences at ``context`` tokens, through
    the engine's forward or (``graphs``) replayed from a CUDA graph of the batch's bucket."""
    cache = filled_cache(model, batch, context + steps + 1)
    runner = DecodeGraphs(model, cache, batch) if graphs else None
    times = []
    for step in range(steps):
        chunks = [Chunk(seq, context + step, [1]) for seq in range(batch)]
        torch.cuda.synchronize(model.device)
        start = time.perf_counter()
        if runner is not None:
            runner(chunks)
        else:
            model.forward(chunks, cache)
        torch.cuda.synchronize(model.device)
        times.append(time.perf_counter() - start)
    return statistics.median(times[2:])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="760m")
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument(
        "--batches",
        default="1,32,256",
        help="Decode batch sizes of the bf16 rows (quantized rows: batch 1).",
    )
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--slo", default="ttft_p99_ms=500,tpot_p99_ms=50")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=240.0,
        help="The serving sweep's time budget; 0 skips the sweep.",
    )
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda")
    cfg = LlamaConfig(**MODEL_PRESETS[args.model], seq_len=args.context + 64)
    results: dict[str, Any] = {"model": args.model, "context": args.context}
    results["copy_gbps"] = copy_bandwidth(device) / 1e9
    rows = []
    for weights in ("bf16", "int8", "int4"):
        torch.manual_seed(0)
        with torch.device(device):
            llama = Llama(cfg)
        # (attention read, CUDA graphs): eager and graphed SDPA over gathered blocks, and the
        # paged kernel graphed; quantized weights against bf16 in two graphed variants: SDPA
        # over gathered blocks, and the engine's fastest (the paged kernel, every fusion)
        variants = VARIANTS if weights == "bf16" else QUANTIZED_VARIANTS
        for reads, graphs, fused, rope in variants:
            model = InferenceModel(llama, weights, reads, fused_norm=fused, fused_rope=rope)
            for batch in batches if weights == "bf16" else (1,):
                step = decode_step_s(model, batch, args.context, args.steps, graphs)
                need = decode_step_bytes(model, batch, args.context)
                fraction = need / step / (results["copy_gbps"] * 1e9)
                rows.append({"weights": weights, "attention": reads, "cuda_graphs": graphs,
                             "fused_norm": fused, "fused_rope": rope, "batch": batch,
                             "step_ms": step * 1e3,
                             "tokens_per_s": batch / step,
                             "roofline_fraction": fraction})  # fmt: skip
                print(json.dumps(rows[-1]), flush=True)
            del model
            torch.cuda.empty_cache()
        del llama
    results["decode"] = rows
    for r in rows:  # quantized rows against bf16 in the same variant, both at batch 1
        bf16 = next((b for b in rows if b["weights"] == "bf16" and b["batch"] == 1
                     and _variant(b) == _variant(r)), None)  # fmt: skip
        same = bf16 is not None and r["batch"] == 1 and _variant(r) in QUANTIZED_VARIANTS
        r["x_bf16_batch1"] = r["tokens_per_s"] / bf16["tokens_per_s"] if same else None
    if args.budget_s <= 0:  # the decode sections only
        (args.out / "serving_summary.json").write_text(json.dumps(results, indent=2, default=str))
        return 0
    storage = f"sqlite:///{args.out / 'serving.db'}"
    command = [sys.executable, "-m", "autotune.cli", "tune", "serving", "--problem",
               f"model={args.model},rate={args.rate}", "--slo", args.slo, "--time-budget",
               f"{args.budget_s:g}s", "--seed", "0", "--storage", storage, "--study", "serving",
               "--output", str(args.out / "best_serving.json")]  # fmt: skip
    with open(args.out / "sweep.log", "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    best = args.out / "best_serving.json"
    if best.exists():
        record = json.loads(best.read_text())
        finish = record.get("finish", {}).get("rows", [])
        default = next((r for r in finish if r.get("baseline")), None)
        results["sweep"] = {"winner": finish[0] if finish else None, "default": default}
    (args.out / "serving_summary.json").write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
