"""The shared kernel objective: problem sizes every kernel workload checks the same way."""

from __future__ import annotations

import pytest

from autotune.objectives import get_objective


@pytest.mark.parametrize(
    ("workload", "problem", "says"),
    [
        # a sweep of crashed trials (exit 1) or, for attention H=0, a "winner" at 0 TFLOP/s
        ("rmsnorm", {"M": 0}, "M=0 must be a whole number in 1..2147483647"),
        ("rmsnorm", {"M": -4}, "M=-4 must be a whole number"),
        ("rmsnorm", {"N": 10**22}, "N=10000000000000000000000 must be a whole number"),
        ("rmsnorm", {"eps": -1.0}, "eps=-1.0 must be 0 or more, and finite"),
        ("attention", {"H": 0}, "H=0 must be a whole number"),
        ("attention", {"H": 12, "H_KV": 8}, "H=12 must be a multiple of H_KV=8"),
        ("attention", {"S": 2**31}, "S=2147483648 must be a whole number"),
        ("matmul", {"K": 0}, "K=0 must be a whole number"),
        ("matmul", {"M": 10**8, "N": 10**8}, "the problem's tensors take 18,626,"),
        ("quant-matmul", {"N": -1}, "N=-1 must be a whole number"),
    ],
)  # fmt: skip
def test_a_size_no_trial_could_run_is_refused_before_the_sweep(workload, problem, says):
    cls = get_objective(workload)
    with pytest.raises(ValueError, match=None) as refused:
        cls({**cls.default_problem({"type": "cpu"}), **problem})
    assert says in str(refused.value)
