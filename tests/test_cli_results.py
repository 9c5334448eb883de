"""The commands that read a stored sweep (``export``'s side file here), as a user runs them."""

import subprocess
import sys
from pathlib import Path

import pytest

PROBLEM = {"global_batch": 16, "lr": 3e-4, "seq_len": 64}
#: a train-step config that Hugging Face's TrainingArguments cannot fully express
TUNED = {"micro_batch": 4, "precision": "fp16", "loss_scale_init": 1024,
         "activation_checkpointing": True, "attention_backend": "flash",
         "optimizer": "foreach", "compile": True}  # fmt: skip


def _export_hf(url: str, output: Path | str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", "export", "--to", "hf", "--storage", url,
         "--output", str(output)], capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def train_step_study(tmp_path, one_trial_study) -> str:
    """A stored train-step sweep whose best config hf cannot fully express."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    one_trial_study(url, "t", "train-step", PROBLEM, TUNED, "tokens_per_s", 1000.0)
    return url


def test_an_export_to_a_device_writes_no_notes_file_beside_it(tmp_path, train_step_study):
    """`export --to hf --output /dev/null` wrote /dev/null.not_expressed.json."""
    link = tmp_path / "out.json"  # a name in a folder of the test's own, for /dev/null
    link.symlink_to("/dev/null")
    done = _export_hf(train_step_study, link)
    assert done.returncode == 0, done.stderr
    assert "not expressed in hf: attention_backend" in done.stderr  # still said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "s.db"]
    assert link.is_symlink()
    side = Path("/dev/null.not_expressed.json")
    if not side.exists():  # (one left by an earlier run proves nothing either way)
        assert _export_hf(train_step_study, "/dev/null").returncode == 0
        assert not side.exists()


def test_a_folder_where_the_notes_file_goes_is_one_line_before_anything_is_written(
    tmp_path, train_step_study
):
    output = tmp_path / "args.json"
    (tmp_path / "args.json.not_expressed.json").mkdir()
    done = _export_hf(train_step_study, output)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0] == (f"error: --output {output}: its notes file {output}.not_expressed.json: "
                        "is a folder; name a file")  # fmt: skip
    assert not output.exists()


def test_the_notes_file_is_written_beside_a_regular_output(tmp_path, train_step_study):
    output = tmp_path / "args.json"
    assert _export_hf(train_step_study, output).returncode == 0
    assert output.exists() and (tmp_path / "args.json.not_expressed.json").is_file()


@pytest.mark.parametrize("listed", ["", "a,,b", ","])
def test_an_empty_name_in_studies_is_one_line(tmp_path, listed):
    # '' was passed over (every study of the workload tabulated), ',' said "study '' is
    # named twice"
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "export", "--to", "triton", "--table",
         "--studies", listed, "--storage", f"sqlite:///{tmp_path / 'x.db'}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        == f"error: --studies {listed!r}: an empty study name; name them A,B,..."
    )
