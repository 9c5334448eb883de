"""Compile-ahead: configs asked for ahead compile in a process pool while others measure.

The faults workload stands in for a Triton kernel with a real on-disk cache: a config costs
``compile_s`` of sleep the first time any process compiles it, and nothing once a marker file
says it was compiled (what Triton's cache does for a kernel compiled by ``warmup``)."""

from __future__ import annotations

import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.compile_ahead import CompileAhead, compile_ahead_pool, default_jobs
from autotune.driver.trial_attrs import LAST_RUN, WORKER, is_launched, trial_status
from autotune.objectives.faults import CACHE_DIR_ENV
from autotune.space import load_space

SPACE = """
parameters:
  fault: {type: categorical, choices: [none]}
  score: {type: float, low: 0.0, high: 1.0}
  compile_s: {type: categorical, choices: [0.3]}
  delay: {type: categorical, choices: [0.3]}
"""


@pytest.fixture
def kernel_cache(tmp_path, monkeypatch):
    cache = tmp_path / "kernel-cache"
    cache.mkdir()
    monkeypatch.setenv(CACHE_DIR_ENV, str(cache))  # inherited by spawned workers and the pool
    return cache


def sweep(space, compile_ahead: int, trials: int = 12):
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="random", n_trials=trials, seed=0, storage="memory", executor="local",
        workers=1, compile_ahead=compile_ahead, device={"type": "cpu"},
    )  # fmt: skip
    return Sweep(settings).run()


def test_compiling_ahead_takes_the_compile_off_the_device_slot(write_space, kernel_cache):
    space = load_space(write_space(SPACE))
    cold = sweep(space, compile_ahead=0)
    for marker in kernel_cache.iterdir():
        marker.unlink()  # the second sweep starts from a cold cache as well
    ahead = sweep(space, compile_ahead=2)
    for summary in (cold, ahead):
        assert summary.trials_run == 12 and not summary.failures
    # without the pool every trial compiles in its slot: 0.3 s of each ~0.6 s trial (the wall
    # time also holds the worker's start, torch's import: 1 to 5 s by the machine's load)
    assert cold.trial_compile_s == pytest.approx(12 * 0.3, abs=0.3)
    assert cold.compile_share > 0.25
    # with it, trials compile only while the pool's processes start (two compile 0.3 s each
    # while a trial measures 0.3 s: they keep ahead from then on)
    assert ahead.trial_compile_s + ahead.compile_wait_s < 0.6 * cold.trial_compile_s
    assert ahead.compile_share < 0.6 * cold.compile_share
    assert ahead.compile_jobs == 2
    last_run = ahead.study.user_attrs[LAST_RUN]
    assert last_run["compile_jobs"] == 2 and last_run["compile_share"] < cold.compile_share
    # the sweep launched each config once, and no more than its budget
    launched = [t for t in ahead.study.trials if is_launched(t)]
    assert len(launched) == 12 and len({t.params["score"] for t in launched}) == 12


def test_a_config_that_fails_to_compile_ahead_takes_no_slot(write_space, kernel_cache):
    space = load_space(write_space(SPACE.replace("[none]", "[none, compile_error]")))
    summary = sweep(space, compile_ahead=2, trials=14)
    failed = [t for t in summary.study.trials if trial_status(t) == "compile_error"]
    # while the pool's processes start, trials compile (and fail) in their worker
    in_pool = [t for t in failed if t.user_attrs[WORKER] == "compile-ahead pool"]
    assert in_pool, "no compile_error config reached the pool"
    assert all("(compiled ahead)" in t.user_attrs["reason"] for t in in_pool)
    ran = [t for t in summary.study.trials if trial_status(t) == "ok"]
    assert ran and all(t.user_attrs[WORKER].startswith("local worker") for t in ran)
    assert summary.trials_run == 14


def test_the_pool_is_sized_to_the_cores_left_and_off_on_the_interpreter():
    assert 1 <= default_jobs(capacity=1) <= 16
    settings = SweepSettings(
        workload="matmul", problem={"M": 64, "N": 64, "K": 64, "dtype": "bf16"},
        space=load_space("matmul"), objectives={"ratio_to_cublas": "maximize"},
        device={"type": "cpu"},
    )  # fmt: skip
    assert compile_ahead_pool(settings, 1) is None  # the interpreter has nothing to compile
    with CompileAhead("faults", {}, jobs=1) as pool:
        pool.submit(3, {"fault": "compile_error"})
        failure = pool.wait(3)
        assert failure is not None and failure.status.value == "compile_error"
        assert pool.wait(4) is None  # never submitted: the trial compiles it itself
