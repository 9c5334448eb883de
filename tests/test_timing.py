"""The timing primitive: interleaved rounds rotate their order, so no candidate owns a position."""

from __future__ import annotations

import itertools

from autotune.timing import interleaved, rotated


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
