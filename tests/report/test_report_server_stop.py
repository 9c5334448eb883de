"""Stopping ``autotune report --serve``: it says the server stopped, not a sweep's words."""

import signal
import socket
import subprocess
import sys
import urllib.request

import optuna
import pytest


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_report_server_says_the_server_stopped(tmp_path, sig):
    # it printed "interrupted; finished trials are stored", a sweep's message
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(study_name="s", storage=url, direction="maximize")
    study.optimize(lambda t: t.suggest_float("x", 0.0, 1.0), n_trials=2)
    with socket.socket() as probe:  # a port free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "report", "--serve", str(port), "--storage", url],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = server.stderr.readline()
        assert first.startswith("serving the report of"), first + server.stderr.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=60) as answer:
            assert answer.status == 200  # serving: stopped from its loop, as a user stops it
        server.send_signal(sig)
        _, rest = server.communicate(timeout=60)  # a server that ignores the signal fails
        assert server.returncode == 130
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert rest.strip() == "report server stopped", rest
