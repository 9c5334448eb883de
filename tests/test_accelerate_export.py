"""The accelerate export (:mod:`autotune.accelerate_export`), read by accelerate's own config
reader and launched by ``accelerate launch``."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autotune.train_export import training_export
from tests.process_group import own_group
from tests.training_records import PARALLEL, PROBLEM, _parallel, _record


def test_accelerate_config_loads_with_accelerates_own_reader(tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    out = training_export(_record(), "accelerate")
    path = tmp_path / "accelerate.yaml"
    path.write_text(out.text)
    config = ClusterConfig.from_yaml_file(str(path))
    assert str(config.mixed_precision) == "fp16" and config.num_processes == 1
    assert config.dynamo_config["dynamo_backend"] == "INDUCTOR"
    # what the file cannot hold is written into it as comments
    assert "# not expressed: gradient_accumulation_steps: 4" in out.text
    assert "# not expressed: activation_checkpointing" in out.text


def test_accelerate_reads_a_multi_gpu_fsdp2_config(tmp_path):
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    mode = "max-autotune-no-cudagraphs"
    out = training_export(_parallel(layout="fsdp2", compile=True, compile_mode=mode), "accelerate")
    path = tmp_path / "accelerate.yaml"
    path.write_text(out.text)
    config = ClusterConfig.from_yaml_file(str(path))
    assert config.distributed_type == "FSDP" and config.num_processes == 4
    assert config.fsdp_config["fsdp_version"] == 2
    assert config.dynamo_config["dynamo_mode"] == "max-autotune-no-cudagraphs"


_ACCELERATE_RANK = """
import json, os
from accelerate.parallelism_config import ParallelismConfig
told = os.environ.get("ACCELERATE_USE_PARALLELISM_CONFIG")
print(json.dumps([told, ParallelismConfig().tp_size]))
"""


def test_accelerate_launches_a_tensor_parallel_winner_tensor_parallel(tmp_path):
    # written MULTI_GPU alone, accelerate launch handed Accelerator() no tensor-parallel size,
    # so prepare() wrapped the parallelize_module'd model in DDP, which refuses DTensor weights
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    record = {**_parallel(layout="tp"), "problem": {**PARALLEL, "world_size": 2}}
    out = training_export(record, "accelerate")
    config, rank = tmp_path / "accelerate.yaml", tmp_path / "rank.py"
    config.write_text(out.text)
    rank.write_text(_ACCELERATE_RANK)
    assert ClusterConfig.from_yaml_file(str(config)).distributed_type == "MULTI_GPU"
    launch = [sys.executable, "-P", "-m", "accelerate.commands.launch", "--config_file",
              str(config), "--main_process_port", "0", str(rank)]  # fmt: skip
    # the launcher's ranks in its process group, ended with the test if the wait runs out
    with own_group(launch, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as done:
        stdout, stderr = done.communicate(timeout=180)
    assert done.returncode == 0, stderr[-2000:]
    said = [json.loads(line) for line in stdout.splitlines() if line.startswith("[")]
    assert said == [["true", 2], ["true", 2]]  # both processes, tensor parallel over 2
    assert "set model.tp_size = 2" in out.not_expressed["layout"]
    on_cpu = training_export({**record, "device": {"type": "cpu"}}, "accelerate")
    assert "refuses MULTI_CPU" in on_cpu.not_expressed["layout"]


def test_accelerate_says_fp16s_first_loss_scale():
    out = training_export(_record(), "accelerate")
    assert out.not_expressed["loss_scale_init"].startswith("1024: GradScaler(init_scale")


def test_a_multi_process_sweep_on_a_cpu_is_exported_to_accelerate_as_multi_cpu():
    # a ddp winner over 2 gloo processes was written MULTI_GPU with use_cpu: true, and its
    # notes said "over 2 GPUs"
    accelerate = pytest.importorskip("accelerate")
    problem = {**PROBLEM, "world_size": 2}
    on_cpu = {**_record(layout="ddp"), "problem": problem, "device": {"type": "cpu"}}
    out = training_export(on_cpu, "accelerate")
    kind = out.settings["distributed_type"]
    assert kind == "MULTI_CPU" and accelerate.utils.DistributedType(kind)  # a name it takes
    assert (
        out.settings["use_cpu"] is True
        and "GPU" not in training_export(on_cpu, "hf").not_expressed["layout"]
    )
    assert "over 2 CPU processes" in training_export(on_cpu, "hf").not_expressed["layout"]
    on_gpu = {**on_cpu, "device": {"type": "cuda", "name": "H100"}}
    assert training_export(on_gpu, "accelerate").settings["distributed_type"] == "MULTI_GPU"
    assert "over 2 GPUs" in training_export(on_gpu, "hf").not_expressed["layout"]


_ACCELERATE_PROCESS = """
import json, os
from accelerate import Accelerator
a = Accelerator()
said = [a.num_processes, a.process_index, a.distributed_type.value]
os.write(1, (json.dumps(said) + "\\n").encode())  # one write: the ranks' lines stay whole
"""


@pytest.mark.parametrize("layout", ["ddp", "fsdp2"])
def test_a_cpu_sweeps_processes_start_as_its_accelerate_note_says(tmp_path, layout):
    # a ddp winner over 2 gloo processes, written MULTI_CPU, started under `accelerate launch
    # --config_file` as one process (accelerate starts MULTI_CPU's through mpirun alone), which
    # trained half the global batch a step; an fsdp2 one as 2 processes that each trained alone
    # (DistributedType NO: the file's use_cpu never reached them); the export said neither
    pytest.importorskip("accelerate")
    import os

    on_cpu = {**_parallel(layout=layout), "problem": {**PARALLEL, "world_size": 2},
              "device": {"type": "cpu"}}  # fmt: skip
    out = training_export(on_cpu, "accelerate")
    note = out.not_expressed["layout"]
    command = "ACCELERATE_USE_CPU=true accelerate launch --config_file THIS --multi_gpu SCRIPT"
    assert note.startswith(f"{layout} over 2 CPU processes: ") and command in note
    config, script = tmp_path / "accelerate.yaml", tmp_path / "rank.py"
    config.write_text(out.text)
    script.write_text(_ACCELERATE_PROCESS)
    launch = [sys.executable, "-P", "-m", "accelerate.commands.launch", "--config_file",
              str(config), "--main_process_port", "0"]  # fmt: skip

    def started(*extra: str, env: dict[str, str] | None = None) -> list[list]:
        with own_group([*launch, *extra, str(script)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True,
                       env={**os.environ, **(env or {})}) as done:  # fmt: skip
            stdout, stderr = done.communicate(timeout=180)
        assert done.returncode == 0, stderr[-2000:]
        return sorted(json.loads(line) for line in stdout.splitlines() if line.startswith("["))

    plain = started()
    assert plain in ([[1, 0, "NO"]], [[1, 0, "NO"], [1, 0, "NO"]])  # one, or two alone
    # the note's command: both processes, one data-parallel group over gloo
    assert started("--multi_gpu", env={"ACCELERATE_USE_CPU": "true"}) == [
        [2, 0, "MULTI_CPU"],
        [2, 1, "MULTI_CPU"],
    ]
