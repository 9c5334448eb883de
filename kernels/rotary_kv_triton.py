"""Rotary embedding of queries and keys, and the paged KV cache write, in one Triton launch.

The serving engine's attention block takes the fused projection ``a`` (tokens, heads, 3,
head_dim: q, k, v of each head) and, in torch, rotates q and k (four products, a difference,
a sum and a concatenation) and writes k and v to the cache (two indexed copies): about nine
kernels a layer, which at decode batch 1 cost more than their bytes. This kernel does it in
one: program (token, head) reads that head's q, k and v once, writes the rotated q to ``q``
and the rotated k and the v to the cache rows ``slots`` name. The products are formed in fp32
and rounded once (torch's bf16 ops round after each), so results agree to bf16 rounding.

Without a GPU the kernel runs under Triton's interpreter on torch CPU tensors (importing this
module switches it on first, see ``interpreter``).

Example:
    >>> import torch
    >>> tokens, heads, hd = 3, 2, 8
    >>> a = torch.randn(tokens, heads, 3, hd, dtype=torch.bfloat16)
    >>> angle = torch.rand(tokens, hd // 2)
    >>> cos, sin = angle.cos().bfloat16(), angle.sin().bfloat16()
    >>> k_cache = torch.zeros(10, heads, hd, dtype=torch.bfloat16)
    >>> v_cache = torch.zeros_like(k_cache)
    >>> q = rotary_kv(a, cos, sin, torch.tensor([4, 0, 7]), k_cache, v_cache)
    >>> q.shape, bool((v_cache[7] == a[2, :, 2]).all()), bool(k_cache[1].abs().sum() == 0)
    (torch.Size([3, 2, 8]), True, True)
"""

from __future__ import annotations

import torch

from autotune.kernels import interpreter  # noqa: F401 - before triton, on purpose

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _rotary_kv_kernel(
    a_ptr, cos_ptr, sin_ptr, slots_ptr, q_ptr, k_cache_ptr, v_cache_ptr, H,
    HALF: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0)
    head = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    mask = offs < HALF
    hd = 2 * HALF
    src = a_ptr + (token * H + head) * 3 * hd  # q at +0, k at +hd, v at +2 hd
    cos = tl.load(cos_ptr + token * HALF + offs, mask=mask, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + token * HALF + offs, mask=mask, other=0.0).to(tl.float32)
    q1 = tl.load(src + offs, mask=mask, other=0.0).to(tl.float32)
    q2 = tl.load(src + HALF + offs, mask=mask, other=0.0).to(tl.float32)
    k1 = tl.load(src + hd + offs, mask=mask, other=0.0).to(tl.float32)
    k2 = tl.load(src + hd + HALF + offs, mask=mask, other=0.0).to(tl.float32)
    v1 = tl.load(src + 2 * hd + offs, mask=mask, other=0.0)
    v2 = tl.load(src + 2 * hd + HALF + offs, mask=mask, other=0.0)
    # pairs (x[i], x[i + hd/2]) rotate by the position's angle, as apply_rotary does
    out = q_ptr + (token * H + head) * hd
    tl.store(out + offs, (q1 * cos - q2 * sin).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(out + HALF + offs, (q1 * sin + q2 * cos).to(q_ptr.dtype.element_ty), mask=mask)
    row = tl.load(slots_ptr + token).to(tl.int64)  # the cache row of this token
    k_out = k_cache_ptr + (row * H + head) * hd
    v_out = v_cache_ptr + (row * H + head) * hd
    kind = k_cache_ptr.dtype.element_ty
    tl.store(k_out + offs, (k1 * cos - k2 * sin).to(kind), mask=mask)
    tl.store(k_out + HALF + offs, (k1 * sin + k2 * cos).to(kind), mask=mask)
    tl.store(v_out + offs, v1.to(v_cache_ptr.dtype.element_ty), mask=mask)
    tl.store(v_out + HALF + offs, v2.to(v_cache_ptr.dtype.element_ty), mask=mask)


def rotary_kv(
    a: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    slots: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
) -> torch.Tensor:
    """Rotated queries (tokens, heads, head_dim) of ``a`` (tokens, heads, 3, head_dim,
    contiguous); the rotated keys and the values are written to rows ``slots`` (tokens) of
    ``k_cache`` / ``v_cache`` (rows, heads, head_dim, contiguous). ``cos`` and ``sin``: the
    tokens' tables, (tokens, head_dim / 2)."""
    tokens, heads, three, hd = a.shape
    if three != 3 or hd % 2 or not a.is_contiguous():
        raise ValueError(f"a must be contiguous (tokens, heads, 3, even head_dim), got {a.shape}")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.shape[1:] != (heads, hd) or not cache.is_contiguous():
            raise ValueError(f"{name} must be contiguous (rows, {heads}, {hd})")
    cos, sin = cos.contiguous(), sin.contiguous()
    if cos.shape != (tokens, hd // 2) or sin.shape != cos.shape:
        raise ValueError(f"cos and sin must be ({tokens}, {hd // 2}), got {tuple(cos.shape)}")
    q = torch.empty(tokens, heads, hd, dtype=a.dtype, device=a.device)
    if tokens:
        half = hd // 2
        _rotary_kv_kernel[(tokens, heads)](
            a, cos, sin, slots.contiguous(), q, k_cache, v_cache, heads, HALF=half,
            BLOCK=triton.next_power_of_2(half), num_warps=1,
        )  # fmt: skip
    return q
