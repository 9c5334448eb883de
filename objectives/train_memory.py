"""The memory model of a training step: its peak memory, predicted from the model's shape and
the config before anything runs.

Peak = the state that lives through the step + what one micro-batch's forward keeps for its
backward + the logits' gradient the backward starts from:

* state: fp32 weights, fp32 gradients and AdamW's two fp32 moments: 16 bytes a parameter.
* activations, per layer and token of a micro-batch (``T = micro_batch * seq_len`` tokens),
  counted on this model with autograd's saved-tensor hooks (``tests/objectives/
  test_train_memory.py`` measures them again): fp32 keeps ``48 d + 16 f`` bytes (12 values of the
  width ``d``: norms, projections' inputs, q, k, v, rotary; 4 of the SwiGLU width ``f``), bf16
  and fp16 autocast ``35 d + 8 f`` (the norms stay fp32) plus a bf16 cast of every weight of the
  layer (2 bytes a parameter). Attention adds the probabilities under the math backend
  (``4 h s`` bytes: fp32, ``h`` heads by ``s`` keys) and only its output and log-sum-exp under
  the fused ones (``4 (d + h + 2)`` in fp32, ``4 h + 8`` under autocast).
  With activation checkpointing only each layer's input stays (``4 d``), and one layer at a time
  is recomputed in the backward (``recompute``). A block compiled by ``torch.compile`` keeps
  less: AOTAutograd's partitioner saves the matmuls' inputs and recomputes the cheap pointwise
  ops in the backward. Counted the same way on compiled blocks (least squares over 8 shapes,
  residuals under 0.1%; the test measures them again): fp32 ``44.2 d + 12 f``, autocast
  ``23.2 d + 6 f`` plus the weights' casts, taken here as ``45 d + 12 f`` and ``24 d + 6 f``.
  Against the peaks recorded on the H200 (``benchmarks/results/h200-2026-12-01-final``), that
  predicts the 760m preset's compiled fp16 steps at micro-batch 16 within 2% of their measured
  69.9-72.3 GB, where the eager count said 91 GB.
* a compiled block under the math backend keeps what it keeps under a fused one (no
  probabilities: inductor replaces the softmax attention it traces with a fused kernel; the
  saved tensors on the CPU, and the H200's peaks of the 1b sweep of session 32, 69.53 GB
  for math and flash alike, say so).
* fp8 (torchao's float8 linears, the rest under bf16 autocast) saves the linears' bf16 inputs
  and their fp32 weights, not bf16 casts of them: ``33 d + 10 f`` eager, ``14 d + 5 f``
  compiled (least squares over 8 shapes with torchao's CPU emulation, residuals under 3%),
  no weight casts. Against the 1b preset's compiled steps on the H200 (session 32) that
  predicts 53.9 / 34.5 GB for measured 55.7 / 37.4 (micro-batch 16 / 8); bf16's count said
  69.1 / 43.0.
* outside the layers: the logits and the loss's fp32 log-softmax (``4 V + 12 d`` bytes a token;
  under autocast also the LM head's bf16 cast, ``2 V d``), and the logits' gradient (``4 V``
  a token) when the backward starts.

Example (the CPU's default problem, fp32, micro-batch 8):
    >>> from autotune.kernels.llama import LlamaConfig
    >>> cfg = LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, seq_len=64)
    >>> est = estimate(cfg, micro_batch=8, precision="fp32", attention_backend="math",
    ...                checkpointing=False)
    >>> sorted(est.parts), round(est.total / 2**20, 1)  # MiB
    (['activations', 'logits_grad', 'state'], 24.3)
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.kernels.llama import LlamaConfig, param_count

# fp8 runs the blocks' linears through torchao's float8 autograd function under bf16 autocast:
# it saves the linears' bf16 inputs and the fp32 weights themselves (no bf16 weight casts), and
# its own per-token coefficients (below) were counted the same way as the others
_MIXED = ("bf16", "fp16", "fp8")


@dataclass(frozen=True)
class MemoryEstimate:
    """The predicted peak, in bytes, and its parts."""

    parts: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.parts.values())


def layer_params(cfg: LlamaConfig) -> int:
    """Weights of one decoder block: q, k, v, out (4 d^2), gate, up, down (3 d f), 2 norms."""
    d, f = cfg.d_model, cfg.ffn_hidden
    return 4 * d * d + 3 * d * f + 2 * d


def layer_activation_bytes(
    cfg: LlamaConfig, tokens: int, precision: str, math: bool, compiled: bool = False
) -> float:
    """What one layer keeps for its backward over ``tokens`` tokens (see the module docstring);
    ``compiled``: the layer is a ``torch.compile``'d block."""
    d, f, h, s = cfg.d_model, cfg.ffn_hidden, cfg.n_heads, cfg.seq_len
    mixed = precision in _MIXED
    if precision == "fp8":
        per_token = (14 * d + 5 * f) if compiled else (33 * d + 10 * f)
    elif compiled:
        per_token = (24 * d + 6 * f) if mixed else (45 * d + 12 * f)
    else:
        per_token = (35 * d + 8 * f) if mixed else (48 * d + 16 * f)
    if math and not compiled:  # compiled, the math backend keeps what a fused one keeps
        per_token += 4 * h * s + 8
    else:
        per_token += (4 * h + 8) if mixed else 4 * (d + h + 2)
    return tokens * per_token + weight_casts(cfg, precision)


