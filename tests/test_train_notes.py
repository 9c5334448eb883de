"""The notes every training target writes (:mod:`autotune.train_notes`): the sequence length,
a value the step lacks, a sweep on a CPU, FSDP2's bf16 gradient reduction."""

from __future__ import annotations

import json
import tomllib

import pytest

from autotune.train_export import training_export
from tests.training_records import TARGETS, _parallel, _record


@pytest.mark.parametrize("target", ["hf", "accelerate", "deepspeed", "torchtitan"])
def test_every_target_states_the_sequence_length_the_micro_batch_was_tuned_at(target):
    # only torchtitan wrote seq_len; a micro-batch of 4 tuned at 64 tokens is no micro-batch
    # for 4096, and hf, accelerate and deepspeed did not say which length it was
    out = training_export(_record(), target)
    if target == "torchtitan":  # a key of its own: tokens per step = global_batch_size x seq_len
        training = tomllib.loads(out.text)["training"]
        assert (training["seq_len"], training["global_batch_size"]) == (64, 16)
        assert "seq_len" not in out.not_expressed
    else:
        note = out.not_expressed["seq_len"]
        assert note.startswith("64: the micro-batch was tuned at this")
        assert "tokens per optimizer step = global_batch 16 x 64 = 1024" in note
    if target == "accelerate":  # in the file itself
        assert "# not expressed: seq_len: 64: " in out.text
    # a record without it (a replay's table) says so rather than nothing
    bare = training_export({**_record(), "problem": {"global_batch": 16, "lr": 3e-4}}, target)
    assert bare.not_expressed["seq_len"].startswith("not recorded: the micro-batch holds only")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(
    ("knob", "value"), [("attention_backend", "weird"), ("attention_backend", "paged"),
                        ("precision", "fp4")],
)  # fmt: skip
def test_a_value_the_training_step_lacks_is_a_note_not_a_crash(target, knob, value):
    out = training_export(_record(**{knob: value}), target)
    assert out.not_expressed[knob].startswith(f"{value}: not a")
    assert "training step" in out.not_expressed[knob]


@pytest.mark.parametrize("target", ["deepspeed", "torchtitan"])
def test_a_target_with_no_cpu_switch_says_the_sweep_ran_on_a_cpu(target):
    # a CPU smoke sweep's DeepSpeed config and torchtitan sections read as a GPU's tuning
    on_cpu = {**_record(precision="bf16"), "device": {"type": "cpu", "name": "cpu"}}
    note = training_export(on_cpu, target).not_expressed["device"]
    assert note.startswith("cpu: the sweep ran on a CPU") and "tune again on one" in note
    on_gpu = {**_record(precision="bf16"), "device": {"type": "cuda", "name": "H100"}}
    assert "device" not in training_export(on_gpu, target).not_expressed


def test_fsdp2_exports_say_accelerate_reduces_the_gradients_the_step_reduced_in_fp32(tmp_path):
    # the tuned step's FSDP2 policy reduced in fp32; accelerate's (the Trainer's too) reduces
    # in bf16, which neither export said
    transformers = pytest.importorskip("transformers")
    import torch
    from accelerate.utils import FullyShardedDataParallelPlugin

    record = _parallel(layout="fsdp2")
    hf = training_export(record, "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(hf.text))  # fmt: skip
    # the plugin the Trainer builds, and the policy its Accelerator gives it
    plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    plugin.set_mixed_precision(args.mixed_precision)
    assert plugin.mixed_precision_policy.reduce_dtype == torch.bfloat16
    accelerate = training_export(record, "accelerate")
    for out in (hf, accelerate):
        assert out.not_expressed["reduce_dtype"].startswith("bfloat16: accelerate reduces")
        assert "reduced them in float32" in out.not_expressed["reduce_dtype"]
    assert "trainer.accelerator.state.fsdp_plugin" in hf.not_expressed["reduce_dtype"]
    # the policy the notes give, as accelerate takes it: kept over its bf16 one
    from autotune.train_notes import FSDP2_POLICY

    policy = {key: getattr(torch, name) for key, name in FSDP2_POLICY.items()}
    kept = FullyShardedDataParallelPlugin(fsdp_version=2, mixed_precision_policy=policy)
    kept.set_mixed_precision("bf16")
    assert kept.mixed_precision_policy.reduce_dtype == torch.float32
    assert kept.mixed_precision_policy.param_dtype == torch.bfloat16
    ddp = training_export(_parallel(layout="ddp"), "accelerate")
    assert "reduce_dtype" not in ddp.not_expressed
