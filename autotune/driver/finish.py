"""The noise-aware finish: re-measure the best few configs in a fresh process, interleaved.

A sweep's best trial is partly luck: on a GPU, short kernels vary 5% or more between runs and
a card at its power cap lowers its clocks as the sweep goes on. The finish starts a fresh
worker, measures the top configs in rounds, the order rotated each round (A B C, B C A,
C A B), so that drift falls on all of them alike and none always goes first. It picks the
winner by median and names the configs that are within noise of it. Each measurement times
the workload's reference in the same round (the ratio to cuBLAS is a figure of one round).

One config is measurably better than another (:func:`beats`) when, over three or more rounds
both were measured in, it wins every round and its median round-by-round ratio to the other
clears 1 by more than those ratios' range (the rounds pair their readings: a slow round slows
both); or, unpaired, when their medians differ by more than the larger of their ranges of
readings (in logarithms, where the readings are positive: a fraction of each reading). A
single reading has no spread to judge by: a finish of one round (``--finish-rounds 1``, or a
time budget that left no more) orders its configs by reading but never replaces the default.

The untuned default (the sweep's trial 0) is re-measured with them, and stays the answer unless
a config measurably beats it: a tuned config that is not measurably faster is not worth
shipping. Of those that do, the best median wins. A config that failed in a round of the finish
(crashed, ran out of memory, hung: not one the time budget stopped) is not shipped either: it
never wins over one that ran every round it was given, whatever its other readings. A default
that the sweep found over the SLO (``--slo``) is re-measured too, as the figure the winner is
compared with, but it is never the answer: its row (``over_slo``) comes last.

Example:
    >>> rows = summarise_samples({3: [10.0, 10.4, 9.8], 7: [10.1, 10.3, 9.9], 9: [8.0, 8.1, 8.0]},
    ...                          maximize=True)
    >>> [r.trial for r in rows], [r.within_noise for r in rows]
    ([7, 3, 9], [True, True, False])
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, replace
from typing import Any

import optuna

from autotune.driver.results import ok_trials
from autotune.driver.signals import raise_if_stopped
from autotune.driver.trial_attrs import (
    BASELINE,
    FINISH,
    trial_status,
)
from autotune.executors.base import Executor
from autotune.failures import TrialStatus
from autotune.redact import redact
from autotune.timing import rotated
from autotune.units import counted


def spread_text(spread: float, readings: int) -> str:
    """A finish row's spread as the output says it; one reading has none.

    Example:
        >>> spread_text(0.0042, 3), spread_text(0.0, 1)
        ('spread 0.4% over 3 rounds', 'one reading, no spread')
    """
    if readings == 1:
        return "one reading, no spread"
    return f"spread {spread:.1%} over {readings} rounds"


@dataclass
class FinishRow:
    """One re-measured config: its median, relative spread (max - min) / median, samples and
    the round each sample came from (``rounds``; by default one sample a round, in order)."""

    trial: int
    config: dict[str, Any]
    median: float
    spread: float
    samples: list[float]
    within_noise: bool = False  # of the winner (the winner itself: True)
    baseline: bool = False  # the untuned default
    rounds: list[int] | None = None
    over_slo: bool = False  # the default, over the SLO in the sweep: compared, never chosen

    def by_round(self) -> dict[int, float]:
        """Round -> reading."""
        rounds = self.rounds if self.rounds is not None else range(len(self.samples))
        return dict(zip(rounds, self.samples, strict=True))


@dataclass(frozen=True)
class FinishRound:
    """The finish's progress, as it goes: ``number`` 0 as it starts (nothing measured yet),
    else the round just ended (from 1) of the ``rounds`` asked; ``top`` the best configs
    re-measured each round, ``configs`` all of them (the untuned default among them where
    ``default``); ``measured`` this round's readings, ``failed`` its measurements that
    failed, ``seconds`` its wall time (the fresh worker's start in the first); ``process``
    where it measures, as the output says it (:data:`FRESH`, :data:`KEPT`)."""

    number: int
    rounds: int
    top: int
    configs: int
    default: bool
    measured: int = 0
    failed: int = 0
    seconds: float = 0.0
    process: str = "a fresh process"


#: Where the finish measures, as the output says it: a worker started for it ...
FRESH = "a fresh process"
#: ... or a search by group's finish worker, kept from group to group (no sweep trial runs in it:
#: see :mod:`autotune.driver.kept_processes`)
KEPT = "the finish's own process (kept from group to group, apart from the sweep's workers)"


#: Paired rounds it takes for a round-by-round comparison (fewer: the medians' spreads decide).
PAIRED_ROUNDS = 3


def beats(a: FinishRow, b: FinishRow, maximize: bool) -> bool:
    """True when ``a`` is measurably better than ``b`` (see the module docstring).

    Example:
        >>> fast = FinishRow(1, {}, 0.96, 0.04, [0.957, 0.991, 0.961])
        >>> default = FinishRow(0, {}, 0.90, 0.02, [0.884, 0.903, 0.903])  # same three rounds
        >>> beats(fast, default, maximize=True)  # 4% spread, but it wins each round by 6-10%
        True
        >>> noisy = FinishRow(2, {}, 1.01, 0.13, [0.887, 1.018, 1.010])
        >>> beats(noisy, default, maximize=True)  # 0.3% in its first round: no clear win
        False
        >>> beats(FinishRow(3, {}, 1.5, 0.0, [1.5]), FinishRow(0, {}, 1.0, 0.0, [1.0]), True)
        False
        >>> served = FinishRow(5, {}, 50.0, 1.8, [20.0, 50.0, 110.0])  # very noisy, yet
        >>> beats(served, FinishRow(0, {}, 0.0, 0.0, [0.0, 0.0, 0.0]), True)  # none served
        True
    """
    if len(a.samples) == 1 or len(b.samples) == 1:
        return False  # one reading says nothing of the noise around it
    other = b.by_round()
    ratios = [_round_ratio(x, other[r], maximize) for r, x in a.by_round().items() if r in other]
    finite = [r for r in ratios if math.isfinite(r)] or [1.0]
    paired = len(ratios) >= PAIRED_ROUNDS and min(ratios) > 1
    if paired and statistics.median(ratios) - 1 > max(finite) - min(finite):
        return True
    better = a.median > b.median if maximize else a.median < b.median
    return better and _gap_over_ranges(a, b)


def _gap_over_ranges(a: FinishRow, b: FinishRow) -> bool:
    """True when the medians of ``a`` and ``b`` lie further apart than either's range of
    readings, on one scale for both: the logarithm where every reading is positive (noise in
    timings is a fraction of the reading, so a default 60x slower with a 100% spread is still
    told apart), else the readings themselves (a row without samples: its median and spread).

    Example:
        >>> def row(*xs): return FinishRow(0, {}, statistics.median(xs), 0.0, list(xs))
        >>> _gap_over_ranges(row(2578.0, 2578.4), row(21.2, 65.2))  # 60x: outside both ranges
        True
        >>> _gap_over_ranges(row(10.0, 10.4, 9.8), row(10.1, 10.3, 9.9))
        False
        >>> _gap_over_ranges(row(1.0, 1.1), row(-2.0, -1.5)), _gap_over_ranges(row(0.5, 1.0),
        ...                                                                     row(0.1, 0.5))
        (True, False)
    """
    logs = min(a.samples + b.samples + [a.median, b.median]) > 0
    scale = math.log if logs else float

    def median_and_range(row: FinishRow) -> tuple[float, float]:
        if not row.samples:  # a relative spread is, near enough, a range of logarithms
            return scale(row.median), row.spread * (1.0 if logs else abs(row.median))
        xs = [scale(x) for x in row.samples]
        return statistics.median(xs), max(xs) - min(xs)

    (median_a, range_a), (median_b, range_b) = median_and_range(a), median_and_range(b)
    return abs(median_a - median_b) > max(range_a, range_b)


def _round_ratio(x: float, y: float, maximize: bool) -> float:
    """How much better ``a``'s reading ``x`` is than ``b``'s ``y`` of the same round (> 1:
    better): for positive readings their ratio, for any others 1 plus their difference over
    the other's size, so that a negative metric (a log-likelihood, a negated latency) is
    ordered as it is, not upside down; a reading of 0 against a real one is an unbounded win or
    loss (a config that served tokens in a round where the default served none won that
    round), 0 against 0 a tie.

    Example:
        >>> _round_ratio(50.0, 0.0, True), _round_ratio(0.0, 0.0, True)
        (inf, 1.0)
        >>> _round_ratio(2.0, 4.0, maximize=False)  # half the time: twice as good
        2.0
        >>> _round_ratio(-3.0, -1.0, True), _round_ratio(-5.0, -10.0, maximize=False)  # losses
        (-1.0, 0.0)
    """
    better, worse = (x, y) if maximize else (y, x)
    if worse == 0:
        return math.inf if better > 0 else 1.0 if better == 0 else 0.0
    if better > 0 and worse > 0:
        return better / worse
    return 1.0 + (better - worse) / abs(worse)


def _mark_noise(rows: list[FinishRow], maximize: bool) -> list[FinishRow]:
    for row in rows:
        row.within_noise = row is rows[0] or not beats(rows[0], row, maximize)
    return rows


def keep_default(
    rows: list[FinishRow], maximize: bool = True, failed: Collection[int] = ()
) -> list[FinishRow]:
    """Winner first: the untuned default unless a row measurably beats it, else the best
    median of the rows that do; the rest in median order. A row whose trial is in ``failed``
    (it failed in a round of the finish) never beats the default, and without a default it
    comes after every row that did not fail.

    Example:
        >>> rows = [FinishRow(4, {}, 10.2, 0.05, []), FinishRow(0, {}, 10.0, 0.04, [], True,
        ...         baseline=True)]
        >>> [r.trial for r in keep_default(rows)]
        [0, 4]
        >>> rows = [FinishRow(4, {}, 99.0, 0.0, [99.0, 99.0]), FinishRow(0, {}, 10.0, 0.0,
        ...         [10.0, 10.0, 10.0], baseline=True)]
        >>> [r.trial for r in keep_default(rows, failed={4})]  # 4 crashed in its third round
        [0, 4]
    """
    rows = [r for r in rows if r.trial not in failed] + [r for r in rows if r.trial in failed]
    default = next((r for r in rows if r.baseline), None)
    if default is None:
        return _mark_noise(rows, maximize) if failed else rows
    if default.over_slo:  # a reference, not a candidate
        rest = [r for r in rows if r is not default]
        return _mark_noise(rest + [default], maximize) if rest else rows
    better = [r for r in rows if r is not default and r.trial not in failed
              and beats(r, default, maximize)]  # fmt: skip
    winner = better[0] if better else default
    return _mark_noise([winner] + [r for r in rows if r is not winner], maximize)


def summarise_samples(
    samples: dict[int, list[float]], maximize: bool,
    rounds: dict[int, list[int]] | None = None,
) -> list[FinishRow]:  # fmt: skip
    """Rows sorted best first; ``within_noise`` marks those indistinguishable from the first.
    ``rounds``: the round of each sample (default: one a round, in order)."""
    rows = []
    for trial, values in samples.items():
        if not values:
            continue
        median = statistics.median(values)
        spread = (max(values) - min(values)) / abs(median) if median else 0.0
        of_rounds = list(rounds[trial]) if rounds is not None else None
        rows.append(FinishRow(trial, {}, median, spread, list(values), rounds=of_rounds))
    rows.sort(key=lambda r: -r.median if maximize else r.median)
    return _mark_noise(rows, maximize)


def _next_round_s(took: list[float], first_round: bool) -> float:
    """What the next round should take, from this one's measurements: the first round's first
    measurement also started the fresh worker (torch's import, the device's start: seconds
    that no later round pays), so it counts as the median of the others.

    Example:
        >>> _next_round_s([6.0, 0.5, 0.7], first_round=True), _next_round_s([0.5, 0.7], False)
        (1.8, 1.2)
    """
    if first_round and len(took) > 1:
        return round(statistics.median(took[1:]) * len(took), 6)
    return sum(took)


def finish(
    study: optuna.Study,
    metric: str,
    direction: str,
    executor: Executor,
    *,
    top: int = 3,
    rounds: int = 3,
    on_sample: Callable[[int, int, float | None], None] | None = None,
    on_round: Callable[[FinishRound], None] | None = None,
    deadline: float | None = None,
    secrets: frozenset[str] = frozenset(),
    process: str = FRESH,
) -> list[FinishRow]:
    """Re-measure the ``top`` best configs of ``study`` on ``executor`` (a fresh one; trials
    run one at a time), in ``rounds`` interleaved rounds; store and return the rows, winner
    first. No round but the first starts that would end past ``deadline`` (a
    ``time.monotonic()`` reading: the end of the run's time budget) if it took as long as
    the round before it, and no measurement but the first starts past it. A stop signal ends
    it with KeyboardInterrupt, nothing stored, also where CPython dropped the signal's
    exception (:func:`~autotune.driver.signals.raise_if_stopped`). ``on_round`` is told
    as the finish starts and as each round ends (:class:`FinishRound`). A failure's reason
    is stored with every password left out, the ``secrets``
    (:attr:`~autotune.driver.settings.SweepSettings.secrets`) wherever they stand.
    ``process``: :data:`FRESH`, or :data:`KEPT` where ``executor`` is a search by group's
    kept finish worker (said so, and in the stored protocol)."""
    maximize = direction == "maximize"
    trials = sorted(ok_trials(study), key=lambda t: -t.values[0] if maximize else t.values[0])
    chosen = trials[:top]
    default = next((t for t in trials if t.user_attrs.get(BASELINE)), None)
    over_slo = None if default is not None or not trials else _default_over_slo(study)
    if default is not None and default not in chosen:
        chosen.append(default)  # re-measured beside them: the answer unless they beat it
    if over_slo is not None:
        chosen.append(over_slo)  # re-measured beside them: what they are compared with
    samples: dict[int, list[float]] = {t.number: [] for t in chosen}
    rounds_of: dict[int, list[int]] = {t.number: [] for t in chosen}
    failures: dict[int, str] = {}
    faulted: set[int] = set()  # the configs that failed a round themselves
    done_rounds = 0
    last_round_s = 0.0
    progress = FinishRound(0, rounds, min(top, len(trials)), len(chosen),
                           default is not None or over_slo is not None,
                           process=process)  # fmt: skip
    worker = ("fresh worker process" if process == FRESH else "the finish's own worker "
              "process, kept from group to group of a search by group (no sweep trial ran in "
              "it)")  # fmt: skip
    if on_round is not None:
        on_round(progress)
    with executor:
        for round_index in range(rounds):
            round_started = time.monotonic()
            if done_rounds and deadline is not None and round_started + last_round_s > deadline:
                break
            done_rounds += 1
            took: list[float] = []  # each measurement's seconds, this round
            measured = 0
            for trial in rotated(chosen, round_index):
                raise_if_stopped()  # a Ctrl-C whose KeyboardInterrupt CPython dropped
                measured_from = time.monotonic()
                if (done_rounds > 1 or took) and deadline is not None and measured_from >= deadline:
                    break  # the budget ended mid-round: what the round measured counts
                executor.submit(trial.number, dict(trial.params))
                result = executor.wait_any()[0].result
                took.append(time.monotonic() - measured_from)
                value = None
                if result.ok and result.measurement is not None:
                    value = float(result.measurement.values[metric])
                    samples[trial.number].append(value)
                    measured += 1
                    rounds_of[trial.number].append(round_index)
                else:
                    # stored in the study: every password in the reason left out
                    failures[trial.number] = (f"{result.status.value}: "
                                              f"{redact(result.reason, secrets)}")  # fmt: skip
                    if result.status is not TrialStatus.INTERRUPTED:  # not the budget's end
                        faulted.add(trial.number)
                if on_sample is not None:
                    on_sample(trial.number, len(samples[trial.number]), value)
            last_round_s = _next_round_s(took, first_round=round_index == 0)
            if on_round is not None:
                on_round(replace(progress, number=round_index + 1, measured=measured,
                                 failed=len(took) - measured,
                                 seconds=time.monotonic() - round_started))  # fmt: skip
        raise_if_stopped()  # (one that came in the last measurement: no record of a finish)
    # the rounds that measured something: a round whose every measurement failed (or was
    # stopped by the budget) re-measured nothing, whatever it started
    done_rounds = len({r for of_trial in rounds_of.values() for r in of_trial})
    rows = summarise_samples(samples, maximize, rounds_of)
    by_number = {t.number: t for t in chosen}
    reference = default or over_slo
    for row in rows:
        row.config = dict(by_number[row.trial].params)
        row.baseline = reference is not None and row.trial == reference.number
        row.over_slo = over_slo is not None and row.trial == over_slo.number
    rows = keep_default(rows, maximize, faulted)
    study.set_user_attr(
        FINISH,
        {
            "metric": metric,
            "rounds": done_rounds,
            "protocol": (
                f"{worker}; top {counted(min(top, len(trials)), 'config')} and the "
                f"untuned default (if over the SLO, a reference only) re-measured in {done_rounds} "
                f"interleaved round{'' if done_rounds == 1 else 's'}, the order rotated "
                "each round; winner by median, "
                "the default kept unless measurably beaten (every paired round won by more than "
                "the rounds' range, or medians apart by more than the spreads)"
                if done_rounds
                else f"{worker}; nothing re-measured: every "
                "measurement failed or the time budget ended first; the sweep's own readings stand"
            )
            + (
                "; one round: single readings cannot show a config measurably better than "
                "the default"
                if done_rounds == 1
                else ""
            ),
            "default_kept": bool(rows) and rows[0].baseline and len(rows) > 1,
            "rows": [asdict(r) for r in rows],
            "failed": {str(k): v for k, v in failures.items()},
        },
    )
    return rows


def _default_over_slo(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    """The untuned default's trial when the sweep measured it over the SLO, else None."""
    return next((t for t in study.get_trials(deepcopy=False)
                 if t.user_attrs.get(BASELINE) and trial_status(t) == "slo_violated"),
                None)  # fmt: skip
