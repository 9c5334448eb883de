"""The CLI's checks of an --output path before a command spends its time."""

from pathlib import Path

import pytest

from autotune.cli_parsing import UsageError, writable_output


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
    import subprocess
    import sys

    read = tmp_path / ("grid.csv" if option == "--replay" else "space.yaml")
    read.write_text("a,m\n1,2\n" if option == "--replay" else "parameters:\n  a: {type: bool}\n")
    before = read.read_bytes()
    args = {"--replay": ["tune", "--replay", "grid.csv", "--params", "a", "--metric", "m"],
            "--space": ["tune", "faults", "--space", "space.yaml"],
            "record --space": ["record", "faults", "--space", "space.yaml"]}[option]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", *args, "--output", str(read)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"is the file {option.split()[-1]} reads" in done.stderr, done.stderr
    assert read.read_bytes() == before
