"""The commands autotune's output suggests name the storage the study is in."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from autotune.redact import STORAGE_ENV
from autotune.suggest import suggested
from tests.cli_in_process import autotune_in_process


def _cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != STORAGE_ENV} | (env or {})
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd, env=environ)  # fmt: skip


def _failed_sweep(tmp_path: Path, *storage: str, env: dict[str, str] | None = None) -> str:
    """The stderr of a replay sweep of study 's' whose one trial broke its --slo."""
    (tmp_path / "t.csv").write_text("p,tflops\n1,3.0\n")
    swept = _cli("tune", "--replay", "t.csv", "--params", "p", "--metric", "tflops",
                 "--minimize", "--slo", "tflops=1", "--trials", "1", *storage, "--study", "s",
                 "--executor", "inline", cwd=tmp_path, env=env)  # fmt: skip
    assert swept.returncode == 1, swept.stderr
    return swept.stderr


def _pointed_to(text: str) -> list[str]:
    """The command in backquotes in ``text``, as the shell splits it, run by this Python."""
    args = shlex.split(re.findall(r"`(autotune [^`]*)`", text)[-1])
    return [sys.executable, "-m", "autotune.cli", *args[1:]]


def test_the_commands_a_sweep_in_another_storage_points_to_name_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # after `--storage sqlite:///other.db` the line said `autotune trials --study s`, which
    # reads ./autotune.db: "no study named 's'"
    (tmp_path / "my dir").mkdir()
    url = f"sqlite:///{tmp_path / 'my dir' / 'other.db'}"
    swept = _failed_sweep(tmp_path, "--storage", url)
    listing = f"autotune trials --study s --storage {shlex.quote(url)}"
    assert f"(`{listing}` lists them)" in swept, swept
    monkeypatch.delenv(STORAGE_ENV, raising=False)  # as _cli leaves it out
    listed = autotune_in_process(*_pointed_to(swept)[3:], cwd=tmp_path)
    assert listed.returncode == 0 and "slo_violated" in listed.stdout, listed.stderr
    best = autotune_in_process("best", "--storage", url, "--study", "s", cwd=tmp_path)
    assert best.returncode == 2 and f"(`{listing}` says why)" in best.stderr, best.stderr


def test_a_storage_from_the_environment_is_left_to_it(tmp_path: Path) -> None:
    env = {STORAGE_ENV: f"sqlite:///{tmp_path / 'env.db'}"}
    swept = _failed_sweep(tmp_path, env=env)
    assert "(`autotune trials --study s` lists them)" in swept, swept
    listed = subprocess.run(_pointed_to(swept), capture_output=True, text=True, cwd=tmp_path,
                            env=os.environ | env)  # fmt: skip
    assert listed.returncode == 0 and "slo_violated" in listed.stdout, listed.stderr


def test_a_storage_that_keeps_nothing_gets_no_command_to_read_it(tmp_path: Path) -> None:
    swept = _failed_sweep(tmp_path, "--storage", "memory")
    last = swept.strip().splitlines()[-1]
    assert last.endswith("loosen a limit to get a best config"), last


def test_a_suggested_storage_never_shows_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STORAGE_ENV, raising=False)
    hint = suggested("trials", "s", "postgresql://tuner:hunter2@db/sweeps")
    assert hint == "autotune trials --study s --storage 'postgresql://tuner:***@db/sweeps'"
    assert suggested("trials", "s", "sqlite:///autotune.db") == "autotune trials --study s"
    # the default given over another in the environment: without it, the command reads that
    monkeypatch.setenv(STORAGE_ENV, "sqlite:///env.db")
    hint = suggested("trials", "s", "sqlite:///autotune.db")
    assert hint == "autotune trials --study s --storage sqlite:///autotune.db"
    assert suggested("trials", "s", "sqlite:///env.db") == "autotune trials --study s"
