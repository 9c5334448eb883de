"""A tuned training step as torchtitan TOML sections (its ``JobConfig``: ``[training]``,
``[parallelism]``, ``[activation_checkpoint]``, ``[optimizer]``, ``[lr_scheduler]``,
``[compile]``, ``[model]``, ``[quantize.linear.float8]``), to merge into a torchtitan train
config (``--job.config_file``).

torchtitan is not a dependency: the keys written are checked against :data:`JOB_CONFIG_KEYS`,
the fields of ``torchtitan/config/job_config.py`` in torchtitan 0.2.0 to 0.2.2, the releases
whose ``ConfigManager`` reads a TOML file (it refuses a key its dataclasses lack; 0.1.0 had
``training.compile`` and ``[float8]`` instead, 0.3 configures in Python). What torchtitan cannot
express (fp16, TF32, bf16 under tensor parallel alone, a forced SDPA backend, a compile mode,
a step without gradient clipping) is listed as comments at the top of the file.

Example:
    >>> record = {"config": {"micro_batch": 2, "precision": "bf16", "optimizer": "fused",
    ...           "activation_checkpointing": True, "attention_backend": "default",
    ...           "compile": True, "layout": "fsdp2", "reshard_after_forward": False},
    ...           "problem": {"global_batch": 16, "seq_len": 2048, "lr": 3e-4, "world_size": 4}}
    >>> out = torchtitan_export(record)
    >>> out.settings["parallelism"]["data_parallel_shard_degree"]
    4
    >>> out.settings["training"]["local_batch_size"], out.settings["activation_checkpoint"]
    (2, {'mode': 'full'})
"""

from __future__ import annotations

import math
from typing import Any

from autotune import train_notes, train_record
from autotune.export_text import TrainExport

#: torchtitan 0.2's JobConfig sections (a dotted name is a nested one) and the fields of each
#: that this export may write.
JOB_CONFIG_KEYS: dict[str, set[str]] = {
    "training": {"local_batch_size", "global_batch_size", "seq_len", "max_norm",
                 "mixed_precision_param", "mixed_precision_reduce"},
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree",
                    "fsdp_reshard_after_forward", "tensor_parallel_degree"},
    "activation_checkpoint": {"mode"},
    "optimizer": {"name", "lr", "beta1", "beta2", "weight_decay", "implementation"},
    "lr_scheduler": {"warmup_steps", "decay_ratio"},
    "compile": {"enable", "components"},
    "model": {"converters"},
    "quantize.linear.float8": {"filter_fqns"},
}  # fmt: skip

#: why a bf16 winner under tensor parallel is written as fp32: torchtitan 0.2 applies
#: ``mixed_precision_param`` through FSDP (``data_parallel_shard_degree`` > 1), or as autocast
#: under DDP and on one GPU, and under tensor parallel alone turns it off
#: (``maybe_enable_amp``: "Mixed precision training is disabled")
_TP_PRECISION_NOTE = (
    "bf16 under tensor parallel: torchtitan 0.2 mixes precision only through FSDP "
    "(data_parallel_shard_degree > 1) or as autocast under DDP and on one GPU, and with tensor "
    "parallel alone trains in fp32 (its log: 'Mixed precision training is disabled'), where "
    "the tuned step ran bf16 autocast over fp32 weights; fp32 is written. training.dtype = "
    '"bfloat16" would keep the weights, gradients and AdamW state in bf16, which the tuned '
    "step did not"
)

#: the model converter torchtitan 0.2 registers for torchao's float8 linears
FLOAT8_CONVERTER = "quantize.linear.float8"


