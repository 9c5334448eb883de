"""Opening a sweep's study: named ones resume, made-up names never do."""

import contextlib
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from autotune.driver import SweepSettings
from autotune.driver.study_setup import open_study
from autotune.driver.trial_attrs import BASELINE, STUDY
from autotune.space import Param, Space
from autotune.storage import open_storage


def _settings(url: str, study: str | None, problem: dict) -> SweepSettings:
    space = Space("s", [Param("score", "categorical", choices=[0.1, 0.2])])
    return SweepSettings(workload="faults", problem=problem, space=space,
                         objectives={"score": "maximize"}, storage=url, study_name=study,
                         warm_start="off", seed=1)  # fmt: skip


def test_two_sweeps_started_in_one_second_without_a_study_name_get_a_study_each(tmp_path):
    # both took 'faults-YYYYMMDD-HHMMSS': two seeds' trials were merged into one study, and
    # at another problem the second was refused as a resume of the first
    url = f"sqlite:///{tmp_path / 's.db'}"
    storage = open_storage(url)
    first = open_study(_settings(url, None, {"n": 8}), storage, in_flight=1)
    first.enqueue_trial({"score": 0.1})
    second = open_study(_settings(url, None, {"n": 16}), storage, in_flight=1)
    assert first.study_name != second.study_name and not second.trials
    names = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    assert names == {first.study_name, second.study_name}


def test_a_named_study_is_resumed(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    storage = open_storage(url)
    first = open_study(_settings(url, "mine", {"n": 8}), storage, in_flight=1)
    first.enqueue_trial({"score": 0.1})
    again = open_study(_settings(url, "mine", {"n": 8}), storage, in_flight=1)
    assert again.study_name == "mine" and len(again.trials) == 1


def _storage_of_many_trials(db: Path, trials: int) -> None:
    """A SQLite storage holding one study of ``trials`` trials (another workload's: a warm
    start reads every stored trial to find its source, seconds for these)."""
    study = optuna.create_study(storage=f"sqlite:///{db}", study_name="big")
    study.add_trial(optuna.trial.create_trial(
        params={"x": 1.0}, distributions={"x": optuna.distributions.FloatDistribution(0, 2)},
        value=1.0,
    ))  # fmt: skip
    with contextlib.closing(sqlite3.connect(db)) as con, con:  # its copies, in one statement
        con.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
            "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) "
            "SELECT i, study_id, state, datetime_start, datetime_complete FROM trials, n",
            (trials - 1,),
        )
        for table, columns in (("trial_params", "param_name, param_value, distribution_json"),
                               ("trial_values", "objective, value, value_type")):  # fmt: skip
            con.execute(f"INSERT INTO {table} (trial_id, {columns}) SELECT t.trial_id, "
                        f"{columns} FROM trials t, {table} c WHERE c.trial_id = 1 "
                        "AND t.trial_id > 1")  # fmt: skip


def _half_made(db: Path) -> bool:
    """Whether ``db`` holds a study beside ``big`` with a trial but no description."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)) as con:
        rows = con.execute(
            "SELECT s.study_id FROM studies s WHERE s.study_name != 'big' "
            "AND EXISTS (SELECT 1 FROM trials t WHERE t.study_id = s.study_id) "
            "AND NOT EXISTS (SELECT 1 FROM study_user_attributes a "
            "WHERE a.study_id = s.study_id AND a.key = 'autotune')"
        ).fetchall()
    return bool(rows)


def _interrupt_the_set_up(proc: subprocess.Popen, db: Path) -> None:
    """Ctrl-C to ``proc`` while it sets its new study up: once a study of it shows half
    made, or (where none ever does) 1.5 s after it opened the storage, while its warm start
    reads the 20,000 stored trials (seconds)."""
    opened = None
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(sqlite3.Error):
            if _half_made(db):
                break
        if opened is None and db.with_name(db.name + "-wal").exists():  # a sweep's WAL
            opened = time.monotonic()
        if opened is not None and time.monotonic() - opened > 1.5:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the sweep ended before it was interrupted"
    proc.send_signal(signal.SIGINT)


@pytest.mark.parametrize("named", [True, False], ids=["--study", "made-up name"])
def test_a_stop_while_a_new_study_is_set_up_leaves_none_or_a_whole_one(
    tmp_path, named, steady_workload
):
    """Ctrl-C while a new study was set up (its warm start reading the storage) left it with
    the untuned default queued and no description: a resume by --study queued the default
    again, and without --study the half-made study stayed."""
    db = tmp_path / "s.db"
    _storage_of_many_trials(db, 20_000)
    url = f"sqlite:///{db}"
    command = [sys.executable, "-m", "autotune.cli", "tune", "steady.py", "--trials", "2",
               "--storage", url, "--executor", "inline", "--finish-top", "0",
               *(["--study", "new"] if named else ["--no-cache"])]  # fmt: skip
    proc = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _interrupt_the_set_up(proc, db)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    # (a Ctrl-C in a SQLite read may have SQLAlchemy log 'Error closing cursor' before this)
    assert (
        proc.returncode == 130 and err.splitlines()[-1] == "interrupted; finished trials are stored"
    ), err
    for name in optuna.get_all_study_names(url):  # none, or one a resume takes up
        study = optuna.load_study(study_name=name, storage=url)
        assert name == "big" or STUDY in study.user_attrs, [t.state for t in study.trials]
    if named:
        resumed = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                                 timeout=120, check=False)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        trials = optuna.load_study(study_name="new", storage=url).trials
        assert [t.user_attrs.get(BASELINE, False) for t in trials] == [True, False]


def test_a_study_a_killed_set_up_left_half_made_is_set_up_without_queueing_twice(tmp_path):
    # a driver killed between queueing the default and writing the description (as Ctrl-C
    # did before): its resume queued the default again
    url = f"sqlite:///{tmp_path / 'h.db'}"
    storage = open_storage(url)
    half = optuna.create_study(storage=storage, study_name="h", direction="maximize")
    half.enqueue_trial({"score": 0.1}, user_attrs={BASELINE: True})
    settings = _settings(url, "h", {})
    settings.baseline = {"score": 0.1}
    study = open_study(settings, storage, in_flight=1)
    assert study.user_attrs[STUDY]["workload"] == "faults"
    assert [t.user_attrs for t in study.trials] == [{BASELINE: True}]


def test_a_resume_whose_trace_is_not_there_from_here_is_refused_naming_it(tmp_path):
    """A serving trace named relative, resumed from another folder (or removed): every trial
    of the resume failed crashed in its worker, and the sweep ended 0."""
    from autotune.driver.study_setup import StudyMismatch, _check_files_kept

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 8, "output_len": 4}\n')
    kept = {"files": {"trace": "0" * 64}}
    with pytest.raises(StudyMismatch, match=r"t.jsonl: its contents changed since study 's'"):
        _check_files_kept("s", kept, {"trace": str(trace)})
    trace.unlink()
    with pytest.raises(StudyMismatch, match=r"t.jsonl: study 's' read this file \(trace\), and"):
        _check_files_kept("s", kept, {"trace": str(trace)})
