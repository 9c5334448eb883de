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
        ("matmul", {"M": 10**8, "N": 10**8}, "the problem's tensors take 149,011,743.1 GiB with"),
        ("quant-matmul", {"N": -1}, "N=-1 must be a whole number"),
    ],
)  # fmt: skip
def test_a_size_no_trial_could_run_is_refused_before_the_sweep(workload, problem, says):
    cls = get_objective(workload)
    with pytest.raises(ValueError, match=None) as refused:
        cls({**cls.default_problem({"type": "cpu"}), **problem})
    assert says in str(refused.value)


@pytest.mark.parametrize("workload", ["matmul", "quant-matmul"])
def test_a_product_whose_float64_check_outgrows_memory_is_refused_before_the_sweep(workload):
    # M=N=K=32768 bf16 on a 24-GiB CPU: A, B and C are 6 GiB, so it passed, and each trial
    # drew them, and the float64 check's copies (38 GiB in all) ran the machine out of memory
    from autotune.objectives.kernel import cuda_present, memory_bytes

    have = memory_bytes("cuda" if cuda_present() else "cpu")
    side = int((have / 12) ** 0.5)  # 6 bytes a square's element fit; with float64 copies, not
    cls = get_objective(workload)
    problem = {**cls.default_problem({"type": "cpu"}), "M": side, "N": side, "K": side}
    with pytest.raises(ValueError, match="with the float64 reference of the check, more than"):
        cls(problem)
