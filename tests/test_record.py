"""`autotune record`: a grid measured into a replayable CSV that resumes, and the outputs it
refuses to resume from."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from autotune.record import RecordError, record_grid
from autotune.space import Param, Space
from tests.cli_in_process import autotune_in_process

SPACE = Space("f", [Param("fault", "categorical", choices=["none", "wrong_result"]),
                    Param("score", "categorical", choices=[0.5, 1.0])])  # fmt: skip


def test_a_recording_of_another_space_of_the_same_names_is_refused_not_mixed(tmp_path):
    # the names matched, so rows of score 2.0 (another space's) were resumed into this one's
    out = tmp_path / "f.csv"
    wider = Space("f", [Param("fault", "categorical", choices=["none", "wrong_result"]),
                        Param("score", "categorical", choices=[0.5, 1.0, 2.0])])  # fmt: skip
    assert len(record_grid("faults", {}, wider, {}, out, executor="inline")) == 6
    with pytest.raises(RecordError, match=r"holds score='2\.0', which this space's score does not"):
        record_grid("faults", {}, SPACE, {}, out, executor="inline")
    assert len(pd.read_csv(out)) == 6  # left as it was
    assert len(record_grid("faults", {}, wider, {}, out, executor="inline")) == 6  # resumes


def test_a_recording_is_stamped_and_resumes_without_measuring_again(tmp_path):
    out = tmp_path / "f.csv"
    first = record_grid("faults", {}, SPACE, {}, out, executor="inline", limit=2, seed=1)
    assert len(first) == 2 and set(first["workload"]) == {"faults"}
    measured: list[int] = []
    whole = record_grid("faults", {}, SPACE, {}, out, executor="inline",
                        on_row=lambda i, n, row: measured.append(i))  # fmt: skip
    assert len(whole) == 4 and len(measured) == 2  # only the two configs not yet recorded
    # a table recorded before the stamps: its blank stamps match, and it resumes too
    pd.read_csv(out).drop(columns=["workload"]).head(3).to_csv(out, index=False)
    assert len(record_grid("faults", {}, SPACE, {}, out, executor="inline")) == 4
    stored = pd.read_csv(out)
    assert sorted(zip(stored["fault"], stored["score"], strict=True)) == [
        ("none", 0.5),
        ("none", 1.0),
        ("wrong_result", 0.5),
        ("wrong_result", 1.0),
    ]


def test_a_hand_edited_table_whose_rows_end_in_a_comma_resumes_with_its_columns_in_place(
    tmp_path,
):
    # pandas took the first column for the index: the rewrite shifted every row one column
    # left, the 'fault' values lost, the scores under 'status'
    out = tmp_path / "f.csv"
    out.write_text("fault,score,status\nnone,0.5,ok,\nwrong_result,1.0,wrong_result,\n")
    measured: list[int] = []
    whole = record_grid("faults", {}, SPACE, {}, out, executor="inline",
                        on_row=lambda i, n, row: measured.append(i))  # fmt: skip
    assert len(whole) == 4 and len(measured) == 2  # the two hand rows kept, not re-measured
    stored = pd.read_csv(out, index_col=False)
    assert set(zip(stored["fault"], stored["score"], stored["status"], strict=True)) >= {
        ("none", 0.5, "ok"),
        ("wrong_result", 1.0, "wrong_result"),
    }


def test_an_output_a_recording_cannot_resume_from_is_refused(tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("BLOCK_M,status\n16,ok\n")
    with pytest.raises(RecordError, match="not a recording of this space .no column 'fault'"):
        record_grid("faults", {}, SPACE, {}, other, executor="inline")
    stamped = tmp_path / "stamped.csv"
    stamped.write_text("fault,score,status,workload\nnone,1.0,ok,matmul\n")
    with pytest.raises(RecordError, match="holds a recording at workload=matmul, not workload="):
        record_grid("faults", {}, SPACE, {}, stamped, executor="inline")
    with pytest.raises(RecordError, match="not a regular file"):
        record_grid("faults", {}, SPACE, {}, tmp_path, executor="inline")  # a folder
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(RecordError, match="is not a recorded table"):
        record_grid("faults", {}, SPACE, {}, empty, executor="inline")
    assert other.read_text() == "BLOCK_M,status\n16,ok\n"  # nothing written over
    # a recording over more parameters than this space: resuming would append rows with a
    # blank 'fault' and skip configs as measured that only a crashed row of it measured
    wider = tmp_path / "wider.csv"
    wider.write_text("fault,score,extra,workload,status\nnone,1.0,3,faults,ok\n")
    with pytest.raises(RecordError, match="is a recording of fault, score, extra, not of this "
                                          "space's fault, score"):  # fmt: skip
        record_grid("faults", {}, SPACE, {}, wider, executor="inline")


@pytest.mark.parametrize("option", [("--limit", "0"), ("--jobs", "0")])
def test_a_limit_or_jobs_below_one_is_one_line(tmp_path, option):
    # --jobs 0 hung the recording; --limit -3 ended in a traceback
    done = autotune_in_process("record", "faults", "--output", str(tmp_path / "x.csv"), *option)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert option[0] in done.stderr and not (tmp_path / "x.csv").exists()


def test_a_space_with_a_conditional_parameter_resumes_without_measuring_again(tmp_path):
    # b is blank where a == 1 and an int column with blanks reads back as floats (2.0): the
    # recorded configs must still match the grid's, or every resume measures all again
    space = Space("r", [Param("fault", "categorical", choices=["none"]),
                        Param("a", "int", low=1, high=2),
                        Param("b", "int", low=1, high=2)])  # fmt: skip
    from autotune.space.expr import Expression

    space.params[2].condition = Expression("a == 2")
    out = tmp_path / "r.csv"
    assert len(record_grid("faults", {}, space, {}, out, executor="inline")) == 3
    measured: list[int] = []
    again = record_grid("faults", {}, space, {}, out, executor="inline",
                        on_row=lambda i, n, row: measured.append(i))  # fmt: skip
    assert measured == [] and len(again) == 3


@pytest.mark.parametrize(
    ("param", "says"),
    [(Param("score", "float", low=0.0, high=1.0), "parameters.score is a float"),
     (Param("n", "int", low=1, high=10**8), "the grid holds up to 100,000,000 configs")],
)  # fmt: skip
def test_a_grid_that_cannot_be_listed_is_refused_before_anything_runs(tmp_path, param, says):
    space = Space("g", [Param("fault", "categorical", choices=["none"]), param])
    with pytest.raises(RecordError, match=says):
        record_grid("faults", {}, space, {}, tmp_path / "g.csv", executor="inline", limit=1)
    assert not (tmp_path / "g.csv").exists()


def test_a_recording_names_its_device_and_resumes_only_on_that_device(tmp_path):
    # a replay of the table says where it was measured (not "device not recorded")
    out = tmp_path / "f.csv"
    h200 = {"type": "cuda", "name": "NVIDIA H200"}
    first = record_grid("faults", {}, SPACE, h200, out, executor="inline", limit=2, seed=1)
    assert set(first["device.name"]) == {"NVIDIA H200"} and set(first["device.type"]) == {"cuda"}
    with pytest.raises(RecordError, match="holds a recording at device.name=NVIDIA H200, not"):
        record_grid("faults", {}, SPACE, {"type": "cuda", "name": "NVIDIA H100"}, out,
                    executor="inline")  # fmt: skip
    assert len(record_grid("faults", {}, SPACE, h200, out, executor="inline")) == 4


#: the passwords, split so that this file's text (in a traceback) is never what a check finds
DB_SECRET, COMMAND_SECRET = "S3cret" + "PW", "Hunter" + "PW2"
LEAK = """
from autotune.objectives.base import Objective


