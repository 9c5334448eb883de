"""Training-step configs side by side on one GPU: each named config (overrides of the
objective's default) trained in one process, rounds interleaved and their order rotated; the
median tokens/s, MFU (over the device's dense bf16 peak), compile seconds and the numerics
gate's verdict of each, and tokens/s over the first config's.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/train_configs.py OUT --problem model=760m,seq_len=2048,global_batch=16 \
        --config 'tuned-s20={"micro_batch":16,"precision":"fp16","compile":true,...}' \
        --config 'fp8={"precision":"fp8","compile":true}' [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from autotune.cli_parsing import parse_problem
from autotune.device import detect_device
from autotune.failures import TrialFailure, classify
from autotune.timing import rotated
from autotune.workload_setup import resolve_workload


def _named(text: str) -> tuple[str, dict[str, Any]]:
    name, _, config = text.partition("=")
    return name, json.loads(config)


def _median(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--problem", default="model=760m,seq_len=2048,global_batch=16")
    parser.add_argument("--config", type=_named, action="append", required=True,
                        help="NAME=JSON overrides of the default config (repeat)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    device = detect_device().as_dict()
    cls, _, problem = resolve_workload("train-step", None, parse_problem([args.problem]), device)
    objective = cls(problem)
    configs = {name: {**objective.default_config(), **over} for name, over in args.config}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    notes: dict[str, str] = {}
    for round_ in range(args.rounds):
        for name in rotated(list(configs), round_):
            try:
                measured = objective.evaluate(configs[name])
            except Exception as exc:  # noqa: BLE001 - a failing config is a row too
                failure = exc if isinstance(exc, TrialFailure) else classify(exc)
                notes[name] = f"{failure.status.value}: {str(failure)[:160]}"
                print(json.dumps({"round": round_, "config": name, "failed": notes[name]}))
                continue
            row = {**measured.metrics, **measured.values}
            runs[name].append(row)
            print(json.dumps({"round": round_, "config": name, **row}, default=str), flush=True)
    objective.close()
    summary = []
    for name, rows in runs.items():
        tokens = [r["tokens_per_s"] for r in rows]
        summary.append({
            "config": name, "params": configs[name], "runs": len(rows), "note": notes.get(name, ""),
            "tokens_per_s": _median(rows, "tokens_per_s"),
            "spread": (max(tokens) - min(tokens)) / statistics.median(tokens) if tokens else None,
            "mfu": _median(rows, "mfu"), "compile_s": _median(rows, "compile_s"),
            "peak_gb": max((r.get("measured_memory_gb") or 0.0 for r in rows), default=None),
            "numerics_gap": _median(rows, "numerics_gap"),
        })  # fmt: skip
    first = summary[0]["tokens_per_s"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "train_configs.json").write_text(json.dumps(summary, indent=1, default=str))
    print(f"\n{args.problem}; {args.rounds} rounds, order rotated, one process; medians")
    print(
        "| config | tokens/s | spread | x first | MFU | compile s | peak GB | numerics gap | note |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s in summary:
        tok = s["tokens_per_s"]
        ratio = f"{tok / first:.3f}" if tok and first else "-"
        print(f"| {s['config']} | {tok or 0:.0f} | {s['spread'] or 0:.1%} | {ratio} "
              f"| {s['mfu'] or 0:.3f} | {s['compile_s'] or 0:.1f} | {s['peak_gb'] or 0:.1f} "
              f"| {s['numerics_gap'] or 0:.3f} | {s['note']} |")  # fmt: skip


if __name__ == "__main__":
    main()
