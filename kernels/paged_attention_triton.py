"""Attention over a paged KV cache, read in place: the serving engine's ``paged`` backend.

The engine keeps keys and values in fixed-size blocks shared out by a block table
(:mod:`kernels.paged_kv`); the ``default`` backend gathers each sequence's blocks into one
contiguous tensor per layer and step, then calls SDPA with a mask. This kernel reads the blocks
where they lie instead (as vLLM's PagedAttention does): each program owns ``BLOCK_M`` query rows
of one (sequence, head) and walks the sequence's keys ``BLOCK_N`` at a time, finding each key's
block through the table (``block = table[key // PAGE]``, row ``key % PAGE``), with the online
softmax of :mod:`kernels.attention_triton` (running max, sum and output in fp32, base-2
exponentials). A query row at position ``p`` sees the keys ``0..p`` (causal; a decode row is
the one query at the sequence's last position, a chunked-prefill row one of several); a row at
position -1 is padding and is not written. Any block size works, one key row per address.

Operands: ``q`` (B, Q, H, D) in the compute dtype (bf16, fp16 or fp32); the cache's ``k`` and
``v`` (num_blocks, PAGE, H_KV, D) in bf16, fp16, fp32 or fp8 e4m3 (multiplied by ``kv_scale`` as
they are read); ``tables`` (B, max_blocks) and ``positions`` (B, Q), int32. Tunables:
``BLOCK_M``, ``BLOCK_N``, ``num_warps``, ``num_stages``; grid (cdiv(Q, BLOCK_M), B * H). A head
dim ``D`` that is not a power of two (96 in the 760m preset) is padded to one in registers and
masked: the padding reads and writes nothing.
Without a GPU it runs under Triton's interpreter (slowly: tests and CPU checks only).

Example:
    >>> import torch
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> k, v = (torch.randn(6, 4, 2, 16, device=dev) for _ in range(2))  # 6 blocks of 4 tokens
    >>> tables = torch.tensor([[5, 0, 3]], dtype=torch.int32, device=dev)  # one sequence
    >>> positions = torch.tensor([[9]], dtype=torch.int32, device=dev)  # decoding token 9
    >>> q = torch.randn(1, 1, 2, 16, device=dev)
    >>> out = paged_attention(q, k, v, tables, positions, BLOCK_M=16, BLOCK_N=16)
    >>> ref = reference_paged_attention(q, k, v, tables, positions)
    >>> out.shape, bool((out - ref).abs().max() < 1e-4)
    (torch.Size([1, 1, 2, 16]), True)
"""

from __future__ import annotations

import torch

from autotune.kernels import interpreter  # noqa: F401 - before triton, on purpose

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

# the same four tunables and limits as the contiguous attention kernel's
from autotune.kernels.attention_triton import check_config  # noqa: E402