class Leak(Objective):
    name = "leak"
    space = "leak.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        said = " said: password " + "Hunter" + "PW2 refused"
        raise RuntimeError("could not reach postgresql://tuner:" + "S3cret" + "PW@db/s; "
                           + self.problem["command"] + said)


OBJECTIVE = Leak
"""


def test_a_password_in_the_problem_or_a_reason_is_recorded_as_stars(tmp_path):
    # the recording is a file, shared as one: the problem's stamp and each row's reason
    # (the objective's error repeats the command) keep the password out
    (tmp_path / "leak.py").write_text(LEAK)
    (tmp_path / "leak.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 2}\n")
    space = Space("leak", [Param("x", "int", low=1, high=2)])
    problem = {"command": f"srv --db postgresql://admin:{COMMAND_SECRET}@db/prod"}
    out = tmp_path / "leak.csv"
    table = record_grid(str(tmp_path / "leak.py"), problem, space, {}, out, executor="inline")
    assert len(table) == 2 and set(table["status"]) == {"crashed"}
    text = out.read_text()
    assert DB_SECRET not in text and COMMAND_SECRET not in text
    assert set(table["problem.command"]) == {"srv --db postgresql://admin:***@db/prod"}
    assert all("password *** refused" in reason for reason in table["reason"])
    # and it resumes: the stamp it compares is blanked the same way
    assert len(record_grid(str(tmp_path / "leak.py"), problem, space, {}, out,
                           executor="inline")) == 2  # fmt: skip


ODD_FIGURES = """
from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Odd(Objective):
    name = "odd"
    space = "odd.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        x = config["x"]
        if x == 2:
            return Measurement(values={"v": float("nan")})
        if x == 3:  # a figure under the row's own column names
            return Measurement(values={"v": 3.0}, metrics={"status": "weird", "x": 99})
        return Measurement(values={"v": float(x)})


