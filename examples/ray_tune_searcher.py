"""Add autotune's search to a Ray Tune pipeline without changing its trainable.

The trainable here stands for the one your pipeline already has: it takes a config, measures,
and reports a metric with ``tune.report``. So that this example runs on any machine, it
REPLAYS a matmul landscape recorded on an H200 (``benchmarks/data/matmul_4096_h200.csv``):
it looks the config's TFLOP/s up instead of measuring. On a GPU cluster, give the trainable its
GPU (``tune.with_resources(trainable, {"gpu": 1})``) and measure for real.

autotune's searcher brings the space (the matmul space the table was recorded over,
``benchmarks/data/matmul_tiled_grid.yaml``), its static constraints
(shared memory, registers, tile sizes against the problem: configs that break one never reach
Tune) and the default sampler; any Tune scheduler still applies on top.

Run: python examples/ray_tune_searcher.py [--samples 30] [--storage sqlite:///tune.db]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import ray  # noqa: E402
from ray import tune  # noqa: E402

from autotune.integrations.ray_tune import AutotuneSearcher  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "benchmarks" / "data"
GRID = DATA / "matmul_4096_h200.csv"
PARAMS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages"]


def trainable(config: dict) -> None:
    """The pipeline's own trainable (here: a REPLAY lookup instead of a measurement)."""
    table = pd.read_csv(GRID)
    match = (table[PARAMS] == pd.Series({p: config[p] for p in PARAMS})).all(axis=1)
    tune.report({"tflops": float(table.loc[match, "tflops"].iloc[0]), "replay": True})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--storage", default="memory", help="where autotune records the trials")
    args = parser.parse_args()

    device = json.loads((DATA / "device_h200.json").read_text())  # the recording's device
    searcher = AutotuneSearcher(
        str(DATA / "matmul_tiled_grid.yaml"),  # the space the table was recorded over
        metric="tflops",
        mode="max",
        problem={"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"},
        device=device,
        seed=0,
        storage=args.storage,
        in_flight=2,
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as results_dir:
        tuner = tune.Tuner(
            trainable,
            tune_config=tune.TuneConfig(
                search_alg=searcher, num_samples=args.samples, max_concurrent_trials=2
            ),
            run_config=tune.RunConfig(storage_path=results_dir, verbose=0),
        )
        results = tuner.fit()
    best = results.get_best_result(metric="tflops", mode="max")
    optimum = pd.read_csv(GRID)["tflops"].max()
    print(f"REPLAY of {GRID.name}: {len(results)} Ray Tune trials suggested by autotune")
    print(f"best: {best.metrics['tflops']:.1f} TFLOP/s ({best.metrics['tflops'] / optimum:.3f}"
          f" of the grid's best) with {({p: best.config[p] for p in PARAMS})}")  # fmt: skip
    print(f"autotune study {searcher.study.study_name}: {len(searcher.study.trials)} trials "
          "(constraint rejections included)")  # fmt: skip
    ray.shutdown()


if __name__ == "__main__":
    main()
