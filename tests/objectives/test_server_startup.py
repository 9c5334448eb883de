"""A server sweep stops early where the server cannot start for any config, and only there:
real sweeps (``autotune tune server``) of tiny scripts that exit at once, for every config or
for some. The rule is the workload's (it reads the trials as told, wherever they ran): the sweeps
run ``--executor inline``, a worker process's start (torch's import) saved for each crashed
trial; the recording runs its trials in a worker process, as ``autotune record`` always does."""

from __future__ import annotations

import subprocess
import sys

import optuna

from tests.server_studies import CLI


def _sweep(tmp_path, script: str, choices: str, trials: int) -> subprocess.CompletedProcess:
    server = tmp_path / "srv.py"
    server.write_text(script)
    space = tmp_path / "s.yaml"
    space.write_text("workload: server\nparameters:\n"
                     f"  max_num_seqs: {{type: categorical, choices: [{choices}]}}\n")  # fmt: skip
    command = f"{sys.executable} {server} --port {{port}} --max-num-seqs {{max_num_seqs}}"
    return subprocess.run(
        [*CLI, "tune", "server", "--space", str(space), "--sampler", "grid", "--problem",
         f"command={command},num_requests=2,output_len=2,prompt_len=4,rate=50",
         "--trials", str(trials), "--finish-top", "0", "--executor", "inline", "--storage",
         f"sqlite:///{tmp_path / 's.db'}", "--study", "s"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _launched(tmp_path) -> list[str]:
    """The stored trials' statuses, less a config asked for ahead and never launched."""
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 's.db'}")
    return [t.user_attrs["status"] for t in study.trials if "duration_s" in t.user_attrs]


def test_a_server_that_never_starts_stops_the_sweep_after_its_first_trials(tmp_path) -> None:
    # every trial was `crashed`, a server start each, for the whole budget, ending exit 1
    done = _sweep(tmp_path, "raise SystemExit(3)\n", "4, 8, 16, 32, 64, 128, 256", trials=7)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the server never started: the first 4 trials of this run "
                           "each exited with code 3 before it was healthy: (it printed "
                           "nothing); command="), last  # fmt: skip
    assert "--max-num-seqs {max_num_seqs}' failed alike for each config tried" in last
    assert "4 trials are stored" in last and "stopped by a failure every config" in done.stderr
    assert _launched(tmp_path) == ["crashed"] * 4


_SOME_CRASH = """import os, sys
if int(sys.argv[sys.argv.index("--max-num-seqs") + 1]) >= 128:
    raise SystemExit(3)
os.execv(sys.executable, [sys.executable, "-m", "autotune.objectives.engine_server",
                          *sys.argv[1:]])
"""


def test_a_server_that_crashes_only_for_some_configs_is_swept_to_its_budget(tmp_path) -> None:
    # the untuned default (256) and two more of the first four crash alike; the fourth serves
    done = _sweep(tmp_path, _SOME_CRASH, "4, 256, 512, 1024", trials=4)
    assert done.returncode == 0, done.stderr
    assert "stopped by trials" in done.stderr and "never started" not in done.stderr
    assert '"max_num_seqs": 4' in done.stdout
    assert sorted(_launched(tmp_path)) == ["crashed"] * 3 + ["ok"]


def test_a_recording_of_a_server_that_never_starts_stops_after_its_first_configs(
    tmp_path,
) -> None:
    # `autotune record server` measured the whole grid, a server start each, every row crashed
    server = tmp_path / "srv.py"
    server.write_text("raise SystemExit(3)\n")
    space = tmp_path / "s.yaml"
    space.write_text("workload: server\nparameters:\n  max_num_seqs: {type: categorical, "
                     "choices: [4, 8, 16, 32, 64, 128, 256]}\n")  # fmt: skip
    table = tmp_path / "grid.csv"
    command = f"{sys.executable} {server} --port {{port}} --max-num-seqs {{max_num_seqs}}"
    done = subprocess.run(
        [*CLI, "record", "server", "--space", str(space), "--output", str(table), "--problem",
         f"command={command},num_requests=2,output_len=2,prompt_len=4,rate=50"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the server never started: the first 4 trials of this run "
                           "each exited with code 3 before it was healthy: (it printed "
                           "nothing); command="), last  # fmt: skip
    assert last.endswith(f"failed alike for each config tried: fix it and run again; {table} holds "
                         "the 4 rows it measured"), last  # fmt: skip
    rows = table.read_text().splitlines()[1:]
    assert len(rows) == 4 and all(",crashed," in row for row in rows), rows
