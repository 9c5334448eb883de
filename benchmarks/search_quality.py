"""Search quality on recorded landscapes: fraction of the optimum reached per trial budget.

Every landscape is a table of real measurements (REPLAY: nothing is measured here). For each
strategy and seed a sweep runs over the table; a config the table does not hold counts as a
spent, failed trial (a real sweep would have launched it), unless a strategy's static
constraints reject it before launch. Printed per strategy: mean and worst fraction of the
table's optimum after 10, 20, 50 and 100 trials, and the median number of trials to reach 98%.

    python benchmarks/search_quality.py [--seeds 10] [--trials 100] [--strategies a,b]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from autotune.driver import Sweep, SweepSettings
from autotune.driver.trial_attrs import DURATION, INFEASIBLE, LAST_RUN, STATUS, is_repeat
from autotune.objectives.replay import ReplayObjective, load_table, space_from_table
from autotune.space import load_space

ROOT = Path(__file__).resolve().parents[1]
MATMUL_PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]
TRAIN_PARAMS = [
    "micro_batch",
    "precision",
    "activation_checkpointing",
    "attention_backend",
    "optimizer",
]
HOPPER = {"type": "cuda", "max_shared_memory": 232448}
CHECKPOINTS = (10, 20, 50, 100)


@dataclass
class Landscape:
    name: str
    table: Path
    params: list[str]
    metric: str
    space_file: str  # the workload's space, with its static constraints
    problem: dict[str, Any]
    device: dict[str, Any] = field(default_factory=lambda: dict(HOPPER))

    @property
    def replay_problem(self) -> dict[str, Any]:
        return {
            "table": str(self.table),
            "params": self.params,
            "metric": self.metric,
            "absent_costs_a_trial": True,
        }

    def settings(self, sampler: str, seed: int, trials: int, **overrides: Any) -> SweepSettings:
        """A replay sweep of this landscape through the inline executor, with the workload's
        space and its static constraints."""
        base: dict[str, Any] = dict(
            workload="replay",
            problem={**self.replay_problem, **self.problem},
            space=load_space(self.space_file),
            objectives={self.metric: "maximize"},
            sampler=sampler,
            seed=seed,
            n_trials=trials,
            storage="memory",
            executor="inline",
            device=self.device,
            warm_start="off",
        )
        return SweepSettings(**(base | overrides))

    def optimum(self) -> float:
        table = load_table(str(self.table))
        return float(table.loc[table["status"] == "ok", self.metric].max())


DATA = ROOT / "benchmarks/data"
# Recorded on one H200 on 2026-11-30 (benchmarks/data/README.md says how). Every table holds
# every config its space allows at that problem, so nothing is missing from a replay.
LANDSCAPES = [
    Landscape(
        "matmul 4096x4096x4096 bf16, TFLOP/s",
        DATA / "matmul_4096_h200.csv",
        MATMUL_PARAMS,
        "tflops",
        str(DATA / "matmul_tiled_grid.yaml"),
        {"M": 4096, "N": 4096, "K": 4096},
    ),
    Landscape(
        "matmul MLP up-projection 8192x14336x4096 bf16, TFLOP/s",
        DATA / "matmul_mlp_h200.csv",
        MATMUL_PARAMS,
        "tflops",
        str(DATA / "matmul_tiled_grid.yaml"),
        {"M": 8192, "N": 14336, "K": 4096},
    ),
    Landscape(
        "matmul decode 64x4096x4096 bf16, TFLOP/s",
        DATA / "matmul_decode_h200.csv",
        MATMUL_PARAMS,
        "tflops",
        str(DATA / "matmul_tiled_grid.yaml"),
        {"M": 64, "N": 4096, "K": 4096},
    ),
    Landscape(
        "training step, 46M-param Llama, 16x1024 tokens, tokens/s",
        DATA / "train_step_h200.csv",
        TRAIN_PARAMS,
        "tokens_per_s",
        str(DATA / "train_step_grid.yaml"),
        {"global_batch": 16},
    ),
]


# -- strategies: each returns the best-so-far value after each launched trial ---------------
def plain_optuna(sampler_factory: Callable[[int], optuna.samplers.BaseSampler]):
    """Off-the-shelf Optuna: the table's values as categoricals, failures told as pruned."""

    def run(landscape: Landscape, seed: int, trials: int) -> list[float]:
        table = load_table(str(landscape.table))
        space = space_from_table(table, landscape.params, str(landscape.table))
        objective = ReplayObjective(landscape.replay_problem)
        study = optuna.create_study(direction="maximize", sampler=sampler_factory(seed))
        best, curve = float("-inf"), []
        for _ in range(trials):
            trial = study.ask()
            config = space.sample(trial)
            try:
                value = objective.evaluate(config).values[landscape.metric]
            except Exception:  # noqa: BLE001 - a recorded or absent failure
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                study.tell(trial, value)
                best = max(best, value)
            curve.append(best)
        return curve

    return run


