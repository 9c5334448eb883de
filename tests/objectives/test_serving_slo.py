"""Stopping a serving trial once its p99 is certain to break the SLO."""

from __future__ import annotations

import math

import pytest

from autotune.failures import Diverged, SloViolated
from autotune.objectives.serving import ServingObjective, percentile
from autotune.objectives.serving_engine import Request
from autotune.objectives.serving_slo import SloWatch, misses_for_certain


@pytest.mark.parametrize("n", [1, 2, 3, 40, 99, 100, 101, 200, 257])
def test_the_misses_that_make_a_p99_certain_are_those_of_the_reported_percentile(n):
    needed = misses_for_certain(n)  # values just over a limit of 1, the others at 0
    assert percentile([0.0] * (n - needed) + [1.01] * needed, 99) > 1.0
    if needed > 1:  # one fewer, and the p99 may still be within the limit
        assert percentile([0.0] * (n - needed + 1) + [1.01] * (needed - 1), 99) <= 1.0


def _request(i, arrival, first=None, finish=None, output_len=5):
    r = Request(i, arrival, [1], output_len)
    r.first_token_s, r.finish_s = first, finish
    return r


def test_ttft_misses_are_requests_that_waited_past_the_limit_or_got_their_token_late():
    rows = [_request(0, 0.0, first=0.2), _request(1, 0.0, first=0.7), _request(2, 0.3),
            _request(3, 0.9), _request(4, 2.0)]  # fmt: skip
    watch = SloWatch(rows, {"ttft_p99_ms": 500.0})
    assert watch.needed == 2
    # at 1.0 s: 1 got its token late, 2 has waited 0.7 s, 3 only 0.1 s, 4 has not arrived
    assert [SloWatch._ttft_misses(r, 1.0, 0.5) for r in rows] == [False, True, True, False, False]
    assert watch.certain(now=1.0) == ["ttft_p99_ms > 500 for certain (2 of 5 requests over it)"]


def test_tpot_counts_a_request_whose_gaps_so_far_already_average_over_the_limit():
    # 5 tokens: 4 gaps after the first; by 1.5 s the last comes no sooner than 0.5 s after it
    running = _request(0, 0.0, first=1.0)
    assert SloWatch._tpot_misses(running, 1.5, 0.100)  # >= 125 ms a gap
    assert not SloWatch._tpot_misses(running, 1.3, 0.100)  # >= 75 ms so far: may still make it
    assert not SloWatch._tpot_misses(_request(1, 0.0), 9.0, 0.100)  # no first token yet
    done = _request(2, 0.0, first=1.0, finish=1.2)
    assert not SloWatch._tpot_misses(done, 9.0, 0.100)  # 50 ms, final


def test_only_the_engines_p99_limits_are_watched():
    with pytest.raises(ValueError, match="cannot watch 'ttft_p50_ms'"):
        SloWatch([], {"ttft_p50_ms": 100.0})


def test_the_sweep_is_asked_once_and_its_prune_becomes_slo_violated():
    rows = [_request(i, 0.0) for i in range(3)]
    asked = []

    def pruning(step, value):
        asked.append((step, value))
        raise Diverged("pruned")

    with pytest.raises(
        SloViolated,
        match=r"stopped early: ttft_p99_ms > 10 for certain \(3 of 3 requests over it\) at 1.0 s",
    ):
        SloWatch(rows, {"ttft_p99_ms": 10.0}).after_step(1.0, pruning, 7)
    assert asked == [(7, math.inf)]
    outside = SloWatch(rows, {"ttft_p99_ms": 10.0})  # the finish: nothing stops
    calls = []
    for now in (1.0, 2.0):
        outside.after_step(now, lambda step, value: calls.append(step), 1)
    assert calls == [1]


def _objective(**problem) -> ServingObjective:
    base = ServingObjective.default_problem({"type": "cpu"})
    return ServingObjective({**base, "num_requests": 6, "device": "cpu", **problem})


def test_a_trial_certain_to_break_its_limit_stops_and_outside_a_sweep_serves_the_trace():
    obj = _objective(stop_ttft_p99_ms=1e-6)

    def sweep_report(step, value):
        if not math.isfinite(value):
            raise Diverged(f"pruned at step {step}")

    with pytest.raises(
        SloViolated, match=r"stopped early: ttft_p99_ms > 1e-06 for certain \(\d of 6"
    ):
        obj.evaluate(obj.default_config(), sweep_report)
    whole = obj.evaluate(obj.default_config())  # no sweep asked: the whole trace, measured
    assert whole.metrics["finished"] == whole.metrics["requests"] == 6
    assert whole.metrics["ttft_p99_ms"] > 1e-6


def test_an_slo_on_the_quality_gates_kl_says_why_and_what_limits_it() -> None:
    # it said "serving does not measure 'kl'", beside trials that report a kl figure
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "serving", "--slo", "kl=0.1",
         "--trials", "1", "--storage", "memory"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(
        "error: --slo: serving's 'kl' is the quality gate's measure, taken of quantized weights "
        "and fp8 caches alone (a bf16 config reports none), and --problem max_kl=N limits it "
        "(default 0.05); a --slo limit may cap ttft_p50_ms, "
    ), done.stderr
