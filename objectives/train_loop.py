"""The training loop one process runs for a train-step trial: build the model, wrap it for the
layout, train ``warmup_steps + steps`` optimizer steps on a fixed random batch, time the last
``steps``. :mod:`autotune.objectives.train_step` runs it in the trial's process (one device);
:mod:`autotune.objectives.train_parallel` in every process of a parallel layout.

Example:
    >>> from autotune.kernels.llama import LlamaConfig
    >>> job = TrainJob(LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=16),
    ...                global_batch=4, lr=1e-3, seed=0, steps=2, warmup_steps=1,
    ...                config=TrainConfig(micro_batch=2, precision="fp32"))
    >>> result = run_steps(job, Placement(torch.device("cpu")))
    >>> len(result.losses), result.accumulation
    (3, 2)
"""

from __future__ import annotations

import contextlib
import gc
import math
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.failures import Diverged
from autotune.kernels.llama import Llama, LlamaConfig, lm_loss
from autotune.objectives import train_layouts

#: "default" is torch's own dispatch (what an untuned run gets); the others force one backend.
ATTENTION_BACKENDS: dict[str, SDPBackend | None] = {
    "default": None,
    "math": SDPBackend.MATH,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
}
#: torch.compile modes: "reduce-overhead" adds CUDA graphs (cudagraph trees) to the default.
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")

# A loss this many times above ln(vocab) (the loss of a uniform guess) only comes from a run
# that has blown up: it means the target gets probability e^-(10 ln V) = V^-10.
BLOWUP_FACTOR = 10.0


@dataclass(frozen=True)
class TrainConfig:
    """One trial's tunables, checked (see ``TrainStepObjective.parse_config``)."""

    micro_batch: int
    precision: str
    activation_checkpointing: bool = False
    attention_backend: str = "default"
    optimizer: str = "fused"
    compile: bool = False
    compile_mode: str = "default"
    layout: str = "single"
    reshard_after_forward: bool = True
    loss_scale_init: float = 2.0**16  # GradScaler's first loss scale; used with fp16 only


@dataclass(frozen=True)
class TrainJob:
    """Everything a process needs to train: the model, the data's size and seed, the config."""

    model: LlamaConfig
    global_batch: int
    lr: float
    seed: int
    steps: int
    warmup_steps: int
    config: TrainConfig


@dataclass
class Placement:
    """Where one process trains: its device, its rank among ``world_size`` and the mesh."""

    device: torch.device
    rank: int = 0
    world_size: int = 1
    mesh: Any = None


@dataclass
class LoopResult:
    """What a process measured. ``peak_bytes``: the device's peak of allocated tensors (CUDA)
    or the process's peak resident set (CPU, None where it cannot be reset)."""

    losses: list[float]
    skipped: int
    timed_s: float
    warmup_s: float
    compile_s: float
    accumulation: int
    peak_bytes: float | None
    peak_is_tensors: bool
    extra: dict[str, Any] = field(default_factory=dict)


