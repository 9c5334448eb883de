import pytest

from autotune.space import SpaceError, load_space


def test_builtin_matmul_space_has_the_tunables_and_constraints():
    space = load_space("matmul")
    assert space.names == ["BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SPLIT_K", "SCHEDULE",
                           "EPILOGUE_SUBTILE", "num_warps", "num_stages"]  # fmt: skip
    assert space["BLOCK_M"].values() == [16, 32, 64, 128, 256]
    assert space["num_stages"].values() == [2, 3, 4, 5, 6]
    assert space["SCHEDULE"].values() == ["tiled", "persistent", "persistent_flat", "stream_k"]
    assert space.grid_size() == 24000 * 2  # the subtile is on or off (persistent schedules)
    assert {c.name for c in space.constraints} >= {"shared_memory", "accumulator_registers",
                                                  "split_k_skinny", "tma_alignment"}  # fmt: skip


def test_every_parameter_kind(write_space):
    path = write_space(
        """
parameters:
  tiles: {type: pow2, low: 16, high: 64}
  n: {type: int, low: 2, high: 10, step: 4}
  lr: {type: float, low: 1e-5, high: 1e-1, log: true}
  mode: {type: categorical, choices: [a, b]}
  flag: {type: bool}
"""
    )
    space = load_space(path)
    assert space["tiles"].values() == [16, 32, 64]
    assert space["n"].values() == [2, 6, 10]
    assert space["lr"].low == pytest.approx(1e-5) and space["lr"].log
    assert space["flag"].values() == [False, True]
    assert space.name == "space"


def test_composition_prefixes_and_repeats_reach_hundreds_of_parameters():
    space = load_space("llm_projections")
    assert len(space) == 288
    assert "layer7.down.num_stages" in space.names
    # each included constraint reads the parameters of its own prefix
    config = {n: space[n].values()[0] for n in space.names}
    assert space.violations(
        config, {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}, {"max_shared_memory": 1}
    )
    constraint_names = [c.name for c in space.constraints]
    assert "layer3.up.shared_memory" in constraint_names


def test_included_constraint_sees_its_own_parameters(write_space, tmp_path):
    write_space(
        "parameters:\n  x: {type: int, low: 0, high: 3}\nconstraints:\n  small: x < 2\n",
        "inner.yaml",
    )
    outer = write_space(
        "include:\n  - {space: inner.yaml, prefix: 'a.'}\n  - {space: inner.yaml, prefix: 'b.'}\n",
        "outer.yaml",
    )
    space = load_space(outer)
    assert space.names == ["a.x", "b.x"]
    assert space.violations({"a.x": 1, "b.x": 3}) == ["b.small"]


