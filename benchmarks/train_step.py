"""The training step's targets on one GPU: a default sweep of a 0.5-1B decoder at sequence 2048,
then the tuned config against the honest default and the plain fp32 row, interleaved.

Steps (GPU machine; a few minutes):
1. ``autotune tune train-step --problem model=1b,seq_len=2048,...`` with the default sampler,
   a trial and time budget, the memory guard and the numerics gate on, the noise-aware finish;
2. ``benchmarks/versus_default.py`` on its winner: default, fp32 reference and tuned
   re-measured in one fresh process, interleaved rounds, medians;
3. a table: tokens/s, MFU (6N + causal attention over the device's dense bf16 peak), the
   ratio to the default, the numerics gap, and the memory model's error on the trials that ran.

    python benchmarks/train_step.py --out DIR [--model 1b] [--trials 40] [--budget-s 420]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from autotune.driver.trial_attrs import LAST_RUN, METRICS, trial_status

TARGETS = {"mfu": 0.58, "versus_default": 1.5, "memory_error": 0.10}


def sweep(args: argparse.Namespace, storage: str) -> float:
    problem = (f"model={args.model},seq_len={args.seq_len},global_batch={args.global_batch},"
               f"steps={args.steps},warmup_steps={args.warmup_steps}")  # fmt: skip
    command = [
        sys.executable,
        "-m",
        "autotune.cli",
        "tune",
        "train-step",
        "--problem",
        problem,
        "--trials",
        str(args.trials),
        "--time-budget",
        f"{args.budget_s:g}s",
        "--seed",
        "0",
        "--storage",
        storage,
        "--study",
        "train",
        "--output",
        str(args.out / "best_train.json"),
    ]  # fmt: skip (no --trial-timeout: a quarter of the budget, the CLI's default under one)
    started = time.monotonic()
    with open(args.out / "sweep.log", "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    return time.monotonic() - started


def memory_errors(study: optuna.Study) -> list[float]:
    """|predicted / measured - 1| of each trial that ran and measured its peak."""
    errors = []
    for trial in study.trials:
        metrics = trial.user_attrs.get(METRICS) or {}
        measured, predicted = metrics.get("measured_memory_gb"), metrics.get("predicted_memory_gb")
        if trial_status(trial) == "ok" and measured and predicted:
            errors.append(abs(predicted / measured - 1))
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="1b")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--global-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{args.out / 'train.db'}"
    wall = sweep(args, storage)
    study = optuna.load_study(study_name="train", storage=storage)
    statuses: dict[str, int] = {}
    for trial in study.trials:
        statuses[trial_status(trial)] = statuses.get(trial_status(trial), 0) + 1
    versus = args.out / "versus_default.json"
    subprocess.run([sys.executable, str(Path(__file__).with_name("versus_default.py")),
                    str(args.out / "best_train.json"), "--rounds", str(args.rounds),
                    "--json", str(versus)], check=False)  # fmt: skip
    rows = json.loads(versus.read_text()) if versus.exists() else {}
    errors = memory_errors(study)
    last_run: dict[str, Any] = study.user_attrs.get(LAST_RUN, {})
    best = max((t for t in study.trials if trial_status(t) == "ok"),
               key=lambda t: t.values[0], default=None)  # fmt: skip
    mfu = (best.user_attrs.get(METRICS) or {}).get("mfu") if best else None
    summary = {
        "model": args.model, "seq_len": args.seq_len, "global_batch": args.global_batch,
        "sweep_wall_s": round(wall, 1), "statuses": statuses, "best_sweep_mfu": mfu,
        "memory_error_median": statistics.median(errors) if errors else None,
        "memory_error_max": max(errors) if errors else None, "memory_trials": len(errors),
        "memory_rejected": last_run.get("memory_rejected"), "versus": rows,
    }  # fmt: skip
    (args.out / "train_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps(summary, indent=2, default=str))
    print(f"targets: MFU >= {TARGETS['mfu']}, tuned >= {TARGETS['versus_default']}x the "
          f"default, memory error <= {TARGETS['memory_error']:.0%}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
