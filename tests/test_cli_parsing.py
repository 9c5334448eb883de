"""The CLI's checks of an --output path before a command spends its time."""

from pathlib import Path

import pytest

from autotune.cli_parsing import UsageError, writable_output
from tests.cli_in_process import autotune_in_process


@pytest.mark.parametrize(
    ("storage", "output"),
    [("sqlite:///{d}/runs.db", "runs.db"), ("sqlite:///{d}/runs.db", "runs.db-wal"),
     ("sqlite+pysqlite:///{d}/runs.db", "runs.db"), ("journal:///{d}/runs.log", "runs.log"),
     ("journal:///{d}/runs.log", "link.log")],
)  # fmt: skip
def test_an_output_that_is_the_storages_own_file_is_refused_and_left_alone(
    tmp_path, storage, output
):
    own = tmp_path / ("runs.log" if "journal" in storage else "runs.db")
    own.write_bytes(b"the stored sweeps")
    (tmp_path / "link.log").symlink_to(own)
    with pytest.raises(UsageError, match="is the storage's own file"):
        writable_output(tmp_path / output, storage=storage.format(d=tmp_path))
    assert own.read_bytes() == b"the stored sweeps"
    writable_output(tmp_path / "best.json", storage=storage.format(d=tmp_path))  # another file


def test_checking_an_output_in_missing_folders_makes_none(tmp_path: Path):
    assert writable_output(tmp_path / "a" / "b" / "best.json") is not None
    assert list(tmp_path.iterdir()) == []  # write_atomic makes them when it writes


@pytest.mark.parametrize("text", ["nan", "inf", "nans", "-infm", "0s", "-5s"])
def test_a_time_budget_must_be_a_positive_finite_duration(text):
    from autotune.cli_parsing import parse_duration

    with pytest.raises(UsageError, match="must be a positive, finite duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h30m", 5400.0), ("10d", 864000.0), ("2m30s", 150.0), ("1.5h", 5400.0), ("90", 90.0),
     (" 1h 30m ", 5400.0), ("1D2H", 93600.0)],
)  # fmt: skip
def test_a_time_budget_in_days_or_of_several_units_is_read(text, seconds):
    # '1h30m' and '10d' were refused as "not a duration like 90s, 5m or 1h"
    from autotune.cli_parsing import parse_duration

    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1ms", "5x", "1h30", "h", "1m1m", "30m1h", "1.5.5s"])
def test_a_time_budget_in_no_known_unit_is_refused_naming_the_units(text):
    from autotune.cli_parsing import parse_duration

    with pytest.raises(UsageError) as refused:
        parse_duration(text)
    said = str(refused.value)
    assert said.startswith(f"--time-budget: {text!r} is not a duration like 90s, 5m, 1h30m or 2d")
    assert "\n" not in said


@pytest.mark.parametrize("text", [",,,", " , "])
def test_an_slo_of_separators_only_is_refused_not_taken_as_no_slo(text):
    from autotune.cli_parsing import parse_slo

    with pytest.raises(UsageError, match="names no limit"):
        parse_slo(text)


@pytest.mark.parametrize(
    "text", ["ttft_p99_ms=-1", "tpot_p99_ms=50,peak_memory_gb=-0.5", "ttft_p99_ms=0"]
)
def test_a_negative_limit_on_a_metric_with_a_unit_is_refused(text):
    from autotune.cli_parsing import parse_slo

    with pytest.raises(UsageError, match="is never 0 or below"):
        parse_slo(text)


def test_a_negative_limit_on_a_metric_without_a_unit_is_taken():
    from autotune.cli_parsing import parse_slo

    assert parse_slo("log_loss=-2.5") == {"log_loss": -2.5}


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "1e999"])
def test_a_problem_value_that_is_no_finite_number_is_refused(value):
    """``--problem rate=inf`` was stored, and every later sweep's warm start then crashed."""
    from autotune.cli_parsing import parse_problem

    with pytest.raises(UsageError, match="rate must be a finite number"):
        parse_problem([f"rate={value}"])