BAD_FILES = [
    ("parameters: [1, 2", "invalid YAML"),
    ("- just\n- a list\n", "expected a mapping at the top level"),
    ("parameters:\n  x: {type: integer, low: 1, high: 2}\n", "parameters.x.type"),
    ("parameters:\n  x: {type: int, low: 5, high: 2}\n", "parameters.x: low 5 is greater"),
    ("parameters:\n  x: {type: int, low: 1}\n", "parameters.x: missing 'high'"),
    ("parameters:\n  x: {type: int, low: one, high: 2}\n", "parameters.x.low"),
    # YAML's not-a-number and infinity (a fuzz case: they raised ValueError/OverflowError)
    ("parameters:\n  x: {type: int, low: .nan, high: 2}\n", "x.low: nan is not a finite"),
    ("parameters:\n  x: {type: float, low: 0, high: .inf}\n", "x.high: inf is not a finite"),
    ("parameters:\n  x: {type: pow2, low: 12, high: 64}\n", "parameters.x.low: 12 is not a power"),
    ("parameters:\n  x: {type: categorical, choices: []}\n", "parameters.x.choices"),
    ("parameters:\n  x: {type: float, low: 0, high: 1, log: true}\n", "parameters.x.low"),
    ("parameters:\n  x: {type: int, low: 1, high: 2, size: 3}\n", "parameters.x: unknown key"),
    (
        'parameters:\n  x: {type: int, low: 1, high: 2}\nconstraints:\n  c: "x <"\n',
        "constraints.c: invalid syntax",
    ),
    (
        "parameters:\n  x: {type: int, low: 1, high: 2}\nconstraints:\n  c: \"__import__('os')\"\n",
        "constraints.c: only these functions",
    ),
    ("parameters:\n  x: {type: int, low: 1, high: 2, when: 'x ='}\n", "parameters.x.when"),
    ("parameters: {}\n", "the space has no parameters"),
    ("paramters:\n  x: {type: int, low: 1, high: 2}\n", "unknown key 'paramters'"),
    ("include:\n  - {space: nowhere.yaml}\n", "include[0].space"),
    ("include:\n  - {space: matmul.yaml, repeat: 2}\n", "include[0].prefix"),
    ("include:\n  - {space: matmul.yaml}\n  - {space: matmul.yaml}\n", "defined twice"),
    # fuzz cases of session 46: each was accepted silently or raised a traceback
    (
        "parameters:\n  x: {type: int, low: 1, high: 2}\n  x: {type: int, low: 1, high: 9}\n",
        "line 3: invalid YAML: key 'x' given twice",
    ),
    (
        'parameters:\n  x: {type: int, low: 1, high: 4}\nconstraints:\n  c: "x > 9"\n'
        '  c: "x > 0"\n',
        "key 'c' given twice",
    ),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'l{i}.', repeats: 8}\n",
        "include[0]: unknown key 'repeats'",
    ),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'l{i}.', repeat: -3}\n",
        "include[0].repeat: -3 is not within 0..1024",
    ),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'l{i}.', repeat: 100000000}\n",
        "include[0].repeat: 100000000 is not within",
    ),
    ("include:\n  - {space: matmul.yaml, prefix: null}\n", "include[0].prefix: must be text"),
    ("include:\n  - {space: 5, prefix: 'a.'}\n", "include[0].space: must be text"),
    (
        "parameters:\n  x: {type: categorical, choices: [[1, 2], [3]]}\n",
        "x.choices: [1, 2] is not a number, text or bool",
    ),
    ("parameters:\n  x: {type: float, low: -1e308, high: 1e308}\n", "is too wide to sample"),
    (
        'parameters:\n  x: {type: int, low: 1, high: 64, log: "false"}\n',
        "x.log: 'false' is not true or false",
    ),
    (
        "parameters:\n  x: {type: int, low: 1, high: 64, step: 4, log: true}\n",
        "a log-scaled parameter takes no step",
    ),
    ("parameters:\n  max: {type: int, low: 1, high: 2}\n", "'max' is taken by the expression"),
    ("parameters:\n  device: {type: int, low: 1, high: 2}\n", "'device' is taken by the"),
    ("parameters:\n  \ufb01: {type: int, low: 1, high: 2}\n", "reads as 'fi' in an expression"),
    ("parameters:\n  a.b: {type: int, low: 1, high: 2}\n", "'a.b' is not a name an expression"),
    ("parameters:\n  '': {type: int, low: 1, high: 2}\n", "'' is not a name an expression"),
    ("parameters:\n  null: {type: int, low: 1, high: 2}\n", "None is not a name an expression"),
    (
        'parameters:\n  x: {type: int, low: 1, high: 2}\nconstraints:\n  c: "'
        + "-" * 1900
        + 'x > 0"\n',
        "nested too deeply",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_bad_files_name_the_file_and_the_key(write_space, text, message):
    path = write_space(text, "bad.yaml")
    with pytest.raises(SpaceError) as info:
        load_space(path)
    assert message in str(info.value)
    assert "bad.yaml" in str(info.value)
    assert "\n" not in str(info.value)


def test_include_cycle_is_reported(write_space):
    write_space("include:\n  - {space: b.yaml, prefix: 'b.'}\n", "a.yaml")
    path = write_space("include:\n  - {space: a.yaml, prefix: 'a.'}\n", "b.yaml")
    with pytest.raises(SpaceError, match="include cycle"):
        load_space(path)


def test_missing_file():
    with pytest.raises(SpaceError, match="not found"):
        load_space("/nonexistent/space.yaml")


def test_unknown_names_found_once_the_problem_is_known(write_space):
    path = write_space(
        "parameters:\n  mb: {type: pow2, low: 1, high: 8}\n"
        "  ls: {type: float, low: 1, high: 2, when: 'precison == 1'}\n"
    )
    with pytest.raises(SpaceError, match=r"parameters.ls.when: unknown name 'precison'"):
        load_space(path).validate_names({"global_batch": 8})
    path = write_space(
        "parameters:\n  mb: {type: pow2, low: 1, high: 8}\n"
        "constraints:\n  divides: global_batsh % mb == 0\n"
    )
    with pytest.raises(SpaceError, match=r"constraints.divides: unknown name 'global_batsh'"):
        load_space(path).validate_names({"global_batch": 8})
    # the shipped space reads the problem's keys (world_size, n_heads): a real problem has them
    from autotune.objectives.train_step import TrainStepObjective

    load_space("train_step").validate_names(TrainStepObjective.default_problem({"type": "cpu"}))


def test_a_space_file_that_is_not_utf8_is_one_line(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: x\nparameters:\n  a: {type: categorical, choices: [caf\xe9]}\n")
    with pytest.raises(SpaceError, match=r"latin1.yaml: not UTF-8 text \(byte 58 is 0xe9\)"):
        load_space(path)
    done = subprocess.run([sys.executable, "-m", "autotune.cli", "tune", "--space", str(path),
                           "--storage", f"sqlite:///{tmp_path / 'a.db'}"], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "not UTF-8" in done.stderr


def test_a_when_that_fails_to_evaluate_names_its_parameter(write_space):
    path = write_space(
        "parameters:\n  a: {type: int, low: 1, high: 2}\n"
        "  b: {type: int, low: 2, high: 5, when: '1 // (a - a) == 1'}\n",
        "w.yaml",
    )
    space = load_space(path)
    with pytest.raises(SpaceError, match=r"w.yaml: parameters.b.when: .*ZeroDivisionError"):
        list(space.grid({}, {}))


def test_a_folder_given_as_the_space_is_named_as_a_folder(tmp_path):
    from autotune.space import resolve_space_path

    with pytest.raises(SpaceError, match="is a folder, not a space file"):
        resolve_space_path(tmp_path)