OBJECTIVE = Odd
"""


def test_a_nan_figure_or_one_named_as_a_column_is_recorded_as_a_failure(tmp_path):
    # NaN was recorded 'ok' (a sweep calls it crashed), and a metric named 'status' or 'x'
    # wrote over the row: the recording could neither resume nor replay
    (tmp_path / "odd.py").write_text(ODD_FIGURES)
    (tmp_path / "odd.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 3}\n")
    space = Space("odd", [Param("x", "int", low=1, high=3)])
    out = tmp_path / "odd.csv"
    table = record_grid(str(tmp_path / "odd.py"), {}, space, {}, out, executor="inline")
    rows = {int(r.x): r for r in table.itertuples()}
    assert {x: r.status for x, r in rows.items()} == {1: "ok", 2: "crashed", 3: "crashed"}
    assert rows[2].reason == "objective measured v = nan"
    assert "a figure named 'status'" in rows[3].reason
    again = record_grid(str(tmp_path / "odd.py"), {}, space, {}, out, executor="inline")
    assert len(again) == 3  # resumed: nothing measured twice
    replayed = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(out), "--params", "x",
         "--metric", "v", "--storage", "memory", "--finish-top", "0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert "failed: crashed 2" in replayed.stderr


WORDS = """
from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Words(Objective):
    name = "words"
    space = "words.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": {"None": 3.0, "full": 1.0, "1": 2.0, "2": 0.5,
                                         "4": 0.2}[config["mode"]]})


