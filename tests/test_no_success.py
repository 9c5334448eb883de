"""The last line of a sweep whose launched trials all failed."""

from __future__ import annotations

from collections import Counter

from autotune.no_success import none_succeeded


def test_the_most_common_failure_is_named_with_a_trial_s_reason() -> None:
    line = none_succeeded(Counter({"oom": 1, "crashed": 2, "infeasible": 5}),
                          (3, "SIGSEGV"), {})  # fmt: skip
    assert line == ("no trial succeeded: crashed 2 of 3 launched; #3: SIGSEGV (`autotune "
                    "trials` lists them)")  # fmt: skip


def test_an_slo_is_named_only_where_every_launched_trial_broke_it() -> None:
    mixed = none_succeeded(Counter({"slo_violated": 2, "oom": 1}), None, {"ms": 2.0})
    assert mixed.startswith("no trial succeeded: slo_violated 2 of 3 launched")
    every = none_succeeded(Counter({"slo_violated": 2}), None, {"ms": 2.0, "spread": 0.05})
    assert every.startswith("no trial succeeded: every trial of this run broke --slo "
                            "ms=2,spread=0.05 (slo_violated 2 of 2); loosen")  # fmt: skip


def test_a_run_that_launched_nothing_keeps_the_bare_line() -> None:
    assert none_succeeded(Counter({"infeasible": 3}), None, {}) == (
        "no trial succeeded: nothing to report (see `autotune trials`)"
    )
