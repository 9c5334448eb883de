"""The driver's memory over a long replay sweep: resident set size every 500 trials of a
5,000-trial sweep on SQLite (the trials live in the database, so the driver's own footprint
should stay flat).

REPLAY of a generated landscape (6,000 configs of four parameters, a smooth metric with a
failing region): recorded-style measurements are looked up, nothing is measured.

    python benchmarks/driver_memory.py [--trials 5000] [--out DIR]
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
import time
from pathlib import Path

import optuna
import pandas as pd

from autotune.driver import Sweep, SweepObserver, SweepSettings
from autotune.space import Param, Space


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Sampling(SweepObserver):
    """Notes the resident set size every ``every`` trials."""

    def __init__(self, every: int) -> None:
        self.every, self.rows, self.start = every, [], time.monotonic()

    def on_trial(self, record, study, counts) -> None:  # noqa: ANN001 - the observer's signature
        if not record.launched:
            return  # repeats and rejections: not trials that ran
        done = counts.total() - counts.get("infeasible", 0) - counts.get("repeated", 0)
        if done % self.every == 0:
            self.rows.append((done, rss_mb(), time.monotonic() - self.start))


def landscape(path: Path) -> list[str]:
    rows = []
    for a, b, c, d in itertools.product(range(20), range(15), range(10), range(2)):
        ok = not (a > 16 and b > 12)
        rows.append(
            {
                "a": a,
                "b": b,
                "c": c,
                "d": d,
                "status": "ok" if ok else "out_of_resources",
                "score": 100 - (a - 7) ** 2 - (b - 5) ** 2 - (c - 3) ** 2 + d if ok else None,
            }
        )
    pd.DataFrame(rows).to_csv(path, index=False)
    return ["a", "b", "c", "d"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=5000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp()))
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    params = landscape(args.out / "landscape.csv")
    table = pd.read_csv(args.out / "landscape.csv")
    space = Space(
        "generated",
        [Param(p, "categorical", choices=sorted(table[p].unique().tolist())) for p in params],
    )
    settings = SweepSettings(
        workload="replay",
        space=space,
        objectives={"score": "maximize"},
        problem={"table": str(args.out / "landscape.csv"), "params": params, "metric": "score"},
        n_trials=args.trials,
        seed=0,
        sampler="random",
        executor="inline",
        warm_start="off",
        storage=f"sqlite:///{args.out / 'memory.db'}",
        study_name="memory",
    )
    observer = Sampling(args.every)
    summary = Sweep(settings, observer).run()
    print("REPLAY of a generated landscape: the driver's resident set size during the sweep")
    print(f"{'trials':>7} {'RSS MB':>8} {'wall s':>8}")
    for done, rss, wall in observer.rows:
        print(f"{done:>7} {rss:>8.1f} {wall:>8.1f}")
    base = next((r for d, r, _ in observer.rows if d >= 1000), observer.rows[0][1])
    growth = observer.rows[-1][1] / base - 1
    print(
        f"{summary.trials_run} trials; RSS growth from trial 1000 to the end: {growth:+.1%} "
        "(target: <= 10%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
