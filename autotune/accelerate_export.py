"""A tuned training step as an ``accelerate launch --config_file`` YAML for one machine; what
the config file cannot express (the micro-batch, the gradient accumulation, the optimizer) is
listed as comments at its top.

Example:
    >>> record = {"config": {"micro_batch": 2, "precision": "bf16", "layout": "ddp"},
    ...           "problem": {"global_batch": 16, "world_size": 4}}
    >>> out = accelerate_export(record)
    >>> out.settings["distributed_type"], out.settings["num_processes"]
    ('MULTI_GPU', 4)
    >>> out.not_expressed["gradient_accumulation_steps"]
    '2: Accelerator(gradient_accumulation_steps=2)'
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

#: the accelerate export's note for a sweep that ran on a CPU
_ACCELERATE_CPU_NOTE = ("true: the sweep ran on a CPU, so accelerate is told to run there "
                        "(and several processes as MULTI_CPU); set it false (MULTI_GPU) to "
                        "train on GPUs, where these figures were not measured")  # fmt: skip


def accelerate_export(record: dict[str, Any]) -> TrainExport:
    """An ``accelerate launch --config_file`` YAML for one machine and one process."""
    config, micro, accum, lr = tuned(record)
    precision = config.get("precision", "fp32")
    mixed = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}.get(precision, "no")
    layout = config.get("layout", "single")
    many = "MULTI_CPU" if measured_on_cpu(record) else "MULTI_GPU"  # processes over gloo
    distributed = {"single": "NO", "ddp": many, "fsdp2": "FSDP", "tp": many}
    settings: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": distributed.get(layout, "NO"),
        "mixed_precision": mixed,
        "num_machines": 1,
        "num_processes": world_size(record),
        "machine_rank": 0,
        "gpu_ids": "all",
        "use_cpu": bool(measured_on_cpu(record)),
        "downcast_bf16": "no",
        "main_training_function": "main",
        "debug": False,
    }
    if config.get("compile"):
        settings["dynamo_config"] = {
            "dynamo_backend": "INDUCTOR",
            "dynamo_mode": config.get("compile_mode", "default"),
        }
    if precision == "fp8":
        settings["fp8_config"] = {"backend": "AO"}  # torchao's float8 training
    if layout == "fsdp2":
        settings["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": bool(config.get("reshard_after_forward", True)),
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
        }
    notes = {
        "micro_batch": f"{micro}: the DataLoader's batch_size",
        "gradient_accumulation_steps": f"{accum}: Accelerator(gradient_accumulation_steps={accum})",
        **sequence_note(record),
        "optimizer": f"torch.optim.AdamW(model.parameters(), lr={lr:g}, betas={ADAMW['betas']}, "
        f"weight_decay={ADAMW['weight_decay']}, fused={config.get('optimizer') == 'fused'}), "
        "no gradient clipping (the tuned step does not clip), a constant lr (no scheduler: "
        "the tuned step has no warmup or decay)",
        **common_notes(config),
    }
    if config.get("activation_checkpointing"):
        notes["activation_checkpointing"] = "model.gradient_checkpointing_enable()"
    if precision == "tf32":
        notes["precision"] = "tf32: torch.backends.cuda.matmul.allow_tf32 = True"
    if measured_on_cpu(record):
        notes["use_cpu"] = _ACCELERATE_CPU_NOTE
    if precision == "fp16" and loss_scale_set(config):
        notes["loss_scale_init"] = (
            f"{loss_scale(config):g}: GradScaler(init_scale=...) through "
            "Accelerator(kwargs_handlers=[GradScalerKwargs(init_scale=...)])"
        )
    notes.pop("compile_mode", None)  # dynamo_mode holds it
    if layout == "fsdp2":
        notes.update(fsdp2_reduce_note(precision, "accelerate"))
    if precision == "fp8":
        notes.pop("precision")  # mixed_precision fp8 with the AO backend holds it
    if layout in ("ddp", "fsdp2") and measured_on_cpu(record):
        notes["layout"] = _accelerate_cpu_launch_note(record, layout, micro * accum)
    if layout == "tp":
        n = world_size(record)
        # without it prepare() wraps the model in DDP, which refuses its DTensor weights
        settings["parallelism_config"] = {"parallelism_config_tp_size": n}
        notes["layout"] = _accelerate_tp_note(record, n)
    return TrainExport("accelerate", settings, notes)


def _accelerate_tp_note(record: dict[str, Any], n: int) -> str:
    """How a tensor-parallel winner trains under accelerate: the launcher hands ``Accelerator()``
    the ``parallelism_config`` tp size, so ``prepare()`` leaves the model to its own sharding
    instead of wrapping it in DDP; the model must arrive sharded, and say so."""
    note = (
        f"tp over {ran_on(record)}: parallelism_config_tp_size {n} has Accelerator() build a "
        "tensor-parallel mesh, so prepare() does not wrap the model in DDP; shard the model "
        "before prepare() with torch.distributed.tensor.parallel.parallelize_module on "
        "accelerator.torch_device_mesh['tp'] (q/k/v and gate/up column-wise, output and down "
        f"row-wise) and set model.tp_size = {n}, which prepare() checks"
    )
    if measured_on_cpu(record):
        note += (
            "; accelerate trains tensor parallel only on GPUs (its ParallelismConfig refuses "
            "MULTI_CPU): set use_cpu false and distributed_type MULTI_GPU"
        )
    return note


def _accelerate_cpu_launch_note(record: dict[str, Any], layout: str, per_process: int) -> str:
    """How a data-parallel winner over CPU processes starts them under accelerate: its launcher
    starts a MULTI_CPU config's processes only through MPI (mpirun), and alone runs one, which
    takes ``per_process`` samples of the global batch a step; an FSDP one's through torchrun,
    each training alone unless ``ACCELERATE_USE_CPU`` is in its environment (the file's
    ``use_cpu`` does not reach them). ``--multi_gpu`` has the launcher start them through
    torchrun, and ``ACCELERATE_USE_CPU=true`` has ``Accelerator()`` join them over gloo.

    Example:
        >>> note = _accelerate_cpu_launch_note(
        ...     {"problem": {"world_size": 2, "global_batch": 8}, "device": {"type": "cpu"}},
        ...     "ddp", 4)
        >>> note[note.index("; start") + 2:note.index(" SCRIPT") + 7]
        'start them as ACCELERATE_USE_CPU=true accelerate launch --config_file THIS --multi_gpu SCRIPT'
    """  # noqa: E501
    n = world_size(record)
    command = "ACCELERATE_USE_CPU=true accelerate launch --config_file THIS --multi_gpu SCRIPT"
    if layout == "ddp":
        alone = (f"accelerate launch starts MULTI_CPU's {n} processes only through MPI "
                 f"(mpirun); without it it runs one process, which trains {per_process} samples "
                 f"of the global batch {record['problem']['global_batch']} a step")  # fmt: skip
    else:
        alone = (f"accelerate launch starts {n} processes, but each trains alone (the file's "
                 "use_cpu does not reach them) unless ACCELERATE_USE_CPU=true is in their "
                 "environment; accelerate then runs them as MULTI_CPU")  # fmt: skip
    return (
        f"{layout} over {ran_on(record)}: {alone}; start them as {command} (torchrun's {n} "
        "processes, data parallel over gloo)"
    )
