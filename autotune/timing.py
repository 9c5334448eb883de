"""The one timing primitive every objective uses.

On CUDA it is Triton's ``do_bench`` (warm-up, L2 flush between runs, repeat count from a time
budget, device events); on the CPU a wall-clock loop with the same shape. ``interleaved``
times several candidates against each other. Single functions *alternate* launch by launch
(:func:`alternating`): every iteration runs each candidate once, in a freshly shuffled order,
each launch timed alone after an L2 flush, so a candidate's neighbours in time are the others
and clock or power drift falls on all of them alike. On an H200 at its 700 W cap, two
launchers of one compiled kernel (and Triton's tutorial kernel, the same SASS) read within
0.1% of each other against cuBLAS at 8192^3 that way, where rounds of ``do_bench`` (3 rounds of
15 ms per candidate, the order rotated) put them anywhere in 0.94-1.12x cuBLAS over two runs
(benchmarks/results/h200-2026-12-04-s34).

A candidate given as several functions, one per input set, is timed *streamed*
(:func:`bench_streamed`), in rounds whose order rotates (A B C, B C A, C A B, ...): its
launches cycle through the sets back to back from one CUDA graph (Triton's
``do_bench_cudagraph``), so no launch finds its inputs in L2 when the sets together
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
import random
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
    ``rep_ms``, replayed 10 times; each replay's mean launch time is a sample. Triton runs
    them on a stream of its own, so the launches before it are waited for first: a K-split's
    tile counters are shared by the launchers of one stream
    (:mod:`~autotune.kernels.split_k_workspace`), and two launches of them at once leave a
    counter off zero, which fails every later launch over that tile. On the CPU: a wall-clock
    loop with the same rotation.

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
        import torch
        import triton.testing

        for _ in fns:  # every set launched once: compiled and allocated before the capture
            next_launch()
        # done before Triton's stream starts, so no launch queued here runs beside its first
        # ones: they would share a K-split's tile counters (see split_k_workspace)
        torch.cuda.synchronize()
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


#: Iterations of :func:`alternating` at most (a 10-us kernel in a 45-ms budget would ask for
#: 4,500: each adds a flush and two events on the host).
MAX_ALTERNATIONS = 1000


class _LaunchClock:
    """Times one launch: device events after an L2 flush on CUDA, the wall clock on the CPU."""

    def __init__(self, device_type: str) -> None:
        self.cuda = device_type == "cuda"
        self.pending: list[tuple[str, Any, Any]] = []
        self.samples: dict[str, list[float]] = {}
        if self.cuda:
            from triton import runtime

            self.driver = runtime.driver.active
            self.device = self.driver.get_device_interface()
            self.cache = self.driver.get_empty_cache_for_benchmark()

    def time(self, name: str, fn: Callable[[], object]) -> None:
        if self.cuda:
            self.driver.clear_cache(self.cache)
            start = self.device.Event(enable_timing=True)
            end = self.device.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            self.pending.append((name, start, end))
        else:
            started = time.perf_counter()
            fn()
            self.samples.setdefault(name, []).append((time.perf_counter() - started) * 1e3)

    def collect(self) -> dict[str, list[float]]:
        """Every sample so far by candidate, in ms (waits for the device)."""
        if self.cuda:
            self.device.synchronize()
            for name, start, end in self.pending:
                self.samples.setdefault(name, []).append(start.elapsed_time(end))
            self.pending = []
        return self.samples


def alternating(
    fns: dict[str, Callable[[], object]],
    *,
    device_type: str,
    warmup_ms: float = 5.0,
    rep_ms: float = 45.0,
    seed: int = 0,
) -> dict[str, Timing]:
    """Time candidates launch by launch: each iteration runs every candidate once, in an order
    shuffled anew (seeded by ``seed``), every launch timed alone (after an L2 flush on CUDA).

    After one untimed call each, three timed calls each estimate the slowest candidate's time
    ``t``; ``warmup_ms / t`` untimed iterations follow, then ``rep_ms / t`` timed ones (at
    least 1, at most :data:`MAX_ALTERNATIONS`), so every candidate gets the same number of
    samples, taken side by side.

    Example:
        >>> calls = []
        >>> fns = {n: (lambda n=n: calls.append(n)) for n in "abc"}
        >>> times = alternating(fns, device_type="cpu", warmup_ms=0, rep_ms=0)
        >>> calls[:3], sorted(calls[3:12]) == sorted("abc" * 3), times["a"].runs
        (['a', 'b', 'c'], True, 1)
    """
    names = list(fns)
    for name in names:  # compiled and allocated outside the measurement
        fns[name]()
    estimate = _LaunchClock(device_type)
    for _ in range(3):
        for name in names:
            estimate.time(name, fns[name])
    slowest = max(statistics.median(v) for v in estimate.collect().values())
    slowest = max(slowest, 1e-6)
    warmup = int(warmup_ms / slowest)
    iterations = max(1, min(MAX_ALTERNATIONS, int(rep_ms / slowest)))
    order = random.Random(seed)
    clock = _LaunchClock(device_type)
    for index in range(warmup + iterations):
        shuffled = names[:]
        order.shuffle(shuffled)
        for name in shuffled:
            if index < warmup:
                fns[name]()
            else:
                clock.time(name, fns[name])
    samples = clock.collect()
    return {name: _summarise(samples[name]) for name in names}


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
    """Time several candidates against each other.

    Candidates measured this way see the same clocks and power state, so their ratio is
    meaningful even while the card throttles. Single functions alternate launch by launch
    (:func:`alternating`, with ``warmup_ms`` of warm-up and ``rounds x rep_ms`` of timed
    launches each). A candidate given as a sequence of functions (one per input set) makes
    every candidate timed in ``rounds`` rounds instead, round ``r`` starting at the ``r``-th
    candidate (:func:`rotated`), the sequences with :func:`bench_streamed`, single functions
    with :func:`bench`.

    Example:
        >>> calls = []
        >>> fns = {"a": [lambda: calls.append("a")], "b": lambda: calls.append("b")}
        >>> times = interleaved(fns, device_type="cpu", rounds=2, warmup_ms=0, rep_ms=0)
        >>> sorted(times), calls[0], calls[-1]  # round 1 runs b first, a last
        (['a', 'b'], 'a', 'a')
    """
    if all(callable(fn) for fn in fns.values()):
        return alternating(
            fns,  # type: ignore[arg-type]
            device_type=device_type, warmup_ms=warmup_ms, rep_ms=rounds * rep_ms,
        )  # fmt: skip
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
