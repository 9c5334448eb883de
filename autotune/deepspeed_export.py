"""A tuned training step as a DeepSpeed config (``deepspeed.initialize(config=...)``), written
as JSON: its batch arithmetic, AdamW, autocast (:func:`deepspeed_autocast`) and ZeRO stage 3
or AutoTP for a sharded layout; what DeepSpeed cannot express is listed in ``not_expressed``,
beside the file.

Example:
    >>> out = deepspeed_export({"config": {"micro_batch": 2, "layout": "fsdp2"},
    ...                         "problem": {"global_batch": 16, "world_size": 4}})
    >>> out.settings["train_batch_size"], out.settings["gradient_accumulation_steps"]
    (16, 2)
    >>> out.settings["zero_optimization"]
    {'stage': 3}
"""

from __future__ import annotations

from typing import Any

from autotune.export_text import TrainExport
from autotune.train_notes import common_notes, cpu_note, sequence_note
from autotune.train_record import (
    ADAMW,
    data_parallel,
    loss_scale,
    loss_scale_set,
    ran_on,
    tuned,
    world_size,
)


def deepspeed_export(record: dict[str, Any]) -> TrainExport:
    """A DeepSpeed config (``deepspeed.initialize(config=...)``) for the sweep's GPUs."""
    config, micro, accum, lr = tuned(record)
    precision = config.get("precision", "fp32")
    layout = config.get("layout", "single")
    settings: dict[str, Any] = {
        # train_batch_size = micro * accumulation * data-parallel size, as DeepSpeed checks
        "train_batch_size": micro * accum * data_parallel(record),
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": accum,
        "gradient_clipping": 0.0,  # the tuned step does not clip; DeepSpeed's default is 1.0
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
    notes = {**sequence_note(record), **common_notes(config), **cpu_note(record, "DeepSpeed")}
    if precision in _AUTOCAST:
        settings["torch_autocast"] = deepspeed_autocast(precision)
        if layout == "fsdp2":
            notes["precision"] = f"{precision}: {_ZERO3_PRECISION_NOTE}"
        if precision == "fp16" and loss_scale_set(config):
            notes["loss_scale_init"] = (
                f"{loss_scale(config):g}: DeepSpeed's torch_autocast GradScaler starts at 2^16 "
                "and takes no initial scale"
            )
    elif precision == "tf32":
        notes["precision"] = "tf32: torch.backends.cuda.matmul.allow_tf32 = True"
    if config.get("optimizer") == "fused":
        notes["optimizer"] = "fused: DeepSpeed's FusedAdam (its own fused kernel, torch_adam off)"
    if config.get("activation_checkpointing"):
        notes["activation_checkpointing"] = "model.gradient_checkpointing_enable()"
    if config.get("compile"):
        notes["compile"] = "engine.compile() after deepspeed.initialize"
    if layout == "fsdp2":
        # ZeRO-3 shards weights, gradients and optimizer state as FSDP2 does
        settings["zero_optimization"] = {"stage": 3}
        notes["layout"] = (
            f"fsdp2 over {ran_on(record)}: as ZeRO stage 3 (DeepSpeed's own sharding, not "
            f"fully_shard); {_deepspeed_launch(record)}"
        )
        if not config.get("reshard_after_forward", True):
            notes["reshard_after_forward"] = (
                "false: the tuned step kept each block's weights gathered from its forward to "
                "its backward; ZeRO stage 3 gathers them again for the backward (it has no "
                "such switch)"
            )
    elif layout == "tp":
        n = world_size(record)
        settings["tensor_parallel"] = {"autotp_size": n}  # one data-parallel replica of N ranks
        # without an mpu, DeepSpeed's batch check counts every rank of the launch, tensor
        # parallel ones too (micro x accumulation x N), with one only the data-parallel ones:
        # left out, it derives the size from the two either way
        del settings["train_batch_size"]
        notes["layout"] = (
            f"tp over {ran_on(record)}: as AutoTP (tensor_parallel.autotp_size {n}), "
            f"launch with deepspeed --num_gpus {n}; AutoTP shards by the model's tp_plan or its "
            "own rules, where the tuned step sharded q/k/v and gate/up column-wise, the "
            "attention output and down projection row-wise, and kept the embedding, norms and "
            "LM head whole; train_batch_size is left for DeepSpeed to derive (without an mpu "
            f"it counts all {n} ranks)"
        )
    elif layout == "ddp":
        notes["layout"] = f"ddp over {ran_on(record)}: {_deepspeed_launch(record)}"
    return TrainExport("deepspeed", settings, notes)


#: the tuned step's autocast dtype per precision (fp8: its float8 linears, the rest bf16)
_AUTOCAST = {"bf16": "bfloat16", "fp8": "bfloat16", "fp16": "float16"}


#: what DeepSpeed's ZeRO-3 under torch_autocast does otherwise than the tuned step's FSDP2
_ZERO3_PRECISION_NOTE = (
    "as torch_autocast over fp32 weights; the tuned step's FSDP2 gathered each block's weights "
    "in half precision and ran the whole block in it (MixedPrecisionPolicy, no autocast), "
    "reducing gradients in fp32; ZeRO stage 3 under torch_autocast gathers the fp32 weights "
    "(twice that traffic and gathered memory) and autocasts; listing torch.nn.Linear in "
    "lower_precision_safe_modules would gather them in half precision but reduce their "
    "gradients in it too"
)


def deepspeed_autocast(precision: str) -> dict[str, Any]:
    """DeepSpeed's ``torch_autocast`` section for a half-precision ``precision``: autocast over
    fp32 weights, as the tuned step ran (DeepSpeed's own ``bf16``/``fp16`` sections hold the
    weights in half precision, with an fp32 copy in the optimizer). No module is "lower
    precision safe", so DeepSpeed reduces every gradient in fp32, as the step did (a listed
    module's gradients are reduced, and under ZeRO-3 its weights gathered, in ``dtype``).

    Example:
        >>> deepspeed_autocast("bf16")
        {'enabled': True, 'dtype': 'bfloat16', 'lower_precision_safe_modules': []}
    """
    return {"enabled": True, "dtype": _AUTOCAST[precision], "lower_precision_safe_modules": []}


def _deepspeed_launch(record: dict[str, Any]) -> str:
    """How many processes to launch a data-parallel DeepSpeed config on: its train_batch_size
    counts them, and DeepSpeed's launcher takes every GPU of the node unless told.

    Example:
        >>> _deepspeed_launch({"problem": {"world_size": 2}, "device": {"type": "cuda"}})
        'launch with deepspeed --num_gpus 2 (train_batch_size counts 2 processes)'
    """
    n = world_size(record)
    return f"launch with deepspeed --num_gpus {n} (train_batch_size counts {n} processes)"