OBJECTIVE = Words
"""


def test_choices_that_read_as_blanks_or_numbers_resume_and_replay_as_written(tmp_path):
    # "None" came back blank and "1" as 1.0: each resume measured them again, and a replay
    # refused the table ('mode' blank in some rows)
    (tmp_path / "words.py").write_text(WORDS)
    out = tmp_path / "w.csv"
    for choices in (["None", "full", "1"], ["1", "2", "4"]):
        out.unlink(missing_ok=True)
        space = Space("words", [Param("mode", "categorical", choices=choices)])
        (tmp_path / "words.yaml").write_text(
            f"parameters:\n  mode: {{type: categorical, choices: {json.dumps(choices)}}}\n"
        )
        first = record_grid(str(tmp_path / "words.py"), {}, space, {}, out, executor="inline")
        again = record_grid(str(tmp_path / "words.py"), {}, space, {}, out, executor="inline")
        assert len(first) == len(again) == len(pd.read_csv(out)) == 3  # none measured twice
        if choices[0] == "None":
            (tmp_path / "w0.csv").write_bytes(out.read_bytes())
    replayed = subprocess.run(  # the first table: a word column, "None" a word in it
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(tmp_path / "w0.csv"),
         "--params", "mode", "--metric", "v", "--storage", "memory", "--finish-top", "0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout) == {"mode": "None"}


SLOW_TO_COMPILE = """
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class SlowToCompile(Objective):
    name = "slow-to-compile"
    space = "slow.yaml"
    directions = {"v": "maximize"}
    compiles = True

    def prepare(self, config):
        time.sleep(6)

    def evaluate(self, config, report=None):
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = SlowToCompile
"""


def test_a_stop_while_record_compiles_ahead_ends_it_at_once(tmp_path):
    # SIGTERM 5 s into compiling 8 configs in 2 processes was obeyed 22 s later: the pool's
    # end waited for every queued compile
    import signal
    import time

    (tmp_path / "slow.py").write_text(SLOW_TO_COMPILE)
    (tmp_path / "slow.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 8}\n")
    recording = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "record", "slow.py", "--output", "g.csv",
         "--jobs", "2"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(5)
    stopped = time.monotonic()
    recording.send_signal(signal.SIGTERM)
    _, err = recording.communicate(timeout=60)
    assert recording.returncode == 130, err
    assert time.monotonic() - stopped < 5, err
    # it said "interrupted; finished trials are stored", a sweep's words: no study stores these
    assert err.strip().splitlines()[-1] == (
        "interrupted; each config measured is in g.csv: the same command resumes the recording"
    )


SLOW_TO_MEASURE = """
import time
from pathlib import Path

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class SlowToMeasure(Objective):
    name = "slow-to-measure"
    space = "slow.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        # after its first config, each waits for the test's 'release' file (at most 60 s)
        waited = time.monotonic() + 60
        while Path("g.csv").exists() and not Path("release").exists() and time.monotonic() < waited:
            time.sleep(0.05)
        time.sleep(0.05)
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = SlowToMeasure
"""


def test_a_second_recording_of_the_same_output_is_refused_while_the_first_writes(tmp_path):
    # two recordings of one --output each rewrote the table from its own rows: the one that
    # wrote last kept its rows and dropped the other's
    import time

    (tmp_path / "slow.py").write_text(SLOW_TO_MEASURE)
    (tmp_path / "slow.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 8}\n")
    command = [sys.executable, "-m", "autotune.cli", "record", "slow.py", "--output", "g.csv"]
    first = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)  # fmt: skip
    deadline = time.monotonic() + 60
    while not (tmp_path / "g.csv").exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the first has measured a config: it holds the table
    # the first holds the table until the second has run: a second that started after the
    # first had ended (the imports of a loaded machine) resumed it and exited 0 (a process of
    # its own: the point is two processes, one holding the table's lock)
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    (tmp_path / "release").touch()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert second.returncode == 2, second.stderr
    last = second.stderr.strip().splitlines()[-1]  # after the line that says what it records
    assert "Traceback" not in second.stderr
    assert last.startswith("error: ") and f"another process (pid {first.pid})" in last, last
    assert sorted(pd.read_csv(tmp_path / "g.csv")["x"]) == list(range(1, 9))
    assert not (tmp_path / "g.csv.lock").exists()  # the first removed its lock
    again = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr  # a resume once the first is done


MIXED = """
from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Mixed(Objective):
    name, space, directions = "mixed", "mixed.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": {"1": 1.0, "a": 2.0, "NA": 3.0, "2.5": 4.0}[
            str(config["mode"])]})


