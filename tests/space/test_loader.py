import pytest

from autotune.space import SpaceError, load_space
from tests.cli_in_process import autotune_in_process


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


def test_a_space_names_every_file_its_includes_read_once(write_space):
    """Nested and repeated includes: each file once, in the order read, the top one not."""
    inner = write_space("parameters:\n  x: {type: int, low: 0, high: 3}\n", "inner.yaml")
    middle = write_space("include:\n  - {space: inner.yaml, prefix: 'l{i}.', repeat: 2}\n",
                         "middle.yaml")  # fmt: skip
    outer = write_space("include:\n  - {space: middle.yaml, prefix: 'm.'}\n"
                        "  - {space: inner.yaml, prefix: 'o.'}\n", "outer.yaml")  # fmt: skip
    space = load_space(outer)
    assert space.names == ["m.l0.x", "m.l1.x", "o.x"]
    assert space.includes == (str(middle.resolve()), str(inner.resolve()))
    assert load_space(inner).includes == ()


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
    # an include's problem (what a search by group runs its part at)
    (
        "include:\n  - {space: matmul.yaml, prefix: 'a.', problem: 16}\n",
        "include[0].problem: 16 is not a mapping of problem key to value",
    ),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'l{i}.', repeat: 3, "
        "problem: [{M: 1}, {M: 2}]}\n",
        "include[0].problem: a list of 2 problems for 3 copies (repeat)",
    ),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'a.', problem: {M: null}}\n",
        "include[0].problem.M: null is not a number, text or bool",
    ),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'l{i}.', repeat: 2, problem: [{M: 1}, [2]]}\n",
        "include[0].problem[1]: [2] is not a mapping",
    ),
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
    # fuzz cases of session 48: each was accepted and then misbehaved, or raised a traceback
    (
        "parameters:\n  c: {type: categorical, choices: [no, yes, 0, 1]}\n",
        "parameters.c.choices: False and 0 compare equal, so only one of them is ever sampled",
    ),
    ("parameters:\n  c: {type: categorical, choices: [1, true, 0, false]}\n", "1 and True compare"),
    ("parameters:\n  c: {type: categorical, choices: [2, 2.0]}\n", "2 and 2.0 compare equal"),
    (
        "parameters:\n  x: {type: float, low: 0, high: 1, step: 0.3}\n",
        "parameters.x.step: the range 0.0..1.0 is not a multiple of 0.3",
    ),
    ("parameters:\n  x: {type: float, low: 0, high: 1, step: -0.5}\n", "x.step: must be positive"),
    # session 53: Optuna cut high to 1 (and 10 to 9), with a UserWarning on stderr per trial
    (
        "parameters:\n  x: {type: int, low: 1, high: 4, step: 10}\n",
        "parameters.x.step: the range 1..4 is not a multiple of 10",
    ),
    ("parameters:\n  x: {type: int, low: 1, high: 10, step: 4}\n", "1..10 is not a multiple"),
    ("parameters:\n  x: {type: float, low: 0, high: 1e30, step: 1}\n", "x.step: 1.0 is too fine"),
    (
        "parameters:\n  x: {type: float, low: 0.1, high: 1, step: 0.1, log: true}\n",
        "parameters.x: a log-scaled parameter takes no step",
    ),
    (
        "parameters:\n  x: {type: pow2, low: 1, high: 8, step: 2}\n",
        "parameters.x: a pow2 parameter takes no 'step' (it takes type, low, high, when)",
    ),
    ("parameters:\n  x: {type: bool, low: 1}\n", "parameters.x: a bool parameter takes no 'low'"),
    (
        "parameters:\n  x: {type: categorical, choices: [a], high: 2}\n",
        "parameters.x: a categorical parameter takes no 'high'",
    ),
    ("parameters:\n  x: {type: int, low: 1, high: 2, choices: [1]}\n", "takes no 'choices'"),
    (
        "parameters:\n  a: &b {type: int, low: 1, high: 8}\n  d: {<<: *b, high: 4, high: 2}\n",
        "line 3: invalid YAML: key 'high' given twice",
    ),
    ("parameters:\n  d: {<<: {low: 1, low: 2}, type: int, high: 4}\n", "key 'low' given twice"),
    ("parameters:\n  '': {type: int, low: 1, high: 2}\n", "'' is not a name an expression"),
    ("parameters:\n  null: {type: int, low: 1, high: 2}\n", "null is not a name an expression"),
    (
        'parameters:\n  x: {type: int, low: 1, high: 2}\nconstraints:\n  c: "'
        + "-" * 1900
        + 'x > 0"\n',
        "nested too deeply",
    ),
    # huge integers: Optuna reads a space's numbers as floats (an OverflowError mid-sweep, or a
    # traceback while loading), exact for an int up to 2**53 ('is not an integer' above it)
    (
        "parameters:\n  A: {type: categorical, choices: [1, 1" + "0" * 400 + "]}\n",
        "parameters.A.choices: an integer of about 401 digits is too large: Optuna reads it as a "
        "float",
    ),
    (
        "parameters:\n  A: {type: categorical, choices: [1, 0x1" + "0" * 5000 + "]}\n",
        "parameters.A.choices: an integer of about 6021 digits is too large",
    ),
    (
        "parameters:\n  A: {type: int, low: 0, high: 1" + "0" * 400 + "}\n",
        "parameters.A.high: an integer of about 401 digits is outside -2**53..2**53",
    ),
    (
        "parameters:\n  A: {type: int, low: 0, high: 9007199254740993}\n",
        "parameters.A.high: 9007199254740993 is outside -2**53..2**53, the integers Optuna holds "
        "exactly",
    ),
    ("parameters:\n  A: {type: pow2, low: 1, high: 9223372036854775808}\n", "A.high: 92233720"),
    (
        "parameters:\n  A: {type: int, low: -9223372036854775807, high: 0}\n",
        "A.low: -9223372036854775807 is outside",
    ),
    ("parameters:\n  A: {type: int, low: 0, high: 0, step: 1" + "0" * 400 + "}\n", "A.step: an"),
    ("parameters:\n  A: {type: float, low: 0, high: 1" + "0" * 400 + "}\n", "A.high: an integ"),
    ("parameters:\n  A: {type: int, low: 0, high: 1" + "0" * 5000 + "}\n", "invalid YAML: Exce"),
    ("parameters:\n  A: {type: int, low: 0, high: 2024-13-45}\n", "invalid YAML: month must"),
    (
        "include:\n  - {space: matmul.yaml, prefix: 'l{i}.', repeat: 0x1" + "0" * 5000 + "}\n",
        "include[0].repeat: an integer of about 6021 digits is not within 0..1024",
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


NULLS = [
    ("include:\n  - {space: matmul.yaml, prefix: 'a.', problem: {M: 1, N: null}}\n",
     "include[0].problem.N: null is not a number, text or bool"),
    ("include:\n  - {space: matmul.yaml, prefix: 'a.', problem: [~]}\n",
     "include[0].problem[0]: null is not a mapping of problem key to value"),
    ("include:\n  - {space: matmul.yaml, prefix: 'a.', problem: {null: 1}}\n",
     "include[0].problem: the key null is not a problem key's name"),
    ("include:\n  - {space: matmul.yaml, prefix: null}\n",
     "include[0].prefix: must be text, not null"),
    ("include:\n  - {space: matmul.yaml, prefix: 'a.', repeat: null}\n",
     "include[0].repeat: null is not a number"),
    ("parameters:\n  null: {type: int, low: 1, high: 2}\n",
     "parameters.null: null is not a name an expression can read"),
    ("parameters:\n  x: {type: categorical, choices: [1, null]}\n",
     "parameters.x.choices: null is not a number, text or bool"),
    ("parameters:\n  x: {type: int, low: null, high: 2}\n",
     "parameters.x.low: null is not a number"),
    ("parameters:\n  x: {type: null}\n", "parameters.x.type: null is not one of int"),
    ("parameters:\n  x: {type: int, low: 1, high: 2, log: null}\n",
     "parameters.x.log: null is not true or false"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), NULLS)
def test_a_null_in_a_space_file_is_named_as_written_not_as_pythons_none(write_space, text, message):
    # 'include[2].problem.N: None is not a number, text or bool' for N: null
    path = write_space(text, "nulls.yaml")
    with pytest.raises(SpaceError) as info:
        load_space(path)
    assert f"nulls.yaml: {message}" in str(info.value) and "None" not in str(info.value)


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
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"name: x\nparameters:\n  a: {type: categorical, choices: [caf\xe9]}\n")
    with pytest.raises(SpaceError, match=r"latin1.yaml: not UTF-8 text \(byte 58 is 0xe9\)"):
        load_space(path)
    done = autotune_in_process("tune", "--space", str(path), "--storage",
                               f"sqlite:///{tmp_path / 'a.db'}")  # fmt: skip
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


