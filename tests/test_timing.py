"""The timing primitive: single functions alternate launch by launch in shuffled orders, so drift
falls on all alike; rounds (with a streamed candidate) rotate their order, so no candidate owns
a position; a candidate of several input sets goes through them in turn."""

from __future__ import annotations

import itertools
import statistics
import time

import pytest

from autotune.timing import alternating, bench_streamed, interleaved, rotated


def test_with_a_streamed_candidate_rounds_start_at_a_different_candidate_each_round():
    calls: list[str] = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b")}
    fns["c"] = [lambda: calls.append("c")]
    times = interleaved(fns, device_type="cpu", rounds=3, warmup_ms=0, rep_ms=0)
    runs = [name for name, _ in itertools.groupby(calls)]  # one entry per bench of a candidate
    assert runs == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {name: t.runs for name, t in times.items()} == {"a": 3, "b": 3, "c": 3}


def test_single_functions_alternate_one_launch_each_per_iteration_in_shuffled_orders():
    calls: list[str] = []
    names = ["kernel", "cublas", "copy"]
    fns = {name: (lambda name=name: calls.append(name)) for name in names}
    times = interleaved(fns, device_type="cpu", rounds=3, warmup_ms=0, rep_ms=2.0)
    timed = calls[len(names) * 4 :]  # after one untimed and three estimating calls each
    iterations = [timed[i : i + 3] for i in range(0, len(timed), 3)]
    assert len(iterations) > 10 and all(sorted(it) == sorted(names) for it in iterations)
    assert len({tuple(it) for it in iterations}) > 1  # the order changes
    assert {it[0] for it in iterations} == set(names)  # every candidate goes first sometimes
    assert len({t.runs for t in times.values()}) == 1 and times["kernel"].runs == len(iterations)


def _busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_alternating_launches_share_a_drift_that_blocks_of_launches_would_not():
    # two identical candidates on a "card" that slows 2% with every launch (a throttling GPU):
    # launch by launch they read the same; timed one after the other, the second reads slower
    launches = [0]

    def launch() -> None:
        launches[0] += 1
        _busy(0.2 * 1.02 ** min(launches[0], 60))

    times = alternating({"a": launch, "b": launch}, device_type="cpu", rep_ms=12.0)
    assert times["a"].runs >= 10
    assert 0.9 < times["a"].median_ms / times["b"].median_ms < 1.1
    launches[0] = 0
    blocks = {}
    for name in ("a", "b"):
        samples = []
        for _ in range(times["a"].runs):
            started = time.perf_counter()
            launch()
            samples.append(time.perf_counter() - started)
        blocks[name] = statistics.median(samples)
    assert blocks["b"] / blocks["a"] > 1.2  # what alternation protects the ratio from


def test_over_as_many_rounds_as_candidates_each_takes_every_position_once():
    names = ["kernel", "cublas", "copy", "other"]
    orders = [rotated(names, r) for r in range(len(names))]
    for position in range(len(names)):
        assert sorted(order[position] for order in orders) == sorted(names)


def test_a_candidate_of_several_input_sets_is_streamed_through_all_of_them_in_turn():
    calls: list[tuple[str, int]] = []
    fns = {
        "kernel": [lambda i=i: calls.append(("kernel", i)) for i in range(3)],
        "reference": lambda: calls.append(("reference", 0)),
    }
    times = interleaved(fns, device_type="cpu", rounds=2, warmup_ms=0, rep_ms=0)
    kernel_sets = [i for name, i in calls if name == "kernel"]
    assert kernel_sets == [0, 1, 2, 0, 1, 2]  # one pass over the sets a round, in turn
    assert {name: t.runs for name, t in times.items()} == {"kernel": 2, "reference": 2}


def test_streaming_needs_a_function():
    with pytest.raises(ValueError, match="at least one"):
        bench_streamed([], device_type="cpu")


def test_streamed_cuda_timing_waits_for_its_warmup_before_tritons_own_stream(monkeypatch):
    # Triton's do_bench_cudagraph launches on a new stream at once; the warm-up launches queued
    # on the caller's stream must be done by then, or two launches of a K-split share its tile
    # counters at the same time (on the H200: NaN tiles in every later trial of the worker).
    # The CUDA runtime and Triton's bench are the boundaries stood in for here.
    import torch
    import triton.testing

    events: list[str] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: events.append("synchronize"))

    def fake_do_bench_cudagraph(fn, rep, return_mode):
        events.append("triton stream")
        fn()
        return [0.01, 0.01]

    monkeypatch.setattr(triton.testing, "do_bench_cudagraph", fake_do_bench_cudagraph)
    fns = [lambda i=i: events.append(f"set {i}") for i in range(2)]
    t = bench_streamed(fns, device_type="cuda", rep_ms=1.0)
    assert events == ["set 0", "set 1", "synchronize", "triton stream", "set 0"]
    assert t.median_ms == 0.01
