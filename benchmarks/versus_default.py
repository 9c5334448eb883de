"""Re-measure a tuned config against the workload's untuned default, side by side.

The configs (the default, the workload's further reference rows such as the training step's
plain fp32, and the tuned one) run in one fresh process, interleaved (default, references,
tuned, default, ...), so clock and power drift falls on all alike; the table gives each one's
median and spread of the primary metric and the ratio tuned / default.

    python benchmarks/versus_default.py best.json --rounds 3 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from autotune.export import load_record
from autotune.failures import TrialFailure, classify
from autotune.objectives import get_objective


def measure(objective: Any, config: dict[str, Any], metric: str) -> tuple[float | None, str]:
    try:
        return float(objective.evaluate(config).values[metric]), "ok"
    except Exception as exc:  # noqa: BLE001 - a failing default is a result too
        failure = exc if isinstance(exc, TrialFailure) else classify(exc)
        return None, f"{failure.status.value}: {failure}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("record", help="best config written by `autotune tune --output`")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the full results here")
    args = parser.parse_args()

    record = load_record(args.record)
    objective = get_objective(record["workload"])(record["problem"])
    metric, direction = next(iter(record["objectives"].items()))
    configs = {"default": objective.default_config()}
    configs |= {f"reference {n}": c for n, c in objective.reference_configs().items()}
    configs["tuned"] = record["config"]
    samples: dict[str, list[float]] = {name: [] for name in configs}
    notes: dict[str, str] = {}
    for _ in range(args.rounds):
        for name, config in configs.items():
            value, note = measure(objective, config, metric)
            if value is None:
                notes[name] = note
            else:
                samples[name].append(value)
    objective.close()

    rows = []
    for name, config in configs.items():
        values = samples[name]
        median = statistics.median(values) if values else None
        spread = (max(values) - min(values)) / median if values and median else None
        rows.append(
            {
                "config": name,
                "median": median,
                "spread": spread,
                "runs": len(values),
                "note": notes.get(name, ""),
                "params": config,
            }
        )
    default, tuned = rows[0]["median"], rows[-1]["median"]
    ratio = None
    if default and tuned:
        ratio = tuned / default if direction == "maximize" else default / tuned
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "record": args.record,
                    "metric": metric,
                    "rows": rows,
                    "ratio": ratio,
                    "protocol": f"{args.rounds} rounds interleaved default/references/tuned, "
                    "one process, median per config",
                },
                f,
                indent=2,
                default=str,
            )
    print(f"\n{record['workload']} {record['problem']}")
    print(f"protocol: {args.rounds} rounds, every config interleaved in one process")
    print(f"{'config':<16} {'median ' + metric:>24} {'spread':>8} {'runs':>5}  note")
    for row in rows:
        median = f"{row['median']:.4g}" if row["median"] is not None else "-"
        spread = f"{row['spread']:.1%}" if row["spread"] is not None else "-"
        print(f"{row['config']:<16} {median:>24} {spread:>8} {row['runs']:>5}  {row['note']}")
    if ratio is not None:
        print(f"tuned / default: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
