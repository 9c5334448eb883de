"""Where a training step's GPU time goes: one config of the train-step objective run twice (the
first compiles and fills the caches), the second under torch.profiler; kernel time per step by
kind (GEMM, attention, inductor's fused kernels, optimizer, loss, other) and the top kernels,
with each kind's share of the profiled kernel time and what the step's model FLOPs would take
at the device's dense bf16 peak.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/train_profile.py OUT --problem model=760m,seq_len=2048,global_batch=16 \
        --config '{"micro_batch":16,"attention_backend":"cudnn","compile":true}'
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from autotune.cli_parsing import parse_problem
from autotune.device import detect_device
from autotune.workload_setup import resolve_workload

#: kernel-name fragments -> kind, first match wins
KINDS = (
    ("attention", ("flash", "fmha", "cudnn", "attn", "sdpa")),
    ("optimizer", ("adam", "multi_tensor")),
    ("loss", ("cross_entropy", "log_softmax", "nll_loss", "softmax")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "sm90", "scaled_mm")),
    ("inductor fused", ("triton_",)),
)


def kind_of(name: str) -> str:
    """The kind of a kernel from its name.

    Example:
        >>> kind_of("nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT"), kind_of("triton_poi_fused_add_0")
        ('gemm', 'inductor fused')
    """
    lowered = name.lower()
    for kind, fragments in KINDS:
        if any(f in lowered for f in fragments):
            return kind
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--problem", default="model=760m,seq_len=2048,global_batch=16")
    parser.add_argument("--config", type=json.loads, required=True)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    device = detect_device().as_dict()
    problem = parse_problem([args.problem + ",check_numerics=false"])
    cls, _, problem = resolve_workload("train-step", None, problem, device)
    objective = cls(problem)
    config = {**objective.default_config(), **args.config}
    objective.evaluate(config)  # compiles; fills inductor's and the allocator's caches
    cuda = torch.cuda.is_available()  # on a CPU (a check of this script): its operators' time
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        measured = objective.evaluate(config)
    steps = int(problem["steps"]) + int(problem["warmup_steps"])
    by_kind: dict[str, float] = defaultdict(float)
    kernels = []
    for event in prof.key_averages():
        us = event.self_device_time_total if cuda else event.self_cpu_time_total
        if us <= 0:
            continue
        by_kind[kind_of(event.key)] += us
        kernels.append((us, event.count, event.key))
    total = sum(by_kind.values())
    m = measured.metrics
    peak = m.get("mfu_peak_tflops") or float("nan")  # none known for a CPU
    ideal_ms = m["model_tflops"] * m["step_ms"] / peak
    report = {"config": config, "problem": problem, "metrics": m,
              "per_step_ms": {k: v / 1e3 / steps for k, v in by_kind.items()},
              "top": [{"ms_per_step": us / 1e3 / steps, "calls": n, "kernel": k}
                      for us, n, k in sorted(kernels, reverse=True)[: args.top]]}  # fmt: skip
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train_profile.json").write_text(json.dumps(report, indent=1, default=str))
    tokens = m["tokens_per_s_per_device"]
    print(f"step {m['step_ms']:.1f} ms (the profiled run: {tokens:.0f} tokens/s, "
          f"MFU {m['mfu'] or 0:.3f}); model FLOPs at the bf16 peak: {ideal_ms:.1f} ms; kernel time "
          f"profiled over {steps} steps (warm-up included)")  # fmt: skip
    print("| kind | ms a step | share |\n|---|---|---|")
    for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"| {kind} | {us / 1e3 / steps:.1f} | {us / total:.1%} |")
    print("| ms a step | calls | kernel |\n|---|---|---|")
    for row in report["top"]:
        print(f"| {row['ms_per_step']:.2f} | {row['calls']} | {row['kernel'][:110]} |")


if __name__ == "__main__":
    main()
