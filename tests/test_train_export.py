"""Training-stack exports (:func:`autotune.train_export.training_export`): the record it takes,
what every target shares, and the ``autotune export --to`` command that writes them; each
target's own file is tested beside it (tests/test_hf_export.py, ...)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tomllib

import optuna
import pytest

from autotune.driver.trial_attrs import STUDY
from autotune.export import best_record
from autotune.train_export import TrainExportError, training_export
from tests.cli_in_process import autotune_in_process
from tests.training_records import PROBLEM, TARGETS, TUNED, _parallel, _record


def test_a_record_that_is_no_training_step_is_refused():
    with pytest.raises(TrainExportError, match="needs a train-step sweep"):
        training_export({"config": {"BLOCK_M": 64}, "problem": {"M": 64}}, "hf")


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed", "torchtitan"])
def test_another_workload_with_a_micro_batch_is_no_training_step(target):
    # a file's objective tuning micro_batch and precision was exported as the training step,
    # its AdamW betas (0.9, 0.95), weight decay 0.1 and unrun knobs written as if tuned
    record = {"study": "mine", "workload": "/home/me/my_train.py",
              "config": {"micro_batch": 4, "precision": "bf16"}, "problem": PROBLEM}  # fmt: skip
    with pytest.raises(TrainExportError, match=r"^a training-stack export needs a train-step "
                       r"sweep; study 'mine' tuned /home/me/my_train.py \(--study"):  # fmt: skip
        training_export(record, target)
    training_export({**record, "workload": "train-step"}, target)


def test_the_cli_writes_the_export_and_what_it_could_not_express(tmp_path, one_trial_study):
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = one_trial_study(url, "t", "train-step", PROBLEM, TUNED, "tokens_per_s", 1000.0)
    assert best_record(study)["config"]["micro_batch"] == 4
    target = tmp_path / "ds.json"
    done = autotune_in_process("export", "--to", "deepspeed", "--storage", url, "--output",
                               str(target))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(target.read_text())["gradient_accumulation_steps"] == 4
    notes = json.loads((tmp_path / "ds.json.not_expressed.json").read_text())
    assert "attention_backend" in notes and "not expressed in deepspeed" in done.stderr


def test_no_target_clips_the_gradients_the_tuned_step_did_not_clip(tmp_path):
    # TrainingArguments, DeepSpeed and torchtitan clip at norm 1.0 unless told; the tuned step
    # (objectives/train_loop.py) never clips
    transformers = pytest.importorskip("transformers")
    hf = training_export(_record(precision="bf16"), "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(hf.text))  # fmt: skip
    assert args.max_grad_norm == 0  # the Trainer clips only where max_grad_norm > 0
    # the Trainer decays no norm weight; the tuned step decayed them all: said, not dropped
    assert "RMSNorm gains" in hf.not_expressed["weight_decay"]
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.config import DeepSpeedConfig

    ds = DeepSpeedConfig(json.loads(training_export(_record(), "deepspeed").text), mpu=None)
    assert ds.gradient_clipping == 0.0  # DeepSpeed's default is 1.0
    titan = training_export(_record(), "torchtitan")
    # torchtitan 0.2 clips every step: 0 would zero the gradients, inf scales them by 1
    assert tomllib.loads(titan.text)["training"]["max_norm"] == math.inf
    assert "still computes their norm" in titan.not_expressed["max_norm"]
    accelerate = training_export(_record(), "accelerate")
    assert "no gradient clipping" in accelerate.not_expressed["optimizer"]
    assert "AdamW(model.parameters()" in accelerate.not_expressed["optimizer"]


def test_parallel_layouts_reach_every_target():
    ddp = training_export(_parallel(layout="ddp"), "deepspeed")
    # DeepSpeed checks train_batch_size = micro x accumulation x its world: 16 = 2 x 2 x 4 GPUs
    assert ddp.settings["train_batch_size"] == 16
    assert ddp.settings["gradient_accumulation_steps"] == 2
    # which world: its launcher takes every GPU of the node unless told (the note said nothing)
    assert ddp.not_expressed["layout"] == (
        "ddp over 4 GPUs: launch with deepspeed --num_gpus 4 (train_batch_size counts 4 processes)"
    )
    fsdp = training_export(_parallel(layout="fsdp2"), "deepspeed")
    assert fsdp.settings["zero_optimization"] == {"stage": 3}
    assert "--num_gpus 4" in fsdp.not_expressed["layout"]
    assert "reshard_after_forward" not in fsdp.not_expressed  # ZeRO-3 reshards, as it did
    assert fsdp.settings["torch_autocast"]["lower_precision_safe_modules"] == []  # fp32 reduce
    assert "ZeRO stage 3 under torch_autocast gathers the fp32" in fsdp.not_expressed["precision"]
    tp = training_export(_parallel(layout="tp"), "hf")
    assert tp.settings["gradient_accumulation_steps"] == 8  # every GPU trains the whole batch
    assert "tp_plan" in tp.not_expressed["layout"]
    acc = training_export(_parallel(layout="fsdp2", reshard_after_forward=False), "accelerate")
    assert acc.settings["distributed_type"] == "FSDP" and acc.settings["num_processes"] == 4
    assert acc.settings["fsdp_config"]["fsdp_reshard_after_forward"] is False


def test_the_cli_refuses_a_micro_batch_beyond_the_global_batch_in_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(study_name="t", storage=url, direction="maximize")
    study.set_user_attr(STUDY, {"workload": "train-step", "problem": {**PROBLEM, "global_batch": 8},
                                "objectives": {"tokens_per_s": "maximize"}})  # fmt: skip
    params = {**TUNED, "micro_batch": 16}
    study.add_trial(optuna.trial.create_trial(
        params=params, value=1000.0, user_attrs={"status": "ok"},
        distributions={k: optuna.distributions.CategoricalDistribution([v])
                       for k, v in params.items()},
    ))  # fmt: skip
    for target in TARGETS:
        done = autotune_in_process("export", "--to", target, "--storage", url)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip() == "error: micro_batch 16 does not divide global_batch 8"


def test_a_replay_exports_the_recorded_knobs_it_did_not_replay_as_parameters() -> None:
    """A train-step table recorded at bf16 throughout and replayed with ``--params
    micro_batch``: the winner's row ran bf16 with fused AdamW, and the export said fp32 and
    torch's plain AdamW (``bf16: false``), as if the knobs left out of --params never ran."""
    record = {"study": "r", "workload": "replay", "config": {"micro_batch": 4},
              "problem": {"table": "t.csv", "params": ["micro_batch"]},
              "metrics": {"replay": True, "precision": "bf16", "optimizer": "fused",
                          "activation_checkpointing": True, "step_ms": 9.5},
              "replay": {"workload": "train-step", "problem": PROBLEM}}  # fmt: skip
    hf = training_export(record, "hf").settings
    assert hf["bf16"] is True and hf["optim"] == "adamw_torch_fused"
    assert hf["per_device_train_batch_size"] == 4 and hf["gradient_accumulation_steps"] == 4
    assert hf["activation_checkpointing"] is True
    # a table that records no workload: its columns are no known sweep's knobs
    unstamped = {
        **record,
        "replay": {"workload": None, "problem": {}},
        "problem": {"table": "t.csv", "params": ["micro_batch"], **PROBLEM},
    }
    assert training_export(unstamped, "hf").settings["bf16"] is False


