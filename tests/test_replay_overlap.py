"""A replay's ``--space`` against its table: the rows it admits, counted before the sweep."""

import subprocess
import sys
from pathlib import Path

import pytest

from autotune.replay_overlap import table_overlap
from autotune.space import load_space
from autotune.sweep_setup import SetupError, build_settings

DATA = Path(__file__).parents[1] / "benchmarks" / "data"
H200 = {"type": "cuda", "name": "NVIDIA H200", "max_shared_memory": 232448}
GROUPS = [f"g{i}.{p}" for i in range(4) for p in ("x", "y")]


def _composed(folder: Path, rows: int) -> tuple[Path, Path]:
    """A space of 9 parameters of 10 values each (one and 4 included groups of two: 10**9
    configs) and a table of ``rows`` of its configs."""
    (folder / "part.yaml").write_text("name: part\nparameters:\n"
                                      "  x: {type: int, low: 0, high: 9}\n"
                                      "  y: {type: int, low: 0, high: 9}\n")  # fmt: skip
    space = folder / "composed.yaml"
    space.write_text("name: composed\nparameters:\n  a: {type: int, low: 0, high: 9}\n"
                     "include:\n  - {space: part.yaml, prefix: 'g{i}.', repeat: 4}\n")  # fmt: skip
    table = folder / "sparse.csv"
    lines = [",".join(["a", *GROUPS, "ms"])]
    lines += [",".join([str(r % 10)] * 9 + [str(1.0 + r)]) for r in range(rows)]
    table.write_text("\n".join(lines) + "\n")
    return table, space


def _settings(table: Path, space: Path, params: str, **given):
    base = dict(
        workload=None, space=str(space), problem={}, objective=None, sampler="auto", trials=20,
        time_budget_s=None, seed=0, storage="memory", study=None, trial_timeout_s=None,
        device=H200, replay=table, params=params, metric="ms", maximize=False,
        command="autotune tune --replay", executor="inline",
    )  # fmt: skip
    return build_settings(**{**base, **given})


def test_a_composed_space_over_a_sparse_table_is_refused_before_the_sweep(tmp_path):
    # 5 rows of 10**9 configs: the sweep refused proposal after proposal for minutes, printing
    # nothing, until 5,000 rejections in a row stopped it
    table, space = _composed(tmp_path, rows=5)
    with pytest.raises(
        SetupError,
        match=r"composed.yaml: the space admits 5 of .*sparse.csv's 5 "
        r"rows, one config in 200,000,000 of its proposals .*leave --space out",
    ):
        _settings(table, space, ",".join(["a", *GROUPS]))


def test_the_refusal_is_one_line_and_exit_code_2_at_once(tmp_path):
    table, space = _composed(tmp_path, rows=5)
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(table), "--space",
         str(space), "--params", ",".join(["a", *GROUPS]), "--metric", "ms", "--minimize",
         "--trials", "20", "--storage", f"sqlite:///{tmp_path / 's.db'}"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
    assert "the space admits 5 of" in done.stderr and "Traceback" not in done.stderr


def test_a_space_no_row_is_a_config_of_names_the_first_rows_reason(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a,b,ms\n1,12,5\n2,15,6\n")
    space = tmp_path / "s.yaml"
    space.write_text("parameters:\n  a: {type: int, low: 0, high: 3}\n"
                     "  b: {type: int, low: 0, high: 9}\n")  # fmt: skip
    with pytest.raises(SetupError, match=r"s.yaml: no row of .*t.csv is a config of the space "
                       r"\(line 2: b=12 is not a value of the space\)"):  # fmt: skip
        _settings(table, space, "a,b")


def test_the_recorded_grids_replay_over_the_spaces_they_were_recorded_over():
    # every row of a whole recording is a config of its space, and a proposal nearly always
    # finds one: such a replay is not refused
    space = load_space(str(DATA / "matmul_tiled_grid.yaml"))
    problem = {"M": 64, "N": 4096, "K": 4096}
    overlap = table_overlap(DATA / "matmul_decode_h200.csv", space, problem, H200)
    assert (overlap.admitted, overlap.rows) == (544, 544) and overlap.hit_chance > 0.5
    params = "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages"
    settings = _settings(DATA / "matmul_decode_h200.csv", DATA / "matmul_tiled_grid.yaml",
                         params, problem=problem, metric="tflops", maximize=True)  # fmt: skip
    assert settings.workload == "replay"


def test_a_row_blank_where_the_space_leaves_a_parameter_inactive_is_a_config(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("S,E,ms\ntiled,,1.0\npersistent,1,2.0\npersistent,,3.0\n")
    space = tmp_path / "s.yaml"
    space.write_text("parameters:\n  S: {type: categorical, choices: [tiled, persistent]}\n"
                     "  E: {type: categorical, choices: [0, 1], "
                     "when: \"S != 'tiled'\"}\n")  # fmt: skip
    overlap = table_overlap(table, load_space(str(space)), {}, {})
    # the third row leaves E blank where the space sets it: no config of it
    assert (overlap.admitted, overlap.rows) == (2, 3)
    assert overlap.hit_chance == pytest.approx(0.5 + 0.25)
    assert overlap.first_miss == "line 4: E is blank where the space sets it"