OBJECTIVE = Mixed
"""


def test_a_choice_of_mixed_types_resumes_without_measuring_again(tmp_path):
    # 1 beside "a" came back as "1", and "NA" as a blank: each resume measured them again
    (tmp_path / "mixed.py").write_text(MIXED)
    choices = [1, "a", "NA", 2.5]
    (tmp_path / "mixed.yaml").write_text(
        f"parameters:\n  mode: {{type: categorical, choices: {json.dumps(choices)}}}\n"
    )
    space = Space("mixed", [Param("mode", "categorical", choices=choices)])
    out = tmp_path / "m.csv"
    first = record_grid(str(tmp_path / "mixed.py"), {}, space, {}, out, executor="inline")
    again = record_grid(str(tmp_path / "mixed.py"), {}, space, {}, out, executor="inline")
    assert len(first) == len(again) == len(pd.read_csv(out)) == 4  # none measured twice
    assert sorted(pd.read_csv(out)["v"]) == [1.0, 2.0, 3.0, 4.0]


def test_a_descriptor_as_the_output_is_refused_whatever_it_is_open_on(tmp_path):
    # under pytest's capture /dev/stdout is a regular file: a recording read it to resume,
    # made /dev/stdout.lock, and rewrote the table through it after every config
    space = Space("f", [Param("fault", "categorical", choices=["none"])])
    with pytest.raises(RecordError, match="not a regular file"):
        record_grid("faults", {}, space, {}, "/dev/stdout", executor="inline")
    assert not Path("/dev/stdout.lock").exists()


def test_a_stamped_table_of_other_problem_keys_is_refused_not_taken_as_measured(tmp_path):
    # a workload file takes any problem: a table at N=3 resumed at M=5 (or at none) counted
    # its 4 rows as measured there, measured nothing, and said "wrote 4 rows"
    (tmp_path / "words.py").write_text(WORDS)
    choices = ["full", "1"]
    (tmp_path / "words.yaml").write_text(
        f"parameters:\n  mode: {{type: categorical, choices: {json.dumps(choices)}}}\n"
    )
    space = Space("words", [Param("mode", "categorical", choices=choices)])
    out = tmp_path / "w.csv"
    workload = str(tmp_path / "words.py")
    record_grid(workload, {"N": 3}, space, {}, out, executor="inline")
    for other, says in (({"M": 5}, "at N=3, not M=5"), ({}, "at N=3, not at no problem")):
        with pytest.raises(RecordError, match=says):
            record_grid(workload, other, space, {}, out, executor="inline")
    assert len(record_grid(workload, {"N": 3}, space, {}, out, executor="inline")) == 2


def test_an_output_in_a_folder_not_made_yet_is_recorded_there(tmp_path):
    # the lock file beside it could not be made: "error: .../g.csv.lock: No such file"
    space = Space("f", [Param("fault", "categorical", choices=["none"])])
    out = tmp_path / "new" / "deeper" / "g.csv"
    assert len(record_grid("faults", {}, space, {}, out, executor="inline")) == 1
    assert out.is_file()


COUNTS_ITS_IMPORTS = """
import os

from autotune.measurement import Measurement
from autotune.objectives.base import Objective

with open(os.environ["IMPORTS_LOG"], "a") as log:
    log.write(f"{os.getpid()}\\n")


class Plain(Objective):
    name = "plain"
    space = "plain.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Plain