def test_the_cli_exports_a_stamped_train_step_replay_once_given_a_global_batch(tmp_path):
    from pathlib import Path

    import pandas as pd

    table = pd.read_csv(Path(__file__).parents[1] / "benchmarks" / "data" / "train_step_h200.csv")
    table["workload"] = "train-step"
    table.to_csv(tmp_path / "ts.csv", index=False)
    url = f"sqlite:///{tmp_path / 'ts.db'}"
    params = "micro_batch,precision,activation_checkpointing,attention_backend,optimizer"

    def autotune(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "autotune.cli", *args, "--storage", url]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)

    for study, problem in (("T", []), ("G", ["--problem", "global_batch=64"])):
        tuned = autotune("tune", "--replay", "ts.csv", "--params", params, "--metric",
                         "tokens_per_s", "--trials", "3", "--study", study, *problem)  # fmt: skip
        assert tuned.returncode == 0, tuned.stderr
    refused = autotune_in_process("export", "--to", "hf", "--study", "T", "--storage", url)
    assert refused.returncode == 2 and refused.stdout == "", refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "tuned replay of a train-step table" in refused.stderr
    assert refused.stderr.strip().endswith("with --problem global_batch=N")
    exported = autotune_in_process("export", "--to", "hf", "--study", "G", "--storage", url)
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["gradient_accumulation_steps"] >= 1


def test_a_sweep_on_a_cpu_is_exported_to_run_there(tmp_path):
    # TrainingArguments(**export) refused a CPU sweep's bf16 config on that same machine
    # ("Your setup doesn't support bf16/gpu"), and accelerate's said use_cpu: false
    transformers = pytest.importorskip("transformers")
    on_cpu = {**_record(precision="bf16"), "device": {"type": "cpu", "name": "cpu"}}
    hf = training_export(on_cpu, "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), **json.loads(hf.text))
    assert args.use_cpu and args.bf16
    assert "drop it to train on a GPU" in hf.not_expressed["use_cpu"]
    accelerate = training_export(on_cpu, "accelerate")
    assert accelerate.settings["use_cpu"] is True and "use_cpu" in accelerate.not_expressed
    on_gpu = {**_record(precision="bf16"), "device": {"type": "cuda", "name": "H100"}}
    assert "use_cpu" not in training_export(on_gpu, "hf").settings
    assert training_export(on_gpu, "accelerate").settings["use_cpu"] is False


@pytest.mark.parametrize("target", ["accelerate", "deepspeed"])
def test_a_target_with_no_schedule_key_runs_the_constant_lr(target):
    # accelerate's loop is the user's, DeepSpeed runs no scheduler unless its config names one
    out = training_export(_record(), target)
    if target == "accelerate":
        assert "a constant lr (no scheduler" in out.not_expressed["optimizer"]
    else:
        pytest.importorskip("deepspeed")
        from deepspeed.runtime.config import DeepSpeedConfig

        assert DeepSpeedConfig(json.loads(out.text), mpu=None).scheduler_name is None
