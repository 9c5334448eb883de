"""The noise-aware finish: re-measure the best few configs in a fresh process, interleaved.

A sweep's best trial is partly luck: on a GPU, short kernels vary 5% or more between runs and
a card at its power cap lowers its clocks as the sweep goes on. The finish starts a fresh
worker, measures the top configs in rounds, the order rotated each round (A B C, B C A,
C A B), so that drift falls on all of them alike and none always goes first. It picks the
winner by median and names the configs that are within noise of it (their medians differ by
less than the larger of the two spreads). Each measurement times the workload's reference in
the same round (the ratio to cuBLAS is a figure of one round).

The untuned default (the sweep's trial 0) is re-measured with them, and stays the answer unless
the best beats it by more than the noise: a tuned config that is not measurably faster is not
worth shipping.

Example:
    >>> rows = summarise_samples({3: [10.0, 10.4, 9.8], 7: [10.1, 10.3, 9.9], 9: [8.0, 8.1, 8.0]},
    ...                          maximize=True)
    >>> [r.trial for r in rows], [r.within_noise for r in rows]
    ([7, 3, 9], [True, True, False])
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import optuna

from autotune.driver.results import ok_trials
from autotune.driver.trial_attrs import BASELINE, FINISH
from autotune.executors.base import Executor
from autotune.timing import rotated


def top_that_fits(top: int, durations: list[float], remaining_s: float) -> int:
    """How many of the ``top`` configs one finish round can re-measure, beside the untuned
    default, in the ``remaining_s`` seconds of a time budget: each measurement takes the
    sweep's median trial time, and a fresh worker starts first (what the first trial took
    beyond the median). 0: not even the best and the default fit, so there is no finish.

    Example:
        >>> top_that_fits(3, [8.0, 2.0, 2.0, 2.0], 20.0)  # 6 s to start, 2 s a measurement
        3
        >>> top_that_fits(3, [40.0, 33.0, 33.0], 80.0), top_that_fits(3, [40.0, 33.0], 50.0)
        (1, 0)
    """
    if not durations:
        return top
    median = statistics.median(durations)
    start_worker = max(0.0, durations[0] - median)
    fit = int((remaining_s - start_worker) // median) - 1 if median > 0 else top
    return max(0, min(top, fit))


@dataclass
class FinishRow:
    """One re-measured config: its median, relative spread (max - min) / median, samples."""

    trial: int
    config: dict[str, Any]
    median: float
    spread: float
    samples: list[float]
    within_noise: bool = False  # of the winner (the winner itself: True)
    baseline: bool = False  # the untuned default


def keep_default(rows: list[FinishRow]) -> list[FinishRow]:
    """Put the untuned default first when the best row beats it by no more than the noise.

    Example:
        >>> rows = [FinishRow(4, {}, 10.2, 0.05, []), FinishRow(0, {}, 10.0, 0.04, [], True,
        ...         baseline=True)]
        >>> [r.trial for r in keep_default(rows)]
        [0, 4]
    """
    default = next((r for r in rows if r.baseline), None)
    if default is None or default is rows[0] or not default.within_noise:
        return rows
    return [default] + [r for r in rows if r is not default]


def summarise_samples(samples: dict[int, list[float]], maximize: bool) -> list[FinishRow]:
    """Rows sorted best first; ``within_noise`` marks those indistinguishable from the first."""
    rows = []
    for trial, values in samples.items():
        if not values:
            continue
        median = statistics.median(values)
        spread = (max(values) - min(values)) / abs(median) if median else 0.0
        rows.append(FinishRow(trial, {}, median, spread, list(values)))
    rows.sort(key=lambda r: -r.median if maximize else r.median)
    if rows:
        winner = rows[0]
        for row in rows:
            gap = abs(winner.median - row.median) / abs(winner.median) if winner.median else 0.0
            row.within_noise = gap <= max(winner.spread, row.spread)
    return rows


def finish(
    study: optuna.Study,
    metric: str,
    direction: str,
    executor: Executor,
    *,
    top: int = 3,
    rounds: int = 3,
    on_sample: Callable[[int, int, float | None], None] | None = None,
    deadline: float | None = None,
) -> list[FinishRow]:
    """Re-measure the ``top`` best configs of ``study`` on ``executor`` (a fresh one; trials
    run one at a time), in ``rounds`` interleaved rounds; store and return the rows, winner
    first. Past ``deadline`` (a ``time.monotonic()`` reading: the end of the run's time
    budget) no further round starts, though the first always runs."""
    maximize = direction == "maximize"
    trials = sorted(ok_trials(study), key=lambda t: -t.values[0] if maximize else t.values[0])
    chosen = trials[:top]
    default = next((t for t in trials if t.user_attrs.get(BASELINE)), None)
    if default is not None and default not in chosen:
        chosen.append(default)  # re-measured beside them: the answer unless they beat it
    samples: dict[int, list[float]] = {t.number: [] for t in chosen}
    failures: dict[int, str] = {}
    done_rounds = 0
    with executor:
        for round_index in range(rounds):
            if done_rounds and deadline is not None and time.monotonic() >= deadline:
                break
            done_rounds += 1
            for trial in rotated(chosen, round_index):
                executor.submit(trial.number, dict(trial.params))
                result = executor.wait_any()[0].result
                value = None
                if result.ok and result.measurement is not None:
                    value = float(result.measurement.values[metric])
                    samples[trial.number].append(value)
                else:
                    failures[trial.number] = f"{result.status.value}: {result.reason}"
                if on_sample is not None:
                    on_sample(trial.number, len(samples[trial.number]), value)
    rows = summarise_samples(samples, maximize)
    by_number = {t.number: t for t in chosen}
    for row in rows:
        row.config = dict(by_number[row.trial].params)
        row.baseline = default is not None and row.trial == default.number
    rows = keep_default(rows)
    study.set_user_attr(
        FINISH,
        {
            "metric": metric,
            "rounds": done_rounds,
            "protocol": f"fresh worker process; top {min(top, len(trials))} configs and the "
            f"untuned default re-measured in {done_rounds} interleaved rounds, the order rotated "
            "each round; winner by median, "
            "the default kept unless beaten by more than the noise",
            "default_kept": bool(rows) and rows[0].baseline and len(rows) > 1,
            "rows": [asdict(r) for r in rows],
            "failed": {str(k): v for k, v in failures.items()},
        },
    )
    return rows
