"""The one timing primitive every objective uses.

On CUDA it is Triton's ``do_bench`` (warm-up, L2 flush between runs, repeat count from a time
budget, device events); on the CPU a wall-clock loop with the same shape. ``interleaved``
times several candidates in alternating rounds, the order rotated each round (A B C, B C A,
C A B, ...), so that clock and power drift falls on all of them alike and no candidate always
runs first (right after the previous candidate's load) or last.

A candidate given as several functions, one per input set, is timed *streamed*
(:func:`bench_streamed`): its launches cycle through the sets back to back from one CUDA graph
(Triton's ``do_bench_cudagraph``), so no launch finds its inputs in L2 when the sets together
span several L2s, and nothing else runs in between: what a decode step sees layer after
layer. ``do_bench``'s flush instead zeroes a 256 MB buffer before every run, which leaves L2
full of dirty lines that the timed launch may first have to write back, and times every launch
alone: on an H200 a 32 MiB decode product read 18-19 us that way and 12.5 us streamed (cuBLAS
alike; benchmarks/results/h200-2026-12-02-late). Which of the two costs the difference is not
measured.

Example:
    >>> t = bench(lambda: sum(range(1000)), device_type="cpu", warmup_ms=1, rep_ms=5)
    >>> t.median_ms > 0
    True
"""

from __future__ import annotations

import itertools
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


def bench_streamed(
    fns: Sequence[Callable[[], object]],
    *,
    device_type: str,
    rep_ms: float = 20.0,
) -> Timing:
    """Time launches that cycle through ``fns`` (one per input set) back to back; the time of
    one launch.

    On CUDA: Triton's ``do_bench_cudagraph`` over a function that calls the next of ``fns``
    each time, so the graph it captures holds ``fns[0], fns[1], ..., fns[0], ...`` for about
    ``rep_ms``, replayed 10 times; each replay's mean launch time is a sample. On the CPU: a
    wall-clock loop with the same rotation.

    Example:
        >>> calls = []
        >>> fns = [lambda i=i: calls.append(i) for i in range(3)]
        >>> t = bench_streamed(fns, device_type="cpu", rep_ms=0)
        >>> calls, t.runs  # one pass over the sets, each launch timed as a third of it
        ([0, 1, 2], 1)
    """
    if not fns:
        raise ValueError("bench_streamed needs at least one function")
    turn = itertools.cycle(fns)

    def next_launch() -> None:
        next(turn)()

    if device_type == "cuda":
        import triton.testing

        for _ in fns:  # every set launched once: compiled and allocated before the capture
            next_launch()
        samples = triton.testing.do_bench_cudagraph(next_launch, rep=rep_ms, return_mode="all")
        return _summarise(samples)
    samples: list[float] = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while not samples or time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in fns:
            next_launch()
        samples.append((time.perf_counter() - start) * 1e3 / len(fns))
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
    fns: dict[str, Callable[[], object] | Sequence[Callable[[], object]]],
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
    favours no position for good. A candidate given as a sequence of functions (one per input
    set) is timed with :func:`bench_streamed`, the others with :func:`bench`.

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
            if callable(fn):
                t = bench(fn, device_type=device_type, warmup_ms=warmup_ms, rep_ms=rep_ms)
            else:
                t = bench_streamed(fn, device_type=device_type, rep_ms=rep_ms)
            # keep the per-round median: robust to the odd long sample within a round
            pooled[name].append(t.median_ms)
    return {name: _summarise(samples) for name, samples in pooled.items()}