def test_a_float_step_is_kept_and_sampled_on_its_grid(write_space):
    # a step of 0.1 was refused as not an integer; a step of 2 was accepted and then ignored
    import optuna

    path = write_space(
        "parameters:\n  f: {type: float, low: 0, high: 1, step: 0.1}\n"
        "  g: {type: float, low: 0, high: 10, step: 2}\n"
    )
    space = load_space(path)
    f, g = space["f"], space["g"]
    assert g.values() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0] and g.count() == 6
    assert f.count() == 11 and f.values()[3] == 0.1 * 3 and f.values()[-1] == 1.0
    assert f.distribution() == optuna.distributions.FloatDistribution(0.0, 1.0, step=0.1)
    assert g.contains(4.0) and g.contains(4) and not g.contains(3.83) and not g.contains(12.0)
    assert space.grid_size() == 66 and len(space.grid_search_space()["f"]) == 11
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    drawn = [space.sample(study.ask()) for _ in range(50)]
    assert all(c["f"] in f.values() and c["g"] in g.values() for c in drawn)
    assert len({c["g"] for c in drawn}) == 6


def test_choices_that_differ_as_text_are_kept(write_space):
    path = write_space("parameters:\n  c: {type: categorical, choices: ['no', 'yes', 0, 1]}\n")
    assert load_space(path)["c"].values() == ["no", "yes", 0, 1]


