import pytest

from autotune.space.expr import Expression, ExpressionError


def test_arithmetic_comparison_and_namespaces():
    expr = Expression("(BM * BK + BK * BN) * 2 * stages <= device.max_shared_memory")
    env = {"BM": 128, "BN": 256, "BK": 64, "stages": 4, "device": {"max_shared_memory": 232448}}
    # (128*64 + 64*256) * 2 bytes * 4 stages = 196608 <= 232448
    assert expr.evaluate(env) is True
    env["stages"] = 5  # 245760 > 232448
    assert expr.evaluate(env) is False
    env["stages"] = 3
    assert expr.evaluate(env) is True


def test_shared_memory_arithmetic_is_exact():
    expr = Expression("(BM * BK + BK * BN) * 2 * stages")
    assert expr.evaluate({"BM": 128, "BN": 256, "BK": 64, "stages": 4}) == 196608


def test_membership_functions_and_conditionals():
    assert Expression("precision in ('bf16', 'fp16')").evaluate({"precision": "bf16"})
    assert not Expression("precision not in ['bf16']").evaluate({"precision": "bf16"})
    assert Expression("cdiv(M, 128) * 128 >= M").evaluate({"M": 300})
    assert Expression("is_pow2(x) and max(x, 3) == x").evaluate({"x": 64})
    assert Expression("1 if a > 2 else 0").evaluate({"a": 3}) == 1
    assert Expression("global_batch % micro_batch == 0").evaluate(
        {"global_batch": 32, "micro_batch": 8}
    )


@pytest.mark.parametrize(
    "source",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "x.__class__",
        "[c for c in x]",
        "lambda: 1",
        "(x := 3)",
        "foo.bar",
        "x[0]",
    ],
)
def test_rejects_anything_beyond_pure_expressions(source):
    with pytest.raises(ExpressionError):
        Expression(source)


def test_syntax_error_and_unknown_name_and_runtime_error():
    with pytest.raises(ExpressionError, match="invalid syntax"):
        Expression("a <=")
    with pytest.raises(ExpressionError, match="unknown name 'b'"):
        Expression("a + b").evaluate({"a": 1})
    with pytest.raises(ExpressionError, match="ZeroDivisionError"):
        Expression("a // b").evaluate({"a": 1, "b": 0})
    with pytest.raises(ExpressionError, match="too large"):
        Expression("2 ** n").evaluate({"n": 10**6})


def test_a_power_too_large_to_hold_is_refused_not_computed():
    # ((10**64)**64)**64 would take minutes and gigabytes: each exponent alone is allowed
    with pytest.raises(ExpressionError, match="too large"):
        Expression("((10**64)**64)**64 > 1").evaluate({})
    assert Expression("2**64 > 1").evaluate({})