def replay_sweep(
    landscape: Landscape,
    sampler: str,
    seed: int,
    trials: int,
    *,
    storage: str = "memory",
    study_name: str | None = None,
    warm_start: str = "off",
) -> list[float]:
    """autotune's driver (Sweep) over ``landscape`` with the workload's space and its static
    constraints; returns the best-so-far value after each launched trial."""
    settings = landscape.settings(
        sampler, seed, trials, storage=storage, study_name=study_name, warm_start=warm_start
    )
    study = Sweep(settings).run().study
    best, curve = float("-inf"), []
    for t in sorted(study.trials, key=lambda t: t.number):
        status = t.user_attrs.get(STATUS)
        if status == INFEASIBLE or is_repeat(t):
            continue  # rejected by a static constraint or answered from the study: no trial
        if status == "ok":
            best = max(best, t.values[0])
        curve.append(best)
    return curve[:trials]


def autotune_sampler(sampler: str):
    """autotune's driver with ``sampler`` (``auto`` is the default)."""

    def run(landscape: Landscape, seed: int, trials: int) -> list[float]:
        return replay_sweep(landscape, sampler, seed, trials)

    return run


def warmed(
    source: Landscape, target: Landscape, seed: int, trials: int, source_trials: int = 50
) -> list[float]:
    """A default sweep of ``target`` warm-started (``--warm-start NAME``) from a default sweep
    of ``source`` stored in the same storage."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        url = f"journal:///{tmp}/sweeps.log"
        replay_sweep(source, "auto", seed, source_trials, storage=url, study_name="source")
        return replay_sweep(
            target, "auto", seed + 1000, trials, storage=url, study_name="target",
            warm_start="source",
        )  # fmt: skip


STRATEGIES: dict[str, Callable[[Landscape, int, int], list[float]]] = {
    "random": plain_optuna(lambda seed: optuna.samplers.RandomSampler(seed=seed)),
    "optuna-tpe": plain_optuna(lambda seed: optuna.samplers.TPESampler(seed=seed)),
    "autotune tpe": autotune_sampler("tpe"),
    "autotune (default)": autotune_sampler("auto"),
}


def short_name(landscape: Landscape) -> str:
    return Path(landscape.table).stem.removesuffix("_h200")


def summarise(curves: list[list[float]], optimum: float) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for n in CHECKPOINTS:
        fractions = [c[min(n, len(c)) - 1] / optimum for c in curves]
        row[n] = (statistics.mean(fractions), min(fractions))
    reach = []
    for c in curves:
        hit = next((i + 1 for i, v in enumerate(c) if v >= 0.98 * optimum), None)
        reach.append(hit if hit is not None else float("inf"))
    row["to98"] = statistics.median(reach)
    return row


def driver_overhead(trials: int = 100) -> float:
    """Seconds per trial the driver itself spends (sampler, constraints, SQLite bookkeeping):
    a replay sweep measures nothing, so all of its time is overhead."""
    import tempfile

    landscape = LANDSCAPES[0]
    with tempfile.TemporaryDirectory() as tmp:
        settings = landscape.settings(
            "auto", 0, trials, storage=f"sqlite:///{tmp}/overhead.db", warm_start="auto"
        )
        summary = Sweep(settings).run()
    return summary.elapsed_s / trials


def gpu_sweep_overhead(db: Path, max_gap_s: float = 30.0) -> list[tuple[str, int, float, float]]:
    """(study, launched trials, wall s, share of wall outside trials) of real sweeps.

    Wall time is summed over the study's trials and the gaps between them, leaving out gaps
    longer than ``max_gap_s`` (a sweep stopped and resumed later)."""
    url = f"sqlite:///{db}"
    rows = []
    for summary in optuna.get_all_study_summaries(url):
        study = optuna.load_study(study_name=summary.study_name, storage=url)
        done = sorted(
            (t for t in study.trials if t.datetime_complete is not None),
            key=lambda t: t.datetime_start,
        )
        if not done:
            continue
        wall = sum((t.datetime_complete - t.datetime_start).total_seconds() for t in done)
        for before, after in zip(done, done[1:], strict=False):
            gap = (after.datetime_start - before.datetime_complete).total_seconds()
            wall += gap if 0 < gap < max_gap_s else 0.0
        inside = sum(t.user_attrs.get(DURATION) or 0.0 for t in done)
        launched = sum(1 for t in done if t.user_attrs.get(DURATION))
        last_run = study.user_attrs.get(LAST_RUN)
        if last_run:  # measured by the driver itself (sweeps from 2026-11-30 21:45 on)
            rows.append(
                (
                    summary.study_name,
                    last_run["trials"],
                    last_run["elapsed_s"],
                    last_run["search_overhead"],
                )
            )
            continue
        # older sweeps: the worker's start-up falls outside the trials' durations too
        rows.append((summary.study_name, launched, wall, 1 - inside / wall))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument(
        "--landscapes", default="", help="Only landscapes whose name contains one of these."
    )
    parser.add_argument("--no-overhead", action="store_true", help="Skip the overhead section.")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore")
    names = [s.strip() for s in args.strategies.split(",")]
    print(
        "REPLAY of recorded measurements: fraction of the optimum, mean / worst over "
        f"{args.seeds} seeds"
    )
    wanted = [w.strip() for w in args.landscapes.split(",") if w.strip()]
    for landscape in LANDSCAPES:
        if wanted and not any(w in landscape.name for w in wanted):
            continue
        optimum = landscape.optimum()
        print(
            f"\n{landscape.name} (optimum {optimum:.4g} {landscape.metric}, {landscape.table.name})"
        )
        header = "".join(f"{'@' + str(n):>14}" for n in CHECKPOINTS)
        print(f"{'strategy':<22}{header}{'trials to 98%':>15}{'s/sweep':>9}")
        for name in names:
            start = time.perf_counter()
            curves = [STRATEGIES[name](landscape, seed, args.trials) for seed in range(args.seeds)]
            seconds = (time.perf_counter() - start) / args.seeds
            row = summarise(curves, optimum)
            cells = "".join(f"{row[n][0]:>8.3f}/{row[n][1]:.3f}" for n in CHECKPOINTS)
            to98 = "-" if row["to98"] == float("inf") else f"{row['to98']:.0f}"
            print(f"{name:<22}{cells}{to98:>15}{seconds:>9.1f}")

    matmuls = [ls for ls in LANDSCAPES if ls.params == MATMUL_PARAMS]
    if not wanted:
        print(
            f"\nwarm start from one related shape (default strategy, source sweep of 50 trials),"
            f" mean / worst over {args.seeds} seeds"
        )
        print(f"{'source -> target':<34}{'@5':>14}{'@10':>14}{'@20':>14}{'cold @20':>14}")
        for source in matmuls:
            for target in matmuls:
                if source is target:
                    continue
                optimum = target.optimum()
                warm = [warmed(source, target, seed, 20) for seed in range(args.seeds)]
                cold = [STRATEGIES["autotune (default)"](target, s, 20) for s in range(args.seeds)]
                cells = "".join(
                    f"{statistics.mean(c[n - 1] / optimum for c in warm):>8.3f}/"
                    f"{min(c[n - 1] / optimum for c in warm):.3f}"
                    for n in (5, 10, 20)
                )
                cold_20 = [c[19] / optimum for c in cold]
                label = f"{short_name(source)} -> {short_name(target)}"
                print(f"{label:<34}{cells}{statistics.mean(cold_20):>8.3f}/{min(cold_20):.3f}")
    if args.no_overhead:
        return
    per_trial = driver_overhead()
    print(
        f"\nsearch overhead: {per_trial * 1e3:.0f} ms per trial "
        "(default sampler, SQLite storage, replay)"
    )
    db = ROOT / "benchmarks/results/h200-2026-12-01-issue3/gpu.db"
    print(f"share of real H200 sweeps' wall time outside trials ({db.parent.name}, default")
    print("strategy, SQLite storage, empty Triton cache at the start; measured by the driver):")
    for study, launched, wall, share in gpu_sweep_overhead(db):
        print(f"  {study:<14} {launched:>3} trials in {wall:6.1f} s: {share:.1%} outside trials")


if __name__ == "__main__":
    main()
