import json
import subprocess
import sys
from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml

from autotune.driver import Sweep, SweepSettings
from autotune.export import (
    ExportError,
    best_record,
    export_text,
    load_record,
    write_atomic,
)
from autotune.space import Param, Space
from autotune.triton_source import triton_config_source
from tests.cli_in_process import autotune_in_process


@pytest.fixture(scope="module")
def study() -> optuna.Study:
    space = Space(
        "tiles",
        [
            Param("BLOCK_M", "pow2", low=16, high=64),
            Param("num_warps", "categorical", choices=[4, 8]),
            Param("score", "categorical", choices=[0.25, 0.5, 1.0]),
        ],
    )
    settings = SweepSettings(
        workload="faults",
        problem={"M": 64},
        space=space,
        objectives={"score": "maximize"},
        sampler="grid",
        n_trials=None,
        storage="memory",
        executor="inline",
        device={"type": "cpu", "name": "test cpu"},
        command="autotune tune faults --demo",
    )
    return Sweep(settings).run().study


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_export_round_trips(tmp_path, study, fmt):
    path = tmp_path / f"best.{fmt}"
    write_atomic(path, export_text(study, fmt))
    record = load_record(path)
    expected = best_record(study)
    expected.pop("exported"), record.pop("exported")
    assert record == expected
    assert record["config"]["score"] == 1.0
    assert record["values"] == {"score": 1.0}
    assert record["command"] == "autotune tune faults --demo"
    assert record["device"]["name"] == "test cpu"
    assert record["problem"] == {"M": 64}


def test_triton_export_lists_the_best_configs_first(study):
    text = export_text(study, "triton", top=3)
    namespace: dict = {}
    exec(compile(text, "configs.py", "exec"), namespace)  # noqa: S102
    configs = namespace["configs"]
    assert len(configs) == 3
    assert all(c.kwargs["score"] == 1.0 for c in configs)  # the three configs that scored 1.0
    assert {c.num_warps for c in configs} <= {4, 8}
    assert "num_warps" not in configs[0].kwargs


def test_triton_config_source_splits_meta_parameters_from_launch_options():
    source = triton_config_source(
        [{"BLOCK_M": 128, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}], ["best"]
    )
    assert "triton.Config({'BLOCK_M': 128, 'GROUP_M': 8}, num_warps=8, num_stages=3)" in source


def test_nothing_to_export():
    empty = optuna.create_study()
    with pytest.raises(ExportError, match="no successful trial"):
        best_record(empty)
    with pytest.raises(ExportError, match="unknown export format"):
        export_text(empty, "toml")