def test_a_yaml_merge_key_is_read_and_the_keys_after_it_win(write_space):
    # it raised "could not determine a constructor for the tag ...merge" (a fuzz case)
    path = write_space(
        "parameters:\n  a: &b {type: int, low: 1, high: 8}\n  d: {<<: *b, high: 4}\n"
        "  e:\n    <<: [*b, {type: float, low: 2.0}]\n    high: 3\n"
    )
    space = load_space(path)
    assert space["a"].values() == list(range(1, 9)) and space["d"].values() == [1, 2, 3, 4]
    assert (space["e"].kind, space["e"].low, space["e"].high) == ("int", 1, 3)  # the first wins


def test_a_parameter_named_like_a_problem_key_that_an_expression_reads_is_refused(write_space):
    # the parameter hid the problem's N from the constraint, whose error then named N=1024
    path = write_space(
        "parameters:\n  N: {type: pow2, low: 1, high: 8}\n"
        "  x: {type: int, low: 1, high: 4, when: 'problem.N > 1'}\nconstraints:\n  fits: x <= N\n",
        "shadow.yaml",
    )
    space = load_space(path)
    with pytest.raises(SpaceError) as info:
        space.validate_names({"N": 1024, "M": 8})
    assert str(info.value) == (
        f"{path}: parameters.N: shares its name with the problem key 'N' (1024), which "
        "constraints.fits reads as the parameter; rename the parameter"
    )
    space.validate_names({"M": 8})
    included = write_space("include:\n  - {space: shadow.yaml, prefix: 'l0.'}\n", "outer.yaml")
    with pytest.raises(SpaceError, match=r"parameters.l0.N: shares its name .* 'N' \(1024\)"):
        load_space(included).validate_names({"N": 1024})
    when = write_space(
        "parameters:\n  N: {type: pow2, low: 1, high: 8}\n"
        "  x: {type: int, low: 1, high: 4, when: 'N > 2'}\n"
    )
    with pytest.raises(SpaceError, match=r"'N' \(1024\), which parameters.x.when reads as"):
        load_space(when).validate_names({"N": 1024})
    # one that no expression reads overrides the problem's value (train-step's loss_scale_init)
    fp16 = write_space(
        "parameters:\n  precision: {type: categorical, choices: [bf16, fp16]}\n"
        "  loss_scale_init: {type: pow2, low: 256, high: 65536, when: \"precision == 'fp16'\"}\n"
    )
    load_space(fp16).validate_names({"loss_scale_init": 65536.0})


