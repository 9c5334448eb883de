"""The training-step records the training-export tests share (tests/test_train_export.py and
the tests of its targets and helpers): a tuned single-GPU step (:func:`_record`), a parallel one
over 4 GPUs (:func:`_parallel`), the targets, and the lr an optimizer steps at (:func:`_lrs`).

Example:
    >>> _record(precision="bf16")["config"]["precision"], _record()["problem"]["global_batch"]
    ('bf16', 16)
    >>> _parallel(layout="fsdp2")["problem"]["world_size"]
    4
"""

from __future__ import annotations

PROBLEM = {"global_batch": 16, "lr": 3e-4, "seq_len": 64}


TUNED = {"micro_batch": 4, "precision": "fp16", "loss_scale_init": 1024,
         "activation_checkpointing": True, "attention_backend": "flash",
         "optimizer": "foreach", "compile": True}  # fmt: skip


def _record(**config) -> dict:
    """A record of :data:`TUNED` over :data:`PROBLEM`, ``config`` over the tuned knobs."""
    return {"config": {**TUNED, **config}, "problem": PROBLEM}


PARALLEL = {"global_batch": 16, "lr": 3e-4, "seq_len": 64, "world_size": 4}


def _parallel(**config) -> dict:
    """A record of a bf16 step over :data:`PARALLEL`'s 4 GPUs, ``config`` over its knobs."""
    base = {"micro_batch": 2, "precision": "bf16", "activation_checkpointing": False,
            "attention_backend": "default", "optimizer": "fused", "compile": False}  # fmt: skip
    return {"config": {**base, **config}, "problem": PARALLEL}


TARGETS = ["hf", "accelerate", "deepspeed", "torchtitan"]


def _lrs(optimizer, scheduler, steps: int) -> set[float]:
    """The lr of each of ``steps`` optimizer steps under ``scheduler``."""
    seen = set()
    for _ in range(steps):
        seen.add(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return seen
