"""Units read from a metric's name: a lone letter is a name, a unit word or suffix a unit."""

import pytest

from autotune.cli_parsing import UsageError, parse_slo
from autotune.report import unit_label
from autotune.units import named, never_negative, readable


@pytest.mark.parametrize("metric", ["s", "S", "w", "x"])
def test_a_metric_named_by_one_letter_has_no_unit(metric):
    # a recorded column `s` may hold a score below 0: not "-2.50 s" of a time, nor "W" of power
    assert readable(metric, -2.5) == "-2.50"
    assert named(metric, -2.5) == f"-2.50 {metric}"  # the name, as any unit-less metric's
    assert not never_negative(metric)
    assert unit_label(metric) == metric  # an axis title "s", not "s (s)"


def test_an_slo_on_a_one_letter_metric_may_be_zero_or_below():
    assert parse_slo("s=0,w=-1") == {"s": 0.0, "w": -1.0}


@pytest.mark.parametrize(
    ("metric", "value", "shown"),
    [("ms", 2.134, "2.13 ms"), ("latency_s", 0.5, "0.500 s"), ("power_w", 312.0, "312 W"),
     ("speedup_x", 1.25, "1.250x"), ("tflops", 707.4, "707 TFLOP/s")],
)  # fmt: skip
def test_a_unit_word_or_suffix_still_gives_the_unit(metric, value, shown):
    assert readable(metric, value) == shown and never_negative(metric)


def test_an_slo_of_zero_on_a_time_is_still_refused():
    with pytest.raises(UsageError, match="ms is never 0 or below"):
        parse_slo("ms=0")


@pytest.mark.parametrize(
    ("metric", "value", "shown"),
    [("copy_fraction", 4.2e-05, "0.00420%"), ("copy_fraction", 3.1e-06, "0.000310%"),
     ("ratio_to_cublas", 1.23e-04, "0.000123x"), ("mfu", 0.0, "0.0%"), ("mfu", 0.0005, "0.1%")],
)  # fmt: skip
def test_a_share_or_ratio_too_small_for_its_decimals_keeps_three_digits(metric, value, shown):
    # `autotune tune rmsnorm` on a CPU (the Triton interpreter against a copy) printed every
    # trial, the best and the finish's medians as 0.0%: the configs could not be told apart
    assert readable(metric, value) == shown


@pytest.mark.parametrize(
    ("metric", "shown"),
    [("gflops_s", "1.23k GFLOP/s"), ("gb_s", "1.23k GB/s"), ("tokens_s", "1.23k tokens/s"),
     ("req_s", "1.23k req/s"), ("samples_s", "1.23k samples/s"), ("tflops_s", "1234 TFLOP/s"),
     ("latency_s", "1234 s"), ("compile_s", "1234 s"), ("warmup_s", "1234 s")],
)  # fmt: skip
def test_a_quantity_before_s_is_a_rate_not_seconds(metric, shown):
    # `--metric gflops_s` (or gb_s, tokens_s, req_s) of a replayed table read '1234 s', a
    # duration, where tok_s and tflops_s read as rates; a time's word before _s stays seconds
    assert readable(metric, 1234.0) == shown
    assert unit_label(metric) == f"{metric} ({shown.split(' ', 1)[1]})"