@pytest.mark.parametrize("option", ["--replay", "--space", "record --space"])
def test_an_output_that_is_a_file_the_command_reads_is_refused_and_left_alone(tmp_path, option):
    """`tune --replay grid.csv --output grid.csv` replaced 784 recorded GPU measurements with
    the best config's JSON; a sweep's space file or a recording's went the same way."""
    read = tmp_path / ("grid.csv" if option == "--replay" else "space.yaml")
    read.write_text("a,m\n1,2\n" if option == "--replay" else "parameters:\n  a: {type: bool}\n")
    before = read.read_bytes()
    args = {"--replay": ["tune", "--replay", "grid.csv", "--params", "a", "--metric", "m"],
            "--space": ["tune", "faults", "--space", "space.yaml"],
            "record --space": ["record", "faults", "--space", "space.yaml"]}[option]  # fmt: skip
    done = autotune_in_process(*args, "--output", str(read), cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"is the file {option.split()[-1]} reads" in done.stderr, done.stderr
    assert read.read_bytes() == before


def _replay_sweep(table: Path, url: str, study: str) -> None:
    """A 2-trial replay sweep of ``table`` (parameter ``a``, metric ``m``) stored as ``study``."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(table), "--params", "a",
         "--metric", "m", "--trials", "2", "--storage", url, "--study", study, "--executor",
         "inline"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[Path, str]:
    """A table and a storage holding two replay studies of it, d2 and d3, as `tune --replay`
    stores them."""

    folder = tmp_path_factory.mktemp("replayed")
    table = folder / "grid.csv"
    table.write_text("a,m,status\n1,2.0,ok\n2,3.0,ok\n3,1.0,ok\n")
    url = f"sqlite:///{folder / 'o.db'}"
    for name in ("d2", "d3"):
        _replay_sweep(table, url, name)
    return table, url


@pytest.mark.parametrize(
    "args",
    [["tune", "--study", "d2", "--trials", "3"], ["export", "--to", "triton", "--study", "d2"],
     ["export", "--to", "json"], ["export", "--to", "triton", "--table", "--key", "a"],
     ["trials", "--format", "csv", "--study", "d2"], ["report", "--study", "d2"],
     ["compare", "d2", "d3"]],
)  # fmt: skip
def test_an_output_that_is_the_table_a_stored_study_replays_is_refused_and_left_alone(
    replayed, args
):
    """`tune --study d2 --output grid.csv` (resuming) replaced the table study d2 replays with
    its best config's JSON, and every later resume or export of d2 failed; `export`, `trials`,
    `report` and `compare` wrote over it the same way."""
    table, url = replayed
    before = table.read_bytes()
    done = autotune_in_process(*args, "--storage", url, "--output", str(table))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "is the table study 'd" in lines[0], done.stderr
    assert f"--output {table}: is the table study 'd" in lines[0]
    assert table.read_bytes() == before


@pytest.fixture(scope="module")
def two_tables(tmp_path_factory) -> tuple[Path, Path, str]:
    """Two tables and a storage holding a replay study of each: A replays a.csv, B (the
    newest) b.csv."""

    folder = tmp_path_factory.mktemp("two_tables")
    url = f"sqlite:///{folder / 'p.db'}"
    tables = []
    for name in ("A", "B"):
        table = folder / f"{name.lower()}.csv"
        table.write_text("a,m\n1,1\n2,2\n3,3\n")
        _replay_sweep(table, url, name)
        tables.append(table)
    return tables[0], tables[1], url


@pytest.mark.parametrize(
    "args",
    [["report", "--study", "B"], ["report"], ["export", "--to", "json", "--study", "B"],
     ["export", "--to", "triton"], ["export", "--to", "triton", "--table", "--studies", "B"],
     ["trials", "--format", "csv", "--study", "B"], ["tune", "--study", "B", "--trials", "3"],
     ["tune", "--replay", "{b}", "--params", "a", "--metric", "m", "--trials", "2",
      "--study", "C"]],
)  # fmt: skip
def test_an_output_that_is_the_table_another_stored_study_replays_is_refused(two_tables, args):
    """`report --study B --output a.csv` wrote over the table study A replays (only the files
    of the studies the command itself reads were protected), and A's next resume failed:
    `export`, `trials`, `report` without --study and `tune`'s --output the same."""
    import optuna

    a_table, b_table, url = two_tables
    before = a_table.read_bytes()
    args = [arg.replace("{b}", str(b_table)) for arg in args]
    done = autotune_in_process(*args, "--storage", url, "--output", str(a_table))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"error: --output {a_table}: is the table study 'A' replays (writing it "
                     "would destroy it); name another file"], done.stderr  # fmt: skip
    assert a_table.read_bytes() == before
    stored = optuna.study.get_all_study_summaries(url, include_best_trial=False)
    assert sorted((s.study_name, s.n_trials) for s in stored) == [("A", 2), ("B", 2)]