def test_an_include_is_read_next_to_the_including_file_from_any_folder(tmp_path, monkeypatch):
    # a sub.yaml in the working folder was read before the one beside top.yaml: a sweep run from
    # one folder swept l.Y, and its resume from another found a space without it
    spaces, elsewhere = tmp_path / "spaces", tmp_path / "elsewhere"
    spaces.mkdir()
    elsewhere.mkdir()
    (spaces / "sub.yaml").write_text("parameters:\n  X: {type: int, low: 0, high: 3}\n")
    (elsewhere / "sub.yaml").write_text("parameters:\n  Y: {type: int, low: 0, high: 3}\n")
    (spaces / "top.yaml").write_text("include:\n  - {space: sub.yaml, prefix: 'l.'}\n")
    (elsewhere / "only_here.yaml").write_text("parameters:\n  Z: {type: bool}\n")
    (spaces / "lost.yaml").write_text("include:\n  - {space: only_here.yaml}\n")
    monkeypatch.chdir(elsewhere)
    space = load_space("../spaces/top.yaml")
    assert space.names == ["l.X"]
    assert space.includes == (str((spaces / "sub.yaml").resolve()),)
    assert load_space("sub.yaml").names == ["Y"]  # a space given on its own: from the folder
    with pytest.raises(SpaceError, match=r"lost.yaml: include\[0\].space: only_here.yaml: space "
                                         r"file not found \(looked next to"):  # fmt: skip
        load_space("../spaces/lost.yaml")


def test_the_largest_integers_optuna_holds_are_taken(write_space):
    path = write_space(
        "parameters:\n  A: {type: int, low: -9007199254740992, high: 9007199254740992}\n"
        "  B: {type: pow2, low: 1, high: 9007199254740992}\n"
        "  C: {type: categorical, choices: [1, 1" + "0" * 300 + "]}\n"
    )
    space = load_space(path)
    assert (space["A"].low, space["A"].high, space["B"].high) == (-(2**53), 2**53, 2**53)
    assert space["C"].choices == [1, 10**300]


def test_a_huge_categorical_choice_is_refused_before_a_study_is_stored(tmp_path):
    # the sweep began, Optuna's OverflowError ended it in a traceback, and the study kept one
    # interrupted trial
    (tmp_path / "space.yaml").write_text(
        "parameters:\n  A: {type: categorical, choices: [1, 1" + "0" * 400 + "]}\n"
    )
    db = tmp_path / "a.db"
    space = str(tmp_path / "space.yaml")
    done = autotune_in_process("tune", "faults", "--trials", "2", "--space", space, "--storage",
                               f"sqlite:///{db}")  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1 and "parameters.A.choices: an integer" in done.stderr
    assert not db.exists()


def test_a_space_past_max_params_is_refused_as_its_includes_expand(write_space, monkeypatch):
    from autotune.space import loader

    monkeypatch.setattr(loader, "MAX_PARAMS", 100)
    write_space("parameters:\n  b: {type: bool}\nconstraints:\n  c: b or not b\n", "leaf.yaml")
    write_space("include:\n  - {space: leaf.yaml, prefix: 'l{i}.', repeat: 20}\n", "mid.yaml")
    top = write_space("include:\n  - {space: mid.yaml, prefix: 'm{i}.', repeat: 20}\n", "top.yaml")
    with pytest.raises(SpaceError) as info:
        load_space(top)
    assert str(info.value) == (
        f"{top}: include[0]: the space expands to 400 parameters, more than 100 (nested or "
        "repeated includes?)"
    )
    assert len(load_space(top.parent / "mid.yaml")) == 20
    many = write_space("include:\n  - {space: leaf.yaml, prefix: 'l{i}.', repeat: 101}\n")
    with pytest.raises(SpaceError, match=r"include\[0\]: the space expands to 101 parameters"):
        load_space(many)
    write_space(
        "parameters:\n  b: {type: bool}\nconstraints:\n"
        + "".join(f"  c{i}: b or not b\n" for i in range(60)),
        "constrained.yaml",
    )
    twice = write_space("include:\n  - {space: constrained.yaml, prefix: 'l{i}.', repeat: 2}\n")
    with pytest.raises(SpaceError, match="the space expands to 120 constraints, more than 100"):
        load_space(twice)


def test_nested_repeated_includes_are_refused_at_once(tmp_path):
    # 1024 x 1024 layers of one bool: the load ran until killed (a process, which the timeout
    # ends if it runs on)
    import subprocess
    import sys

    (tmp_path / "leaf.yaml").write_text("parameters:\n  b: {type: bool}\n")
    (tmp_path / "mid.yaml").write_text(
        "include:\n  - {space: leaf.yaml, prefix: 'l{i}.', repeat: 1024}\n"
    )
    (tmp_path / "top.yaml").write_text(
        "include:\n  - {space: mid.yaml, prefix: 'm{i}.', repeat: 1024}\n"
    )
    db = tmp_path / "a.db"
    command = [sys.executable, "-m", "autotune.cli", "tune", "faults", "--trials", "2",
               "--space", str(tmp_path / "top.yaml"), "--storage", f"sqlite:///{db}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "top.yaml: include[0]: the space expands to 1048576 parameters" in done.stderr
    assert not db.exists()