#: Untuned but sensible for decode (one query row per sequence pads to the smallest tile).
DEFAULT_CONFIG: dict[str, int] = {"BLOCK_M": 16, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
CONFIG_KEYS: tuple[str, ...] = tuple(DEFAULT_CONFIG)
COMPUTE_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
CACHE_DTYPES = (*COMPUTE_DTYPES, torch.float8_e4m3fn)
LOG2E = 1.4426950408889634
_MAX_GRID_Y = 65535


# Reductions through helpers of this module, not ``tl.max``/``tl.sum``: those are decorated when
# ``triton`` is first imported, and a process that imported it before the interpreter was
# switched on (torch may) could not call them from an interpreted kernel.
@triton.jit
def _maximum(a, b):  # noqa: ANN001, ANN202
    return tl.maximum(a, b)


@triton.jit
def _add(a, b):  # noqa: ANN001, ANN202
    return a + b


@triton.jit
def _paged_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, table_ptr, pos_ptr,
    stride_qb, stride_qs, stride_qh, stride_qd,
    stride_kn, stride_kp, stride_kh, stride_kd,
    stride_vn, stride_vp, stride_vh, stride_vd,
    stride_ob, stride_os, stride_oh, stride_od,
    stride_tb, stride_pb,
    H, GROUP, Q, qk_scale, kv_scale,
    D: tl.constexpr, BLOCK_D: tl.constexpr, PAGE: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    UPCAST: tl.constexpr, IEEE: tl.constexpr, CONVERT: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kv_h = h // GROUP  # grouped-query: GROUP consecutive query heads share one K/V head
    rows = start_m + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)  # the head dim padded to a power of two (96 -> 128)
    in_d = cols < D
    pos = tl.load(pos_ptr + b * stride_pb + rows, mask=rows < Q, other=-1)
    live = pos >= 0  # padding rows (position -1) see nothing and are not stored
    q_ptrs = q_ptr + b * stride_qb + h * stride_qh
    q = tl.load(q_ptrs + rows[:, None] * stride_qs + cols[None, :] * stride_qd,
                mask=live[:, None] & in_d[None, :], other=0.0)  # fmt: skip
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, dtype=tl.float32)
    acc = tl.full((BLOCK_M, BLOCK_D), 0.0, dtype=tl.float32)
    hi = tl.reduce(pos, 0, _maximum) + 1  # keys 0..the last row's position
    for start in range(0, hi, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        in_range = keys < hi
        block = tl.load(table_ptr + b * stride_tb + keys // PAGE, mask=in_range, other=0)
        row = keys % PAGE
        k_base = k_ptr + block.to(tl.int64) * stride_kn + row * stride_kp + kv_h * stride_kh
        v_base = v_ptr + block.to(tl.int64) * stride_vn + row * stride_vp + kv_h * stride_vh
        # K^T: (BLOCK_D, BLOCK_N) and V: (BLOCK_N, BLOCK_D)
        k = tl.load(k_base[None, :] + cols[:, None] * stride_kd,
                    mask=in_range[None, :] & in_d[:, None], other=0.0)  # fmt: skip
        v = tl.load(v_base[:, None] + cols[None, :] * stride_vd,
                    mask=in_range[:, None] & in_d[None, :], other=0.0)  # fmt: skip
        if CONVERT:  # an fp8 cache, or the interpreter's upcast q: to q's dtype at the scale
            k = (k.to(tl.float32) * kv_scale).to(q.dtype)
            v = (v.to(tl.float32) * kv_scale).to(q.dtype)
        if IEEE:  # noqa: SIM108 - a constexpr branch: one of the two is compiled
            qk = tl.dot(q, k, input_precision="ieee") * qk_scale
        else:
            qk = tl.dot(q, k) * qk_scale
        qk = tl.where((keys[None, :] <= pos[:, None]) & in_range[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.reduce(qk, 1, _maximum))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # padding rows stay finite
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.reduce(p, 1, _add)
        acc = acc * alpha[:, None]
        p = p.to(q.dtype)
        if IEEE:  # noqa: SIM108
            acc = tl.dot(p, v, acc, input_precision="ieee")
        else:
            acc = tl.dot(p, v, acc)
        m_i = m_new
    out = (acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]).to(o_ptr.dtype.element_ty)
    o_ptrs = o_ptr + b * stride_ob + h * stride_oh
    tl.store(o_ptrs + rows[:, None] * stride_os + cols[None, :] * stride_od, out,
             mask=live[:, None] & in_d[None, :])  # fmt: skip


#: True under Triton's interpreter (no GPU compile; CPU tensors).
INTERPRETED: bool = not isinstance(_paged_attention_kernel, JITFunction)


def _check_operands(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, tables: torch.Tensor,
    positions: torch.Tensor,
) -> None:  # fmt: skip
    if q.ndim != 4 or k.ndim != 4 or k.shape != v.shape:
        raise ValueError(f"need q (B,Q,H,D) and k, v (blocks,PAGE,H_KV,D), got {tuple(q.shape)}, "
                         f"{tuple(k.shape)}, {tuple(v.shape)}")  # fmt: skip
    B, Q, H, D = q.shape
    if k.shape[3] != D or H % k.shape[2]:
        raise ValueError(f"k/v {tuple(k.shape)} do not fit q {tuple(q.shape)} (H % H_KV == 0)")
    if not (16 <= D <= 256 and D % 8 == 0):
        raise ValueError(f"head dim D={D} must be a multiple of 8 in 16..256")
    if q.dtype not in COMPUTE_DTYPES or k.dtype not in CACHE_DTYPES or v.dtype != k.dtype:
        raise ValueError(f"q must be bf16, fp16 or fp32 and k, v one cache dtype, got {q.dtype}, "
                         f"{k.dtype}, {v.dtype}")  # fmt: skip
    if tables.ndim != 2 or tables.shape[0] != B or positions.shape != (B, Q):
        raise ValueError(
            f"tables must be (B, blocks) and positions (B, Q) for q "
            f"{tuple(q.shape)}, got {tuple(tables.shape)}, {tuple(positions.shape)}"
        )
    if tables.dtype != torch.int32 or positions.dtype != torch.int32:
        raise ValueError("tables and positions must be int32")
    if B * H > _MAX_GRID_Y:
        raise ValueError(f"B * H = {B * H} exceeds the grid limit {_MAX_GRID_Y}")


def paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tables: torch.Tensor,
    positions: torch.Tensor,
    *,
    kv_scale: float = 1.0,
    sm_scale: float | None = None,
    BLOCK_M: int = DEFAULT_CONFIG["BLOCK_M"],
    BLOCK_N: int = DEFAULT_CONFIG["BLOCK_N"],
    num_warps: int = DEFAULT_CONFIG["num_warps"],
    num_stages: int = DEFAULT_CONFIG["num_stages"],
) -> torch.Tensor:
    """Causal attention of ``q`` over the paged keys and values: (B, Q, H, D) in q's dtype;
    rows at position -1 come back as zeros. Every position's block must be in ``tables``."""
    check_config(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages)
    _check_operands(q, k, v, tables, positions)
    B, Q, H, D = q.shape
    out = torch.zeros_like(q)
    upcast = INTERPRETED and q.dtype == torch.bfloat16  # the interpreter's bf16 is bit patterns
    scale = (D**-0.5 if sm_scale is None else float(sm_scale)) * LOG2E
    grid = (triton.cdiv(Q, BLOCK_M), B * H)
    _paged_attention_kernel[grid](
        q, k, v, out, tables, positions,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        tables.stride(0), positions.stride(0),
        H, H // k.shape[2], Q, scale, float(kv_scale),
        D=D, BLOCK_D=triton.next_power_of_2(D), PAGE=k.shape[1], BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N, UPCAST=upcast,
        IEEE=q.dtype == torch.float32,
        CONVERT=upcast or k.dtype != q.dtype or float(kv_scale) != 1.0,
        num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    return out


def reference_paged_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tables: torch.Tensor,
    positions: torch.Tensor,
    *,
    kv_scale: float = 1.0,
) -> torch.Tensor:
    """The same attention in fp32 torch: blocks gathered, a causal mask by position."""
    B, Q, H, D = q.shape
    page, group = k.shape[1], H // k.shape[2]
    keys = k[tables.long()].reshape(B, -1, k.shape[2], D).float() * kv_scale
    values = v[tables.long()].reshape(B, -1, v.shape[2], D).float() * kv_scale
    keys = keys.repeat_interleave(group, dim=2).transpose(1, 2)  # (B, H, blocks*page, D)
    values = values.repeat_interleave(group, dim=2).transpose(1, 2)
    scores = q.float().transpose(1, 2) @ keys.transpose(-1, -2) * D**-0.5  # (B, H, Q, keys)
    index = torch.arange(tables.shape[1] * page, device=q.device)
    visible = index[None, None, :] <= positions[:, :, None].long()  # (B, Q, keys)
    scores = scores.masked_fill(~visible[:, None], float("-inf"))
    weights = torch.softmax(scores, -1).nan_to_num(0.0)  # padding rows: all masked
    out = (weights @ values).transpose(1, 2)
    return out.masked_fill((positions < 0)[:, :, None, None], 0.0)
