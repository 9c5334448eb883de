"""Search by group on the composed 100+-parameter replay space (REPLAY of H200 landscapes)."""

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*; last, so that
# the repository's kernels/ never stands in for the installed `kernels` package

from autotune.driver.grouped import Group, JointKnobs, search_by_group  # noqa: E402
from autotune.space import Param, Space  # noqa: E402
from benchmarks.search.composed import ComposedProblem, flat_curve, grouped_curve  # noqa: E402


def test_groups_are_tuned_on_their_own_sub_metric_and_the_joint_knobs_last():
    tile = Space("tile", [Param("x", "pow2", low=1, high=64)])
    knob = Space("knob", [Param("k", "int", low=0, high=3)])
    seen_by_joint = []

    def whole(configs, knobs):
        seen_by_joint.append(configs)
        return -abs(knobs["k"] - 2)

    result = search_by_group(
        [Group("a", tile, lambda c: -abs(c["x"] - 8)), Group("b", tile, lambda c: -c["x"])],
        per_group=7, sampler="random", seed=0,
        joint=JointKnobs(knob, whole, trials=4),
    )  # fmt: skip
    assert result.configs == {"a": {"x": 8}, "b": {"x": 1}} and result.joint == {"k": 2}
    assert all(c == result.configs for c in seen_by_joint)  # the groups at their best
    assert result.measurements == 7 + 7 + 4
    assert [m for m, _ in result.progress] == [2 * r for r in range(1, 8)]


def test_by_group_beats_flat_tpe_at_the_same_number_of_kernel_measurements():
    problem = ComposedProblem.build()
    assert len(problem.flat_space().params) >= 100
    grouped, _ = grouped_curve(problem, seed=0, per_group=15, joint_trials=10)
    measurements, by_group = grouped[-1]
    flat = flat_curve(problem, "tpe", seed=0, trials=measurements // (len(problem.groups) + 1))
    assert by_group > flat[-1][1] + 0.03
    assert by_group > 0.9


def test_a_composed_yaml_splits_into_its_included_spaces_with_their_constraints():
    from autotune.driver.grouped import split_by_prefix
    from autotune.space import load_space

    hopper = {"type": "cuda", "max_shared_memory": 232448}
    problem = {"M": 64, "N": 4096, "K": 4096, "dtype": "bf16"}
    groups, joint = split_by_prefix(load_space("llm_projections"))
    assert len(groups) == 32 and not joint.params
    one = list(groups["layer3.down."].grid(problem, hopper))
    assert len(one) == len(list(load_space("matmul").grid(problem, hopper)))


def test_two_groups_of_one_name_are_refused_not_one_dropped():
    # the second group's search replaced the first's: it was never measured, nor returned
    import pytest

    part = Space("tile", [Param("x", "pow2", low=1, high=64)])
    groups = [Group("qkv", part, lambda c: -c["x"]), Group("qkv", part, lambda c: c["x"])]
    with pytest.raises(ValueError, match="group 'qkv' is named twice"):
        search_by_group(groups, per_group=2, sampler="random", seed=0)


def test_a_constraint_across_includes_is_refused_by_the_split_and_named_by_the_check(tmp_path):
    # no group's search checked it: the best configs broke it (64 + 64 > 24), silently
    import pytest

    from autotune.driver.grouped import split_by_prefix
    from autotune.space import SpaceError, load_space

    (tmp_path / "part.yaml").write_text("parameters:\n  x: {type: pow2, low: 1, high: 64}\n")
    (tmp_path / "comp.yaml").write_text(
        'include:\n  - {space: part.yaml, prefix: "g{i}_", repeat: 2}\n'
        'constraints:\n  across: "g0_x + g1_x <= 24"\n'
    )
    space = load_space(tmp_path / "comp.yaml")
    with pytest.raises(SpaceError, match=r"constraints.across: reads 'g0_x', a parameter of an"):
        split_by_prefix(space)
    with pytest.raises(
        SpaceError,
        match=r"constraints.across: 'g0_x' is a parameter of include "
        r"'g0_'; a constraint of the top level reads only",
    ):
        space.validate_names({})