def torchtitan_export(record: dict[str, Any]) -> TrainExport:
    """torchtitan sections for the record's tuned config (see the module docstring)."""
    config, micro, accum, lr = train_record.tuned(record)
    precision = config.get("precision", "fp32")
    layout = config.get("layout", "single")
    world = train_record.world_size(record)
    half = precision in ("bf16", "fp8") and layout != "tp"  # see _TP_PRECISION_NOTE
    training: dict[str, Any] = {
        "local_batch_size": micro,  # per device; torchtitan accumulates up to the global batch
        "global_batch_size": micro * accum * train_record.data_parallel(record),
        "mixed_precision_param": "bfloat16" if half else "float32",
        "mixed_precision_reduce": "float32",
        # the tuned step does not clip; torchtitan 0.2 always clips, by max_norm / grad norm
        # capped at 1 (0 would zero every gradient): at inf that factor is 1
        "max_norm": math.inf,
    }
    seq = train_record.sequence_length(record)
    if seq is not None:  # tokens per optimizer step = global_batch_size * seq_len
        training["seq_len"] = seq
    settings: dict[str, Any] = {
        "training": training,
        "parallelism": {
            "data_parallel_replicate_degree": world if layout == "ddp" else 1,
            "data_parallel_shard_degree": world if layout == "fsdp2" else 1,
            "tensor_parallel_degree": world if layout == "tp" else 1,
        },
        "activation_checkpoint": {
            "mode": "full" if config.get("activation_checkpointing") else "none"
        },
        "optimizer": {
            "name": "AdamW",
            "lr": lr,
            "beta1": train_record.ADAMW["betas"][0],
            "beta2": train_record.ADAMW["betas"][1],
            "weight_decay": train_record.ADAMW["weight_decay"],
            "implementation": "fused" if config.get("optimizer") == "fused" else "foreach",
        },  # fmt: skip
        # the tuned step's lr is constant; torchtitan 0.2's warmup-stable-decay schedule warms
        # up over 200 steps and then decays to 0 unless told: no warmup and no decay phase
        # (build_lr_schedulers: decay_steps round(steps x 0) = 0) hold it at lr every step
        "lr_scheduler": {"warmup_steps": 0, "decay_ratio": 0.0},
        "compile": {"enable": bool(config.get("compile", False))},
    }
    if config.get("compile"):
        # each decoder block compiled, as the training step did (torchtitan's "model"
        # component); its default, ["model", "loss"], compiles the loss too, which the step ran
        # eager
        settings["compile"]["components"] = ["model"]
    if layout == "fsdp2":
        reshard = config.get("reshard_after_forward", True)
        settings["parallelism"]["fsdp_reshard_after_forward"] = "always" if reshard else "never"
    notes = {**train_notes.common_notes(config), **train_notes.cpu_note(record, "torchtitan")}
    if seq is None:  # torchtitan's own default (2048) is no tuned length
        notes.update(train_notes.sequence_note(record))
    notes["max_norm"] = (
        "inf: the tuned step does not clip; torchtitan 0.2 clips every step and has no switch, "
        "so at inf it scales the gradients by 1 but still computes their norm (a reduction, "
        "and a collective when sharded, that the tuned step did not run)"
    )
    if precision in train_record.PRECISIONS:  # an unknown one keeps the common note
        notes.pop("precision", None)
    if precision == "fp8":
        settings["model"] = {"converters": [FLOAT8_CONVERTER]}
        settings[FLOAT8_CONVERTER] = {"filter_fqns": ["output"]}  # the LM head stays in bf16
    elif precision == "bf16" and layout == "tp":
        notes["precision"] = _TP_PRECISION_NOTE
    elif precision in ("fp16", "tf32"):
        notes["precision"] = (
            f"{precision}: torchtitan trains in bf16 or fp32 only; fp32 is written"
            if precision == "fp16"
            else "tf32: torch.backends.cuda.matmul.allow_tf32 = True before training"
        )
    check_keys(settings)
    return TrainExport("torchtitan", settings, notes)


def check_keys(settings: dict[str, dict[str, Any]]) -> None:
    """Refuse a section or key torchtitan's JobConfig does not have.

    Raises:
        ValueError: naming the first unknown ``section.key``.
    """
    for section, values in settings.items():
        known = JOB_CONFIG_KEYS.get(section)
        if known is None:
            raise ValueError(f"torchtitan has no [{section}] section")
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"torchtitan's [{section}] has no key {unknown[0]!r}")


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def toml_text(settings: dict[str, dict[str, Any]]) -> str:
    """TOML sections of scalars and lists (what the export writes).

    Example:
        >>> print(toml_text({"compile": {"enable": True}, "training": {"seq_len": 2048}}), end="")
        [compile]
        enable = true
        <BLANKLINE>
        [training]
        seq_len = 2048
    """
    blocks = []
    for section, values in settings.items():
        lines = [f"[{section}]"] + [f"{key} = {_toml_value(v)}" for key, v in values.items()]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)
