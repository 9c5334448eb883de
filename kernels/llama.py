"""A small Llama-style decoder in plain torch, with random weights (nothing is downloaded).

Each block is pre-norm: ``x + attn(rmsnorm(x))`` then ``x + mlp(rmsnorm(x))``; attention is causal
with rotary position embeddings and runs through
:func:`torch.nn.functional.scaled_dot_product_attention`, so the caller picks the attention backend
with :func:`torch.nn.attention.sdpa_kernel`. The MLP is SwiGLU. This module knows nothing about the
tuner: it is a model, a config, and the arithmetic of its size and cost.

Example:
    >>> import torch
    >>> cfg = LlamaConfig(vocab=64, d_model=32, n_layers=2, n_heads=4, seq_len=16)
    >>> cfg.ffn_hidden
    128
    >>> model = Llama(cfg)
    >>> model(torch.zeros(2, 16, dtype=torch.long)).shape
    torch.Size([2, 16, 64])
    >>> param_count(cfg) == sum(p.numel() for p in model.parameters())
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def default_ffn_hidden(d_model: int, multiple_of: int = 64) -> int:
    """SwiGLU hidden width: 8/3 * d_model rounded up to a multiple of ``multiple_of``.

    SwiGLU has three d x f matrices instead of two d x 4d ones; f = 8/3 * d keeps the MLP's
    parameter count at 3 * d * 8d/3 = 8 d^2, the same as a classic 4d MLP (2 * d * 4d).

    Example:
        >>> default_ffn_hidden(768)  # 8/3 * 768 = 2048, already a multiple of 64
        2048
        >>> default_ffn_hidden(128)  # 8/3 * 128 = 341.3 -> 384
        384
    """
    raw = 8 * d_model / 3
    return multiple_of * math.ceil(raw / multiple_of)


@dataclass
class LlamaConfig:
    """Shape of the model.

    Attributes:
        vocab: vocabulary size (rows of the embedding, columns of the LM head).
        d_model: width of the residual stream.
        n_layers: number of decoder blocks.
        n_heads: attention heads; ``d_model // n_heads`` must be even (rotary rotates pairs).
        ffn_hidden: SwiGLU hidden width; ``None`` means :func:`default_ffn_hidden`.
        seq_len: longest sequence the rotary tables cover.
        rope_base: rotary frequency base (theta).
        norm_eps: RMSNorm epsilon.

    Example:
        >>> LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, seq_len=64).head_dim
        32
    """

    vocab: int = 32000
    d_model: int = 768
    n_layers: int = 12
    n_heads: int = 12
    ffn_hidden: int | None = None
    seq_len: int = 1024
    rope_base: float = 10000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        if self.ffn_hidden is None:
            self.ffn_hidden = default_ffn_hidden(self.d_model)
        for name in ("vocab", "d_model", "n_layers", "n_heads", "ffn_hidden", "seq_len"):
            if int(getattr(self, name)) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for rotary embeddings")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


def param_count(cfg: LlamaConfig) -> int:
    """Number of parameters of :class:`Llama` built from ``cfg`` (embedding and head untied).

    Example:
        >>> param_count(LlamaConfig(vocab=32000, d_model=768, n_layers=12, n_heads=12))
        134105856
    """
    d, f, v = cfg.d_model, cfg.ffn_hidden, cfg.vocab
    attention = 4 * d * d  # q, k, v and output projections, d x d each, no biases
    mlp = 3 * d * f  # gate and up (d x f), down (f x d)
    norms = 2 * d  # two RMSNorm gains per block
    per_block = attention + mlp + norms
    # embedding (v x d) + blocks + final norm (d) + LM head (d x v)
    return v * d + cfg.n_layers * per_block + d + d * v


def matmul_param_count(cfg: LlamaConfig) -> int:
    """Parameters that take part in a matmul: all but the embedding table and the norm gains.

    The embedding is a lookup (no multiply-adds) and the norm gains are elementwise, so neither
    counts towards model FLOPs.
    """
    d = cfg.d_model
    return param_count(cfg) - cfg.vocab * d - (2 * cfg.n_layers + 1) * d


def flops_per_token(cfg: LlamaConfig, seq_len: int | None = None, causal: bool = True) -> float:
    """Model FLOPs of one training token (forward + backward), the numerator of MFU.

    Arithmetic (the usual estimate, as in the PaLM paper's appendix B):

    * Dense layers: a weight of N parameters costs 2 FLOPs per parameter per token forward (one
      multiply, one add) and twice that backward (gradient w.r.t. input and w.r.t. weight):
      2N + 4N = 6N, with N = :func:`matmul_param_count`.
    * Attention scores and the weighted sum: per layer and token, QK^T costs 2 * seq * d forward
      and softmax(QK^T) V another 2 * seq * d, so 4 * seq * d forward and 3x that with backward:
      12 * seq * d per layer. The mask is causal, so a token attends to seq / 2 keys on average:
      6 * seq * d per layer, 6 * L * seq * d in all (``causal=False`` counts the full square).
      Recomputation from activation checkpointing is not added: these are model FLOPs, not
      hardware FLOPs.

    Example:
        >>> cfg = LlamaConfig(vocab=32000, d_model=768, n_layers=12, n_heads=12, seq_len=1024)
        >>> round(flops_per_token(cfg) / 1e6)  # 6 * 109.5M + 6 * 12 * 1024 * 768
        714
    """
    seq = cfg.seq_len if seq_len is None else seq_len
    dense = 6 * matmul_param_count(cfg)
    attention = (6 if causal else 12) * cfg.n_layers * seq * cfg.d_model
    return float(dense + attention)


class RMSNorm(nn.Module):
    """Root-mean-square norm: ``x / sqrt(mean(x^2) + eps) * gain``, computed in fp32."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * self.weight.float()).to(x.dtype)


def rotary_tables(head_dim: int, seq_len: int, base: float) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables of shape (seq_len, head_dim // 2) for rotary embeddings.

    Pair i of a head (dimensions i and i + head_dim/2) turns by angle pos * base^(-2i/head_dim).
    """
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[..., i], x[..., i + h/2]) of ``x`` (batch, heads, seq, h) by the tables."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    """Causal multi-head self-attention with rotary embeddings, through SDPA."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)  # q, k, v fused
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        # (b, t, 3d) -> 3 x (b, heads, t, head_dim). The fused weight's rows are grouped by head
        # (q, k, v of head 0, then of head 1, ...), so a tensor-parallel shard of contiguous rows
        # holds whole heads and the same view works on it (heads counted from the shape).
        qkv = self.qkv(x).view(b, t, -1, 3, self.head_dim).permute(3, 0, 2, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q, k = apply_rotary(q, cos[:t], sin[:t]), apply_rotary(k, cos[:t], sin[:t])
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


#: SwiGLU's fused gate/up weight alternates blocks of this many gate rows and up rows.
SWIGLU_BLOCK = 64


class SwiGLU(nn.Module):
    """``down(silu(gate(x)) * up(x))``; gate and up share one matmul.

    The fused weight's rows alternate :data:`SWIGLU_BLOCK` gate rows and as many up rows (one
    block of each when ``ffn_hidden`` is not a multiple of it), so a tensor-parallel shard of
    contiguous rows holds matching gate and up units.
    """

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.block = SWIGLU_BLOCK if cfg.ffn_hidden % SWIGLU_BLOCK == 0 else cfg.ffn_hidden
        self.gate_up = nn.Linear(cfg.d_model, 2 * cfg.ffn_hidden, bias=False)
        self.down = nn.Linear(cfg.ffn_hidden, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        *lead, _ = x.shape
        h = self.gate_up(x).view(*lead, -1, 2, self.block)
        return self.down((F.silu(h[..., 0, :]) * h[..., 1, :]).reshape(*lead, -1))


class Block(nn.Module):
    """One pre-norm decoder block."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    """Token embedding, ``n_layers`` blocks, final RMSNorm, LM head (untied).

    Args:
        cfg: the model's shape.
        activation_checkpointing: recompute each block's activations in the backward pass
            (``torch.utils.checkpoint``, non-reentrant) instead of keeping them: less memory for
            about one more forward pass of compute. Can be switched later through the attribute.

    Example:
        >>> import torch
        >>> cfg = LlamaConfig(vocab=32, d_model=16, n_layers=1, n_heads=2, seq_len=8)
        >>> tokens = torch.randint(0, 32, (1, 9))
        >>> loss = lm_loss(Llama(cfg)(tokens[:, :-1]), tokens[:, 1:])
        >>> loss.item() > 0
        True
    """

    def __init__(self, cfg: LlamaConfig, activation_checkpointing: bool = False) -> None:
        super().__init__()
        self.cfg = cfg
        self.activation_checkpointing = activation_checkpointing
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        cos, sin = rotary_tables(cfg.head_dim, cfg.seq_len, cfg.rope_base)
        # not persistent: derived from the config, so kept out of the state dict
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        """Random init: N(0, 0.02) weights; residual outputs scaled by 1/sqrt(2 * n_layers)."""
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith(("attn.out.weight", "mlp.down.weight")):
                # two residual writes per block: keep the stream's variance from growing with depth
                p.normal_(0.0, std / math.sqrt(2 * self.cfg.n_layers))
            else:
                p.normal_(0.0, std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, seq, vocab) for ``tokens`` of shape (batch, seq)."""
        if tokens.shape[1] > self.cfg.seq_len:
            raise ValueError(f"sequence of {tokens.shape[1]} > seq_len={self.cfg.seq_len}")
        x = self.embed(tokens)
        for block in self.blocks:
            if self.activation_checkpointing and torch.is_grad_enabled():
                x = checkpoint(block, x, self.rope_cos, self.rope_sin, use_reentrant=False)
            else:
                x = block(x, self.rope_cos, self.rope_sin)
        return self.head(self.norm(x))


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy, computed in fp32 whatever the logits' dtype."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


__all__ = [
    "Llama",
    "LlamaConfig",
    "apply_rotary",
    "default_ffn_hidden",
    "flops_per_token",
    "lm_loss",
    "matmul_param_count",
    "param_count",
    "rotary_tables",
]
