"""Trials that fail in every real way a kernel or training step can, each in an isolated local
worker: each ends with its state and a reason, and the next trial on the same slot works."""

from __future__ import annotations

import pytest
import torch

from autotune.executors.local import LocalExecutor

CASES = [  # fault, the state it must end in, a word its reason must hold
    ("oom", "oom", "memory"),
    ("host_memory", "oom", ""),
    ("segfault", "crashed", "SIGSEGV"),
    ("hang", "timeout", "no result after"),
    ("wrong_result", "wrong_result", "error"),
    ("diverge", "diverged", "loss"),
    ("exception", "crashed", "injected failure"),
]
# on a GPU (benchmarks/gpu/issue13_faults.sh runs them in a sweep too): the device refuses an
# allocation; a kernel writes far outside its buffer and the CUDA context is lost with it
GPU_CASES = [("cuda_oom", "oom", "memory"), ("illegal_address", "crashed", "illegal memory")]
GPU = torch.cuda.is_available()
if GPU:
    CASES += GPU_CASES


@pytest.fixture(scope="module")
def executor():
    with LocalExecutor("faults", {}, workers=1, timeout_s=4) as ex:
        yield ex


@pytest.mark.parametrize(("fault", "state", "word"), CASES, ids=[c[0] for c in CASES])
def test_a_failing_trial_is_recorded_and_the_next_trial_works(executor, fault, state, word):
    """A trial that runs out of device or host memory, segfaults, hangs, returns a wrong
    result, diverges or raises: recorded with its state and reason; the next trial works."""
    executor.submit(1, {"fault": fault, "score": 0.5})
    (failed,) = executor.wait_any()
    assert failed.result.status.value == state, failed.result.reason
    assert word.lower() in failed.result.reason.lower()
    executor.submit(2, {"fault": "none", "score": 0.7})
    (after,) = executor.wait_any()
    assert after.result.ok and after.result.measurement.values["score"] == 0.7


@pytest.mark.skipif(GPU, reason="a GPU runs these faults for real (CASES)")
@pytest.mark.parametrize("fault", [c[0] for c in GPU_CASES])
def test_a_gpu_fault_without_a_gpu_is_infeasible(executor, fault):
    """A GPU fault (a CUDA out-of-memory, an illegal memory access) asked of a machine without
    a GPU: infeasible, the reason says why; the next trial works."""
    executor.submit(1, {"fault": fault, "score": 0.5})
    (refused,) = executor.wait_any()
    assert refused.result.status.value == "infeasible"
    assert "needs a CUDA device" in refused.result.reason
    executor.submit(2, {"fault": "none", "score": 0.7})
    (after,) = executor.wait_any()
    assert after.result.ok