"""


def test_record_with_jobs_starts_no_compile_processes_for_a_workload_that_compiles_nothing(
    tmp_path, monkeypatch
):
    # every objective has prepare() (the base class's does nothing): --jobs 4 started four
    # processes that each imported the workload and compiled nothing
    (tmp_path / "plain.py").write_text(COUNTS_ITS_IMPORTS)
    (tmp_path / "plain.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 4}\n")
    log = tmp_path / "imports.log"
    monkeypatch.setenv("IMPORTS_LOG", str(log))
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "record", "plain.py", "--output", "g.csv",
         "--jobs", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # the command's own process and its one worker: no compile process
    assert len(set(log.read_text().split())) <= 2


@pytest.mark.parametrize(
    ("row", "says"),
    [("none,1.0,,faults", r"line 3: status is blank"),
     ("none,1.0,weird,faults", r"line 3: status 'weird' is no trial state")],
)  # fmt: skip
def test_a_hand_edited_row_of_no_state_is_refused_not_counted_as_measured(tmp_path, row, says):
    # the resume said the grid was done, and the replay of the table refused the row
    out = tmp_path / "f.csv"
    out.write_text(f"fault,score,status,workload\nwrong_result,0.5,ok,faults\n{row}\n")
    with pytest.raises(RecordError, match=says):
        record_grid("faults", {}, SPACE, {}, out, executor="inline")


def test_status_before_the_parameters_is_named_not_an_empty_list(tmp_path):
    out = tmp_path / "f.csv"
    out.write_text("workload,fault,score,status\nfaults,none,1.0,ok\n")
    with pytest.raises(RecordError, match="no parameter column comes before its 'workload'"):
        record_grid("faults", {}, SPACE, {}, out, executor="inline")


def test_each_row_s_progress_line_names_the_figure_it_shows(tmp_path):
    # "[1/12] 0.0%": an RMSNorm's copy_fraction on a CPU, unnamed, read as the progress
    space = tmp_path / "none.yaml"
    space.write_text("parameters:\n  fault: {type: categorical, choices: [none]}\n"
                     "  score: {type: categorical, choices: [0.5]}\n")  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "record", "faults", "--space", str(space),
         "--output", str(tmp_path / "f.csv"), "--device", "cpu"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "[1/1] score 0.500" in done.stderr.splitlines(), done.stderr


def test_the_closing_line_counts_the_rows_this_run_wrote_apart_from_the_table_s(tmp_path):
    # a resume that measured 2 configs, or none, said 'wrote 4 rows to g.csv' (the table's
    # rows, all but those 2 written before), with the states as a dict: {'ok': 4}
    (tmp_path / "plain.py").write_text(COUNTS_ITS_IMPORTS)
    (tmp_path / "plain.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 4}\n")

    def record(*extra: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "autotune.cli", "record", "plain.py", "--output", "g.csv",
             *extra],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env={**os.environ, "IMPORTS_LOG": str(tmp_path / "imports.log")},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    assert record("--limit", "2") == "wrote 2 rows to g.csv; it holds 2: ok 2"
    assert record() == "wrote 2 rows to g.csv; it holds 4: ok 4"
    assert record() == "wrote no row to g.csv: it holds every config asked already (4: ok 4)"


def test_record_says_its_problem_as_a_sweep_does_and_refuses_an_output_in_one_line(tmp_path):
    # the first line read "recording rmsnorm {'M': 16, 'N': 64, 'dtype': 'bf16', ...}" (a
    # Python dict), and was said before an --output it cannot resume from was refused: two
    # lines where bad input gets one
    record = [sys.executable, "-m", "autotune.cli", "record", "rmsnorm", "--device", "cpu",
              "--problem", "M=16,N=64", "--trial-timeout", "120"]  # fmt: skip
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("BLOCK_M,status\n16,ok\n")
    refused = autotune_in_process(*record[3:], "--output", str(foreign))
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: {foreign}: exists and is not a recording of this space (no column 'BLOCK_N'); "
        "name another --output or remove it"
    ]
    assert foreign.read_text() == "BLOCK_M,status\n16,ok\n"
    done = subprocess.run([*record, "--output", str(tmp_path / "r.csv"), "--limit", "1"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("recording rmsnorm M=16, N=64, dtype=bf16, residual=True, "
                            "eps=1e-06 on "), first  # fmt: skip
    assert "{" not in first and "'" not in first, first
