"""The DeepSpeed export (:mod:`autotune.deepspeed_export`), checked by DeepSpeed's own config
and engine, in processes of their own.

DeepSpeed's TorchBackend JIT-builds a C++ extension (deepspeed_shm_comm, its shared-memory
all-reduce for CPU inference) at its first start on a Linux machine: a minute of compiling on a
2-core CI machine, in every run from a clean cache. What is checked here (the config DeepSpeed
takes, the engine's weights and reduce dtypes) does not use it, so each DeepSpeed process marks
it incompatible first, as it is off Linux, and DeepSpeed starts with gloo's collectives alone
(``build_shm_op`` builds no incompatible op). Each runs in a process group of its own
(:func:`tests.process_group.own_group`), ended with its test.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest

from autotune.train_export import training_export
from tests.process_group import own_group
from tests.training_records import PARALLEL, TUNED, _parallel, _record


def test_deepspeed_config_passes_deepspeeds_own_checks():
    pytest.importorskip("deepspeed")
    import torch
    from deepspeed.runtime.config import DeepSpeedConfig

    out = training_export(_record(), "deepspeed")
    config = DeepSpeedConfig(json.loads(out.text), mpu=None)  # checks the batch arithmetic
    assert config.train_batch_size == 16 and config.gradient_accumulation_steps == 4
    assert config.train_micro_batch_size_per_gpu == 4
    # fp16 as the tuned step ran it: autocast over fp32 weights, not fp16 weights
    assert config.torch_autocast_enabled and config.torch_autocast_dtype == torch.float16
    assert not config.float16_config.enabled and not config.bfloat16_config.enabled
    # torch_autocast's GradScaler starts at 2^16 and takes no other first scale
    assert out.not_expressed["loss_scale_init"].startswith("1024: DeepSpeed's torch_autocast")
    assert config.optimizer_name == "adamw" and config.optimizer_params["torch_adam"] is True
    with pytest.raises(AssertionError):  # a wrong product is refused by DeepSpeed itself
        DeepSpeedConfig({**json.loads(out.text), "train_batch_size": 15}, mpu=None)


_DEEPSPEED_ENGINE = """
import json, sys
import deepspeed
import deepspeed.ops
import torch
from deepspeed.runtime.torch_autocast import has_comm_dtype
deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # built by none: see above
deepspeed.init_distributed(dist_backend="gloo")
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                  config=json.loads(sys.argv[1]))
params = list(engine.module.parameters())
try:
    out = str(engine(torch.randn(4, 8)).dtype)
except RuntimeError as exc:  # bf16 weights meeting the fp32 input
    out = str(exc)
print(json.dumps([sorted({str(p.dtype) for p in params}), out,
                  [str(p.comm_dtype) for p in params if has_comm_dtype(p)]]))
"""


def test_deepspeeds_engine_keeps_the_fp32_weights_the_tuned_bf16_step_autocast_over():
    # the export's bf16 section is DeepSpeed's own mixed precision: it cast the weights to bf16
    # (an fp32 copy in the optimizer), where the tuned step ran autocast over fp32 weights
    pytest.importorskip("deepspeed")
    from autotune.objectives.train_parallel import free_port

    record = {"config": {**TUNED, "precision": "bf16", "compile": False},
              "problem": {"global_batch": 8, "lr": 3e-4, "seq_len": 8}}  # fmt: skip
    out = training_export(record, "deepspeed")
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "RANK": "0",
           "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_SIZE": "1"}  # fmt: skip
    command = [sys.executable, "-P", "-c", _DEEPSPEED_ENGINE, out.text]
    pipes = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    with own_group(command, env=env, **pipes) as engine:
        stdout, stderr = engine.communicate(timeout=180)
    assert engine.returncode == 0, stderr[-2000:]
    weights, output, reduced_in = json.loads(stdout.strip().splitlines()[-1])
    assert weights == ["torch.float32"] and output == "torch.bfloat16"
    assert reduced_in == []  # no gradient is reduced in bf16: all in fp32, as the step's were


_DEEPSPEED_RANK = """
import json, sys
import deepspeed
import deepspeed.ops
from deepspeed.runtime.config import DeepSpeedConfig
deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False  # built by none: see above
deepspeed.init_distributed(dist_backend="gloo")
try:
    c = DeepSpeedConfig(json.loads(sys.argv[1]), mpu=None)
    print(json.dumps([c.tensor_parallel_config.autotp_size, c.gradient_accumulation_steps,
                      c.train_micro_batch_size_per_gpu]))
except AssertionError as exc:
    print(json.dumps(str(exc)))
"""


def test_deepspeed_takes_a_tensor_parallel_winner_as_autotp_on_its_processes():
    # a tp winner was a note only, and its train_batch_size (micro x accumulation, data
    # parallel 1) failed DeepSpeed's batch check on the tp processes it must launch on
    pytest.importorskip("deepspeed")
    from autotune.objectives.train_parallel import free_port

    record = {**_parallel(layout="tp"), "problem": {**PARALLEL, "world_size": 2}}
    out = training_export(record, "deepspeed")
    port = free_port()
    with contextlib.ExitStack() as started:  # a rank left waiting for its peer ends with the test
        ranks = [
            started.enter_context(own_group(
                [sys.executable, "-P", "-c", _DEEPSPEED_RANK, out.text], stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True, env={**os.environ, "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port), "RANK": str(rank), "LOCAL_RANK": str(rank),
                "WORLD_SIZE": "2", "LOCAL_SIZE": "2"},
            ))
            for rank in range(2)
        ]  # fmt: skip
        said = [json.loads(rank.communicate(timeout=180)[0].strip().splitlines()[-1])
                for rank in ranks]  # fmt: skip
    # AutoTP over both processes, the whole global batch of 16 = 2 x 8 on each
    assert said == [[2, 8, 2], [2, 8, 2]]
    assert "--num_gpus 2" in out.not_expressed["layout"]
    assert "row-wise" in out.not_expressed["layout"]  # what AutoTP may shard otherwise


def test_deepspeed_says_it_cannot_keep_the_weights_gathered_after_the_forward():
    # reshard_after_forward=False, tuned under FSDP2, was dropped without a word in ZeRO-3
    out = training_export(_parallel(layout="fsdp2", reshard_after_forward=False), "deepspeed")
    assert out.settings["zero_optimization"] == {"stage": 3}
    assert out.not_expressed["reshard_after_forward"].startswith("false: the tuned step kept")