def weight_casts(cfg: LlamaConfig, precision: str) -> float:
    """Bytes of one layer's weights that autocast keeps cast to 16 bits for the backward (2 a
    parameter under bf16 and fp16; none in fp32, nor in fp8, whose linears keep the fp32
    weights themselves)."""
    return 2.0 * layer_params(cfg) if precision in ("bf16", "fp16") else 0.0


def activation_bytes(
    cfg: LlamaConfig,
    micro_batch: int,
    precision: str,
    attention_backend: str,
    checkpointing: bool,
    compiled: bool = False,
) -> float:
    """Bytes autograd keeps for the backward of one micro-batch (layers and logits)."""
    tokens = micro_batch * cfg.seq_len
    math = attention_backend == "math"
    if checkpointing:  # each layer's input only: the fp32 residual stream
        layers = cfg.n_layers * tokens * 4.0 * cfg.d_model
    else:
        layers = cfg.n_layers * layer_activation_bytes(cfg, tokens, precision, math, compiled)
    logits = tokens * (4.0 * cfg.vocab + 12 * cfg.d_model)
    head_cast = 2.0 * cfg.vocab * cfg.d_model if precision in _MIXED else 0.0
    return layers + logits + head_cast


def local_params(cfg: LlamaConfig, layout: str = "single", world_size: int = 1) -> float:
    """Parameters one process holds: all of them under ``single`` and ``ddp``, a 1/world_size
    shard under ``fsdp2``, and under ``tp`` a 1/world_size share of the blocks' projections
    (the norms, the embedding and the LM head stay whole).

    Example:
        >>> cfg = LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, seq_len=64)
        >>> local_params(cfg, "fsdp2", 2) == param_count(cfg) / 2
        True
    """
    total = float(param_count(cfg))
    if layout == "fsdp2":
        return total / world_size
    if layout == "tp":
        sharded = cfg.n_layers * (layer_params(cfg) - 2 * cfg.d_model)
        return total - sharded * (1 - 1 / world_size)
    return total


def estimate(
    cfg: LlamaConfig,
    *,
    micro_batch: int,
    precision: str,
    attention_backend: str,
    checkpointing: bool,
    layout: str = "single",
    world_size: int = 1,
    reshard_after_forward: bool = True,
    compiled: bool = False,
) -> MemoryEstimate:
    """The predicted peak memory of one process's training step with this config.

    Parallel layouts (``micro_batch`` is each process's): the state counts the process's
    :func:`local_params`; DDP adds its gradient buckets (4 bytes a parameter); FSDP2 adds the
    weights it gathers (the root's, and two blocks' at a time when it reshards after forward,
    else every block's, in the compute precision) and one block's unsharded fp32 gradient, and
    its activations have no autocast casts (the policy casts the gathered weights); tensor
    parallel divides the layers' activations by the processes but the residual stream's
    (16 bytes of the width a token). The single-device parts are checked against autograd's
    saved tensors; the parallel terms follow the libraries' documented behaviour and are not
    yet checked against GPU peaks.
    """
    tokens = micro_batch * cfg.seq_len
    mixed = precision in _MIXED
    activations = activation_bytes(
        cfg, micro_batch, precision, attention_backend, checkpointing, compiled
    )
    parts = {
        "state": 16.0 * local_params(cfg, layout, world_size),  # fp32 weights, grads, 2 moments
        "activations": activations,
        "logits_grad": 4.0 * tokens * cfg.vocab,
    }
    math = attention_backend == "math"
    if checkpointing:
        parts["recompute"] = layer_activation_bytes(cfg, tokens, precision, math, compiled)
    if layout == "ddp":
        parts["ddp_buckets"] = 4.0 * param_count(cfg)
    elif layout == "fsdp2":
        weight = 2.0 if mixed else 4.0
        root = param_count(cfg) - cfg.n_layers * layer_params(cfg)
        blocks = min(2, cfg.n_layers) if reshard_after_forward else cfg.n_layers
        parts["gathered"] = weight * (root + blocks * layer_params(cfg)) + 4.0 * layer_params(cfg)
        if not checkpointing:
            parts["activations"] -= cfg.n_layers * weight_casts(cfg, precision)
    elif layout == "tp" and not checkpointing:  # checkpointing keeps the replicated inputs
        layers = cfg.n_layers * layer_activation_bytes(cfg, tokens, precision, math, compiled)
        stream = cfg.n_layers * tokens * 16.0 * cfg.d_model
        parts["activations"] = activations - layers * (1 - 1 / world_size) + stream
    return MemoryEstimate(parts)


