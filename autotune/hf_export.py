"""A tuned training step as keyword arguments of Hugging Face ``transformers.TrainingArguments``
(``TrainingArguments(output_dir=..., **settings)``), written as JSON; what the arguments
cannot express (an SDPA backend, fp16's first loss scale, weight decay on the norms) is listed
in ``not_expressed``, beside the file.

Example:
    >>> out = hf_export({"config": {"micro_batch": 4, "precision": "bf16", "optimizer": "fused"},
    ...                  "problem": {"global_batch": 16}})
    >>> out.settings["gradient_accumulation_steps"], out.settings["bf16"], out.settings["optim"]
    (4, True, 'adamw_torch_fused')
"""

from __future__ import annotations

from typing import Any

from autotune.export_record import measured_on_cpu
from autotune.export_text import TrainExport
from autotune.train_notes import common_notes, fsdp2_reduce_note, sequence_note
from autotune.train_record import (
    ADAMW,
    loss_scale,
    loss_scale_set,
    ran_on,
    tuned,
    world_size,
)

#: the note of a target that leaves biases and norm weights undecayed where the step did not
_DECAY_NOTE = ("0.1 on every parameter: the tuned step decayed the RMSNorm gains too, which "
               "the Trainer leaves out (with biases); pass Trainer(optimizers=(torch.optim."
               "AdamW(model.parameters(), ...), None)) to match")  # fmt: skip


#: the note of an export whose sweep ran on a CPU, where it is written to run
_CPU_NOTE = ("on: the sweep ran on a CPU, so the config is written to run there (with bf16, "
             "TrainingArguments refuses a machine without a GPU otherwise); drop it to train on "
             "a GPU, where these figures were not measured")  # fmt: skip


def _hf_checkpointing_name() -> str:
    """``activation_checkpointing`` where the installed transformers has it (5.x, which warns
    about the old name), else ``gradient_checkpointing`` (4.x, and no transformers here)."""
    try:
        import dataclasses

        from transformers import TrainingArguments
    except ImportError:
        return "gradient_checkpointing"
    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else ("gradient_checkpointing")
    )


def hf_export(record: dict[str, Any]) -> TrainExport:
    """Keyword arguments of ``transformers.TrainingArguments``:
    ``TrainingArguments(output_dir=..., **settings)``."""
    config, micro, accum, lr = tuned(record)
    precision = config.get("precision", "fp32")
    settings: dict[str, Any] = {
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accum,
        "learning_rate": lr,
        "adam_beta1": ADAMW["betas"][0],
        "adam_beta2": ADAMW["betas"][1],
        "weight_decay": ADAMW["weight_decay"],
        "max_grad_norm": 0.0,  # the tuned step does not clip; 0 turns the Trainer's 1.0 off
        # the tuned step's lr is constant (no warmup, no decay); the Trainer's default is linear
        # decay to 0. "constant" (get_constant_schedule) ignores the warmup settings
        "lr_scheduler_type": "constant",
        "optim": "adamw_torch_fused" if config.get("optimizer") == "fused" else "adamw_torch",
        _hf_checkpointing_name(): bool(config.get("activation_checkpointing", False)),
        "torch_compile": bool(config.get("compile", False)),
        "bf16": precision in ("bf16", "fp8"),
        "fp16": precision == "fp16",
    }
    if precision == "tf32":
        settings["tf32"] = True
    notes = {**sequence_note(record), **common_notes(config), "weight_decay": _DECAY_NOTE}
    if measured_on_cpu(record):  # TrainingArguments refuses bf16 without a GPU unless told
        settings["use_cpu"] = True
        notes["use_cpu"] = _CPU_NOTE
    if config.get("compile") and config.get("compile_mode", "default") != "default":
        settings["torch_compile_mode"] = config["compile_mode"]
        notes.pop("compile_mode")
    layout = config.get("layout", "single")
    if layout == "fsdp2":
        settings["fsdp"] = "full_shard"
        settings["fsdp_config"] = {
            "fsdp_version": 2,
            "reshard_after_forward": bool(config.get("reshard_after_forward", True)),
        }
        notes.update(fsdp2_reduce_note(precision, "hf"))
    if layout != "single":
        notes["layout"] = (
            f"{layout} over {ran_on(record)}: launch with torchrun --nproc-per-node "
            f"{world_size(record)}" + ("; tensor parallel is the model's own tp_plan, not a "
                                        "TrainingArguments field" if layout == "tp" else "")
        )  # fmt: skip
    if precision == "fp16" and loss_scale_set(config):
        notes["loss_scale_init"] = (
            f"{loss_scale(config):g}: Hugging Face's GradScaler starts at 2^16; set "
            "init_scale on the Trainer's accelerator scaler to match"
        )
    return TrainExport("hf", settings, notes)