def test_write_atomic_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "best.json"
    write_atomic(path, json.dumps({"a": 1}))

    with pytest.raises(TypeError):
        write_atomic(path, 12345)  # not text: the write fails half-way
    assert json.loads(path.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["best.json"]


def test_yaml_is_plain_data(study):
    assert isinstance(yaml.safe_load(export_text(study, "yaml")), dict)


def test_triton_export_puts_the_finish_winner_first_then_the_rest_by_reading():
    study = optuna.create_study(direction="maximize")
    study.set_user_attr("autotune", {"objectives": {"tflops": "maximize"}, "workload": "matmul"})
    distributions = {
        "BLOCK_M": optuna.distributions.CategoricalDistribution([32, 64, 128]),
        "num_warps": optuna.distributions.CategoricalDistribution([4, 8]),
    }
    readings = [(32, 4, 700.0), (64, 8, 723.7), (128, 4, 690.0), (128, 8, 600.0)]
    for bm, warps, value in readings:
        study.add_trial(optuna.trial.create_trial(
            params={"BLOCK_M": bm, "num_warps": warps}, distributions=distributions,
            value=value, user_attrs={"status": "ok"},
        ))  # fmt: skip
    # trial 1 read 723.7 once (lucky); the finish re-measured 0, 1, 2 and found 0 the winner
    study.set_user_attr("finish", {"rows": [
        {"trial": 0, "median": 705.0, "spread": 0.02, "samples": [704.0, 705.0, 709.0]},
        {"trial": 1, "median": 698.0, "spread": 0.03, "samples": [690.0, 698.0, 701.0]},
        {"trial": 2, "median": 689.0, "spread": 0.01, "samples": [688.0, 689.0, 690.0]},
    ]})  # fmt: skip
    text = export_text(study, "triton", top=4, rename={"BLOCK_M": "BLOCK_SIZE_M"})
    namespace: dict = {}
    exec(text, namespace)  # noqa: S102 - the exported module, as a kernel file would import it
    configs = namespace["configs"]
    assert [c.kwargs["BLOCK_SIZE_M"] for c in configs] == [32, 64, 128, 128]
    assert [c.num_warps for c in configs] == [4, 8, 4, 8]
    lines = [line for line in text.splitlines() if "triton.Config(" in line]
    assert "finish median 705 tflops, spread 2.0% over 3 rounds" in lines[0]
    assert "600 tflops (one sweep reading)" in lines[3]


def test_exports_take_the_users_umask_not_the_temporary_files_0600(tmp_path):
    import os
    import stat

    from autotune.export import write_atomic

    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "best.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert not list(tmp_path.glob(".best.json.*"))  # no temporary file left behind


def test_write_atomic_follows_a_link_and_writes_a_device_in_place(tmp_path):
    # a rename would have replaced the link with a file, and /dev/full (as root: any device,
    # /dev/stdout's terminal) with a regular file
    target = tmp_path / "best.json"
    target.write_text("old")
    (tmp_path / "link.json").symlink_to(target)
    write_atomic(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and target.read_text() == "new"
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    with pytest.raises(OSError) as failed:
        write_atomic("/dev/full", "x" * 10_000)
    assert failed.value.filename == "/dev/full"
    assert Path("/dev/full").is_char_device()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autotune.cli", *args], capture_output=True,
                          text=True, timeout=240, cwd=cwd)  # fmt: skip


def _replayed(tmp_path: Path, name: str, table: pd.DataFrame, params: str, metric: str) -> str:
    """``tune --replay`` of ``table`` (written to NAME.csv) into a storage; its URL. Its
    lookups run in the command's own process (``--executor inline``): a worker process would
    import torch again only to read a table."""
    table.to_csv(tmp_path / f"{name}.csv", index=False)
    url = f"sqlite:///{tmp_path / 'r.db'}"
    done = _cli("tune", "--replay", f"{name}.csv", "--params", params, "--metric", metric,
                "--sampler", "grid", "--executor", "inline", "--storage", url, "--study", name,
                cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return url


#: a replay of a kernel's table whose rows record no device; several tests read its study
TILES = pd.DataFrame({"BLOCK_M": [16, 32], "num_warps": [4, 8], "tflops": [90.0, 113.0]})


@pytest.fixture(scope="module")
def tiles_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The storage of ``tune --replay`` of :data:`TILES` (study ``mm``), made once for the
    tests that only export it (on one xdist worker: their ``xdist_group``)."""
    return _replayed(tmp_path_factory.mktemp("tiles"), "mm", TILES, "BLOCK_M,num_warps",
                     "tflops")  # fmt: skip


def test_a_replay_is_exported_as_its_tables_workload_and_device(tmp_path):
    # as `autotune record serving` writes it: the workload and problem stamped on every row
    serving = pd.DataFrame({"max_num_seqs": [64, 128], "block_size": [16, 16],
                            "cuda_graphs": [False, False], "workload": ["serving"] * 2,
                            "problem.rate": [40.0] * 2, "status": ["ok"] * 2,
                            "goodput_tok_s": [10.0, 19.0]})  # fmt: skip
    url = _replayed(tmp_path, "sv", serving, "max_num_seqs,block_size,cuda_graphs",
                    "goodput_tok_s")  # fmt: skip
    triton = autotune_in_process("export", "--to", "triton", "--storage", url, "--study", "sv",
                                 cwd=tmp_path)  # fmt: skip
    assert triton.returncode == 2 and "Traceback" not in triton.stderr
    assert triton.stderr.strip() == (
        "error: study 'sv' replays a serving table (its workload column), not a kernel's: "
        "triton.Config has nothing of it to hold (--to vllm or sglang)"
    )
    vllm = autotune_in_process("export", "--to", "vllm", "--storage", url, "--study", "sv",
                               cwd=tmp_path)  # fmt: skip
    assert vllm.returncode == 0, vllm.stderr
    assert "# not expressed: replay: REPLAY of sv.csv" in vllm.stdout  # labelled a replay
    assert yaml.safe_load(vllm.stdout)["max-num-seqs"] == 128
    # where it was measured is not recorded: cuda_graphs off may be a CPU's, not a finding
    assert "enforce-eager" not in vllm.stdout
    exported = autotune_in_process("export", "--storage", url, "--study", "sv", cwd=tmp_path)
    record = json.loads(exported.stdout)
    assert record["device"] == {} and record["replay"]["workload"] == "serving"
    assert record["replay"]["source"] == "replay of a recorded table, device not recorded"
    assert record["replay"]["replayed_on"]["type"] == "cpu"  # the machine, kept apart


def test_a_replay_of_a_kernel_table_names_the_device_it_records(tmp_path):
    tiles = pd.DataFrame({"BLOCK_M": [16, 32], "num_warps": [4, 8], "tflops": [90.0, 113.0],
                          "device.name": ["NVIDIA H200"] * 2})  # fmt: skip
    url = _replayed(tmp_path, "mm", tiles, "BLOCK_M,num_warps", "tflops")
    exported = autotune_in_process("export", "--storage", url, "--study", "mm", cwd=tmp_path)
    record = json.loads(exported.stdout)
    assert record["device"] == {"name": "NVIDIA H200"}
    assert record["replay"]["source"] == "replay of measurements on NVIDIA H200"
    module = autotune_in_process("export", "--to", "triton", "--storage", url, "--study", "mm",
                                 cwd=tmp_path)  # fmt: skip
    assert module.returncode == 0, module.stderr
    assert module.stdout.startswith('"""Tuned by autotune 0.1.0: replay of measurements on '
                                    "NVIDIA H200; replayed on ")  # fmt: skip


def test_write_atomic_writes_into_a_pipe_through_dev_stdout_s_link(tmp_path):
    # /dev/stdout into a pipe is a link to /proc/self/fd/1, a link to "pipe:[N]": no path to
    # resolve() or rename onto; the text goes into the pipe and nothing is left on disk
    script = (
        "from autotune.export import write_atomic\n"
        "write_atomic('/dev/stdout', 'through the pipe\\n')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert out.returncode == 0
    assert out.stdout == "through the pipe\n"
    assert list(tmp_path.iterdir()) == []


def test_write_atomic_through_a_dangling_link_writes_the_file_it_names(tmp_path):
    link = tmp_path / "best.json"
    link.symlink_to(tmp_path / "target.json")
    write_atomic(link, "new")
    assert link.is_symlink() and (tmp_path / "target.json").read_text() == "new"


@pytest.mark.xdist_group("export_tiles")
@pytest.mark.parametrize("fd", [1, 2])
def test_an_output_on_a_descriptor_the_shell_opened_on_a_file_is_written_into_that_file(
    tmp_path, tiles_url, fd
):
    # `export --output /dev/stdout >> run.log`: /dev/stdout then named a regular file, which
    # was replaced through a temporary file and a rename: the log's earlier lines were lost
    log = tmp_path / "run.log"
    log.write_text("existing line\n")
    name = {1: "/dev/stdout", 2: "/dev/stderr"}[fd]
    with open(log, "a") as appended:  # a process: the shell's descriptor is the point
        done = subprocess.run(
            [sys.executable, "-m", "autotune.cli", "export", "--storage", tiles_url, "--study",
             "mm", "--output", name],
            stdout=appended if fd == 1 else subprocess.PIPE,
            stderr=appended if fd == 2 else subprocess.PIPE, cwd=tmp_path, timeout=240,
        )  # fmt: skip
    assert done.returncode == 0
    text = log.read_text()
    assert text.startswith("existing line\n"), text[:200]
    exported = text[text.index("{") : text.rindex("}") + 1]
    assert json.loads(exported)["config"] == {"BLOCK_M": 32, "num_warps": 8}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.log"]  # nothing left beside it


def test_a_descriptor_path_is_a_device_whatever_it_is_open_on():
    # under pytest's capture, fd 1 is a regular file: an export's notes file went beside it,
    # to /dev/stdout.not_expressed.json
    from autotune.cli_parsing import is_device
    from autotune.cli_results import _side_file

    if not Path("/dev/stdout").is_file():
        pytest.skip("stdout is not captured to a file (pytest -s)")
    assert is_device(Path("/dev/stdout")) and is_device(Path("/proc/self/fd/2"))
    assert _side_file(Path("/dev/stdout"), "memory", []) is None


@pytest.mark.xdist_group("export_tiles")
def test_a_yaml_export_of_a_replay_has_no_anchors(tmp_path, tiles_url):
    # the replay's device stood twice in the record: 'device: &id001 {}' ... '*id001'
    done = autotune_in_process("export", "--to", "yaml", "--storage", tiles_url, "--study", "mm",
                               cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "&id" not in done.stdout and "*id" not in done.stdout
    assert yaml.safe_load(done.stdout)["config"] == {"BLOCK_M": 32, "num_warps": 8}


def test_a_finished_study_with_no_success_has_none_not_none_yet():
    # a study whose every trial failed said 'has no successful trial yet', as if one still ran
    study = optuna.create_study(study_name="f")
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
    with pytest.raises(ExportError) as finished:
        best_record(study)
    assert str(finished.value).startswith("study 'f' has no successful trial: no best config")
    study.ask()  # a trial still running: one may succeed
    with pytest.raises(ExportError, match=r"^study 'f' has no successful trial yet: no best"):
        best_record(study)
