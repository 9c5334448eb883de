"""A one-trial ``server`` sweep of the project's engine server, stored for the export tests
(``tests/test_serving_export.py``, ``tests/objectives/test_server.py``).

Example:
    url = one_trial_server_study(tmp_path, "--max-num-seqs {max_num_seqs} --block-size 32")
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "autotune.cli"]


def one_trial_server_study(tmp_path: Path, flags: str) -> str:
    """Tune ``max_num_seqs`` (4) of the engine server started with ``flags`` for one trial of
    two requests, into study ``s`` of a SQLite file under ``tmp_path``; return its URL."""
    space = tmp_path / "seqs.yaml"
    space.write_text("name: seqs\nworkload: server\nparameters:\n"
                     "  max_num_seqs: {type: categorical, choices: [4]}\n")  # fmt: skip
    command = f"{sys.executable} -m autotune.objectives.engine_server --port {{port}} {flags}"
    url = f"sqlite:///{tmp_path / 's.db'}"
    tuned = subprocess.run(
        [*CLI, "tune", "server", "--space", str(space), "--sampler", "grid", "--problem",
         f"command={command},num_requests=2,output_len=2,prompt_len=4",
         "--trials", "1", "--finish-top", "0", "--storage", url, "--study", "s",
         "--executor", "inline"],  # the server is the trial's process: no worker's start
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert tuned.returncode == 0, tuned.stderr
    return url
