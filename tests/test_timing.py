"""The timing primitive: interleaved rounds rotate their order, so no candidate owns a position;
a candidate of several input sets goes through them in turn."""

from __future__ import annotations

import itertools

import pytest

from autotune.timing import bench_streamed, interleaved, rotated


def test_interleaved_rounds_start_at_a_different_candidate_each_round():
    calls: list[str] = []
    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    times = interleaved(fns, device_type="cpu", rounds=3, warmup_ms=0, rep_ms=0)
    runs = [name for name, _ in itertools.groupby(calls)]  # one entry per bench of a candidate
    assert runs == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert {name: t.runs for name, t in times.items()} == {"a": 3, "b": 3, "c": 3}


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
