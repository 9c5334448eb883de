"""The tuning cache's key of a server sweep holds the server program: its files and the version
of the Python package it comes from, so an edited or upgraded server sweeps again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autotune.objectives.server_program import server_program_parts


def _settings(command: str):  # noqa: ANN202
    from autotune.sweep_setup import build_settings

    return build_settings(
        workload="server", space=None, problem={"command": command}, objective=None,
        sampler="auto", trials=1, time_budget_s=None, seed=0, storage="memory", study=None,
        trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None, params=None,
        metric=None, maximize=True, command="autotune tune server",
    )  # fmt: skip


def test_an_edited_server_script_is_another_sweep_for_the_cache(tmp_path: Path) -> None:
    script = tmp_path / "srv.py"
    script.write_text("print('fast')\n")
    command = (f"{sys.executable} {script} --port {{port}} --max-num-seqs {{max_num_seqs}} "
               "--max-num-batched-tokens {max_num_batched_tokens} --block-size {block_size} "
               "--policy {policy}")  # fmt: skip
    before = _settings(command).fingerprint
    assert before["key"] == _settings(command).fingerprint["key"]  # unchanged: the same key
    assert str(script) in before["parts"]["external"]["files"]
    script.write_text("print('slow at 32 sequences and more')\n")
    assert _settings(command).fingerprint["key"] != before["key"]


def test_a_file_given_as_an_option_value_is_keyed_and_a_placeholder_is_not(tmp_path: Path) -> None:
    config = tmp_path / "engine.yaml"
    config.write_text("max_model_len: 4096\n")
    parts = server_program_parts(f"{sys.executable} -m optuna --config={config} --x {{port}}")
    assert str(config) in parts["files"] and "{port}" not in parts["files"]
    config.write_text("max_model_len: 8192\n")
    assert server_program_parts(f"{sys.executable} -m optuna --config={config}") != parts


def _install(site: Path, version: str) -> None:
    """A distribution ``fakesrv`` of ``version`` with a console script, as pip leaves one."""
    for old in site.glob("fakesrv-*.dist-info"):
        for f in old.iterdir():
            f.unlink()
        old.rmdir()
    info = site / f"fakesrv-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakesrv\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[console_scripts]\nfakesrv = fakesrv:main\n")
    (info / "top_level.txt").write_text("fakesrv\n")


@pytest.mark.parametrize("how", ["console script", "python -m"])
def test_an_upgraded_server_package_is_another_sweep_for_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    site, bin_dir = tmp_path / "site", tmp_path / "bin"
    bin_dir.mkdir()
    (site / "fakesrv").mkdir(parents=True)
    (site / "fakesrv" / "__init__.py").write_text("def main():\n    pass\n")
    script = bin_dir / "fakesrv"  # the same wrapper before and after an upgrade, as pip's
    script.write_text(f"#!{sys.executable}\nfrom fakesrv import main\nmain()\n")
    script.chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(site))  # the server's interpreter sees the package
    command = str(script) if how == "console script" else f"{sys.executable} -m fakesrv.cli"
    _install(site, "1.0")
    old = server_program_parts(f"{command} serve --port {{port}}")
    assert old["package"] == "fakesrv 1.0"
    _install(site, "1.1")
    assert server_program_parts(f"{command} serve --port {{port}}")["package"] == "fakesrv 1.1"
