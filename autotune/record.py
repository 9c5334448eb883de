"""Measure every config of a (small) discrete space and write a replayable table.

The table has a column per parameter, ``status`` and ``reason``, and every metric the
objective measured; ``autotune tune --replay`` searches it without a GPU. Rows are written
after every config, so an interrupted recording keeps what it measured and resumes from there.

Example:
    >>> from autotune.space import Param, Space
    >>> import tempfile, os
    >>> out = os.path.join(tempfile.mkdtemp(), "faults.csv")
    >>> space = Space("f", [Param("fault", "categorical", choices=["none", "wrong_result"])])
    >>> table = record_grid("faults", {}, space, {}, out, executor="inline")
    >>> sorted(table["status"])
    ['ok', 'wrong_result']
"""

from __future__ import annotations

import random
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.driver.executor_choice import build_executor
from autotune.export import write_atomic
from autotune.failures import TrialStatus, classify
from autotune.objectives import get_objective
from autotune.runners.base import TrialResult
from autotune.space import Space

_PREPARED: dict[str, Any] = {}


def _prepare(workload: str, problem: dict[str, Any], config: dict[str, Any]) -> tuple[str, str]:
    """In a pool process: compile ``config`` only (fills the on-disk kernel cache)."""
    key = repr((workload, sorted(problem.items())))
    if key not in _PREPARED:
        _PREPARED[key] = get_objective(workload)(problem)
    try:
        _PREPARED[key].prepare(config)
    except Exception as exc:  # noqa: BLE001 - a failure to compile is a result
        failure = classify(exc)
        return failure.status.value, str(failure)
    return TrialStatus.OK.value, ""


def precompile(
    workload: str, problem: dict[str, Any], configs: list[dict[str, Any]], jobs: int
) -> list[tuple[str, str]]:
    """Compile ``configs`` in ``jobs`` processes; returns (status, reason) per config."""
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_prepare, workload, problem, c) for c in configs]
        results = []
        for future in futures:
            try:
                results.append(future.result())
            except Exception as exc:  # noqa: BLE001 - a pool worker died: time it normally
                results.append(("unknown", f"precompile failed: {exc}"))
        return results


def _key(config: dict[str, Any], names: list[str]) -> tuple:
    return tuple(str(config.get(n)) for n in names)


def record_grid(
    workload: str,
    problem: dict[str, Any],
    space: Space,
    device: dict[str, Any],
    output: str | Path,
    *,
    limit: int | None = None,
    seed: int = 0,
    jobs: int = 1,
    timeout_s: float = 300.0,
    executor: str = "local",
    on_row: Callable[[int, int, dict[str, Any]], None] | None = None,
) -> pd.DataFrame:
    """Measure the grid of ``space`` (or ``limit`` configs of it, drawn with ``seed``)."""
    configs = list(space.grid(problem, device))
    if limit is not None and limit < len(configs):
        chosen = set(random.Random(seed).sample(range(len(configs)), limit))
        configs = [c for i, c in enumerate(configs) if i in chosen]
    output = Path(output)
    rows: list[dict[str, Any]] = []
    if output.exists():
        rows = pd.read_csv(output).to_dict(orient="records")
    done = {_key(r, space.names) for r in rows}
    todo = [c for c in configs if _key(c, space.names) not in done]
    # measured in random order: the card's drift over the recording (power cap, heat) falls on
    # every region of the grid alike instead of on the configs recorded last
    random.Random(seed).shuffle(todo)

    compiled: list[tuple[str, str]] = [("unknown", "")] * len(todo)
    objective_cls = get_objective(workload)
    if jobs > 1 and hasattr(objective_cls, "prepare") and todo:
        compiled = precompile(workload, problem, todo, jobs)

    slot = build_executor(
        executor, workload, problem, device=device, workers=1, timeout_s=timeout_s
    )
    with slot:
        for i, (config, (status, reason)) in enumerate(zip(todo, compiled, strict=True)):
            if status not in ("ok", "unknown"):
                result = TrialResult(TrialStatus(status), reason)
            else:
                slot.submit(i, config)
                result = slot.wait_any()[0].result
            row: dict[str, Any] = {n: config.get(n) for n in space.names}
            row["status"] = result.status.value
            row["reason"] = result.reason
            row["duration_s"] = round(result.duration_s, 4)  # replay's simulated clock reads it
            if result.measurement is not None:
                row.update(result.measurement.all_metrics())
                row.update({f"telemetry.{k}": v for k, v in result.measurement.telemetry.items()})
            rows.append(row)
            write_atomic(output, pd.DataFrame(rows).to_csv(index=False))
            if on_row is not None:
                on_row(i + 1, len(todo), row)
    return pd.DataFrame(rows)