def test_a_file_several_stored_studies_read_is_told_as_the_commands_own_studys(tmp_path):
    import optuna

    from autotune.driver.trial_attrs import STUDY

    table = tmp_path / "t.csv"
    table.write_text("a,m\n1,1\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    for name in ("x", "y", "z"):
        study = optuna.create_study(study_name=name, storage=url)
        study.set_user_attr(STUDY, {"workload": "replay", "space": str(table),
                                    "problem": {"table": str(table), "metric": "m"}})  # fmt: skip
    for studies, named in ((["y"], "y"), ([None], "z"), ([], "x"), (["gone"], "x")):
        with pytest.raises(UsageError, match=f"is the table study '{named}' replays"):
            writable_output(table, storage=url, studies=studies)


def test_the_files_a_stored_study_reads_are_its_table_space_workload_and_problem_files(
    tmp_path,
):
    import optuna

    from autotune.cli_parsing import stored_reads
    from autotune.driver.trial_attrs import STUDY

    files = {n: tmp_path / n for n in ("trace.jsonl", "space.yaml", "objective.py", "t.csv")}
    for path in files.values():
        path.write_text("x\n")
    url = f"sqlite:///{tmp_path / 's.db'}"
    serving = optuna.create_study(study_name="sv", storage=url)
    problem = {"trace": str(files["trace.jsonl"]), "rate": 4, "dtype": "bf16",
               "gone": str(tmp_path / "no")}  # fmt: skip
    workload, space = str(files["objective.py"]), str(files["space.yaml"])
    serving.set_user_attr(STUDY, {"workload": workload, "space": space, "problem": problem})
    replay = optuna.create_study(study_name="r", storage=url)
    table = {"table": str(files["t.csv"]), "metric": "m"}
    replay.set_user_attr(STUDY, {"workload": "replay", "space": str(files["t.csv"]),
                                 "problem": table})  # fmt: skip
    assert stored_reads(url, ["sv"]) == {
        "the workload file study 'sv' runs": str(files["objective.py"]),
        "the space file study 'sv' reads": str(files["space.yaml"]),
        "the trace file study 'sv' reads": str(files["trace.jsonl"]),
    }
    assert stored_reads(url, [None]) == {"the table study 'r' replays": str(files["t.csv"])}
    assert len(stored_reads(url, None)) == 4  # every stored study
    assert stored_reads(url, ["not stored"]) == stored_reads(url, []) == {}
    assert stored_reads(f"sqlite:///{tmp_path / 'missing.db'}", [None]) == {}
    assert not (tmp_path / "missing.db").exists()  # looking creates no storage
    with pytest.raises(UsageError, match="is the trace file study 'sv' reads"):
        writable_output(files["trace.jsonl"], storage=url, studies=["sv"])
    with pytest.raises(UsageError, match="is the trace file study 'sv' reads"):
        writable_output(files["trace.jsonl"], storage=url, studies=["r"])  # sv reads it still
    writable_output(tmp_path / "new.json", storage=url, studies=["r"])  # a file none reads


def test_a_device_output_is_checked_in_place_not_by_a_probe_file_beside_it(monkeypatch):
    """`--output /dev/null` made a probe file in /dev, which only root may write: any other
    user was told /dev/null cannot be written."""
    import tempfile

    def no_probe(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", no_probe)
    assert writable_output(Path("/dev/null")) == Path("/dev/null")