def token_batch_bytes(global_batch: int, seq_len: int) -> int:
    """Bytes of the fixed random global batch a trial draws before it trains: ``global_batch``
    sequences of ``seq_len + 1`` int64 tokens (inputs and their shifted targets), made whole
    on the host (:func:`autotune.objectives.train_loop.batches`).

    Example:
        >>> token_batch_bytes(8, 64)
        4160
    """
    return 8 * global_batch * (seq_len + 1)


def check_token_batch(global_batch: int, seq_len: int, host_bytes: int) -> None:
    """Refuse a global batch whose tokens alone outgrow the host's memory (``host_bytes``; 0:
    not known, left to the trials): every trial would allocate it first and run out of memory,
    or push the machine into the kernel's OOM killer, before one step.

    Raises:
        ValueError: naming global_batch and seq_len, the batch's size and the memory.

    Example:
        >>> check_token_batch(8, 64, 2**34)
        >>> check_token_batch(10**8, 64, 2**34)
        Traceback (most recent call last):
        ...
        ValueError: global_batch=100000000, seq_len=64: the token batch (100000000 x 65 int64 \
tokens) takes 48.4 GiB, more than this machine's 16.0 GiB of memory
    """
    need = token_batch_bytes(global_batch, seq_len)
    if not host_bytes or need <= host_bytes:
        return
    raise ValueError(f"global_batch={global_batch}, seq_len={seq_len}: the token batch "
                     f"({global_batch} x {seq_len + 1} int64 tokens) takes {need / 2**30:,.1f} "
                     f"GiB, more than this machine's {host_bytes / 2**30:,.1f} GiB of "
                     "memory")  # fmt: skip


def check_state_fits(cfg: LlamaConfig, world_size: int, memory: int, where: str) -> None:
    """Refuse a model whose training state (fp32 weights, gradients and AdamW's two moments: 16
    bytes a parameter, sharded over ``world_size`` processes at best, as FSDP2 shards it)
    outgrows the whole ``memory`` of one process's device (``where``: 'this CPU', 'this GPU
    (NAME)'; 0: not known, left to the sweep): every config would be refused by its predicted
    peak, one by one, or fail. Named by the sizes it comes of.

    Raises:
        ValueError: naming the model's sizes, the state's bytes and the memory.

    Example:
        >>> big = LlamaConfig(vocab=32000, d_model=4096, n_layers=32, n_heads=32, seq_len=64)
        >>> check_state_fits(big, 8, 80 * 2**30, "this GPU (H100)")
        >>> check_state_fits(big, 1, 24 * 2**30, "this CPU")  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        ValueError: vocab=32000, d_model=4096, n_layers=32: the model's 6,713,249,792 parameters
        take 100.0 GiB to train (fp32 weights, gradients and AdamW's two moments, 16 bytes each),
        more than the 24.0 GiB of memory of this CPU
    """
    state = 16.0 * param_count(cfg) / world_size
    if not memory or state <= memory:
        return
    sizes = f"vocab={cfg.vocab}, d_model={cfg.d_model}, n_layers={cfg.n_layers}"
    shared = f" over world_size={world_size} processes" if world_size > 1 else ""
    raise ValueError(f"{sizes}: the model's {param_count(cfg):,} parameters take "
                     f"{state / 2**30:,.1f} GiB to train{shared} (fp32 weights, gradients and "
                     "AdamW's two moments, 16 bytes each), more than the "
                     f"{memory / 2**30:,.1f} GiB of memory of {where}")  # fmt: skip
