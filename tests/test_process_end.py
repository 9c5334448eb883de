"""The command's start and end: the budget counts from the process's start, and the end
skips the interpreter's teardown but not the exit handlers, the output or the storage."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(code: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)  # fmt: skip


def test_the_process_start_is_before_the_imports_that_read_it():
    # --time-budget counted from the CLI module's import: the interpreter's start and the
    # imports before it ran outside the budget
    done = _python("""
        import time
        time.sleep(0.5)  # a slow start, before the module is imported
        from autotune.cli import COMMAND_STARTED
        print(time.monotonic() - COMMAND_STARTED)
    """)
    assert done.returncode == 0, done.stderr
    assert 0.45 < float(done.stdout) < 60


def test_the_end_runs_the_exit_handlers_flushes_and_keeps_the_code():
    done = _python("""
        import atexit, sys
        atexit.register(lambda: print("handler ran", file=sys.stderr))
        print("result", end="")  # buffered: a pipe is no terminal
        from autotune.process_end import end_process
        end_process(3)
        print("never")
    """)
    assert done.returncode == 3
    assert done.stdout == "result" and "handler ran" in done.stderr


def test_a_thread_still_running_is_waited_for():
    done = _python("""
        import threading, time
        from autotune.process_end import end_process
        def late():
            time.sleep(0.3)
            print("the thread finished", flush=True)
        threading.Thread(target=late).start()
        end_process(4)
    """)
    assert done.returncode == 4 and "the thread finished" in done.stdout


def test_a_sqlite_storage_leaves_no_log_files_behind(tmp_path):
    # the last connection's close removes -wal and -shm; os._exit came before it
    done = _python("""
        import optuna
        from autotune.storage import open_storage
        storage = open_storage("sqlite:///s.db")
        optuna.create_study(storage=storage, study_name="s").optimize(lambda t: 1.0, n_trials=2)
        from autotune.process_end import end_process
        end_process(0)
    """, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


def test_a_process_that_ran_long_before_asking_counts_from_now():
    # the CLI called in a notebook's process started an hour ago: its budget was spent at once
    done = _python("""
        import time
        import autotune.process_end as process_end
        process_end.MOST_START_S = 0.2
        time.sleep(0.5)
        print(time.monotonic() - process_end.process_started())
    """)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 0.1
