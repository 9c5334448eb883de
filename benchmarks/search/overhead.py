"""Driver time per trial: a real sweep (autotune's driver, default sampler, inline executor)
over a synthetic table whose metric costs nothing to read, so all of its time is the driver's
(sampler, constraints, bookkeeping, storage). The table's values are a smooth function of the
config, made up for this measurement only: no search-quality figure comes from it.

Example:
    >>> seconds = per_trial(configs=64, trials=12)
    >>> 0 < seconds < 1
    True
"""

from __future__ import annotations

import itertools
import math
import tempfile
import time
from pathlib import Path

import pandas as pd

from autotune.driver import Sweep, SweepSettings
from objectives.replay import load_table, space_from_table


def synthetic_table(configs: int, path: Path) -> list[str]:
    """A table of about ``configs`` rows over six parameters; returns the parameter names."""
    side = max(2, round(configs ** (1 / 6)))
    sizes = [side] * 6
    while math.prod(sizes) < configs:
        sizes[sizes.index(min(sizes))] += 1
    names = [f"p{i}" for i in range(6)]
    rows = []
    for values in itertools.islice(itertools.product(*(range(s) for s in sizes)), configs):
        score = sum(math.cos(v * (i + 1) / 3) for i, v in enumerate(values)) + 10
        rows.append({**dict(zip(names, values, strict=True)), "status": "ok", "score": score})
    pd.DataFrame(rows).to_csv(path, index=False)
    return names


def per_trial(configs: int, trials: int = 100, storage: str = "memory") -> float:
    """Seconds of driver time per trial at ``configs`` enumerated configs.

    The default sampler's Gaussian process imports torch on first use (about 2 s here, once a
    process): that import happens before the clock starts, as it is no trial's cost."""
    import autotune.driver.gp  # noqa: F401 - torch, imported once, outside the measurement

    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "synthetic.csv"
        names = synthetic_table(configs, table)
        url = f"sqlite:///{tmp}/overhead.db" if storage == "sqlite" else storage
        settings = SweepSettings(
            workload="replay",
            problem={"table": str(table), "params": names, "metric": "score"},
            space=space_from_table(load_table(str(table)), names, str(table)),
            objectives={"score": "maximize"}, sampler="auto", seed=0, n_trials=trials,
            storage=url, executor="inline", warm_start="off",
        )  # fmt: skip
        start = time.perf_counter()
        Sweep(settings).run()
        return (time.perf_counter() - start) / trials
