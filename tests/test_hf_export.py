"""The Hugging Face export (:mod:`autotune.hf_export`), constructed by ``TrainingArguments``
and run by the ``Trainer`` it builds."""

from __future__ import annotations

import json

import pytest

from autotune.train_export import training_export
from tests.training_records import _lrs, _parallel, _record


def test_hf_training_arguments_construct_from_the_export(tmp_path):
    transformers = pytest.importorskip("transformers")
    out = training_export(_record(precision="bf16"), "hf")
    # use_cpu: on a machine without a GPU TrainingArguments refuses bf16 otherwise
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(out.text))  # fmt: skip
    assert args.per_device_train_batch_size == 4 and args.gradient_accumulation_steps == 4
    assert args.bf16 and not args.fp16 and args.torch_compile
    assert getattr(args, "activation_checkpointing", None) or args.gradient_checkpointing
    assert str(args.optim.value) == "adamw_torch" and args.learning_rate == 3e-4
    assert "attention_backend" in out.not_expressed  # no SDPA backend argument exists
    assert "loss_scale_init" not in out.not_expressed  # bf16: no loss scale to set


def test_hf_export_says_what_it_cannot_express():
    out = training_export(_record(), "hf")
    assert out.settings["fp16"] is True
    assert set(out.not_expressed) == {"attention_backend", "loss_scale_init", "weight_decay",
                                      "seq_len"}  # fmt: skip
    assert "FLASH_ATTENTION" in out.not_expressed["attention_backend"]


def test_hf_takes_fsdp2_and_the_compile_mode(tmp_path):
    transformers = pytest.importorskip("transformers")
    out = training_export(_parallel(layout="fsdp2", compile=True, compile_mode="reduce-overhead"),
                          "hf")  # fmt: skip
    assert out.settings["torch_compile_mode"] == "reduce-overhead"
    assert out.settings["fsdp_config"]["fsdp_version"] == 2
    kwargs = {k: v for k, v in json.loads(out.text).items()}
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **kwargs)
    assert args.torch_compile_mode == "reduce-overhead" and args.fsdp


def test_the_trainer_keeps_the_constant_lr_the_step_was_measured_at(tmp_path):
    # the measured step runs AdamW at one lr throughout; the Trainer's default schedule
    # (linear, to 0 by the last step) ran every step after the first at a lower one
    transformers = pytest.importorskip("transformers")
    import torch

    out = training_export(_record(precision="bf16"), "hf")
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True,
                                          **json.loads(out.text))  # fmt: skip
    trainer = transformers.Trainer(model=torch.nn.Linear(2, 2), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=50)
    assert _lrs(trainer.optimizer, trainer.lr_scheduler, 50) == {3e-4}


@pytest.mark.parametrize("checkpointing", [True, False])
@pytest.mark.parametrize("layout", ["single", "fsdp2"])
def test_every_exported_key_is_a_field_of_the_installed_training_arguments(
    tmp_path, checkpointing, layout
):
    """The export names fields the installed ``TrainingArguments`` has (the checkpointing key
    follows its version: ``activation_checkpointing`` in 5.x, ``gradient_checkpointing``
    before), and each value is what the constructed arguments hold: none dropped."""
    import dataclasses

    transformers = pytest.importorskip("transformers")
    config = {"activation_checkpointing": checkpointing, "compile": True,
              "compile_mode": "max-autotune-no-cudagraphs"}  # fmt: skip
    if layout == "fsdp2":
        record = _parallel(layout="fsdp2", reshard_after_forward=False, **config)
    else:
        record = _record(precision="bf16", **config)
    out = training_export(record, "hf")
    fields = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
    assert set(out.settings) <= fields, set(out.settings) - fields
    assert {"activation_checkpointing", "gradient_checkpointing"} & set(out.settings)
    args = transformers.TrainingArguments(output_dir=str(tmp_path), use_cpu=True, **out.settings)
    for key, value in out.settings.items():
        held = getattr(args, key)
        if key == "fsdp":  # "full_shard": FSDP on (newer versions keep True, with the config)
            assert held, held
        elif key == "fsdp_config":  # newer versions drop the "fsdp_" prefix of its keys
            reshard = held.get("reshard_after_forward", held.get("fsdp_reshard_after_forward"))
            assert reshard is False, held
        else:
            assert getattr(held, "value", held) == value, (key, value, held)