def reset_peak_rss() -> bool:
    """Reset this process's peak resident set size (VmHWM); False where Linux refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size since the last reset, in bytes."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # reported in kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def make_optimizer(model: torch.nn.Module, kind: str, lr: float, device: torch.device):
    """AdamW as LLM training runs it (betas 0.9/0.95, weight decay 0.1), fused or foreach.

    Raises:
        Infeasible: fused AdamW on a device without its kernel.
    """
    from autotune.failures import Infeasible

    try:
        return torch.optim.AdamW(
            train_layouts.param_groups(model),
            lr=lr,
            betas=(0.9, 0.95),
            weight_decay=0.1,
            fused=kind == "fused",
            foreach=kind == "foreach",
        )
    except RuntimeError as exc:  # fused AdamW refuses devices it has no kernel for
        raise Infeasible(f"{kind} AdamW is unavailable on {device.type}: {exc}") from exc


def batches(job: TrainJob, placement: Placement) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """This process's share of the fixed random global batch, cut into (inputs, targets)
    micro-batches: all of it under ``single`` and ``tp``, a 1/world_size slice otherwise."""
    cfg = job.model
    gen = torch.Generator().manual_seed(job.seed + 1)
    tokens = torch.randint(0, cfg.vocab, (job.global_batch, cfg.seq_len + 1), generator=gen)
    shards = train_layouts.data_parallel(job.config.layout, placement.world_size)
    if shards > 1:
        tokens = tokens.chunk(shards)[placement.rank]
    tokens = tokens.to(placement.device)
    return [(chunk[:, :-1], chunk[:, 1:]) for chunk in tokens.split(job.config.micro_batch)]


def _wrap(model: Llama, tc: TrainConfig, placement: Placement) -> torch.nn.Module:
    return train_layouts.wrap(model, tc.layout, placement.mesh, tc.precision,
                              tc.reshard_after_forward, placement.device)  # fmt: skip


def compile_blocks(model: Llama, mode: str) -> None:
    """torch.compile each decoder block in place (regional compilation, as torchtitan does):
    the blocks share one code object, so one compile serves them all, in a fraction of the
    time a whole-model compile of the unrolled layers takes; embedding and head stay eager."""
    for index, block in enumerate(model.blocks):
        model.blocks[index] = torch.compile(block, mode=mode)


def to_float8(model: torch.nn.Module, emulate: bool = False) -> None:
    """Swap the decoder blocks' linears for torchao's float8 training linears (dynamic
    per-tensor scales: e4m3 weights and inputs, e5m2 gradients), as torchtitan does; the LM head
    stays in bf16. torchao is the ``fp8`` extra. ``emulate``: torchao's CPU emulation of the
    float8 matmuls (the memory model's tests count what it saves).

    Raises:
        Infeasible: torchao is not installed.
    """
    from autotune.failures import Infeasible

    try:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    except ImportError as exc:
        raise Infeasible("precision fp8 needs torchao: pip install 'autotune[fp8]'") from exc

    def in_blocks(module: torch.nn.Module, fqn: str) -> bool:
        linear = isinstance(module, torch.nn.Linear)
        # float8 matmuls need both dimensions to be multiples of 16
        return not linear or (fqn.startswith("blocks.") and module.in_features % 16 == 0
                              and module.out_features % 16 == 0)  # fmt: skip

    config = Float8LinearConfig(emulate=emulate)
    convert_to_float8_training(model, config=config, module_filter_fn=in_blocks)


def _local(param: torch.Tensor) -> torch.Tensor:
    """A parameter's part on this process (a DTensor's local shard)."""
    to_local = getattr(param, "to_local", None)
    return to_local() if to_local is not None else param


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_steps(
    job: TrainJob,
    placement: Placement,
    report: Callable[[int, float], None] | None = None,
) -> LoopResult:
    """Train ``warmup_steps + steps`` optimizer steps and time the last ``steps``.

    ``report(step, loss)`` is called after every optimizer step with the global batch's mean
    loss; the time it takes is not measured.

    Raises:
        Diverged: the loss is NaN/inf or above 10 * ln(vocab) (or ``report`` raised it).
        torch.cuda.OutOfMemoryError: on CUDA, left for the caller to classify.
    """
    tc, cfg, device = job.config, job.model, placement.device
    cuda = device.type == "cuda"
    saved_matmul_precision = torch.get_float32_matmul_precision()
    model = optimizer = data = step = None
    try:
        gc.collect()
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        rss_reset = cuda or reset_peak_rss()
        # tf32 only changes how fp32 matmuls run on CUDA; on the CPU it is plain fp32
        torch.set_float32_matmul_precision("high" if tc.precision == "tf32" else "highest")
        torch.manual_seed(job.seed)  # every process builds the same weights
        with torch.device(device):
            model = Llama(cfg, activation_checkpointing=tc.activation_checkpointing)
        if tc.precision == "fp8":
            to_float8(model)
        if tc.layout == "tp":  # torchtitan's order: tensor parallel, compile, data parallel
            model = _wrap(model, tc, placement)
        if tc.compile:
            compile_blocks(model, tc.compile_mode)
        if tc.layout != "tp":
            model = _wrap(model, tc, placement)
        optimizer = make_optimizer(model, tc.optimizer, job.lr, device)
        # what this process holds of the weights (a shard's local part under fsdp2 and tp)
        held = sum(_local(p).numel() for p in model.parameters())
        data = batches(job, placement)
        step = _step_fn(model, optimizer, data, tc, placement)

        limit = BLOWUP_FACTOR * math.log(cfg.vocab)
        losses: list[float] = []
        times: list[float] = []
        skipped = 0
        for index in range(job.warmup_steps + job.steps):
            _sync(device)
            start = time.perf_counter()
            loss, was_skipped = step()  # .item() inside waits for the step's work to finish
            _sync(device)
            times.append(time.perf_counter() - start)
            skipped += was_skipped
            losses.append(loss)
            if not math.isfinite(loss) or loss > limit:
                raise Diverged(f"loss {loss:.4g} at step {index} (limit {limit:.3g})")
            if report is not None:
                report(index, loss)
        warmup, timed = times[: job.warmup_steps], times[job.warmup_steps :]
        # what the warm-up took beyond steady steps: torch.compile's compilation, CUDA graph
        # capture, the allocator's first growth
        compile_s = max(0.0, sum(warmup) - len(warmup) * statistics.median(timed))
        if cuda:
            peak: float | None = float(torch.cuda.max_memory_allocated(device))
        else:
            rss = peak_rss_bytes() if rss_reset else None
            peak = float(rss) if rss is not None else None
        return LoopResult(
            losses=losses, skipped=skipped, timed_s=sum(timed), warmup_s=sum(warmup),
            compile_s=compile_s, accumulation=len(data), peak_bytes=peak, peak_is_tensors=cuda,
            extra={"local_params": held},
        )  # fmt: skip
    except BaseException as exc:
        # The traceback keeps every frame's locals (activations, logits) alive for as long as
        # the caller holds the exception; drop them so that an OOM really frees the memory.
        traceback.clear_frames(exc.__traceback__)
        raise
    finally:
        torch.set_float32_matmul_precision(saved_matmul_precision)
        del model, optimizer, data, step
        release(device, dynamo=tc.compile)


def _step_fn(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    data: list[tuple[torch.Tensor, torch.Tensor]],
    tc: TrainConfig,
    placement: Placement,
) -> Callable[[], tuple[float, bool]]:
    """One optimizer step over all micro-batches; returns the global batch's mean loss and
    whether the loss scaler skipped the step (fp16 gradients that overflowed)."""
    device = placement.device
    accum = len(data)
    # fp8: the converted linears run in float8, everything else under bf16 autocast
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}.get(
        tc.precision
    )
    if not train_layouts.uses_autocast(tc.layout):
        autocast_dtype = None  # FSDP2's mixed-precision policy casts instead
    # fp16 needs dynamic loss scaling: small gradients would underflow to zero otherwise
    scaler = torch.amp.GradScaler(
        device.type, init_scale=tc.loss_scale_init, enabled=tc.precision == "fp16"
    )
    first = optimizer.param_groups[0]["params"][0]

    def steps_taken() -> float:
        # AdamW counts the updates it made in each parameter's state
        return float(optimizer.state.get(first, {}).get("step", 0))

    backend = ATTENTION_BACKENDS[tc.attention_backend]
    # torch's own dispatch for "default", else the one backend, backward included
    attention = (lambda: sdpa_kernel(backend)) if backend is not None else contextlib.nullcontext
    sync = train_layouts.gradient_sync(model, tc.layout)
    shards = train_layouts.data_parallel(tc.layout, placement.world_size)
    graphs = tc.compile and tc.compile_mode == "reduce-overhead"

    def step() -> tuple[float, bool]:
        optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        # the backward pass (and checkpointing's recompute) runs inside sdpa_kernel too
        with attention():
            for index, (inputs, targets) in enumerate(data):
                if graphs:
                    torch.compiler.cudagraph_mark_step_begin()
                autocast = (
                    torch.autocast(device.type, dtype=autocast_dtype)
                    if autocast_dtype is not None
                    else contextlib.nullcontext()
                )
                with sync(index == accum - 1):
                    with autocast:
                        # each micro-batch's mean loss / accum: the gradients sum to the mean
                        loss = lm_loss(model(inputs), targets) / accum
                    scaler.scale(loss).backward()
                if graphs and index == 0 and accum > 1:
                    _own_gradients(model)
                total += loss.detach()
        if shards > 1:  # the global batch's mean over the data-parallel processes
            torch.distributed.all_reduce(total)
            total /= shards
        before = steps_taken()
        scaler.step(optimizer)  # skips the update when fp16 gradients overflowed
        scaler.update()
        return total.item(), steps_taken() == before

    return step


def _own_gradients(model: torch.nn.Module) -> None:
    """Give the parameters gradients of their own after a micro-batch's backward under CUDA
    graphs: autograd adopted the compiled backward's outputs as the first ``.grad`` (no copy),
    and those live in the graphs' memory, which the next micro-batch's replay overwrites
    ("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run",
    seen on the H200 with accumulation). Later micro-batches add into these in place."""
    for param in model.parameters():
        if param.grad is not None:
            param.grad = param.grad.clone()


def release(device: torch.device, dynamo: bool = False) -> None:
    """Free what a trial left: garbage, the CUDA cache, and (``dynamo``) compiled code, which
    is cached per code object (Block.forward is shared by every model built in this process):
    without a reset, later trials hit the recompile limit and silently run eagerly."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if dynamo:
        torch._dynamo.reset()
