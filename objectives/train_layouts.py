"""Parallel layouts of the training step over the processes of one node: how the model is
wrapped, which share of the global batch a process trains on, and how gradient sync is held
back during accumulation.

* ``single``: one process, the whole global batch.
* ``ddp``: :class:`~torch.nn.parallel.DistributedDataParallel`; every process keeps the whole
  model and trains ``global_batch / world_size`` sequences; gradients are all-reduced on the
  last micro-batch only (``no_sync`` before).
* ``fsdp2``: :func:`torch.distributed.fsdp.fully_shard` on every block and on the model;
  weights, gradients and AdamW state sharded over the processes, ``reshard_after_forward``
  searched, and under bf16/fp16 a :class:`~torch.distributed.fsdp.MixedPrecisionPolicy`
  (half-precision compute, fp32 gradient reduction) instead of autocast.
* ``tp``: tensor parallel (Megatron-style, :func:`~torch.distributed.tensor.parallel.
  parallelize_module`): the fused q/k/v and gate/up projections column-wise, the attention
  output and MLP down projections row-wise; every process trains the whole global batch.
  Needs the heads and the SwiGLU blocks to divide by the processes.

Example:
    >>> data_parallel("ddp", 4), data_parallel("tp", 4), data_parallel("single", 1)
    (4, 1, 1)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from autotune.failures import Infeasible
from autotune.kernels.llama import SWIGLU_BLOCK, LlamaConfig

LAYOUTS = ("single", "ddp", "fsdp2", "tp")
_HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}


def data_parallel(layout: str, world_size: int) -> int:
    """How many processes share out the global batch: all of them but under ``tp``."""
    return 1 if layout in ("single", "tp") else world_size


def check_layout(layout: str, world_size: int, cfg: LlamaConfig, precision: str) -> None:
    """Refuse a layout that cannot run this model on ``world_size`` processes.

    Raises:
        Infeasible: an unknown layout, ``single`` on several processes (or a parallel one on
            one), tensor parallel over heads or SwiGLU blocks it does not divide, or fp16 under
            a sharded layout (its loss scaler's overflow check would differ between shards).

    Example:
        >>> cfg = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=8)
        >>> check_layout("tp", 4, cfg, "bf16")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        autotune.failures.Infeasible: tensor parallel over 4 processes needs n_heads=2 to ...
    """
    if layout not in LAYOUTS:
        raise Infeasible(f"layout={layout!r} is not one of {', '.join(LAYOUTS)}")
    if (layout == "single") != (world_size == 1):
        raise Infeasible(f"layout={layout!r} does not run on world_size={world_size}")
    if layout == "tp":
        if cfg.n_heads % world_size:
            raise Infeasible(
                f"tensor parallel over {world_size} processes needs n_heads={cfg.n_heads} "
                f"to divide by {world_size}"
            )
        if cfg.ffn_hidden % (SWIGLU_BLOCK * world_size):
            raise Infeasible(
                f"tensor parallel over {world_size} processes needs ffn_hidden="
                f"{cfg.ffn_hidden} to divide into {world_size} x {SWIGLU_BLOCK}-wide blocks"
            )
    if precision == "fp16" and layout in ("fsdp2", "tp"):
        raise Infeasible(f"fp16's loss scaler is not supported under {layout}: use bf16 or ddp")


def wrap(
    model: nn.Module,
    layout: str,
    mesh: Any,
    precision: str,
    reshard_after_forward: bool,
    device: torch.device,
) -> nn.Module:
    """The model as the layout trains it (``mesh``: a 1-D DeviceMesh over the processes)."""
    if layout == "single":
        return model
    if layout == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [device.index] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)
    if layout == "fsdp2":
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        half = _HALF.get(precision)
        policy = (
            MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32)
            if half is not None
            else MixedPrecisionPolicy()
        )
        for block in model.blocks:
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward,
                        mp_policy=policy)  # fmt: skip
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward, mp_policy=policy)
        return model
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {
        "attn.qkv": ColwiseParallel(),
        "attn.out": RowwiseParallel(),
        "mlp.gate_up": ColwiseParallel(),
        "mlp.down": RowwiseParallel(),
    }
    for block in model.blocks:
        parallelize_module(block, mesh, plan)
    return model


def uses_autocast(layout: str) -> bool:
    """FSDP2 casts through its mixed-precision policy; the other layouts autocast."""
    return layout != "fsdp2"


def param_groups(model: nn.Module) -> list[dict[str, Any]]:
    """AdamW's parameter groups: sharded (DTensor) and plain parameters apart, since one fused
    or foreach kernel call takes only one kind (tensor parallel leaves the norms and the
    embedding plain)."""
    from torch.distributed.tensor import DTensor

    params = list(model.parameters())
    sharded = [p for p in params if isinstance(p, DTensor)]
    plain = [p for p in params if not isinstance(p, DTensor)]
    return [{"params": group} for group in (sharded, plain) if group]


GradientSync = Callable[[bool], contextlib.AbstractContextManager[None]]


def gradient_sync(model: nn.Module, layout: str) -> GradientSync:
    """``sync(last)``: a context for one micro-batch's backward that holds the gradient
    reduction back until the last micro-batch of the optimizer step."""

    @contextlib.contextmanager
    def sync(last: bool) -> Iterator[None]:
        if layout == "ddp" and not last:
            with model.no_sync():
                yield
        elif layout == "fsdp2":
            model.set_requires_gradient_sync(last)
            yield
        else:
            yield

    return sync
