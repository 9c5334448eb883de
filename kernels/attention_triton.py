"""Fused attention forward in Triton (FlashAttention-2 style), causal or not, grouped-query.

``out = softmax(q k^T * sm_scale [+ causal mask]) v`` for ``q`` of shape (B, H, S, D) and ``k``,
``v`` of shape (B, H_KV, S, D), H a multiple of H_KV: query head ``h`` reads key/value head
``h // (H // H_KV)`` (H_KV = H is plain multi-head attention, H_KV = 1 multi-query). bf16 or fp16
in, fp32 accumulation, the result in the input dtype.

Each program owns ``BLOCK_M`` query rows of one (batch, head) and walks the keys ``BLOCK_N`` at a
time, keeping the running row maximum ``m``, the running sum ``l`` of exponentials and the
unnormalised output ``acc`` in registers (the online softmax): a new block's scores rescale
what came before by ``2^(m_old - m_new)``, and ``acc / l`` is written once at the end. Scores are
taken in base 2, ``qk * sm_scale * log2(e)``, so each exponential is one ``exp2``. The
key loop is split in two: the blocks that need no mask (for causal attention those entirely
below the diagonal, otherwise all whole blocks), then the few that do (the diagonal blocks, or
the ragged last block when S is not a multiple of ``BLOCK_N``). Masking of ragged edges is
compiled in only when S is not a multiple of both block sizes (the ``MASKED`` constexpr),
so the common case, causal or not, runs its bulk unmasked.
Tunables: ``BLOCK_M``, ``BLOCK_N``, ``num_warps``, ``num_stages``, and ``TMA``: 1 brings q, k,
v in and the output out through tensor descriptors over (B*H, S, D) (Hopper's copy engine; a
ragged S then needs no mask on loads, the descriptor reads zeros past S and clips the store),
0 through pointer loads. Grid: (cdiv(S, BLOCK_M), B * H). The module knows nothing about the
tuner.

Without a GPU the kernel runs under Triton's interpreter on torch CPU tensors (importing this
module switches it on first, see ``interpreter``); ``num_warps``/``num_stages`` are ignored
there and ``compile_only`` has nothing to compile.

Example:
    >>> import torch
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> q = torch.randn(1, 4, 40, 32, dtype=torch.bfloat16, device=dev)
    >>> k, v = (torch.randn(1, 2, 40, 32, dtype=torch.bfloat16, device=dev) for _ in range(2))
    >>> out = attention(q, k, v, causal=True, BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    >>> ref = reference_attention(q, k, v, causal=True)
    >>> out.shape, out.dtype, bool((out.float() - ref).norm() / ref.norm() < 1e-2)
    (torch.Size([1, 4, 40, 32]), torch.bfloat16, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from autotune.kernels import interpreter  # noqa: F401 - before triton, on purpose

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from autotune.kernels import tma  # noqa: E402
from autotune.kernels.interpreter import (  # noqa: E402
    check_shared_memory,
    is_pow2,
)

#: The tunables with an untuned but sensible value each (for D <= 128 on a Hopper GPU).
DEFAULT_CONFIG: dict[str, int] = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 4, "num_stages": 2}
#: Tunables off unless a config sets them: ``TMA=1`` brings q, k, v in and the output out
#: through tensor descriptors (the copy engine of Hopper and later) instead of pointer loads;
#: it needs each of q, k, v, out to keep its (B, H) rows in one stride pattern (contiguous
#: tensors do) and rows 16-byte aligned.
OPTIONAL_CONFIG: dict[str, int] = {"TMA": 0}
CONFIG_KEYS: tuple[str, ...] = (*DEFAULT_CONFIG, *OPTIONAL_CONFIG)
DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}

LOG2E = 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
# Offsets inside the kernel are int32: every address offset must stay below 2**31 elements.
_INT32_LIMIT = 2**31
_MAX_GRID_Y = 65535  # CUDA's limit on the second grid dimension (B * H programs)


@triton.jit
def _attend(
    acc, l_i, m_i, q, k_src, v_src, kv_bh, stride_ks, stride_vs, rows, lo, hi, S, qk_scale,
    BLOCK_N: tl.constexpr, D: tl.constexpr, CAUSAL_MASK: tl.constexpr, KEY_MASK: tl.constexpr,
    UPCAST: tl.constexpr, TMA: tl.constexpr,
):  # fmt: skip
    """Fold the keys ``lo <= j < hi`` (``lo`` a multiple of ``BLOCK_N``) into the running
    (acc, l, m) of the rows ``rows``; masks only what the constexpr flags ask for.

    ``k_src``/``v_src`` are tensor descriptors over (B*H_KV, S, D) with ``TMA`` (the copy engine
    brings whole tiles, zero past S, and ``kv_bh`` is the K/V head's row), else pointers to a
    (D, BLOCK_N) tile of K^T and a (BLOCK_N, D) tile of V."""
    if not TMA:
        k_src += lo * stride_ks
        v_src += lo * stride_vs
    for start in range(lo, hi, BLOCK_N):
        keys = start + tl.arange(0, BLOCK_N)
        if TMA:
            k = k_src.load([kv_bh, start, 0]).reshape(BLOCK_N, D).T
            v = v_src.load([kv_bh, start, 0]).reshape(BLOCK_N, D)
        elif KEY_MASK:  # keys past S read as 0 and score -inf below
            k = tl.load(k_src, mask=keys[None, :] < S, other=0.0)
            v = tl.load(v_src, mask=keys[:, None] < S, other=0.0)
        else:
            k = tl.load(k_src)
            v = tl.load(v_src)
        if UPCAST:  # interpreter only (see _upcast): bf16 -> fp32 is exact
            k = k.to(tl.float32)
            v = v.to(tl.float32)
        # base-2 logits: exp(s * sm_scale) = exp2(s * sm_scale * log2(e)) = exp2(s * qk_scale).
        # The scale is applied inside the exponent's argument, qk * qk_scale - m, one fused
        # multiply-add an element (qk_scale > 0, so scaling commutes with the row maximum).
        qk = tl.dot(q, k)
        if CAUSAL_MASK:
            qk = tl.where(keys[None, :] <= rows[:, None], qk, float("-inf"))
        if KEY_MASK:
            qk = tl.where(keys[None, :] < S, qk, float("-inf"))
        # every row has seen at least one live key by its first block (key 0, or the key on
        # its diagonal), so m_new is finite and exp2(-inf - m_new) = 0 for masked entries
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        alpha = tl.exp2(m_i - m_new)  # rescales the old sums; 0 on the first block
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if UPCAST:  # noqa: SIM108 - the P @ V product in the input dtype (bf16), as on a GPU
            p = p.to(tl.bfloat16).to(tl.float32)
        else:
            p = p.to(v.dtype)
        acc = tl.dot(p, v, acc)
        m_i = m_new
        if not TMA:
            k_src += BLOCK_N * stride_ks
            v_src += BLOCK_N * stride_vs
    return acc, l_i, m_i


@triton.jit
def _attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr,
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    H, GROUP, S, qk_scale,
    D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    MASKED: tl.constexpr, UPCAST: tl.constexpr, TMA: tl.constexpr,
):  # fmt: skip
    # --- which rows this program owns: BLOCK_M queries of one (batch, head) -------------------
    block_m = tl.program_id(0)
    if CAUSAL:
        # the last query blocks see the most keys: launched first, so that the grid's last
        # wave is of light blocks and no SM idles while a few heavy ones finish
        block_m = tl.num_programs(0) - 1 - block_m
    start_m = block_m * BLOCK_M
    bh = tl.program_id(1)
    b = bh // H
    h = bh % H
    kv_h = h // GROUP  # grouped-query: GROUP consecutive query heads share one K/V head
    rows = start_m + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, D)
    if TMA:
        # (B, H) collapse into one axis of rows (the launcher checks the strides allow it):
        # query head bh's rows, and K/V head bh // GROUP's (= b * H_KV + kv_h); tiles past S
        # read as zeros and their stores are clipped, so nothing is masked by hand
        bh_all = tl.num_programs(1)
        q_src = tl.make_tensor_descriptor(q_ptr, shape=[bh_all, S, D],
                                          strides=[stride_qh, stride_qs, 1],
                                          block_shape=[1, BLOCK_M, D])  # fmt: skip
        k_src = tl.make_tensor_descriptor(k_ptr, shape=[bh_all // GROUP, S, D],
                                          strides=[stride_kh, stride_ks, 1],
                                          block_shape=[1, BLOCK_N, D])  # fmt: skip
        v_src = tl.make_tensor_descriptor(v_ptr, shape=[bh_all // GROUP, S, D],
                                          strides=[stride_vh, stride_vs, 1],
                                          block_shape=[1, BLOCK_N, D])  # fmt: skip
        q = q_src.load([bh, start_m, 0]).reshape(BLOCK_M, D)
    else:
        keys = tl.arange(0, BLOCK_N)
        q_ptrs = q_ptr + b * stride_qb + h * stride_qh
        q_ptrs += rows[:, None] * stride_qs + cols[None, :] * stride_qd
        k_src = k_ptr + b * stride_kb + kv_h * stride_kh
        k_src += keys[None, :] * stride_ks + cols[:, None] * stride_kd  # K^T: (D, BLOCK_N)
        v_src = v_ptr + b * stride_vb + kv_h * stride_vh
        v_src += keys[:, None] * stride_vs + cols[None, :] * stride_vd  # V: (BLOCK_N, D)
        if MASKED:  # noqa: SIM108 - rows past S read as 0; they are never stored
            q = tl.load(q_ptrs, mask=rows[:, None] < S, other=0.0)
        else:
            q = tl.load(q_ptrs)
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, dtype=tl.float32)
    acc = tl.full((BLOCK_M, D), 0.0, dtype=tl.float32)
    kv_bh = bh // GROUP

    # --- the key blocks that need no mask, then the ones that do ------------------------------
    if CAUSAL:
        # blocks wholly at or below the smallest row's diagonal: every key j <= start_m <= row,
        # e.g. start_m=96, BLOCK_N=64: keys 0..63 unmasked, then 64..127 and up masked
        full_end = (start_m // BLOCK_N) * BLOCK_N
        hi = start_m + BLOCK_M  # the largest row's diagonal
        if MASKED:
            hi = tl.minimum(hi, S)
    else:
        full_end = S
        hi = S
        if MASKED:
            full_end = (S // BLOCK_N) * BLOCK_N  # e.g. S=40, BLOCK_N=16: 0..31, then 32..39
    acc, l_i, m_i = _attend(
        acc, l_i, m_i, q, k_src, v_src, kv_bh, stride_ks, stride_vs, rows, 0, full_end, S,
        qk_scale, BLOCK_N=BLOCK_N, D=D, CAUSAL_MASK=False, KEY_MASK=False, UPCAST=UPCAST,
        TMA=TMA,
    )  # fmt: skip
    if CAUSAL or MASKED:
        acc, l_i, m_i = _attend(
            acc, l_i, m_i, q, k_src, v_src, kv_bh, stride_ks, stride_vs, rows, full_end, hi, S,
            qk_scale, BLOCK_N=BLOCK_N, D=D, CAUSAL_MASK=CAUSAL, KEY_MASK=MASKED, UPCAST=UPCAST,
            TMA=TMA,
        )  # fmt: skip

    # --- normalise once and write back in the output's dtype ----------------------------------
    out = (acc / l_i[:, None]).to(o_ptr.dtype.element_ty)
    if TMA:
        o_dst = tl.make_tensor_descriptor(o_ptr, shape=[tl.num_programs(1), S, D],
                                          strides=[stride_oh, stride_os, 1],
                                          block_shape=[1, BLOCK_M, D])  # fmt: skip
        o_dst.store([bh, start_m, 0], out.reshape(1, BLOCK_M, D))
    else:
        o_ptrs = o_ptr + b * stride_ob + h * stride_oh
        o_ptrs += rows[:, None] * stride_os + cols[None, :] * stride_od
        if MASKED:
            tl.store(o_ptrs, out, mask=rows[:, None] < S)
        else:
            tl.store(o_ptrs, out)


#: True under Triton's interpreter (no GPU compile; CPU tensors).
INTERPRETED: bool = not isinstance(_attention_kernel, JITFunction)


def check_config(
    *, BLOCK_M: int, BLOCK_N: int, num_warps: int, num_stages: int, TMA: int = 0
) -> None:
    """Reject a config the kernel cannot express, before anything is compiled.

    Raises:
        ValueError: block sizes not powers of two >= 16 (``tl.arange`` and ``tl.dot`` need
            that), ``num_warps`` not a power of two in 1..32, ``num_stages`` below 1, ``TMA``
            other than 0 or 1.

    Example:
        >>> check_config(**DEFAULT_CONFIG)
        >>> check_config(**{**DEFAULT_CONFIG, "BLOCK_M": 48})
        Traceback (most recent call last):
        ...
        ValueError: BLOCK_M=48 must be a power of two >= 16
    """
    for name, value in (("BLOCK_M", BLOCK_M), ("BLOCK_N", BLOCK_N)):
        if not (is_pow2(int(value)) and value >= 16):
            raise ValueError(f"{name}={value} must be a power of two >= 16")
    if not (is_pow2(int(num_warps)) and num_warps <= 32):  # 32 warps x 32 threads = 1024
        raise ValueError(f"num_warps={num_warps} must be a power of two in 1..32")
    if num_stages < 1:
        raise ValueError(f"num_stages={num_stages} must be >= 1")
    if TMA not in (0, 1):
        raise ValueError(f"TMA={TMA} must be 0 or 1")


def _check_head_dim(D: int) -> None:
    if not (is_pow2(D) and 16 <= D <= 256):
        raise ValueError(f"head dim D={D} must be a power of two in 16..256")


def _check_operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    if q.ndim != 4 or k.ndim != 4 or k.shape != v.shape:
        raise ValueError(f"need q (B,H,S,D) and k, v (B,H_KV,S,D), got {q.shape}, {k.shape}, "
                         f"{v.shape}")  # fmt: skip
    (B, H, S, D), H_KV = q.shape, k.shape[1]
    if (k.shape[0], k.shape[2], k.shape[3]) != (B, S, D) or H_KV < 1 or H % H_KV:
        raise ValueError(f"k/v {tuple(k.shape)} do not fit q {tuple(q.shape)} (H % H_KV == 0)")
    if q.dtype not in DTYPES.values() or {k.dtype, v.dtype, out.dtype} != {q.dtype}:
        raise ValueError(f"q, k, v, out must all be bf16 or fp16, got {q.dtype}, {k.dtype}, "
                         f"{v.dtype}, {out.dtype}")  # fmt: skip
    if out.shape != q.shape or len({q.device, k.device, v.device, out.device}) != 1:
        raise ValueError(f"out must be {tuple(q.shape)} on {q.device}, got {tuple(out.shape)}")
    _check_head_dim(D)
    if B * H > _MAX_GRID_Y:
        raise ValueError(f"B * H = {B * H} exceeds the grid limit {_MAX_GRID_Y}")


def _offset_bound(t: torch.Tensor, pad: int) -> int:
    # largest element offset the kernel forms for t (B, H, S, D): every index at its last value,
    # the sequence's by a block overhanging its end, e.g. (1, 32, 4096, 128) contiguous in
    # 128-blocks: 31 * 4096*128 + (4095 + 128) * 128 + 127 = 16.8M, far below 2^31
    last = [size - 1 for size in t.shape]
    last[2] += pad
    return sum(i * stride for i, stride in zip(last, t.stride(), strict=True))


def _masked(S: int, BLOCK_M: int, BLOCK_N: int) -> bool:
    # the unmasked variant is only correct when every query and key block is full
    return bool(S % BLOCK_M or S % BLOCK_N)


def _upcast(dtype: torch.dtype) -> bool:
    # Triton's interpreter keeps bf16 as uint16 bit patterns and its tl.dot multiplies those;
    # widening first gives the exact products a GPU forms (see matmul_triton._upcast).
    return INTERPRETED and dtype == torch.bfloat16


def _scale(sm_scale: float | None, D: int) -> float:
    # qk_scale: the softmax scale (default 1/sqrt(D)) times log2(e), for exp2; positive, since
    # the kernel takes the row maximum of unscaled scores
    if sm_scale is not None and not sm_scale > 0:
        raise ValueError(f"sm_scale={sm_scale} must be > 0")
    return (D**-0.5 if sm_scale is None else float(sm_scale)) * LOG2E


def _check_tma(tensors: dict[str, torch.Tensor]) -> None:
    # A descriptor sees (B*H, S, D): B's stride must be H of H's (true of contiguous tensors),
    # D's stride 1, and every other stride and the base 16-byte aligned, as the copy engine asks.
    for name, t in tensors.items():
        (B, H, _, _), (sb, sh, ss, sd) = t.shape, t.stride()
        size = t.element_size()
        if sd != 1 or (B > 1 and sb != H * sh):
            raise ValueError(f"TMA=1 needs {name} with unit D stride and (B, H) rows in one "
                             f"stride pattern, got strides {t.stride()}")  # fmt: skip
        if (sh * size) % 16 or (ss * size) % 16 or t.data_ptr() % 16:
            raise ValueError(f"TMA=1 needs {name}'s rows 16-byte aligned, got strides "
                             f"{t.stride()}")  # fmt: skip


def launcher(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    *,
    causal: bool,
    sm_scale: float | None = None,
    BLOCK_M: int,
    BLOCK_N: int,
    num_warps: int,
    num_stages: int,
    TMA: int = 0,
) -> Callable[[], None]:
    """Return a no-argument function that writes ``out = attention(q, k, v)``: one launch.

    Shapes, strides and the grid are worked out once. ``sm_scale`` defaults to 1/sqrt(D).

    Example:
        >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
        >>> q = torch.zeros(1, 2, 20, 16, dtype=torch.float16, device=dev)
        >>> v = torch.arange(20, dtype=torch.float16, device=dev).repeat(16, 1).t()[None, None]
        >>> out = torch.empty_like(q)
        >>> run = launcher(q, q[:, :1], v, out, causal=True, BLOCK_M=16, BLOCK_N=16,
        ...                num_warps=4, num_stages=1)
        >>> run(); out[0, 1, 9, 0].item()  # equal scores: the mean of values 0..9
        4.5
    """
    tunables = {"BLOCK_M": BLOCK_M, "BLOCK_N": BLOCK_N, "num_warps": num_warps}
    check_config(**tunables, num_stages=num_stages, TMA=TMA)
    _check_operands(q, k, v, out)
    if TMA:
        _check_tma({"q": q, "k": k, "v": v, "out": out})
        if not INTERPRETED:
            tma.ensure_allocator()
    (B, H, S, D), H_KV = q.shape, k.shape[1]
    pad = max(BLOCK_M, BLOCK_N)
    for name, t in (("q", q), ("k", k), ("v", v), ("out", out)):
        if _offset_bound(t, pad) >= _INT32_LIMIT:
            raise ValueError(f"{name} {tuple(t.shape)} is too large for the kernel's int32 offsets")
    if q.numel() == 0:
        return lambda: None
    kernel = _attention_kernel[(triton.cdiv(S, BLOCK_M), B * H)]
    args = (q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
            H, H // H_KV, S, _scale(sm_scale, D))  # fmt: skip
    flags = {"D": D, "CAUSAL": bool(causal), "MASKED": _masked(S, BLOCK_M, BLOCK_N),
             "UPCAST": _upcast(q.dtype), "TMA": bool(TMA)}  # fmt: skip

    def run() -> None:
        kernel(*args, **tunables, **flags, num_stages=num_stages)

    return run


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool,
    sm_scale: float | None = None, **config: int,
) -> torch.Tensor:  # fmt: skip
    """Attention of ``q`` over ``k``, ``v``; ``config`` as :data:`DEFAULT_CONFIG` (missing keys
    take its values)."""
    out = torch.empty_like(q)
    launcher(q, k, v, out, causal=causal, sm_scale=sm_scale, **{**DEFAULT_CONFIG, **config})()
    return out


def compile_only(
    B: int, H: int, H_KV: int, S: int, D: int, dtype: torch.dtype | str, causal: bool, *,
    sm_scale: float | None = None, BLOCK_M: int, BLOCK_N: int, num_warps: int, num_stages: int,
    TMA: int = 0,
) -> Any:  # fmt: skip
    """Compile the kernel for contiguous q (B, H, S, D) and k, v (B, H_KV, S, D) of ``dtype``
    without running it (Triton's ``warmup``: it lands in the on-disk cache where the launch
    finds it, and its shared memory is checked against the device's); None under the
    interpreter, which compiles nothing.

    Raises:
        ValueError: see ``check_config``; a head dim not a power of two in 16..256.
        triton.runtime.errors.OutOfResources: more shared memory than the device has.

    Example:
        >>> k = compile_only(1, 4, 2, 128, 64, "bf16", True, **DEFAULT_CONFIG)
        >>> k is None if INTERPRETED else k.metadata.shared > 0
        True
    """
    check_config(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages,
                 TMA=TMA)  # fmt: skip
    _check_head_dim(D)
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    if INTERPRETED:
        return None
    q_strides = (H * S * D, S * D, D, 1)  # contiguous (B, H, S, D)
    kv_strides = (H_KV * S * D, S * D, D, 1)
    kernel = _attention_kernel.warmup(
        dtype, dtype, dtype, dtype, *q_strides, *kv_strides, *kv_strides, *q_strides,
        H, H // H_KV, S, _scale(sm_scale, D), D=D, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
        CAUSAL=bool(causal), MASKED=_masked(S, BLOCK_M, BLOCK_N), UPCAST=False, TMA=bool(TMA),
        num_warps=num_warps, num_stages=num_stages, grid=(1,),
    )  # fmt: skip
    check_shared_memory(kernel)
    return kernel


def reference_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool,
    sm_scale: float | None = None,
    *,
    dtype: torch.dtype = torch.float64,
    max_scores: int = 2**28,
) -> torch.Tensor:
    """Attention computed in ``dtype`` (float64 by default) and returned as float32: the
    ground truth for the gate.

    K/V heads are repeated for grouped-query attention. The query rows are taken in chunks so
    that at most about ``max_scores`` scores exist at once (2**28 float32 scores are 1 GiB),
    which keeps a large GPU problem's reference in bounded memory; TF32 is kept off.

    Example:
        >>> q = torch.zeros(1, 1, 3, 2)
        >>> v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])[None, None]
        >>> reference_attention(q, q, v, causal=True)[0, 0]  # equal scores: running means
        tensor([[1.0000, 0.0000],
                [0.5000, 0.5000],
                [0.6667, 0.6667]])
    """
    B, H, S, D = q.shape
    group = H // k.shape[1]
    scale = D**-0.5 if sm_scale is None else float(sm_scale)
    kt = k.to(dtype).repeat_interleave(group, dim=1).transpose(-1, -2)  # (B, H, D, S)
    vv = v.to(dtype).repeat_interleave(group, dim=1)
    out = torch.empty(B, H, S, D, dtype=torch.float32, device=q.device)
    chunk = max(1, max_scores // max(1, B * H * S))
    keys = torch.arange(S, device=q.device)
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        for lo in range(0, S, chunk):
            scores = q[:, :, lo : lo + chunk].to(dtype) @ kt * scale
            if causal:
                rows = torch.arange(lo, min(lo + chunk, S), device=q.device)
                scores.masked_fill_(keys[None, :] > rows[:, None], -math.inf)
            out[:, :, lo : lo + chunk] = (torch.softmax(scores, dim=-1) @ vv).float()
    finally:
        torch.set_float32_matmul_precision(precision)
    return out


__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_CONFIG",
    "DTYPES",
    "INTERPRETED",
    "attention",
    "check_config",
    "compile_only",
    "launcher",
    "reference_attention",
]
