"""A training step's record as its exports read it: the config the trial ran
(:func:`ran_config`), its micro-batch, gradient accumulation and lr (:func:`tuned`), the
processes it ran on and those that shared out the global batch (:func:`world_size`,
:func:`data_parallel`), its sequence length and fp16's first loss scale; and what the step
ran with that no record holds (:data:`ADAMW`, :data:`PRECISIONS`).

A record that is no training step, or whose batch arithmetic does not hold, is refused with
:class:`TrainExportError`:
    gradient_accumulation = global_batch // (micro_batch * data-parallel processes)

Example:
    >>> record = {"config": {"micro_batch": 4, "layout": "ddp"},
    ...           "problem": {"global_batch": 32, "world_size": 2, "lr": 1e-4}}
    >>> config, micro, accumulation, lr = tuned(record)
    >>> micro, accumulation, lr, data_parallel(record)
    (4, 4, 0.0001, 2)
"""

from __future__ import annotations

from typing import Any

from autotune.export_record import measured_on_cpu, positive, which_sweep, whole

# What the training-step objective's AdamW runs with (objectives/train_loop.py): every
# parameter decayed (the RMSNorm gains too), no gradient clipping before its step, and one
# lr throughout (no warmup or decay: a constant schedule where the target has a key for it).
ADAMW = {"betas": (0.9, 0.95), "weight_decay": 0.1}


#: the training step's precisions (objectives/train_step.py)
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8")


class TrainExportError(ValueError):
    """A record that is not a training step, or an unknown target."""


def ran_config(record: dict[str, Any]) -> dict[str, Any]:
    """The config the trial ran: its tuned parameters over the untuned defaults the sweep held
    fixed (``untuned``: a space without ``precision`` ran bf16 on a GPU, not fp32), with fp16's
    first loss scale where ``--problem loss_scale_init=`` fixed it.

    Example:
        >>> ran_config({"config": {"micro_batch": 2}, "untuned": {"precision": "bf16",
        ...             "micro_batch": 8}, "problem": {"loss_scale_init": 1024}})
        {'precision': 'bf16', 'micro_batch': 2, 'loss_scale_init': 1024}
    """
    config = {**(record.get("untuned") or {}), **(record.get("config") or {})}
    problem = record.get("problem") or {}
    if "loss_scale_init" in problem and "loss_scale_init" not in config:
        config["loss_scale_init"] = problem["loss_scale_init"]
    return config


def tuned(record: dict[str, Any]) -> tuple[dict[str, Any], int, int, float]:
    """The config (:func:`ran_config`), its micro-batch (per process), the gradient
    accumulation and the lr."""
    config, problem = ran_config(record), record.get("problem", {})
    if "micro_batch" not in config or "global_batch" not in problem:
        hint = ""
        # a replay, of a table that records no workload or (as_recorded) of a stamped one
        replayed = record.get("workload") == "replay" or isinstance(record.get("replay"), dict)
        if replayed and "micro_batch" in config:
            hint = "; replay a table without problem.global_batch with --problem global_batch=N"
        raise TrainExportError(
            "a training-stack export needs a train-step sweep (micro_batch, global_batch); "
            + which_sweep(record)
            + hint
        )
    micro = whole("micro_batch", config["micro_batch"], TrainExportError)
    total = whole("global_batch", problem["global_batch"], TrainExportError)
    lr = positive("lr", problem.get("lr", 3e-4), TrainExportError)
    shards = data_parallel(record)
    if total % (micro * shards):  # as the training step refuses it: no whole accumulation
        where = f" over {shards} data-parallel processes" if shards > 1 else ""
        raise TrainExportError(f"micro_batch {micro} does not divide global_batch {total}{where}")
    return config, micro, total // (micro * shards), lr


def world_size(record: dict[str, Any]) -> int:
    """The processes (GPUs) the tuned step ran on."""
    return whole("world_size", record.get("problem", {}).get("world_size", 1) or 1,
                 TrainExportError)  # fmt: skip


def ran_on(record: dict[str, Any]) -> str:
    """What the tuned step's processes ran on, for a note: ``N GPUs``, or ``N CPU processes``
    where the sweep ran on a CPU (gloo).

    Example:
        >>> ran_on({"problem": {"world_size": 2}, "device": {"type": "cpu"}})
        '2 CPU processes'
    """
    return f"{world_size(record)} " + ("CPU processes" if measured_on_cpu(record) else "GPUs")


def sequence_length(record: dict[str, Any]) -> int | None:
    """The sequence length the step was tuned at; None where the record lacks it (a replay
    of a table that does not record it)."""
    problem = record.get("problem", {})
    if "seq_len" not in problem:
        return None
    return whole("seq_len", problem["seq_len"], TrainExportError)


def loss_scale(config: dict[str, Any]) -> float:
    """fp16's first loss scale (2^16 where the sweep did not tune it)."""
    return positive("loss_scale_init", config.get("loss_scale_init", 2.0**16), TrainExportError)


def loss_scale_set(config: dict[str, Any]) -> bool:
    """Whether the config sets fp16's first loss scale to other than the scalers' own 2^16."""
    return "loss_scale_init" in config and loss_scale(config) != 2.0**16


def data_parallel(record: dict[str, Any]) -> int:
    """How many processes shared out the global batch (all but under tensor parallel)."""
    layout = ran_config(record).get("layout", "single")
    return 1 if layout in ("single", "tp") else world_size(record)
