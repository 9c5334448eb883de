"""Search quality on recorded landscapes (REPLAY of H200 and H100 measurements; nothing is
measured).

Every strategy gets the same feasible set, the same trial 0 and the same dedup (a repeat or a
constraint rejection costs nobody a trial; a recorded failure costs everybody one): Optuna
samplers, autotune's among them, run under benchmarks/search/harness.py, Kernel Tuner's
strategies in its simulation mode over the same set (benchmarks/search/kernel_tuner_peer.py).
Landscapes are development (the default strategy was chosen on them) or held-out (recorded
after it was frozen). Printed per strategy: mean / worst fraction of the optimum after 10, 20,
50 and 100 trials over the seeds, and the median trials to 98%. Then: the composed 149-parameter
space by group vs flat, warm start through the driver, two objectives (hypervolume), and the
driver's time per trial.

    python benchmarks/search_quality.py [--seeds 30] [--strategies a,b] [--landscapes k1,k2]
        [--sections single,composed,warm,pareto,overhead] [--jobs 2] [--cache DIR]
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import optuna  # noqa: E402

from benchmarks.search.landscapes import available, by_name  # noqa: E402
from benchmarks.search.strategies import MAX_SEEDS, MAX_TRIALS, STOCK_TPE, STRATEGIES  # noqa: E402
from benchmarks.search.table import CHECKPOINTS, run_all, summarise  # noqa: E402

DEFAULT = "autotune default"
TARGET_MEAN, TARGET_WORST = 0.98, 0.93
WARM_PAIRS = [("decode", "4096"), ("decode", "mlp"), ("4096", "mlp"), ("mlp", "4096"),
              ("4096", "decode"), ("mlp", "decode"), ("raw_8192", "raw_mlp"),
              ("raw_mlp", "raw_8192")]  # fmt: skip


def single(args: argparse.Namespace) -> None:
    names = [s.strip() for s in args.strategies.split(",")]
    wanted = [w.strip() for w in args.landscapes.split(",") if w.strip()]
    landscapes = [ls for ls in available() if not wanted or ls.key in wanted]
    verdicts = []
    for split in ("development", "held-out"):
        chosen = [ls for ls in landscapes if ls.split == split]
        if chosen:
            print(f"\n## {split} landscapes", flush=True)
        for ls in chosen:
            start = time.perf_counter()
            curves = {}
            for (trials, seeds), group in _by_budget(names, args.seeds):
                curves |= run_all(group, [ls.key], seeds, trials, args.jobs, args.cache_file)
            verdict = _landscape_table(ls, names, curves)
            print(f"({time.perf_counter() - start:.0f} s on {args.jobs} processes)", flush=True)
            if verdict is not None:
                verdicts.append((ls.key, split, *verdict))
    if verdicts:
        print(
            f"\ntargets at 50 trials: mean >= {TARGET_MEAN}, worst >= {TARGET_WORST}, "
            f"mean >= {STOCK_TPE}'s"
        )
        for key, split, mean, worst, tpe, ok in verdicts:
            print(
                f"  {key:<12} {split:<12} default {mean:.3f}/{worst:.3f}  stock TPE mean "
                f"{tpe:.3f}  {'met' if ok else 'NOT MET'}"
            )


def _landscape_table(ls, names: list[str], curves: dict) -> tuple | None:  # noqa: ANN001
    """Print one landscape's rows; return (mean, worst, stock TPE mean, met) of the default
    at 50 trials, or None when either row is missing."""
    optimum = ls.optimum()
    space = "raw (no constraints)" if ls.raw else "constrained"
    print(
        f"\n{ls.title}: {len(ls.feasible())} feasible configs, {space}, optimum "
        f"{optimum:.4g} {ls.metric} ({ls.table.name}), trial 0 = {ls.first_config()}"
    )
    header = "".join(f"{'@' + str(n):>14}" for n in CHECKPOINTS)
    print(f"{'strategy':<34}{header}{'trials to 98%':>15}")
    rows = {}
    for name in names:
        row = summarise(curves[(name, ls.key)], optimum)
        rows[name] = row
        cells = "".join(
            f"{row[n][0]:>8.3f}/{row[n][1]:.3f}" if n <= MAX_TRIALS.get(name, 100)
            else f"{'-':>14}" for n in CHECKPOINTS
        )  # fmt: skip
        to98 = "-" if row["to98"] == math.inf else f"{row['to98']:.0f}"
        label = name + (f" ({MAX_SEEDS[name]} seeds)" if name in MAX_SEEDS else "")
        print(f"{label:<34}{cells}{to98:>15}", flush=True)
    if DEFAULT not in rows or STOCK_TPE not in rows:
        return None
    mean, worst = rows[DEFAULT][50]
    tpe = rows[STOCK_TPE][50][0]
    return mean, worst, tpe, mean >= TARGET_MEAN and worst >= TARGET_WORST and mean >= tpe


def _by_budget(names: list[str], seeds: int) -> list[tuple[tuple[int, int], list[str]]]:
    """Strategies grouped by (trials, seeds) they run with."""
    budgets: dict[tuple[int, int], list[str]] = {}
    for name in names:
        key = (min(100, MAX_TRIALS.get(name, 100)), min(seeds, MAX_SEEDS.get(name, seeds)))
        budgets.setdefault(key, []).append(name)
    return sorted(budgets.items())


def composed(args: argparse.Namespace) -> None:
    from benchmarks.search.composed import (
        ComposedProblem,
        flat_curve,
        grouped_curve,
        measurements_to,
    )

    problem = ComposedProblem.build()
    n_groups = len(problem.groups)
    params = len(problem.flat_space().params)
    per_group, joint = 30, 20
    print(
        f"\n## composed space: {n_groups} GEMM groups x 6 tile parameters + 5 training "
        f"knobs = {params} parameters (REPLAY, {args.seeds} seeds)"
    )
    print(
        "fraction of the optimum (sum of per-kernel times + 0.1 x the step's time) after the "
        "given number of kernel measurements; a flat trial measures every group and the step"
    )
    grouped = [grouped_curve(problem, s, per_group, joint)[0] for s in range(args.seeds)]
    budget = grouped[0][-1][0]
    flat_trials = 2 * budget // (n_groups + 1)
    flats = {
        name: [flat_curve(problem, name, s, flat_trials) for s in range(args.seeds)]
        for name in ("tpe", "random")
    }

    def at(curve, measurements):  # noqa: ANN001, ANN202
        return max((f for m, f in curve if m <= measurements), default=0.0)

    marks = [n_groups * k for k in (10, 20, 30)] + [budget, 2 * budget]
    print(f"{'strategy':<36}" + "".join(f"{m:>13}" for m in marks) + f"{'to 0.95':>10}")
    rows = {"by group (autotune default per group)": grouped,
            "flat optuna TPE": flats["tpe"], "flat random": flats["random"]}  # fmt: skip
    for name, curves in rows.items():
        cells = "".join(
            f"{statistics.mean(at(c, m) for c in curves):>7.3f}/"
            f"{min(at(c, m) for c in curves):.3f}" for m in marks
        )  # fmt: skip
        reach = statistics.median(measurements_to(c, 0.95) for c in curves)
        print(f"{name:<36}{cells}{('-' if reach == math.inf else f'{reach:.0f}'):>10}")
    print(
        f"(by group: {per_group} measurements per group in rounds, then {joint} of the "
        f"joint knobs = {budget}; flat: {flat_trials} trials)"
    )


def warm(args: argparse.Namespace) -> None:
    from benchmarks.search.warm import sweep_curve, warm_curve

    seeds = args.seeds
    print(
        f"\n## warm start through the driver (default strategy; source: a stored 50-trial "
        f"sweep), mean / worst over {seeds} seeds"
    )
    print(f"{'source -> target':<26}" + "".join(f"{'warm @' + str(n):>14}" for n in (5, 10, 20))
          + "".join(f"{'cold @' + str(n):>14}" for n in (5, 10, 20)))  # fmt: skip
    keys = {ls.key for ls in available()}
    for source, target in WARM_PAIRS:
        if source not in keys or target not in keys:
            continue
        src, tgt = by_name(source), by_name(target)
        optimum = tgt.optimum()
        w = [warm_curve(src, tgt, s, 20) for s in range(seeds)]
        c = [sweep_curve(tgt, "auto", s + 1000, 20) for s in range(seeds)]
        cells = "".join(
            f"{statistics.mean(x[n - 1] / optimum for x in cs):>8.3f}/"
            f"{min(x[n - 1] / optimum for x in cs):.3f}"
            for cs in (w, c) for n in (5, 10, 20)
        )  # fmt: skip
        print(f"{source + ' -> ' + target:<26}{cells}")
    print("(a replay sweep has no untuned default to run first: trial 0 is the sampler's)")


def pareto(args: argparse.Namespace) -> None:
    from benchmarks.search.multi_objective import SAMPLERS, run

    print(
        f"\n## two objectives on the training-step landscape (tokens/s up, peak memory "
        f"down): hypervolume fraction of the table's front, mean / worst over {args.seeds} "
        "seeds"
    )
    print(f"{'strategy':<32}{'@20':>14}{'@50':>14}")
    for name in SAMPLERS:
        cells = ""
        for trials in (20, 50):
            values = [run(name, s, trials) for s in range(args.seeds)]
            cells += f"{statistics.mean(values):>8.3f}/{min(values):.3f}"
        print(f"{name:<32}{cells}")


def overhead(args: argparse.Namespace) -> None:
    from benchmarks.search.overhead import per_trial

    print(
        "\n## driver time per trial (default sampler, inline executor, 100 trials, a "
        "synthetic table whose metric costs nothing; after a 12-trial warm-up sweep on each "
        "storage in the same process, so that what a process does once, imports and first "
        "calls, is no trial's cost)"
    )
    for storage in ("memory", "sqlite"):  # the warm-up: SQLAlchemy's first use is an import
        per_trial(64, 12, storage)
    for configs, target in ((1000, 0.030), (20000, 0.100)):
        memory = per_trial(configs, 100, "memory")
        sqlite = per_trial(configs, 100, "sqlite")
        print(
            f"  {configs:>6} configs: {memory * 1e3:5.1f} ms in memory, {sqlite * 1e3:5.1f} ms "
            f"on SQLite (target {target * 1e3:.0f} ms: "
            f"{'met' if memory <= target else 'not met'} in memory, "
            f"{'met' if sqlite <= target else 'not met'} on SQLite)"
        )


SECTIONS = {"single": single, "composed": composed, "warm": warm, "pareto": pareto,
            "overhead": overhead}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--landscapes", default="", help="Landscape keys (default: all).")
    parser.add_argument("--sections", default=",".join(SECTIONS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--cache", type=Path, default=None,
        help="A folder for this commit's curves (JSON lines): a stopped run picks up there.",
    )  # fmt: skip
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, cwd=ROOT).stdout.strip()  # fmt: skip
    args.cache_file = None
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
        args.cache_file = args.cache / f"curves-{commit}{'-dirty' if dirty else ''}.jsonl"
    print(f"REPLAY of recorded H200 and H100 measurements; {args.seeds} seeds; commit {commit}"
          + (" (uncommitted changes)" if dirty else ""), flush=True)  # fmt: skip
    for name in args.sections.split(","):
        SECTIONS[name.strip()](args)


if __name__ == "__main__":
    main()
