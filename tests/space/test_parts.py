"""The parts of a composed space: each include's copies with their prefix, file and problem."""

from autotune.space.parts import composed_parts


def test_an_include_gives_the_problem_of_each_copy(write_space):
    """One mapping for every copy of a repeated include, or a list of one per copy."""
    path = write_space(
        "include:\n  - {space: matmul.yaml, prefix: 'a{i}.', repeat: 2, problem: {M: 16}}\n"
        "  - {space: matmul.yaml, prefix: 'b{i}.', repeat: 2, problem: [{M: 1}, {M: 2048}]}\n"
        "  - {space: matmul.yaml, prefix: 'c.'}\n",
        "top.yaml",
    )
    parts = composed_parts(path)
    assert [(p.prefix, p.problem) for p in parts] == [
        ("a0.", {"M": 16}), ("a1.", {"M": 16}), ("b0.", {"M": 1}), ("b1.", {"M": 2048}),
        ("c.", {}),
    ]  # fmt: skip
    assert {p.space.name for p in parts} == {"matmul.yaml"}
    assert parts[2].where == f"{path}: include[1]"
