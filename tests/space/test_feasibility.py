"""A space's constraints checked for any feasible config before a sweep: enumerated where the
space is small and finite, drawn from where it is not."""

import time
from pathlib import Path

import pytest

from autotune.space import SpaceError, load_space
from autotune.space.feasibility import check_satisfiable


def _space(tmp_path: Path, parameters: str, constraints: str):
    path = tmp_path / "space.yaml"
    path.write_text(f"parameters:\n{parameters}constraints:\n{constraints}")
    return load_space(path)


FLOAT = "  x: {type: float, low: 0.0, high: 1.0}\n  n: {type: int, low: 1, high: 8}\n"
WIDE = "".join(f"  p{i}: {{type: int, low: 0, high: 99}}\n" for i in range(6))  # 10^12 configs


@pytest.mark.parametrize("constraint", ["x > 2", "x < 0", "n > 8 and x >= 0"])
def test_a_float_space_that_no_config_satisfies_is_refused_naming_its_constraint(
    tmp_path, constraint
):
    space = _space(tmp_path, FLOAT, f"  - {constraint}\n  - n >= 1\n")
    with pytest.raises(SpaceError, match=f"'{constraint}' held for none of 20000 configs"):
        check_satisfiable(space, {}, {})


@pytest.mark.parametrize("constraint", ["x >= 1.0", "x <= 0", "x > 0.9999", "n == 8 and x < 1e-4"])
def test_a_float_space_with_a_thin_or_edge_feasible_region_is_accepted(tmp_path, constraint):
    check_satisfiable(_space(tmp_path, FLOAT, f"  - {constraint}\n"), {}, {})


def test_constraints_that_each_admit_configs_but_not_together_are_named_together(tmp_path):
    space = _space(tmp_path, FLOAT, "  low: x < 0.5\n  high: x > 0.5\n")
    with pytest.raises(SpaceError, match=r"the constraints \(low, high\) together held for none"):
        check_satisfiable(space, {}, {})


def test_a_drawn_space_that_admits_no_config_names_the_problem_values_it_read(tmp_path):
    # `x > problem.M` held for none at M=2, and the message did not say M was 2
    space = _space(tmp_path, FLOAT, "  over: x > problem.M\n")
    with pytest.raises(SpaceError, match=r"'x > problem.M' held for none .* at problem.M=2: "):
        check_satisfiable(space, {"M": 2}, {})
    both = _space(tmp_path, FLOAT, "  low: x < problem.lo\n  high: x > problem.hi\n")
    with pytest.raises(SpaceError, match=r"\(low, high\) together held for none .* included\) "
                       r"at problem.hi=0.6, problem.lo=0.4: "):  # fmt: skip
        check_satisfiable(both, {"lo": 0.4, "hi": 0.6}, {})


def test_a_finite_space_too_large_to_enumerate_is_drawn_from_in_seconds(tmp_path):
    started = time.monotonic()
    with pytest.raises(SpaceError, match="'p0 \\+ p1 > 198 \\+ p2 \\+ 1' held for none"):
        check_satisfiable(_space(tmp_path, WIDE, "  - p0 + p1 > 198 + p2 + 1\n"), {}, {})
    check_satisfiable(_space(tmp_path, WIDE, "  - p0 + p1 >= 198\n"), {}, {})  # both at high
    assert time.monotonic() - started < 60  # a generous bound on a loaded CI machine


def test_a_small_finite_space_is_still_proven_empty_by_enumeration(tmp_path):
    space = _space(tmp_path, "  n: {type: int, low: 1, high: 8}\n", "  - n > 8\n")
    with pytest.raises(SpaceError, match="'n > 8' admits no config"):
        check_satisfiable(space, {}, {})


def test_a_space_of_many_independent_groups_is_checked_group_by_group(tmp_path):
    # 40 groups, each feasible in 1 of its 64 configs: one draw of all 80 parameters would
    # satisfy every group with probability 64^-40, yet each group alone is easily proven
    eight = "{type: int, low: 0, high: 7}"
    params = "".join(f"  a{i}: {eight}\n  b{i}: {eight}\n" for i in range(40))
    rules = "".join(f"  g{i}: a{i} == 3 and b{i} == 5\n" for i in range(40))
    check_satisfiable(_space(tmp_path, params, rules), {}, {})
    with pytest.raises(SpaceError, match="constraints.g7: 'a7 == 9 and b7 == 5' admits no config"):
        check_satisfiable(_space(tmp_path, params, rules.replace("a7 == 3", "a7 == 9")), {}, {})


def test_the_builtin_composed_space_of_hundreds_of_parameters_is_accepted():
    space = load_space("llm_projections")
    assert len(space.params) > 200
    device = {"type": "cuda", "max_shared_memory": 232448, "compute_capability": 9.0}
    check_satisfiable(space, {}, device)


SMALL = "  x: {type: int, low: 1, high: 4}\n  y: {type: int, low: 1, high: 4}\n"


def test_a_constraint_undefined_at_some_configs_rules_out_those_configs_only(tmp_path):
    # x / (y - 2) at y=2 raised ZeroDivisionError: the whole space was refused (or, in a space
    # too large to enumerate, the sweep ended when it met such a config, at its untuned default
    # on every resume)
    space = _space(tmp_path, SMALL, "  c: x / (y - 2) > 0\n")
    check_satisfiable(space, {}, {})
    assert sorted({c["y"] for c in space.grid({}, {})}) == [3, 4]
    assert space.violations({"x": 1, "y": 2}) == ["c"]
    wide = _space(tmp_path, WIDE, "  c: 1 / (p0 - 37) < 1000\n")
    check_satisfiable(wide, {}, {})
    assert wide.violations({f"p{i}": 37 for i in range(6)}) == ["c"]


@pytest.mark.parametrize("parameters", [SMALL, WIDE])
def test_a_constraint_undefined_everywhere_is_refused_naming_its_failure(tmp_path, parameters):
    # undefined at every config for this problem: the failure is what to fix, not "admits none"
    space = _space(tmp_path, parameters, "  c: log2(M) >= 1\n")
    with pytest.raises(SpaceError, match=r"constraints.c: .*failed: ValueError: .* at M=0"):
        check_satisfiable(space, {"M": 0}, {})
