"""The one timing primitive every objective uses.

On CUDA it is Triton's ``do_bench`` (warm-up, L2 flush between runs, repeat count from a time
budget, device events); on the CPU a wall-clock loop with the same shape. ``interleaved``
times several candidates in alternating rounds, the order rotated each round (A B C, B C A,
C A B, ...), so that clock and power drift falls on all of them alike and no candidate always
runs first (right after the previous candidate's load) or last.

Example:
    >>> t = bench(lambda: sum(range(1000)), device_type="cpu", warmup_ms=1, rep_ms=5)
    >>> t.median_ms > 0
    True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Timing:
    """Summary of repeated runs of one function, in milliseconds."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    runs: int

    @property
    def spread(self) -> float:
        """Relative inter-quantile spread, (p80 - p20) / median."""
        return (self.p80_ms - self.p20_ms) / self.median_ms if self.median_ms else 0.0


def _summarise(samples: Sequence[float]) -> Timing:
    ordered = sorted(samples)
    n = len(ordered)

    def q(p: float) -> float:
        return ordered[min(n - 1, max(0, round(p * (n - 1))))]

    return Timing(statistics.median(ordered), q(0.2), q(0.8), n)


def bench(
    fn: Callable[[], object],
    *,
    device_type: str,
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
) -> Timing:
    """Time ``fn`` after warm-up and return the median and quantiles of its run time."""
    if device_type == "cuda":
        import triton.testing

        samples = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
        return _summarise(samples)
    fn()  # first call: compile / allocate outside the measurement
    deadline = time.perf_counter() + warmup_ms / 1e3
    while time.perf_counter() < deadline:
        fn()
    samples: list[float] = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while not samples or time.perf_counter() < deadline:
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return _summarise(samples)


def rotated(items: list[Any], round_index: int) -> list[Any]:
    """``items`` in the order of round ``round_index``: rotated left by that many places.

    Example:
        >>> [rotated(["a", "b", "c"], r) for r in range(4)]
        [['a', 'b', 'c'], ['b', 'c', 'a'], ['c', 'a', 'b'], ['a', 'b', 'c']]
    """
    if not items:
        return []
    shift = round_index % len(items)
    return items[shift:] + items[:shift]


def interleaved(
    fns: dict[str, Callable[[], object]],
    *,
    device_type: str,
    rounds: int = 3,
    warmup_ms: float = 10.0,
    rep_ms: float = 30.0,
) -> dict[str, Timing]:
    """Time several candidates in alternating rounds and pool each one's samples.

    Candidates measured this way see the same clocks and power state, so their ratio is
    meaningful even while the card throttles. Round ``r`` starts at the ``r``-th candidate
    (:func:`rotated`): a card that heats within a round, or a cache left warm by the one before,
    favours no position for good.

    Example:
        >>> calls = []
        >>> fns = {n: (lambda n=n: calls.append(n)) for n in "ab"}
        >>> times = interleaved(fns, device_type="cpu", rounds=2, warmup_ms=0, rep_ms=0)
        >>> sorted(times), calls[0], calls[-1]  # round 1 runs b first, a last
        (['a', 'b'], 'a', 'a')
    """
    pooled: dict[str, list[float]] = {name: [] for name in fns}
    for round_index in range(rounds):
        for name in rotated(list(fns), round_index):
            fn = fns[name]
            t = bench(fn, device_type=device_type, warmup_ms=warmup_ms, rep_ms=rep_ms)
            # keep the per-round median: robust to the odd long sample within a round
            pooled[name].append(t.median_ms)
    return {name: _summarise(samples) for name, samples in pooled.items()}
