"""Bad input, fuzzed (hypothesis): space files of any bytes or YAML, problem strings, --slo and
--time-budget values, replay tables. Always the one-line error type the CLI turns into exit code
2 with no traceback; never another exception, never code run from a file, bounded time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotune.cli import UsageError, parse_duration, parse_problem, parse_slo
from autotune.space import SpaceError, load_space
from autotune.sweep_setup import SetupError, build_settings

FUZZ = settings(
    max_examples=150,
    deadline=2000,
    # generating YAML documents is slow on a loaded 2-core machine (stopped a run once): how
    # fast the examples come is not what these tests check
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _load(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_bytes(data)
    try:
        load_space(path)
    except SpaceError as exc:
        assert "\n" not in str(exc)  # one line


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_as_a_space_file(tmp_path, data: bytes) -> None:
    """A space file of any bytes (150 fuzzed): a one-line SpaceError or a space, nothing else."""
    _load(tmp_path, data)


yaml_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["name", "workload", "parameters", "constraints", "x"]),
        yaml_values,
        max_size=4,
    )
)
def test_any_yaml_document_as_a_space_file(tmp_path, document: dict) -> None:
    """A space file of any YAML document (150 fuzzed): a one-line SpaceError or a space."""
    import yaml

    _load(tmp_path, yaml.safe_dump(document).encode())


@FUZZ
@given(
    st.dictionaries(
        st.text(min_size=1, max_size=6),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["int", "pow2", "float", "categorical", "bool", "nope"]),
                "low": yaml_scalars,
                "high": yaml_scalars,
                "choices": st.lists(yaml_scalars, max_size=4),
                "when": st.text(max_size=30),
            }
        ),
        min_size=1,
        max_size=3,
    ),
    st.lists(st.text(max_size=40), max_size=2),
)
def test_any_parameters_and_constraints(tmp_path, params: dict, constraints: list) -> None:
    """Parameters of any type, bounds and choices, constraints of any text (150 fuzzed)."""
    import yaml

    doc = {"parameters": params, "constraints": {f"c{i}": c for i, c in enumerate(constraints)}}
    _load(tmp_path, yaml.safe_dump(doc).encode())


def test_an_alias_bomb_is_refused_quickly(tmp_path) -> None:
    """A YAML alias bomb (9^10 choices by reference): a one-line error within seconds."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    lines += ["parameters:", "  p: {type: categorical, choices: *a9}"]
    started = time.monotonic()
    with pytest.raises(SpaceError):
        _strict_load(tmp_path, "\n".join(lines).encode())
    assert time.monotonic() - started < 10


def test_deep_nesting_is_refused_quickly(tmp_path) -> None:
    """5,000 nested lists: a one-line error, not a RecursionError traceback."""
    started = time.monotonic()
    with pytest.raises(SpaceError):
        _strict_load(tmp_path, b"parameters: " + b"[" * 5000 + b"]" * 5000)
    assert time.monotonic() - started < 10


def test_a_yaml_tag_cannot_run_code(tmp_path) -> None:
    """A !!python/object/apply tag that would run a command: refused, nothing runs."""
    marker = tmp_path / "ran"
    payload = f"!!python/object/apply:os.system ['touch {marker}']"
    with pytest.raises(SpaceError):
        _strict_load(tmp_path, f"parameters:\n  p: {payload}\n".encode())
    assert not marker.exists()


def _strict_load(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(data)
    load_space(path)


@FUZZ
@given(st.lists(st.text(max_size=30), max_size=3))
def test_any_problem_string(items: list[str]) -> None:
    """--problem values of any text (150 fuzzed): parsed or a one-line usage error."""
    try:
        parse_problem(items)
    except UsageError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(st.text(max_size=40))
def test_any_slo_and_time_budget(text: str) -> None:
    """--slo and --time-budget of any text (150 fuzzed): parsed or a one-line usage error."""
    for parse in (parse_slo, parse_duration):
        try:
            parse(text)
        except UsageError as exc:
            assert "\n" not in str(exc)


@FUZZ
@given(st.text(max_size=300))
def test_any_replay_table(tmp_path, text: str) -> None:
    """A replay table of any text (150 fuzzed): a sweep set up or a one-line error."""
    path = tmp_path / "grid.csv"
    path.write_bytes(text.encode("utf-8", "replace"))
    try:
        build_settings(
            workload=None,
            space=None,
            problem={},
            objective=None,
            sampler="auto",
            trials=1,
            time_budget_s=None,
            seed=0,
            storage="memory",
            study=None,
            trial_timeout_s=10,
            device={"type": "cpu"},
            replay=path,
            params="a",
            metric="m",
            maximize=True,
            command="",
        )
    except (SetupError, SpaceError, UsageError) as exc:
        assert "\n" not in str(exc)
