"""Search quality and simulated throughput with N trials in flight (REPLAY).

Every recorded landscape in ``benchmarks/data`` is replayed through the inline executor with
1, 2, 4 and 8 trials in flight: each replayed trial takes its recorded duration on a simulated
clock (``duration_s``, else a stand-in column, see ``autotune.objectives.replay``), so trials
finish out of order as they would on N devices, and the sampler proposes while others run.
Printed per landscape and number in flight: mean / worst fraction of the optimum after 20 and
50 trials over the seeds, the difference at 50 trials from one in flight, and the simulated
time to 50 trials relative to one in flight. Nothing is measured here.

    python benchmarks/in_flight.py [--seeds 10] [--trials 50] [--sampler auto]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune.driver import Sweep, SweepSettings  # noqa: E402
from autotune.driver.executor_choice import make_executor  # noqa: E402
from autotune.driver.trial_attrs import INFEASIBLE, STATUS, is_repeat  # noqa: E402
from autotune.executors.inline import InlineExecutor  # noqa: E402
from autotune.objectives.replay import ReplayObjective  # noqa: E402
from benchmarks.search.landscapes import Landscape, available  # noqa: E402

IN_FLIGHT = (1, 2, 4, 8)


def sweep(landscape: Landscape, sampler: str, seed: int, trials: int, workers: int):
    """(best-so-far per launched trial, in the order they finished; simulated seconds)."""
    executors: list[InlineExecutor] = []

    def factory(settings: SweepSettings, workers: int | None = None):
        executors.append(make_executor(settings, workers))
        return executors[-1]

    settings = landscape.sweep_settings(sampler, seed, trials, workers=workers)
    study = Sweep(settings, executor_factory=factory).run().study
    done = [
        t
        for t in study.trials
        if t.datetime_complete and t.user_attrs.get(STATUS) != INFEASIBLE and not is_repeat(t)
    ]
    best, curve = float("-inf"), []
    for t in sorted(done, key=lambda t: t.datetime_complete):  # the order they were told
        if t.user_attrs.get(STATUS) == "ok":
            best = max(best, t.values[0])
        curve.append(best)
    return curve[:trials], executors[0].clock_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--sampler", default="auto")
    parser.add_argument("--landscapes", default="", help="Landscape keys (default: all).")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    print(
        f"REPLAY with N trials in flight (inline executor, simulated clock), sampler "
        f"{args.sampler}, {args.trials} trials, mean / worst fraction of the optimum over "
        f"{args.seeds} seeds"
    )
    wanted = [k for k in args.landscapes.split(",") if k]
    for landscape in available():
        if wanted and landscape.key not in wanted:
            continue
        optimum = landscape.optimum()
        problem = {"table": str(landscape.table), "params": landscape.params,
                   "metric": landscape.metric}  # fmt: skip
        column = ReplayObjective(problem).duration_column
        print(f"\n{landscape.title} (trial duration from column {column!r})")
        checkpoints = sorted({min(20, args.trials), args.trials})
        header = "".join(f"{'@' + str(n):>14}" for n in checkpoints)
        print(f"{'in flight':>9}{header}{'diff':>8}{'time':>8}")
        base_mean = base_time = None
        for workers in IN_FLIGHT:
            runs = [
                sweep(landscape, args.sampler, s, args.trials, workers) for s in range(args.seeds)
            ]
            at = {n: [c[min(n, len(c)) - 1] / optimum for c, _ in runs] for n in checkpoints}
            clock = statistics.median(t for _, t in runs)
            mean_end = statistics.mean(at[args.trials])
            if base_mean is None:
                base_mean, base_time = mean_end, clock
            cells = "".join(f"{statistics.mean(v):>8.3f}/{min(v):.3f}" for v in at.values())
            diff = mean_end - base_mean
            print(f"{workers:>9}{cells}{diff:>+8.3f}{clock / base_time:>8.2f}")


if __name__ == "__main__":
    main()
