"""Faults outside the trials: a storage locked for a while by another process, a disk that
fills while an export is written."""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys
import threading
import time

import optuna
import pandas as pd

from autotune.driver.trial_attrs import is_launched, trial_status
from autotune.export import write_atomic


def _grid(tmp_path):
    rows = [{"a": a, "b": b, "m": float(a * 10 + b), "status": "ok"}
            for a in range(6) for b in range(6)]  # fmt: skip
    pd.DataFrame(rows).to_csv(tmp_path / "grid.csv", index=False)
    return tmp_path / "grid.csv"


def test_a_sweep_waits_out_a_storage_another_process_locks(tmp_path) -> None:
    """Another process holds an exclusive lock on the SQLite file for 2 s mid-sweep: the sweep
    waits it out and ends with all its trials, none RUNNING."""
    db = tmp_path / "s.db"
    url = f"sqlite:///{db}"
    command = [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(_grid(tmp_path)),
               "--params", "a,b", "--metric", "m", "--maximize", "--trials", "30",
               "--sampler", "random", "--storage", url, "--study", "s"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(300):  # until the sweep has written its study
        if db.exists() and db.stat().st_size > 0:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    lock = sqlite3.connect(db, timeout=30, check_same_thread=False)
    lock.execute("BEGIN EXCLUSIVE")  # nobody else may write (or, in WAL, checkpoint) now
    threading.Timer(2.0, lambda: (lock.rollback(), lock.close())).start()
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    study = optuna.load_study(study_name="s", storage=url)
    launched = [t for t in study.trials if is_launched(t)]
    assert len(launched) == 30 and all(trial_status(t) == "ok" for t in launched)
    assert optuna.trial.TrialState.RUNNING not in {t.state for t in study.trials}


def test_a_disk_that_fills_during_an_export_leaves_the_old_file_whole(tmp_path) -> None:
    """The disk fills while an export is written (a real file-size limit): the write fails,
    the previous export is untouched, no temporary file is left."""
    # a real limit on file size (RLIMIT_FSIZE) in a child process: its write fails with EFBIG
    # as it would with ENOSPC on a full disk
    target = tmp_path / "best.json"
    write_atomic(target, '{"old": true}\n')
    script = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from autotune.export import write_atomic\n"
        "try:\n"
        f"    write_atomic({str(target)!r}, 'x' * 100000)\n"
        "except OSError as exc:\n"
        "    print(exc.errno); sys.exit(3)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert done.returncode == 3 and int(done.stdout) == errno.EFBIG, done.stderr
    assert target.read_text() == '{"old": true}\n'  # the previous export, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["best.json"]  # no temporary file left


def _as_postgres(sql: str) -> None:
    subprocess.run(["su", "postgres", "-c", f'psql -qd postgres -c "{sql}"'], check=True,
                   capture_output=True, timeout=60)  # fmt: skip


def test_a_postgresql_server_gone_mid_sweep_ends_it_in_one_line_and_loses_nothing(tmp_path):
    """The database stops taking connections and drops the sweep's (what a server going away
    looks like to a client): the sweep ends with a one-line error, exit 1; every trial it had
    told is still there once the server is back, and the sweep resumes."""
    import os
    import shutil

    import pytest

    url = os.environ.get("AUTOTUNE_TEST_POSTGRES_URL")
    if not url or os.geteuid() != 0 or shutil.which("su") is None:
        pytest.skip("needs the CI PostgreSQL server (AUTOTUNE_TEST_POSTGRES_URL) and root")
    name = f"gone-{os.getpid()}"
    command = [sys.executable, "-m", "autotune.cli", "tune", "--replay", str(_grid(tmp_path)),
               "--params", "a,b", "--metric", "m", "--maximize", "--sampler", "random",
               "--storage", url, "--study", name]  # fmt: skip
    proc = subprocess.Popen([*command, "--trials", "36"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    told = 0
    try:
        for _ in range(600):
            time.sleep(0.05)
            try:
                trials = optuna.load_study(study_name=name, storage=url).trials
            except KeyError:
                continue
            # trials told by then (one may be being told and the next asked meanwhile)
            told = sum(1 for t in trials if t.state.is_finished())
            if told >= 4:
                break
        _as_postgres("ALTER DATABASE autotune_test ALLOW_CONNECTIONS false")
        _as_postgres("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     "datname = 'autotune_test' AND pid <> pg_backend_pid()")  # fmt: skip
        _, err = proc.communicate(timeout=300)
    finally:
        _as_postgres("ALTER DATABASE autotune_test ALLOW_CONNECTIONS true")
        if proc.poll() is None:
            proc.kill()
    if proc.returncode == 0:
        pytest.fail("the sweep finished before the server went away; make it longer")
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert proc.returncode == 1 and "Traceback" not in err, err[-2000:]
    assert "storage" in lines[-1].lower() and "autotune:autotune@" not in err  # no password
    assert "connection" in lines[-1].lower()  # the cause: the server dropped it
    study = optuna.load_study(study_name=name, storage=url)
    finished = [t for t in study.trials if t.state.is_finished()]
    assert len(finished) >= told and all(trial_status(t) == "ok" for t in finished)
    again = subprocess.run([*command, "--trials", str(len(finished) + 3)], capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    resumed = optuna.load_study(study_name=name, storage=url)
    assert sum(1 for t in resumed.trials if is_launched(t)) >= len(finished) + 3
