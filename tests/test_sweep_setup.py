import pytest

from autotune.sweep_setup import SetupError, build_settings


def _settings(tmp_path, **given):
    base = dict(
        workload="faults", space=None, problem={}, objective=None, sampler="auto", trials=4,
        time_budget_s=None, seed=0, storage=f"sqlite:///{tmp_path / 's.db'}", study=None,
        trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None, params=None,
        metric=None, maximize=True, command="autotune tune faults",
    )  # fmt: skip
    return build_settings(**{**base, **given})


def test_a_time_budget_bounds_one_trial_to_a_quarter_of_it_unless_a_timeout_is_given(tmp_path):
    assert _settings(tmp_path).trial_timeout_s == 300.0
    assert _settings(tmp_path, time_budget_s=300.0).trial_timeout_s == 75.0
    assert _settings(tmp_path, time_budget_s=40.0).trial_timeout_s == 30.0  # the floor
    assert _settings(tmp_path, time_budget_s=3600.0).trial_timeout_s == 300.0
    given = _settings(tmp_path, time_budget_s=300.0, trial_timeout_s=180.0)
    assert given.trial_timeout_s == 180.0


def test_a_serving_sweeps_slo_is_also_the_limit_its_goodput_counts_requests_within(tmp_path):
    slo = {"ttft_p99_ms": 1000.0, "tpot_p99_ms": 80.0}
    problem = _settings(tmp_path, workload="serving", slo=slo).problem
    assert (problem["slo_ttft_ms"], problem["slo_tpot_ms"]) == (1000.0, 80.0)
    given = _settings(tmp_path, workload="serving", slo=slo, problem={"slo_ttft_ms": 300.0})
    assert (given.problem["slo_ttft_ms"], given.problem["slo_tpot_ms"]) == (300.0, 80.0)
    assert _settings(tmp_path, workload="serving").problem["slo_ttft_ms"] == 250.0  # CPU default
    # a workload without per-request limits keeps its problem; it cannot cap a latency it
    # never measures
    assert "slo_ttft_ms" not in _settings(tmp_path, slo={"latency_s": 5.0}).problem
    with pytest.raises(SetupError, match="faults does not measure 'ttft_p99_ms'"):
        _settings(tmp_path, slo=slo)
