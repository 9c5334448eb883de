"""A tuned training step, written for the stacks that train: Hugging Face ``TrainingArguments``,
an ``accelerate`` config file, a DeepSpeed config.

Each target takes what it can express; every knob it cannot (an SDPA backend in
``TrainingArguments``, fp16's first loss scale in Hugging Face's scaler, a micro-batch in an
accelerate config) is listed in ``not_expressed`` with what to do instead, never dropped
silently: in the file itself where the format allows comments (YAML), else beside it.

The batch arithmetic every target states the same way:
    gradient_accumulation = global_batch // micro_batch
    tokens per optimizer step = micro_batch * gradient_accumulation * seq_len * world size

Example:
    >>> record = {"config": {"micro_batch": 4, "precision": "bf16", "optimizer": "fused",
    ...           "activation_checkpointing": True, "attention_backend": "flash",
    ...           "compile": False}, "problem": {"global_batch": 16, "lr": 3e-4}}
    >>> out = training_export(record, "hf")
    >>> out.settings["gradient_accumulation_steps"], out.settings["optim"]
    (4, 'adamw_torch_fused')
    >>> sorted(out.not_expressed)
    ['attention_backend']
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

TARGETS = ("hf", "accelerate", "deepspeed")

# What the training-step objective's AdamW runs with (objectives/train_step.py).
ADAMW = {"betas": (0.9, 0.95), "weight_decay": 0.1}


class TrainExportError(ValueError):
    """A record that is not a training step, or an unknown target."""


@dataclass
class TrainExport:
    """One target's settings, their text, and what the target could not express."""

    target: str
    settings: dict[str, Any]
    not_expressed: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        if self.target == "accelerate":
            notes = "".join(f"# not expressed: {k}: {v}\n" for k, v in self.not_expressed.items())
            return notes + yaml.safe_dump(self.settings, sort_keys=False)
        return json.dumps(self.settings, indent=2) + "\n"


def _tuned(record: dict[str, Any]) -> tuple[dict[str, Any], int, int, float]:
    config, problem = record.get("config", {}), record.get("problem", {})
    if "micro_batch" not in config or "global_batch" not in problem:
        raise TrainExportError(
            "a training-stack export needs a train-step sweep (micro_batch, global_batch)"
        )
    micro = int(config["micro_batch"])
    return config, micro, int(problem["global_batch"]) // micro, float(problem.get("lr", 3e-4))


def _common_notes(config: dict[str, Any]) -> dict[str, str]:
    notes = {}
    backend = config.get("attention_backend", "default")
    if backend != "default":
        notes["attention_backend"] = (
            f"{backend}: run the model's attention under torch.nn.attention.sdpa_kernel("
            f"SDPBackend.{_SDPA[backend]}) (the model loaded with attn_implementation='sdpa')"
        )
    return notes


_SDPA = {"math": "MATH", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
         "cudnn": "CUDNN_ATTENTION"}  # fmt: skip


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
    config, micro, accum, lr = _tuned(record)
    precision = config.get("precision", "fp32")
    settings: dict[str, Any] = {
        "per_device_train_batch_size": micro,
        "gradient_accumulation_steps": accum,
        "learning_rate": lr,
        "adam_beta1": ADAMW["betas"][0],
        "adam_beta2": ADAMW["betas"][1],
        "weight_decay": ADAMW["weight_decay"],
        "optim": "adamw_torch_fused" if config.get("optimizer") == "fused" else "adamw_torch",
        _hf_checkpointing_name(): bool(config.get("activation_checkpointing", False)),
        "torch_compile": bool(config.get("compile", False)),
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
    }
    if precision == "tf32":
        settings["tf32"] = True
    notes = _common_notes(config)
    if precision == "fp16" and "loss_scale_init" in config:
        notes["loss_scale_init"] = (
            f"{config['loss_scale_init']:g}: Hugging Face's GradScaler starts at 2^16; set "
            "init_scale on the Trainer's accelerator scaler to match"
        )
    return TrainExport("hf", settings, notes)


def accelerate_export(record: dict[str, Any]) -> TrainExport:
    """An ``accelerate launch --config_file`` YAML for one machine and one process."""
    config, micro, accum, lr = _tuned(record)
    precision = config.get("precision", "fp32")
    mixed = {"bf16": "bf16", "fp16": "fp16"}.get(precision, "no")
    settings: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "NO",
        "mixed_precision": mixed,
        "num_machines": 1,
        "num_processes": 1,
        "machine_rank": 0,
        "gpu_ids": "all",
        "use_cpu": False,
        "downcast_bf16": "no",
        "main_training_function": "main",
        "debug": False,
    }
    if config.get("compile"):
        settings["dynamo_config"] = {"dynamo_backend": "INDUCTOR"}
    notes = {
        "micro_batch": f"{micro}: the DataLoader's batch_size",
        "gradient_accumulation_steps": f"{accum}: Accelerator(gradient_accumulation_steps={accum})",
        "optimizer": f"torch.optim.AdamW(lr={lr:g}, betas={ADAMW['betas']}, weight_decay="
        f"{ADAMW['weight_decay']}, fused={config.get('optimizer') == 'fused'})",
        **_common_notes(config),
    }
    if config.get("activation_checkpointing"):
        notes["activation_checkpointing"] = "model.gradient_checkpointing_enable()"
    if precision == "tf32":
        notes["precision"] = "tf32: torch.backends.cuda.matmul.allow_tf32 = True"
    return TrainExport("accelerate", settings, notes)


def deepspeed_export(record: dict[str, Any], world_size: int = 1) -> TrainExport:
    """A DeepSpeed config (``deepspeed.initialize(config=...)``) for ``world_size`` GPUs."""
    config, micro, accum, lr = _tuned(record)
    precision = config.get("precision", "fp32")
    settings: dict[str, Any] = {
        # train_batch_size = micro * accumulation * world size, as DeepSpeed checks
        "train_batch_size": micro * accum * world_size,
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "optimizer": {
            "type": "AdamW",
            "params": {
                "lr": lr,
                "betas": list(ADAMW["betas"]),
                "weight_decay": ADAMW["weight_decay"],
                "torch_adam": config.get("optimizer") != "fused",
            },  # fmt: skip
        },
    }
    notes = _common_notes(config)
    if precision == "bf16":
        settings["bf16"] = {"enabled": True}
    elif precision == "fp16":
        scale = float(config.get("loss_scale_init", 2.0**16))
        power = round(math.log2(scale))
        settings["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": power}
        if 2.0**power != scale:
            notes["loss_scale_init"] = f"{scale:g} rounded to 2^{power}"
    elif precision == "tf32":
        notes["precision"] = "tf32: torch.backends.cuda.matmul.allow_tf32 = True"
    if config.get("optimizer") == "fused":
        notes["optimizer"] = "fused: DeepSpeed's FusedAdam (its own fused kernel, torch_adam off)"
    if config.get("activation_checkpointing"):
        notes["activation_checkpointing"] = "model.gradient_checkpointing_enable()"
    if config.get("compile"):
        notes["compile"] = "engine.compile() after deepspeed.initialize"
    return TrainExport("deepspeed", settings, notes)


def training_export(record: dict[str, Any], target: str) -> TrainExport:
    """The export of a best-config record (``autotune.export.best_record``) for ``target``."""
    makers = {"hf": hf_export, "accelerate": accelerate_export, "deepspeed": deepspeed_export}
    if target not in makers:
        raise TrainExportError(f"unknown training target {target!r}; choose {', '.join(TARGETS)}")
    return makers[target](record)
