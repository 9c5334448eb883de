"""Replay of a recorded table: the tables `autotune record` writes (a status per row) and
tables measured by hand (no status column)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from autotune.failures import Crashed, Infeasible
from autotune.objectives.replay import ReplayObjective, load_table, space_from_table
from autotune.space import SpaceError
from tests.cli_in_process import autotune_in_process

HAND_TABLE = "BM,BN,tflops\n64,64,410.5\n64,128,522.0\n128,128,\n128,256,oom?\n"


@pytest.fixture
def hand_table(tmp_path: Path) -> Path:
    path = tmp_path / "by_hand.csv"
    path.write_text(HAND_TABLE)
    return path


def _objective(path: Path) -> ReplayObjective:
    return ReplayObjective({"table": str(path), "params": ["BM", "BN"], "metric": "tflops"})


def test_a_table_without_status_takes_every_row_as_a_measurement(hand_table):
    objective = _objective(hand_table)
    assert objective.evaluate({"BM": 64, "BN": 128}).values == {"tflops": 522.0}
    assert objective.evaluate({"BM": 64, "BN": 64}).metrics["replay"] is True


@pytest.mark.parametrize(("config", "cell"), [({"BM": 128, "BN": 128}, "nan"),
                                             ({"BM": 128, "BN": 256}, "'oom?'")])  # fmt: skip
def test_a_blank_or_a_word_in_a_hand_table_is_a_config_that_did_not_run(hand_table, config, cell):
    with pytest.raises(Crashed, match=re.escape(f"no tflops recorded: {cell} (replay)")):
        _objective(hand_table).evaluate(config)


def test_a_recorded_ok_row_without_a_figure_stays_infeasible(tmp_path):
    path = tmp_path / "recorded.csv"
    path.write_text("BM,tflops,status\n64,,ok\n128,600.0,ok\n")
    objective = ReplayObjective({"table": str(path), "params": ["BM"], "metric": "tflops"})
    with pytest.raises(Infeasible, match="recorded tflops is nan"):
        objective.evaluate({"BM": 64})
    with pytest.raises(Infeasible, match="not in the recorded table"):
        objective.evaluate({"BM": 32})


def test_the_cli_tunes_a_hand_table_and_counts_its_blanks_as_failures(hand_table, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(hand_table), "--params",
         "BM,BN", "--metric", "tflops", "--storage", "memory", "--seed", "0", "--output",
         "best.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "522 TFLOP/s" in done.stderr
    assert json.loads((tmp_path / "best.json").read_text())["config"] == {"BM": 64, "BN": 128}
    assert "failed: crashed 2" in done.stderr  # the progress lines


def test_a_config_recorded_more_than_once_replays_the_median_of_its_ok_readings(tmp_path):
    path = tmp_path / "repeated.csv"
    path.write_text("BM,tflops,status\n64,400.0,ok\n64,,oom\n64,900.0,ok\n64,500.0,ok\n"
                    "128,,oom\n128,,oom\n256,300.0,ok\n")  # fmt: skip
    objective = ReplayObjective({"table": str(path), "params": ["BM"], "metric": "tflops"})
    repeated = objective.evaluate({"BM": 64})
    assert repeated.values == {"tflops": 500.0}  # the median of 400, 900, 500; not the first
    assert repeated.metrics["replay_readings"] == 3
    assert "replay_readings" not in objective.evaluate({"BM": 256}).metrics
    with pytest.raises(Exception, match="recorded oom"):
        objective.evaluate({"BM": 128})  # no ok reading: its first row's failure


# `autotune record matmul` leaves EPILOGUE_SUBTILE blank where SCHEDULE is tiled (inactive there)
CONDITIONAL_TABLE = "SCHEDULE,EPILOGUE_SUBTILE,ms\ntiled,,1.0\npersistent,0,5.0\npersistent,1,6.0\n"


def test_a_blank_parameter_cell_is_a_parameter_inactive_in_its_row(tmp_path):
    path = tmp_path / "conditional.csv"
    path.write_text(CONDITIONAL_TABLE)
    params = ["EPILOGUE_SUBTILE", "SCHEDULE"]  # in either order: the condition reads SCHEDULE
    space = space_from_table(load_table(str(path)), params, str(path))
    assert space.names == ["SCHEDULE", "EPILOGUE_SUBTILE"]
    assert space["EPILOGUE_SUBTILE"].condition.source == "SCHEDULE != 'tiled'"
    assert list(space.grid()) == [{"SCHEDULE": "persistent", "EPILOGUE_SUBTILE": 0},
                                  {"SCHEDULE": "persistent", "EPILOGUE_SUBTILE": 1},
                                  {"SCHEDULE": "tiled"}]  # fmt: skip
    objective = ReplayObjective({"table": str(path), "params": space.names, "metric": "ms"})
    assert objective.evaluate({"SCHEDULE": "tiled"}).values == {"ms": 1.0}
    assert objective.evaluate({"SCHEDULE": "persistent", "EPILOGUE_SUBTILE": 1}).values == {
        "ms": 6.0
    }
    with pytest.raises(Infeasible, match="not in the recorded table"):
        objective.evaluate({"SCHEDULE": "tiled", "EPILOGUE_SUBTILE": 0})  # never recorded


def test_the_cli_reaches_a_row_whose_conditional_parameter_is_blank(tmp_path):
    path = tmp_path / "conditional.csv"
    path.write_text(CONDITIONAL_TABLE)
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(path), "--params",
         "SCHEDULE,EPILOGUE_SUBTILE", "--metric", "ms", "--minimize", "--trials", "10",
         "--storage", "memory", "--seed", "0", "--output", "best.json"],
        capture_output=True, text=True, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["config"] == {"SCHEDULE": "tiled"}
    assert "REPLAY" in done.stderr


def test_blanks_that_one_parameter_cannot_explain_read_the_never_blank_ones_together(tmp_path):
    table = pd.DataFrame({"A": [1, 1, 2, 2], "B": [1, 2, 1, 2], "C": [None, 7, 7, 7],
                          "m": [1.0, 2.0, 3.0, 4.0]})  # fmt: skip
    space = space_from_table(table, ["A", "B", "C"], "t.csv")
    assert space["C"].condition.source == "(A, B) in [(1, 2), (2, 1), (2, 2)]"
    assert {"A": 1, "B": 1} in list(space.grid())


@pytest.mark.parametrize(
    ("columns", "says"),
    [({"A": [1, 1], "C": [None, 7]}, "column 'C' is blank in some rows, and no other parameter"),
     ({"A": [1, 2], "C": [None, None]}, "column 'C' is blank in every row")],
)  # fmt: skip
def test_blanks_no_parameter_explains_are_refused_naming_the_column(columns, says):
    with pytest.raises(SpaceError, match=says):
        space_from_table(pd.DataFrame(columns), list(columns), "t.csv")


def test_a_column_named_twice_is_refused_and_a_whole_number_past_64_bits_stays_a_number(
    tmp_path,
):
    # pandas renamed the second 'a' to 'a.1' (the first replayed alone), and one number past
    # 64 bits turned the whole column into text: the best config came back as {"a": "3"}
    twice = tmp_path / "twice.csv"
    twice.write_text("a,a,m\n1,2,5\n2,3,6\n")
    with pytest.raises(SpaceError, match=r"twice.csv: column 'a' is named twice in the header"):
        load_table(str(twice))
    wide = tmp_path / "wide.csv"
    wide.write_text("a,m\n1180591620717411303424,5\n2,6\n3,7\n")
    table = load_table(str(wide))
    assert list(table["a"]) == [1180591620717411303424, 2, 3]
    space = space_from_table(table, ["a"], str(wide))
    assert 3 in space["a"].values() and "3" not in space["a"].values()
    # rows that end in a comma (a spreadsheet's export): pandas took 'a' for the index
    trailing = tmp_path / "trailing.csv"
    trailing.write_text("a,m\n1,5,\n2,6,\n")
    assert list(load_table(str(trailing))["a"]) == [1, 2]


# pandas dropped a first row's extra field without a word (a later row's it refused), and a
# blank status beside an unknown one ended in a TypeError traceback
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b,score\n1,x,0.5,7\n2,y,9\n", r"line 2: 4 fields, the header names 3"),
        ("a,score,status\n1,1,ok\n2,2,weird\n4,3,\n", r"line 3: column 'status': unknown state"),
        ("a,score,status\n1,1,ok\n4,3,\n", r"line 3: column 'status' is blank"),
    ],
)
def test_a_row_past_the_header_or_a_blank_or_unknown_state_is_refused_naming_its_line(
    tmp_path, text, message
):
    table = tmp_path / "t.csv"
    table.write_text(text)
    with pytest.raises(SpaceError, match=rf"t.csv: {message}"):
        load_table(str(table))


def test_words_that_look_like_numbers_replay_as_written(tmp_path):
    # pandas read the choices "01", "10" as the numbers 1 and 10: a --space naming the words
    # found no row (every config infeasible), and "01" and "1" replayed as one config
    table = tmp_path / "tags.csv"
    table.write_text("tag,BM,v\n01,64,1.0\n10,64,3.0\n1,64,9.0\n")
    objective = ReplayObjective({"table": str(table), "params": ["tag", "BM"], "metric": "v"})
    assert objective.evaluate({"tag": "10", "BM": 64}).values["v"] == 3.0
    assert objective.evaluate({"tag": "01", "BM": 64}).values["v"] == 1.0
    assert objective.evaluate({"tag": "1", "BM": 64}).values["v"] == 9.0
    assert objective.evaluate({"tag": 10, "BM": 64}).values["v"] == 3.0  # the table's own space
    with pytest.raises(Infeasible):
        objective.evaluate({"tag": "02", "BM": 64})


def _sparse_table(path: Path, rows: int = 40) -> list[str]:
    """A table measured by hand: ``rows`` configs of the 4^8 = 65,536 of its columns."""
    import random

    rng = random.Random(2)
    names = [f"p{i}" for i in range(8)]
    lines = [",".join([*names, "score"])]
    for _ in range(rows):
        values = [str(rng.choice([16, 32, 64, 128])) for _ in names]
        lines.append(",".join([*values, f"{rng.random():.3f}"]))
    path.write_text("\n".join(lines) + "\n")
    return names


def test_a_sparse_table_s_space_lists_its_rows_alone(tmp_path):
    names = _sparse_table(tmp_path / "hand.csv")
    table = load_table(str(tmp_path / "hand.csv"))
    space = space_from_table(table, names, "hand.csv")
    listed = list(space.grid())
    recorded = {tuple(int(v) for v in row) for row in table[names].itertuples(index=False)}
    assert {tuple(c[n] for n in names) for c in listed} == recorded
    assert space.grid_size() == len(recorded) == len(listed)
    # a whole grid keeps its product, unconstrained
    whole = tmp_path / "whole.csv"
    whole.write_text("a,b,v\n1,x,1\n1,y,2\n2,x,3\n2,y,4\n")
    assert space_from_table(load_table(str(whole)), ["a", "b"], "whole.csv").constraints == []


@pytest.mark.parametrize("sampler", ["auto", "tpe"])
def test_a_sweep_over_a_sparse_table_keeps_to_its_rows(tmp_path, sampler):
    # proposals came from the columns' product: 2,247 rejected in 44 s for one trial (auto),
    # and the space was taken as measured completely after 2 of 40 (tpe's steering)
    names = _sparse_table(tmp_path / "hand.csv")
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(tmp_path / "hand.csv"),
         "--params", ",".join(names), "--metric", "score", "--trials", "12", "--seed", "0",
         "--sampler", sampler, "--storage", "memory", "--time-budget", "60s"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "done: 12 trials" in done.stderr and "stopped by trials" in done.stderr


def test_a_column_of_codes_with_leading_zeros_is_offered_as_written(tmp_path):
    # without --space, pandas read the tags 007 and 010 as 7 and 10: the sweep's winner and
    # its export held a value the table never did
    table = tmp_path / "codes.csv"
    table.write_text("tag,BM,ms\n007,16,1.0\n010,32,0.5\n1e3,64,2.0\n")
    loaded = load_table(str(table))
    space = space_from_table(loaded, ["tag", "BM"])
    assert space["tag"].choices == ["007", "010", "1e3"] and space["BM"].choices == [16, 32, 64]
    objective = ReplayObjective({"table": str(table), "params": ["tag", "BM"], "metric": "ms"})
    assert objective.evaluate({"tag": "010", "BM": 32}).values["ms"] == 0.5
    assert objective.evaluate({"tag": 10, "BM": 32}).values["ms"] == 0.5  # a --space of numbers


def test_a_code_beside_a_column_of_floats_replays_its_row(tmp_path):
    # the table's own space offers ("01", 1) for the row 01,1.0: the numbers' key read (1, 1)
    # and the text's ("01", "1.0"), so every config was infeasible ('rejected by constraints
    # (not launched)', 0 trials)
    table = tmp_path / "codes.csv"
    table.write_text("tag,BM,ms\n01,1.0,5.0\n02,2.0,6.0\n")
    space = space_from_table(load_table(str(table)), ["tag", "BM"])
    objective = ReplayObjective({"table": str(table), "params": ["tag", "BM"], "metric": "ms"})
    assert [objective.evaluate(c).values["ms"] for c in space.grid()] == [5.0, 6.0]
    assert objective.evaluate({"tag": 2, "BM": 2.0}).values["ms"] == 6.0  # a --space of numbers


def test_a_column_of_numbers_and_words_replays_its_numbers(tmp_path):
    # a --space of choices [8, 16, auto]: the column was read as text, so 8 and 16 were "not in
    # the recorded table" and the sweep's best was auto at 2.0, not 16 at 5.0
    table = tmp_path / "mixed.csv"
    table.write_text("X,m\n8,1.0\n16,5.0\nauto,2.0\n")
    objective = ReplayObjective({"table": str(table), "params": ["X"], "metric": "m"})
    assert objective.evaluate({"X": 16}).values["m"] == 5.0
    assert objective.evaluate({"X": "auto"}).values["m"] == 2.0
    with pytest.raises(Infeasible):
        objective.evaluate({"X": 32})


def _tune(table: Path, params: str, metric: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(table), "--params", params,
         "--metric", metric, "--trials", "2", "--seed", "0", "--storage", "memory"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "params", "name"),
    [("a,device,v\n1,1,1\n2,2,2\n", "a,device", "device"),  # sparse: a traceback, exit 1
     ("problem,a,v\n1,1,1\n1,2,2\n2,1,3\n2,2,4\n", "problem,a", "problem")],
)  # fmt: skip
def test_a_parameter_named_device_or_problem_is_refused_in_one_line(tmp_path, rows, params, name):
    # the space's constraint over the rows read `device` as the device's dict: "unhashable
    # type: 'dict'", exit 1
    table = tmp_path / "t.csv"
    table.write_text(rows)
    says = f"column {name!r} is taken by the expression language; rename the column or leave it"
    with pytest.raises(SpaceError, match=re.escape(says)):
        space_from_table(load_table(str(table)), params.split(","), str(table))
    done = autotune_in_process("tune", "--replay", str(table), "--params", params, "--metric",
                               "v", "--trials", "2", "--seed", "0", "--storage",
                               "memory")  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [f"error: {table}: {says} out of --params"]


def test_a_column_named_device_or_problem_beside_the_parameters_replays(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a,b,device,problem,v\n1,1,h100,x,1.0\n2,2,h200,y,2.0\n")
    objective = ReplayObjective({"table": str(table), "params": ["a", "b"], "metric": "v"})
    assert objective.evaluate({"a": 2, "b": 2}).metrics["device"] == "h200"
    done = _tune(table, "a,b", "v")
    assert done.returncode == 0 and "done: 2 trials" in done.stderr, done.stderr[-2000:]


def test_a_replays_set_up_reads_its_tables_text_once(tmp_path, monkeypatch):
    # the loader read the file as text for its words and codes, and the objective read it as
    # text again for its cells as written (4 parses of one table, with the header's check):
    # one read of the text now serves both, and the replay finds the same rows
    path = tmp_path / "grid.csv"
    path.write_text("BM,mode,tflops\n064,None,400\n128,tiled,610\n8,auto,\n")
    read_csv, reads = pd.read_csv, []

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202 - pandas' own, counted
        reads.append(kwargs.get("dtype"))
        return read_csv(*args, **kwargs)

    monkeypatch.setattr(pd, "read_csv", counted)
    objective = ReplayObjective({"table": str(path), "params": ["BM", "mode"], "metric": "tflops"})
    assert reads == [None, str]  # the typed read and the text's
    assert objective.evaluate({"BM": "064", "mode": "None"}).values["tflops"] == 400.0
    assert objective.evaluate({"BM": 128, "mode": "tiled"}).values["tflops"] == 610.0
    with pytest.raises(Crashed, match="no tflops recorded"):
        objective.evaluate({"BM": 8, "mode": "auto"})


def test_the_columns_one_configs_median_merges_are_named_with_their_values(tmp_path) -> None:
    """A config column left out of --params whose ok readings of one config differ: codes as
    written, blanks as None; a failed row (no reading in the median) and the columns after
    the config (stamps, status, figures) do not count."""
    from autotune.objectives.replay_rows import merged_columns

    path = tmp_path / "t.csv"
    path.write_text("a,tag,sub,opt,workload,status,ms,spread\n"
                    "1,01,,x,matmul,ok,5,0.1\n1,1,4,x,matmul,ok,6,0.2\n"
                    "2,01,4,x,matmul,ok,7,0.1\n2,01,4,y,matmul,crashed,,\n")  # fmt: skip
    table = load_table(str(path))
    assert merged_columns(table, ["a"], "ms") == {"tag": ["01", "1"], "sub": [None, 4]}
    assert merged_columns(table, ["a", "tag", "sub"], "ms") == {}
    # a table by hand: its config columns end at the metric
    hand = tmp_path / "hand.csv"
    hand.write_text("a,b,ms,tflops\n1,2,5,9\n1,3,6,8\n")
    assert merged_columns(load_table(str(hand)), ["a"], "ms") == {"b": [2, 3]}


def test_a_table_written_again_is_read_again_by_the_same_process(tmp_path):
    """A process kept a table it read by its path alone: a table recorded again under the
    same name (a notebook's second `autotune record`, a long-lived driver) replayed the first
    recording's figures and keys."""
    from autotune.objectives.replay_table import text_keys

    path = tmp_path / "grid.csv"
    path.write_text("BM,tflops,status\n16,1.0,ok\n32,2.0,ok\n")
    assert list(load_table(str(path))["tflops"]) == [1.0, 2.0]
    assert text_keys(str(path), ("BM",)) == [("16",), ("32",)]
    before = path.stat().st_mtime_ns
    path.write_text("BM,tflops,status\n16,5.0,ok\n64,7.0,ok\n")
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a later write, on any clock's grain
    assert list(load_table(str(path))["tflops"]) == [5.0, 7.0]
    assert text_keys(str(path), ("BM",)) == [("16",), ("64",)]
