"""Weight-only quantized matmul ``y = x @ W`` in Triton, for decode (few rows, large weights).

``x`` is (M, K) bf16 or fp16; ``W`` (K, N) is stored quantized and dequantized inside the
kernel; products accumulate in fp32 and ``y`` (M, N) comes out in x's dtype. With M of 1..64
the kernel is bound by reading weights, so fewer weight bytes means a faster kernel. Levels:

``int8``        symmetric per output channel: ``s[n] = max_k |W[k, n]| / 127``,
                ``q = round(W / s)`` clamped to [-127, 127]; q is (K, N) int8, s is (1, N).
``int4-gG``     symmetric per group of G rows along K: ``s[g, n] = max |W[gG:(g+1)G, n]| / 7``,
                ``q`` in [-8, 7] stored plus 8 as a nibble 0..15, two to a byte along K:
                ``byte[k2, n] = q[2 k2, n] | q[2 k2 + 1, n] << 4``, so q is (K/2, N) uint8 and
                s is (K/G, N). :data:`LEVELS` lists G = 128 and 64.

Scales are fp16. They are a weight read like any other: with fp32 scales int4-g64 would read
4 bytes of scale per 64 weights (32 bytes of nibbles), 12.5% on top of the nibbles; fp16 halves
that, and it is what int4 checkpoints (GPTQ, AWQ) ship. An fp16 scale is exact to 2^-11,
far finer than the quantization step itself (1/7 or 1/127 of the range), and the quantizers
compute q with the rounded scale, so ``dequantize`` is exactly what the kernel multiplies by
(``q * s`` has at most 7 + 11 significant bits: exact in fp32). Scales are kept at or above
fp16's smallest normal number (6.1e-5), so a column of tiny weights never gets a zero scale.

The kernel: each program owns a ``BLOCK_M x BLOCK_N`` tile of y and one of ``SPLIT_K``
contiguous shares of the K-blocks (``BLOCK_K`` deep). int8 tiles are converted to the
activation dtype (small integers are exact in bf16/fp16), fed to ``tl.dot`` over the whole
share, and the fp32 sum is scaled once per column. An int4 block of packed bytes
(``BLOCK_K/2 x BLOCK_N``) is split into its low nibbles (even k) and high nibbles (odd k), each
minus 8; x's even and odd columns are loaded apart and two ``tl.dot`` s give the block's
product, which the block's group scale then multiplies per column (``G % BLOCK_K == 0``, so a
block never straddles two groups). Compiled, the nibbles become bf16/fp16 in inline PTX, a
few bit operations and one paired fma for two weights (Triton's own ``(b & 15) - 8`` and
integer-to-float conversion took several instructions a weight); with the weights stored
K-major (``quantize`` does) the tensor cores' operand is read from shared memory in whole
words, not a byte a load. The two together cut the 16-row tile's loop from 544 to 230 sm_90
instructions and made it 1.44-1.64x bf16 cuBLAS at 16 rows of 4096x4096, 14336x4096 and
4096x14336 where it was 0.80-1.01x (benchmarks/results/h200-2026-12-04-s37). A block's
scales are too few bytes a thread for Triton to stage with the weights; tiles 128 and more
wide load them a block ahead (:data:`SCALES_AHEAD`), which made those 1.05-1.19x faster
(benchmarks/results/h200-2026-12-04-s38).
``BLOCK_M = 1`` (one decode row a program) leaves the tensor cores out: ``tl.dot`` pads its
rows to 16 and takes the dequantized weights through a shared-memory layout change, while
one row's product is a multiply-add per weight on the CUDA cores, in fp32, where the weight
tile was loaded; each thread sums its own products over the
whole share and the threads' sums are added once at the end; its ``num_stages`` (1 or 2) is
how many K-blocks it loads before it uses any. There a weight becomes fp32 without a
conversion instruction (a quarter of the FMA rate on the H200): its bits are put in the
mantissa of 2**23 and 2**23 is subtracted, which made the 7b preset's decode linears 1.01-1.22x
faster at one row (benchmarks/results/h200-2026-12-03-s31). With ``SPLIT_K == 1`` the tile
is written directly. Otherwise each program writes its fp32 partial tile to a workspace
``[SPLIT_K, M, N]``, and takes a ticket from the tile's counter (an ``acq_rel`` atomic add
after a barrier, so its partial is visible first); the program that draws the last ticket sums
the ``SPLIT_K`` partials in a fixed order (the result does not depend on which split finished
last), writes y and puts the counter back to 0, so the next launch needs no memset: one
launch, no second reduction kernel. The launcher allocates the workspace and the counters
once. The module knows nothing about the tuner.

Without a GPU the kernel runs under Triton's interpreter on torch CPU tensors (importing this
module switches it on first, see ``interpreter``).

Example:
    >>> import torch
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> gen = torch.Generator().manual_seed(0)
    >>> x = torch.randn(3, 128, generator=gen).to(dev, torch.bfloat16)
    >>> w = torch.randn(128, 32, generator=gen).to(dev, torch.bfloat16)
    >>> q, s = quantize(w, "int4-g64")
    >>> q.shape, q.dtype, s.shape, level_of(q, s)
    (torch.Size([64, 32]), torch.uint8, torch.Size([2, 32]), 'int4-g64')
    >>> y = quant_matmul(x, q, s, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, SPLIT_K=2)
    >>> ref = reference_quant_matmul(x, q, s)
    >>> y.shape, y.dtype, bool((y.float() - ref).norm() / ref.norm() < 1e-2)
    (torch.Size([3, 32]), torch.bfloat16, True)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autotune.kernels import interpreter  # noqa: F401 - before triton, on purpose

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from autotune.kernels import split_k_workspace  # noqa: E402
from autotune.kernels.interpreter import (  # noqa: E402
    check_shared_memory,
    is_pow2,
)

#: The quantization levels and their group size along K (0: one scale per output channel).
LEVELS: dict[str, int] = {"int8": 0, "int4-g128": 128, "int4-g64": 64}

#: The kernel's tunables with an untuned but sensible value each (one 16-row tile covers a
#: decode batch; no split of K).
DEFAULT_CONFIG: dict[str, int] = {
    "BLOCK_M": 16,
    "BLOCK_N": 64,
    "BLOCK_K": 64,
    "SPLIT_K": 1,
    "num_warps": 4,
    "num_stages": 3,
}
#: An untuned one-row config (``BLOCK_M = 1``: a decode step of one sequence, on the CUDA
#: cores), K split by :func:`decode_config`. A one-row tile's ``num_stages`` is how many
#: K-blocks it loads before it uses any: 1 or 2. At 1x4096x4096 int4-g128 on the H200 it read
#: 1.19x bf16 cuBLAS against 1.01x for the 16-row tile (streamed, 3 rounds;
#: benchmarks/results/h200-2026-12-03-s27); :func:`decode_config` sets K blocks by level.
#: Since the 16-row tile dequantizes in PTX and reads K-major weights it is the faster one
#: there (1.52x against 1.37x, benchmarks/results/h200-2026-12-04-s37), and the defaults
#: take it; the one-row tile stays in the search space.
ONE_ROW_CONFIG: dict[str, int] = {
    "BLOCK_M": 1,
    "BLOCK_N": 128,
    "BLOCK_K": 128,
    "SPLIT_K": 1,
    "num_warps": 8,
    "num_stages": 1,
}
CONFIG_KEYS: tuple[str, ...] = tuple(DEFAULT_CONFIG)
DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}

SCALE_DTYPE = torch.float16
#: whether the int4 tensor-core tile loads a K-block's scales one block ahead (True) or in the
#: block's own iteration (False); None: ahead for tiles 128 and more wide. Side by side on the
#: H200 (benchmarks/results/h200-2026-12-04-s38), ahead made 128-wide tiles 1.05-1.19x faster
#: on all 42 linears and row counts measured and left 64-wide ones where they were (0.94-1.03x,
#: geometric means 0.997 and 0.992 over 16 and 20).
SCALES_AHEAD: bool | None = None
# scales stay normal fp16 numbers: never 0 (an all-zero column), never subnormal
_SCALE_MIN = torch.finfo(torch.float16).tiny
_SCALE_MAX = torch.finfo(torch.float16).max
# Offsets inside the kernel are int32: every address offset must stay below 2**31 elements.
_INT32_LIMIT = 2**31


@triton.jit
def _row_block(
    x_ptr, q_ptr, s_ptr, row, kb, valid, cols, col_ok, K,
    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn,
    BLOCK_K: tl.constexpr, GROUP: tl.constexpr, MASK_K: tl.constexpr,
):  # fmt: skip
    # one K-block of a one-row tile: its weights (int8, or int4 pairs packed), x's block in
    # fp32 (0 where the block is past the share: it then adds nothing) and the block's scales
    # (int4; int8 scales each column once, after the loop)
    ks = tl.arange(0, BLOCK_K)
    k = kb * BLOCK_K + ks
    x_ok = valid & (k < K) if MASK_K else valid
    a = tl.load(x_ptr + row * stride_xm + k * stride_xk, mask=x_ok, other=0.0).to(tl.float32)
    if GROUP == 0:
        w_ok = valid & (k[:, None] < K) & col_ok[None, :] if MASK_K else valid & col_ok[None, :]
        w = tl.load(q_ptr + k[:, None] * stride_qk + cols[None, :] * stride_qn, mask=w_ok,
                    other=0)  # fmt: skip
        scale = tl.full((BLOCK_K,), 1.0, tl.float32)  # unused
    else:
        half = tl.arange(0, BLOCK_K // 2)
        rows_q = kb * (BLOCK_K // 2) + half  # packed rows: two k's each
        q_ptrs = q_ptr + rows_q[:, None] * stride_qk + cols[None, :] * stride_qn
        w = tl.load(q_ptrs, mask=valid & col_ok[None, :], other=0)
        s_ptrs = s_ptr + ((kb * BLOCK_K) // GROUP) * stride_sg + cols * stride_sn
        scale = tl.load(s_ptrs, mask=valid & col_ok, other=0.0).to(tl.float32)
    return w, a, scale


@triton.jit
def _int8_f32(w):
    # int8 to fp32 without a conversion instruction (those issue at a quarter of the FMA
    # rate, and a decode row converts every weight): the byte plus 128 becomes the low
    # mantissa bits of 2**23, and 2**23 + 128 comes off again, e.g. q = -3: 2**23 + 125 - 2**23
    # - 128 = -3, exact (unsigned byte u: u ^ 0x80 = q + 128)
    u = w.to(tl.uint8, bitcast=True).to(tl.int32)
    return (u ^ 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0


@triton.jit
def _nibbles_f32(w):
    # a packed int4 byte's low nibble minus 8 and 16 x (its high nibble minus 8), in fp32,
    # with the same trick as _int8_f32: each nibble masked in place into the mantissa of
    # 2**23 (the high one 16 times over, so no shift), e.g. byte 0x3A: 10 - 8 = 2 and
    # 16 x (3 - 8) = -80
    u = w.to(tl.int32)
    lo = ((u & 15) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
    hi16 = ((u & 240) | 0x4B000000).to(tl.float32, bitcast=True) - 8388736.0
    return lo, hi16


# inline PTX for a packed int4 word (4 bytes: 8 nibbles, each stored plus 8) to the 16-bit
# floats of its low and of its high nibbles minus 8, two to a register. Each byte goes into
# a 16-bit half (prmt), its nibble is masked into the mantissa of 128 (bf16 0x4300) or 1024
# (fp16 0x6400) and 136 or 1032 comes off in a paired fma, exactly (e.g. nibble 3: bf16
# 0x4303 = 131, 131 - 136 = -5): 12 instructions for 8 weights. $0 $1 are the low nibbles of
# bytes 0-1 and 2-3, $2 $3 the high ones, $4 the packed word.
_NIBBLES_PTX = """
{
.reg .b32 t<2>, u<2>, mask, magic, one, bias;
mov.b32 mask, 0x000F000F;
mov.b32 magic, MAGIC;
mov.b32 one, ONE;
mov.b32 bias, BIAS;
prmt.b32 t0, $4, 0, 0x4140;
prmt.b32 t1, $4, 0, 0x4342;
lop3.b32 u0, t0, mask, magic, 0xEA;
lop3.b32 u1, t1, mask, magic, 0xEA;
fma.rn.TYPE $0, u0, one, bias;
fma.rn.TYPE $1, u1, one, bias;
shr.b32 t0, t0, 4;
shr.b32 t1, t1, 4;
lop3.b32 u0, t0, mask, magic, 0xEA;
lop3.b32 u1, t1, mask, magic, 0xEA;
fma.rn.TYPE $2, u0, one, bias;
fma.rn.TYPE $3, u1, one, bias;
}
"""
#: the PTX per activation type: bf16 128 + n - 136; fp16 1024 + n - 1032
NIBBLES_BF16_PTX = tl.constexpr(_NIBBLES_PTX.replace("MAGIC", "0x43004300")
                                .replace("ONE", "0x3F803F80").replace("BIAS", "0xC308C308")
                                .replace("TYPE", "bf16x2"))  # fmt: skip
NIBBLES_FP16_PTX = tl.constexpr(_NIBBLES_PTX.replace("MAGIC", "0x64006400")
                                .replace("ONE", "0x3C003C00").replace("BIAS", "0xE408E408")
                                .replace("TYPE", "f16x2"))  # fmt: skip


@triton.jit
def _nibbles_ptx(packed, BF16: tl.constexpr):
    # packed uint8 -> (low nibble - 8, high nibble - 8) in bf16 or fp16, compiled only
    if BF16:
        lo, hi = tl.inline_asm_elementwise(NIBBLES_BF16_PTX, "=r,=r,=r,=r,r", [packed],
                                           dtype=(tl.bfloat16, tl.bfloat16), is_pure=True,
                                           pack=4)  # fmt: skip
    else:
        lo, hi = tl.inline_asm_elementwise(NIBBLES_FP16_PTX, "=r,=r,=r,=r,r", [packed],
                                           dtype=(tl.float16, tl.float16), is_pure=True,
                                           pack=4)  # fmt: skip
    return lo, hi


@triton.jit
def _block_scales(s_ptr, kb, last, cols, col_ok, stride_sg, stride_sn,
                  BLOCK_K: tl.constexpr, GROUP: tl.constexpr):  # fmt: skip
    # K-block kb's scales (fp16; 0 past the share): it lies in group kb * BLOCK_K // GROUP
    # (GROUP % BLOCK_K == 0: a block never straddles two groups)
    s_ptrs = s_ptr + ((kb * BLOCK_K) // GROUP) * stride_sg + cols * stride_sn
    return tl.load(s_ptrs, mask=col_ok & (kb < last), other=0.0)


@triton.jit
def _row_fma(acc2, w, a, scale, BLOCK_K: tl.constexpr, GROUP: tl.constexpr):
    # acc2 (k, n) += one block's products, as the one-row loop below does
    if GROUP == 0:
        acc2 += a[:, None] * _int8_f32(w)
    else:
        a_even, a_odd = tl.split(tl.reshape(a, (BLOCK_K // 2, 2)))
        lo_w, hi16_w = _nibbles_f32(w)
        a_odd = a_odd * 0.0625  # the high nibbles come 16 times over; exact (a power of 2)
        acc2 += (a_even[:, None] * lo_w + a_odd[:, None] * hi16_w) * scale[None, :]
    return acc2


@triton.jit
def _quant_matmul_kernel(
    x_ptr, q_ptr, s_ptr, y_ptr, ws_ptr, count_ptr, M, N, K,
    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg, stride_sn, stride_ym, stride_yn,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SPLIT_K: tl.constexpr, GROUP: tl.constexpr, MASK_K: tl.constexpr, UPCAST: tl.constexpr,
    ROW_BLOCKS: tl.constexpr, PTX: tl.constexpr, SCALES_AHEAD: tl.constexpr,
):  # fmt: skip
    # GROUP == 0: int8 (K, N) with one scale per column; else int4 nibbles packed along K,
    # (K/2, N) uint8, with one scale per GROUP rows of W and column.
    # --- the output tile (axis 0) and the share of K (axis 1) this program owns -----------
    tile = tl.program_id(0)
    split = tl.program_id(1)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    rows = (tile // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (tile % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    row_ok = rows < M  # decode: M (e.g. 1) is usually below BLOCK_M (16 at least)
    col_ok = cols < N
    # K-blocks [first, last) are this split's, e.g. K=4096, BLOCK_K=64, SPLIT_K=8: 64 blocks,
    # 8 each; with 5 blocks and SPLIT_K=4 the shares are 2, 2, 1, 0 (an empty share adds 0)
    k_blocks = (K + BLOCK_K - 1) // BLOCK_K
    per_split = (k_blocks + SPLIT_K - 1) // SPLIT_K
    first = split * per_split
    last = tl.minimum(first + per_split, k_blocks)

    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
    if BLOCK_M == 1:
        # --- one decode row, on the CUDA cores: each thread keeps its own products in a (k, n)
        # accumulator laid out as the weight tile is loaded; k is summed across threads once,
        # after the loop (summing every block would cross warps through shared memory).
        # ROW_BLOCKS K-blocks are loaded before any is used: their bytes in flight together
        DEPTH: tl.constexpr = BLOCK_K if GROUP == 0 else BLOCK_K // 2
        acc2 = tl.full((DEPTH, BLOCK_N), 0.0, dtype=tl.float32)
        row = tile // tiles_n
        for kb in tl.range(first, last, ROW_BLOCKS):
            w0, a0, s0 = _row_block(x_ptr, q_ptr, s_ptr, row, kb, kb < last, cols, col_ok, K,
                                    stride_xm, stride_xk, stride_qk, stride_qn, stride_sg,
                                    stride_sn, BLOCK_K, GROUP, MASK_K)  # fmt: skip
            if ROW_BLOCKS == 2:  # the next block (0 past the share) before the first's math
                w1, a1, s1 = _row_block(x_ptr, q_ptr, s_ptr, row, kb + 1, kb + 1 < last, cols,
                                        col_ok, K, stride_xm, stride_xk, stride_qk, stride_qn,
                                        stride_sg, stride_sn, BLOCK_K, GROUP, MASK_K)  # fmt: skip
            acc2 = _row_fma(acc2, w0, a0, s0, BLOCK_K, GROUP)
            if ROW_BLOCKS == 2:
                acc2 = _row_fma(acc2, w1, a1, s1, BLOCK_K, GROUP)
        acc = tl.sum(acc2, 0)[None, :]
        if GROUP == 0:  # int8: one scale a column, applied once
            scale = tl.load(s_ptr + cols * stride_sn, mask=col_ok, other=0.0)
            acc = acc * scale.to(tl.float32)[None, :]
    elif GROUP == 0:
        # --- int8 on tensor cores: sum the whole share, then scale each column once ---------
        ks = tl.arange(0, BLOCK_K)
        for kb in range(first, last):
            k = kb * BLOCK_K + ks
            q_ptrs = q_ptr + k[:, None] * stride_qk + cols[None, :] * stride_qn
            if MASK_K:  # K not a multiple of BLOCK_K: the last block overhangs
                w = tl.load(q_ptrs, mask=(k[:, None] < K) & col_ok[None, :], other=0)
            else:
                w = tl.load(q_ptrs, mask=col_ok[None, :], other=0)
            x_ptrs = x_ptr + rows[:, None] * stride_xm + k[None, :] * stride_xk
            if MASK_K:
                a = tl.load(x_ptrs, mask=row_ok[:, None] & (k[None, :] < K), other=0.0)
            else:
                a = tl.load(x_ptrs, mask=row_ok[:, None], other=0.0)
            if UPCAST:  # interpreter only, see _upcast
                acc = tl.dot(a.to(tl.float32), w.to(tl.float32), acc)
            else:  # -127..127 are exact in bf16 and fp16
                acc = tl.dot(a, w.to(a.dtype), acc)
        scale = tl.load(s_ptr + cols * stride_sn, mask=col_ok, other=0.0)
        acc = acc * scale.to(tl.float32)[None, :]
    else:
        # --- int4 on tensor cores: per block, low nibbles against even k, high against odd k
        half = tl.arange(0, BLOCK_K // 2)
        ks = tl.arange(0, BLOCK_K)
        # a block's scales are too few bytes a thread for Triton to stage them with the
        # weights: loaded in the block's own iteration, their memory latency came before the
        # block's sum every iteration. With SCALES_AHEAD they are loaded one block early (two
        # made Triton 3.7 stop pipelining the weights).
        s_next = _block_scales(s_ptr, first, last, cols, col_ok, stride_sg, stride_sn,
                               BLOCK_K, GROUP)  # fmt: skip
        for kb in range(first, last):
            k0 = kb * BLOCK_K  # even; the block's packed rows are k0/2 .. k0/2 + BLOCK_K/2
            q_ptrs = q_ptr + (k0 // 2 + half)[:, None] * stride_qk + cols[None, :] * stride_qn
            packed = tl.load(q_ptrs, mask=col_ok[None, :], other=0)
            if SCALES_AHEAD:  # this block's scales came one iteration ago
                scale = s_next
                s_next = _block_scales(s_ptr, kb + 1, last, cols, col_ok, stride_sg,
                                       stride_sn, BLOCK_K, GROUP)  # fmt: skip
            else:
                scale = _block_scales(s_ptr, kb, last, cols, col_ok, stride_sg, stride_sn,
                                      BLOCK_K, GROUP)  # fmt: skip
            # x's block in one contiguous load (vector copies, pipelined like the weights),
            # then its even and odd columns apart in registers: two strided loads of every
            # other element were one 2-byte load each, outside the pipeline
            x_ptrs = x_ptr + rows[:, None] * stride_xm + (k0 + ks)[None, :] * stride_xk
            a = tl.load(x_ptrs, mask=row_ok[:, None], other=0.0)
            a_even, a_odd = tl.split(tl.reshape(a, (BLOCK_M, BLOCK_K // 2, 2)))
            if PTX:  # compiled: the weights' bf16/fp16 in a few bit operations
                lo, hi = _nibbles_ptx(packed, x_ptr.dtype.element_ty == tl.bfloat16)
            else:
                lo = (packed & 15).to(tl.int8) - 8  # q[k0 + 2j], in -8..7
                hi = (packed >> 4).to(tl.int8) - 8  # q[k0 + 2j + 1]
            if UPCAST:
                part = tl.dot(a_even.to(tl.float32), lo.to(tl.float32))
                part = tl.dot(a_odd.to(tl.float32), hi.to(tl.float32), part)
            else:
                part = tl.dot(a_even, lo.to(a_even.dtype))
                part = tl.dot(a_odd, hi.to(a_odd.dtype), part)
            acc += part * scale.to(tl.float32)[None, :]

    # --- write y, directly or through the workspace ----------------------------------------
    y_ptrs = y_ptr + rows[:, None] * stride_ym + cols[None, :] * stride_yn
    tile_ok = row_ok[:, None] & col_ok[None, :]
    if SPLIT_K == 1:
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=tile_ok)
    else:
        # the workspace is contiguous [SPLIT_K, M, N] fp32; only the real rows are stored
        offsets = rows[:, None] * N + cols[None, :]
        tl.store(ws_ptr + split * M * N + offsets, acc, mask=tile_ok)
        tl.debug_barrier()  # every thread's part of the partial is stored before the ticket
        ticket = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel")
        if ticket == SPLIT_K - 1:  # the last split of this tile to finish
            total = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
            for s in range(SPLIT_K):  # in split order: the same sum whoever arrives last
                # .cg: read L2, where the other programs' stores are, not a stale L1 line
                part = tl.load(
                    ws_ptr + s * M * N + offsets, mask=tile_ok, other=0.0, cache_modifier=".cg"
                )
                total += part
            tl.store(y_ptrs, total.to(y_ptr.dtype.element_ty), mask=tile_ok)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next launch


#: True under Triton's interpreter (no GPU compile; CPU tensors).
INTERPRETED: bool = not isinstance(_quant_matmul_kernel, JITFunction)


def group_size(level: str) -> int:
    """The group size along K of a level (0 for per-channel int8).

    Example:
        >>> group_size("int4-g128"), group_size("int8")
        (128, 0)
    """
    if level not in LEVELS:
        raise ValueError(f"weights={level!r} must be one of {', '.join(LEVELS)}")
    return LEVELS[level]


def check_config(
    *,
    weights: str,
    BLOCK_M: int,
    BLOCK_N: int,
    BLOCK_K: int,
    SPLIT_K: int,
    num_warps: int,
    num_stages: int,
    K: int | None = None,
) -> None:
    """Reject a config the kernel cannot express, before anything is compiled.

    ``K`` (when given) is checked too: int4 weights need whole groups.

    Raises:
        ValueError: an unknown level; tile sizes not powers of two >= 16 (``tl.dot``),
            except ``BLOCK_M`` 1 (one row on the CUDA cores);
            for int4 a ``BLOCK_K`` below 32 (each half-block dot is ``BLOCK_K/2`` deep) or
            not dividing the group; ``SPLIT_K`` or ``num_stages`` below 1, or ``num_stages``
            above 2 for a one-row tile (there: K-blocks loaded before any is used);
            ``num_warps`` not a power of two in 1..32; K not a multiple of the group.

    Example:
        >>> check_config(weights="int4-g128", **DEFAULT_CONFIG)
        >>> check_config(weights="int4-g128", **{**DEFAULT_CONFIG, "BLOCK_K": 256})
        Traceback (most recent call last):
        ...
        ValueError: BLOCK_K=256 must divide the int4-g128 group of 128 rows
    """
    group = group_size(weights)
    if not (BLOCK_M == 1 or (is_pow2(int(BLOCK_M)) and BLOCK_M >= 16)):
        raise ValueError(f"BLOCK_M={BLOCK_M} must be 1 or a power of two >= 16")
    for name, value in (("BLOCK_N", BLOCK_N), ("BLOCK_K", BLOCK_K)):
        if not (is_pow2(int(value)) and value >= 16):
            raise ValueError(f"{name}={value} must be a power of two >= 16")
    if group:
        if BLOCK_K < 32:
            raise ValueError(f"BLOCK_K={BLOCK_K} must be >= 32 for int4 (two dots of BLOCK_K/2)")
        if group % BLOCK_K:
            raise ValueError(f"BLOCK_K={BLOCK_K} must divide the {weights} group of {group} rows")
        if K is not None and K % group:
            raise ValueError(f"K={K} is not a multiple of the {weights} group of {group}")
    if SPLIT_K < 1:
        raise ValueError(f"SPLIT_K={SPLIT_K} must be >= 1")
    if not (is_pow2(int(num_warps)) and num_warps <= 32):  # 32 warps x 32 threads = 1024
        raise ValueError(f"num_warps={num_warps} must be a power of two in 1..32")
    if num_stages < 1:
        raise ValueError(f"num_stages={num_stages} must be >= 1")
    if BLOCK_M == 1 and num_stages > 2:
        raise ValueError(f"num_stages={num_stages}: a one-row tile has 1 or 2 K-blocks in flight")


# -- quantizers and references (torch) ---------------------------------------------------
def decode_config(
    N: int, K: int, programs: int, block_n: int | None = None, *, level: str | None = None,
    block_k: int | None = None,
) -> dict[str, int]:  # fmt: skip
    """An untuned config for decode rows (up to 16; the caller sets ``BLOCK_M`` for more):
    :data:`DEFAULT_CONFIG` with K split in two until the grid has ``programs`` programs or a
    split would walk fewer than two ``BLOCK_K`` steps. Without a split a 1536-wide output is
    24 programs on a 132-SM H200; the kernel suite's tuned decode winners there (1x and
    16x4096x4096) ran 256-512 programs, split-K 8-16, at 2x the default's speed. Ask for about
    two programs per SM. ``block_n`` (default ``DEFAULT_CONFIG``'s) sets the tile width,
    ``block_k`` the K-block (of the 16-row tile).
    ``level`` asks for the one-row tile (:data:`ONE_ROW_CONFIG`, for one decode row) with K
    blocks that fit that level's groups.

    Example:
        >>> decode_config(N=4096, K=4096, programs=264)["SPLIT_K"]  # the 16-row int4 winner's
        8
        >>> decode_config(N=1536, K=1536, programs=264)["SPLIT_K"]  # 24 tiles, 24 K-steps
        8
        >>> decode_config(N=8192, K=4096, programs=264)["SPLIT_K"]  # 128 tiles
        4
        >>> decode_config(N=4096, K=4096, programs=132, block_n=128)["SPLIT_K"]  # 32 tiles
        8
        >>> one_row = decode_config(N=4096, K=4096, programs=264, level="int4-g64")
        >>> [one_row[k] for k in ("BLOCK_M", "BLOCK_K", "SPLIT_K")]
        [1, 64, 16]
    """
    config = dict(DEFAULT_CONFIG)
    if level is not None:
        config = dict(ONE_ROW_CONFIG)
        # the best of each level in the H200 scans (1x4096x4096): K blocks of 128 for groups
        # of 128 (8 warps: 1.19-1.21x bf16 cuBLAS), 64 for groups of 64 (a block inside one
        # group; 4 warps: 1.16-1.18x, 8 warps 1.00x) and for int8 (8 warps: 1.08-1.09x)
        group = group_size(level)
        config["BLOCK_K"] = 128 if group >= 128 else 64
        config["num_warps"] = 4 if group == 64 else 8
    if block_n is not None:
        config["BLOCK_N"] = block_n
    if block_k is not None and level is None:
        config["BLOCK_K"] = block_k
    tiles = -(-N // config["BLOCK_N"])
    steps = -(-K // config["BLOCK_K"])
    split = 1
    while tiles * split < programs and steps // (split * 2) >= 2:
        split *= 2
    config["SPLIT_K"] = split
    return config


def decode_tile(N: int, K: int, level: str, sms: int) -> dict[str, int]:
    """The untuned tensor-core tile for 1 to 16 decode rows at ``level``: 16 x 64, K-blocks of
    128 where the level's groups are 128 rows (else 64; 32 for K under 64), 4 warps, 3
    stages, K split until two programs an SM (:func:`decode_config`). Chosen on the 7b
    preset's four linears at one row (int4, K-major weights, PTX dequantization; a scan of
    37-73 tiles each, one reading a tile, H200): at 64 wide, K-blocks of 128 read 1.60-1.68x
    bf16 cuBLAS where blocks of 64 read 1.35-1.47x, and 3 stages beat 4 and 6. Held out (the
    1b and 760m presets' linears, 1 and 16 rows): 1.21x / 1.13x in int4 against 1.19x /
    1.11x for the objective's tile before it; benchmarks/results/h200-2026-12-04-s37.

    int4 in groups of 128 takes a 128-wide tile (its scales loaded a block ahead,
    :data:`SCALES_AHEAD`) where its K split is 4 or less, all of its programs fit on the SMs
    at once (three an SM: its 147 registers a thread leave room for three) and each keeps at
    least 4 K-blocks. Where its programs took a second wave, or had 3 K-blocks each, it lost
    to 64 wide; the rule was fitted on 32 such pairs (the 7b, 1b and 760m presets, six more
    shapes) and then held on ten shapes measured after it (1 and 16 rows: the faster tile in
    all 20, 1.48-2.20x bf16 cuBLAS where it goes wide against 1.25-1.93x at 64 wide;
    benchmarks/results/h200-2026-12-04-s38).

    Example:
        >>> tile = decode_tile(4096, 4096, "int4-g128", sms=132)
        >>> [tile[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_stages")]
        [16, 64, 128, 8, 3]
        >>> [decode_tile(21888, 4096, "int4-g128", sms=132)[k] for k in ("BLOCK_N", "SPLIT_K")]
        [128, 2]
        >>> decode_tile(28672, 4096, "int4-g128", sms=132)["BLOCK_N"]  # 448 programs: 2 waves
        64
        >>> [decode_tile(4096, 10944, level, 132)["BLOCK_K"] for level in ("int4-g64", "int8")]
        [64, 64]
    """
    block_k = 128 if group_size(level) == 128 else 64
    if K < 64:
        block_k = 32
    if group_size(level) == 128 and block_k == 128:
        wide = decode_config(N, K, 2 * sms, block_n=128, block_k=block_k)
        programs = -(-N // 128) * wide["SPLIT_K"]
        blocks_each = -(-K // block_k) // wide["SPLIT_K"]
        if wide["SPLIT_K"] <= 4 and programs <= 3 * sms and blocks_each >= 4:
            return wide
    return decode_config(N, K, 2 * sms, block_k=block_k)


def _fp16_scale(scale: torch.Tensor) -> torch.Tensor:
    return scale.clamp(_SCALE_MIN, _SCALE_MAX).to(SCALE_DTYPE)


def k_major(q: torch.Tensor) -> torch.Tensor:
    """``q`` (K or K/2 rows, N columns) with its values stored K-major (consecutive rows
    adjacent): the layout :func:`quantize_int8` and :func:`quantize_int4` return. The kernel
    takes either layout; K-major is the one its tensor-core tiles read in whole words (a
    4-byte word is 8 nibbles of one column), where N-major weights reach the tensor cores a
    byte a load. An nn.Linear's (N, K) weight, transposed, is already K-major.

    Example:
        >>> q = k_major(torch.arange(6, dtype=torch.uint8).reshape(3, 2))
        >>> q.tolist(), q.stride()
        ([[0, 1], [2, 3], [4, 5]], (1, 3))
    """
    return q.t().contiguous().t()


def quantize_int8(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-output-channel int8: ``(q, s)``, q (K, N) int8 stored K-major
    (:func:`k_major`), s (1, N) fp16.

    Example:
        >>> q, s = quantize_int8(torch.tensor([[1.0, -62.0], [-127.0, 254.0]]))
        >>> q.tolist(), s.tolist()  # s = max |column| / 127
        ([[1, -31], [-127, 127]], [[1.0, 2.0]])
    """
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (K, N), got {tuple(w.shape)}")
    w32 = w.float()
    scale = _fp16_scale(w32.abs().amax(dim=0, keepdim=True) / 127)
    q = torch.round(w32 / scale.float()).clamp(-127, 127).to(torch.int8)
    return k_major(q), scale


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Pack int4 values (K, N) in [-8, 7] two to a byte along K: (K/2, N) uint8, each nibble
    the value plus 8, row ``2 k2`` in the low nibble and ``2 k2 + 1`` in the high one.

    Example:
        >>> pack_int4(torch.tensor([[-8], [7], [0], [-1]])).tolist()  # 0 | 15<<4, 8 | 7<<4
        [[240], [120]]
    """
    if q.ndim != 2 or q.shape[0] % 2:
        raise ValueError(f"int4 values must be (K, N) with K even, got {tuple(q.shape)}")
    if bool(((q < -8) | (q > 7)).any()):
        raise ValueError("int4 values must lie in [-8, 7]")
    nibbles = (q.to(torch.int16) + 8).to(torch.uint8)
    return nibbles[0::2] | (nibbles[1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`pack_int4`: (K/2, N) uint8 to (K, N) int8 in [-8, 7].

    Example:
        >>> unpack_int4(torch.tensor([[240], [120]], dtype=torch.uint8)).flatten().tolist()
        [-8, 7, 0, -1]
    """
    if packed.dtype != torch.uint8 or packed.ndim != 2:
        raise ValueError(f"packed int4 must be 2-D uint8, got {packed.dtype} {packed.ndim}-D")
    lo = (packed & 15).to(torch.int8) - 8
    hi = (packed >> 4).to(torch.int8) - 8
    return torch.stack((lo, hi), dim=1).reshape(2 * packed.shape[0], packed.shape[1])


def quantize_int4(w: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric group-wise int4 along K: ``(packed, s)``, packed (K/2, N) uint8 (see
    :func:`pack_int4`) stored K-major (:func:`k_major`), s (K/group, N) fp16 with
    ``s[g, n] = max |W[group rows, n]| / 7``.

    Example:
        >>> w = torch.tensor([[7.0], [-3.0], [1.5], [-3.5]])
        >>> packed, s = quantize_int4(w, group=2)
        >>> unpack_int4(packed).flatten().tolist(), s.flatten().tolist()
        ([7, -3, 3, -7], [1.0, 0.5])
    """
    if w.ndim != 2:
        raise ValueError(f"weights must be 2-D (K, N), got {tuple(w.shape)}")
    K, N = w.shape
    if group < 2 or group % 2 or K % group:
        raise ValueError(f"group={group} must be even and divide K={K}")
    w32 = w.float().reshape(K // group, group, N)
    scale = _fp16_scale(w32.abs().amax(dim=1) / 7)  # (K/group, N)
    q = torch.round(w32 / scale.float()[:, None, :]).clamp(-8, 7).to(torch.int8)
    return k_major(pack_int4(q.reshape(K, N))), scale


def quantize(w: torch.Tensor, level: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize (K, N) weights to ``level`` (one of :data:`LEVELS`): ``(q, s)``."""
    group = group_size(level)
    return quantize_int4(w, group) if group else quantize_int8(w)


def _group_of(q: torch.Tensor, s: torch.Tensor) -> int:
    """0 for int8; the int4 group size read off the shapes: K = 2 * packed rows."""
    if q.dtype == torch.int8:
        if s.shape != (1, q.shape[1]):
            raise ValueError(f"int8 scales must be (1, {q.shape[1]}), got {tuple(s.shape)}")
        return 0
    if q.dtype != torch.uint8:
        raise ValueError(f"quantized weights must be int8 or packed int4 (uint8), got {q.dtype}")
    K = 2 * q.shape[0]
    if s.ndim != 2 or s.shape[1] != q.shape[1] or s.shape[0] < 1 or K % s.shape[0]:
        raise ValueError(f"int4 scales {tuple(s.shape)} do not fit packed {tuple(q.shape)}")
    return K // s.shape[0]


def level_of(q: torch.Tensor, s: torch.Tensor) -> str:
    """The level name of quantized weights, read off their dtype and shapes.

    Example:
        >>> level_of(*quantize_int4(torch.ones(256, 4), 128)), level_of(*quantize_int8(torch.ones(4, 4)))
        ('int4-g128', 'int8')
    """  # noqa: E501
    group = _group_of(q, s)
    return f"int4-g{group}" if group else "int8"


def dequantize(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The (K, N) float32 weights the kernel multiplies by: ``q * s``, exact in fp32.

    Example:
        >>> w = torch.tensor([[1.0, -0.5], [-2.54, 0.25]])
        >>> (dequantize(*quantize_int8(w)) - w).abs().max().item() < 0.02 / 2  # half a step
        True
    """
    group = _group_of(q, s)
    if not group:
        return q.float() * s.float()
    return unpack_int4(q).float() * s.float().repeat_interleave(group, dim=0)


def weight_bytes(q: torch.Tensor, s: torch.Tensor) -> int:
    """Bytes of quantized weights and scales, what one product reads of W.

    Example:
        >>> weight_bytes(*quantize_int4(torch.ones(4096, 4096), 128))  # 2048*4096 + 32*4096*2
        8650752
    """
    return q.numel() * q.element_size() + s.numel() * s.element_size()


def reference_quant_matmul(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """``x @ dequantize(q, s)`` in float64, returned as float32: what the kernel must match.

    Example:
        >>> q, s = quantize_int8(torch.tensor([[2.0], [254.0]]))  # s = 2, q = 1 and 127
        >>> reference_quant_matmul(torch.tensor([[1.0, 1.0]]), q, s)
        tensor([[256.]])
    """
    return torch.matmul(x.double(), dequantize(q, s).double()).float()


def reference_matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w`` with the unquantized weights, in float64, returned as float32."""
    return torch.matmul(x.double(), w.double()).float()


# -- launching ---------------------------------------------------------------------------
def _checked(level: str, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, SPLIT_K: int,
             num_warps: int, num_stages: int, K: int | None = None) -> dict[str, int]:  # fmt: skip
    """The six tunables, checked, as the kernel's keyword arguments."""
    values = (BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages)
    tunables = {key: int(v) for key, v in zip(CONFIG_KEYS, values, strict=True)}
    check_config(weights=level, **tunables, K=K)
    return tunables


def _upcast(dtype: torch.dtype) -> bool:
    # Triton's interpreter keeps bf16 as uint16 bit patterns and its tl.dot multiplies those
    # (triton-lang/triton#11584); widening first gives the exact products a GPU forms.
    # Compiled kernels never take this branch.
    return INTERPRETED and dtype == torch.bfloat16


def _offset_bound(t: torch.Tensor, pad: int) -> int:
    # largest element offset the kernel forms for t, tiles overhanging the edge included
    return sum((size - 1 + pad) * stride for size, stride in zip(t.shape, t.stride(), strict=True))


def _tiles(M: int, N: int, BLOCK_M: int, BLOCK_N: int) -> int:
    # e.g. M=16, N=4096 with 16 x 64 tiles: 1 * 64 = 64 tiles, each SPLIT_K programs
    return triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)


def _constexprs(
    level: str, K: int, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, num_stages: int,
    dtype: torch.dtype,
) -> dict[str, Any]:  # fmt: skip
    # a one-row tile loads num_stages K-blocks before it uses any (Triton's own pipelining
    # stages only the loads that feed tl.dot: the tensor-core tiles', num_stages deep)
    group = group_size(level)
    return {"GROUP": group, "MASK_K": bool(K % BLOCK_K), "UPCAST": _upcast(dtype),
            "ROW_BLOCKS": num_stages if BLOCK_M == 1 else 1, "PTX": not INTERPRETED,
            "SCALES_AHEAD": BLOCK_N >= 128 if SCALES_AHEAD is None else SCALES_AHEAD}  # fmt: skip


def launcher(
    x: torch.Tensor,
    q: torch.Tensor,
    s: torch.Tensor,
    y: torch.Tensor,
    *,
    BLOCK_M: int,
    BLOCK_N: int,
    BLOCK_K: int,
    SPLIT_K: int,
    num_warps: int,
    num_stages: int,
    counters: torch.Tensor | None = None,
    shared_workspace: bool = True,
) -> Callable[[], None]:
    """Return a no-argument function that computes ``y = x @ dequantize(q, s)``: one launch.

    The level is read off ``q`` and ``s`` (:func:`level_of`). Shapes, strides, the grid
    ``(tiles, SPLIT_K)``, the fp32 workspace ``[SPLIT_K, M, N]`` and the per-tile counters
    (zeros; each launch leaves them at zero again) are set up once, here. A caller that
    launches often (a serving engine's linears, a decode step captured in a CUDA graph) passes
    ``counters`` it keeps: int32 zeros, at least a tile's worth (see :func:`tile_counters`),
    which saves the fill kernel of fresh ones in every call. Without them, and for the
    workspace, the launcher takes the pair that every K-split launcher on this device and
    stream shares (:mod:`~autotune.kernels.split_k_workspace`: the partials' lines stay in
    L2), or with ``shared_workspace=False`` a pair of its own.

    Example:
        >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
        >>> x = torch.ones(2, 64, dtype=torch.float16, device=dev)
        >>> q, s = quantize_int8(torch.full((64, 16), 0.5, device=dev))
        >>> y = torch.empty(2, 16, dtype=torch.float16, device=dev)
        >>> run = launcher(x, q, s, y, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, SPLIT_K=4,
        ...                num_warps=4, num_stages=2)
        >>> run(); run(); y[1, 15].item()  # 64 * (1 * 0.5), twice over the same counters
        32.0
    """
    group = _group_of(q, s)
    level = level_of(q, s)
    if x.ndim != 2 or x.dtype not in DTYPES.values():
        raise ValueError(f"x must be 2-D bf16 or fp16, got {x.dtype} {tuple(x.shape)}")
    M, K = x.shape
    N = q.shape[1]
    if (2 * q.shape[0] if group else q.shape[0]) != K:
        raise ValueError(f"{level} weights {tuple(q.shape)} do not match x {tuple(x.shape)}")
    tunables = _checked(level, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages, K=K)
    if tuple(y.shape) != (M, N) or y.dtype != x.dtype:
        raise ValueError(f"y must be ({M}, {N}) {x.dtype}, got {tuple(y.shape)} {y.dtype}")
    if len({t.device for t in (x, q, s, y)}) != 1:
        raise ValueError("x, q, s and y must be on one device")
    pad = max(BLOCK_M, BLOCK_N, BLOCK_K)
    for name, t in (("x", x), ("q", q), ("s", s), ("y", y)):
        if _offset_bound(t, pad) >= _INT32_LIMIT:
            raise ValueError(f"{name} {tuple(t.shape)} is too large for the kernel's int32 offsets")
    if SPLIT_K * M * N >= _INT32_LIMIT:
        raise ValueError(f"a workspace of {SPLIT_K} x {M} x {N} exceeds int32 offsets")
    if M == 0 or N == 0:
        return lambda: None
    tiles = _tiles(M, N, BLOCK_M, BLOCK_N)
    kernel = _quant_matmul_kernel[(tiles, SPLIT_K)]
    # SPLIT_K == 1 writes y directly: a one-element workspace stands in
    take = split_k_workspace.buffers if shared_workspace else split_k_workspace.own
    workspace, own_counters = take(x.device, partials=SPLIT_K * M * N if SPLIT_K > 1 else 1,
                                   tiles=tiles)  # fmt: skip
    if counters is None:
        counters = own_counters
    elif counters.dtype != torch.int32 or counters.numel() < tiles or counters.device != x.device:
        raise ValueError(
            f"counters must be int32 on {x.device}, at least {tiles} of them; "
            f"got {counters.numel()} {counters.dtype} on {counters.device}"
        )
    args = (x, q, s, y, workspace, counters, M, N, K,
            *x.stride(), *q.stride(), *s.stride(), *y.stride())  # fmt: skip
    constexprs = _constexprs(level, K, BLOCK_M, BLOCK_N, BLOCK_K, num_stages, x.dtype)

    def run() -> None:
        kernel(*args, **tunables, **constexprs)

    return run


def quant_matmul(
    x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, *, out: torch.Tensor | None = None,
    counters: torch.Tensor | None = None, **config: int,
) -> torch.Tensor:  # fmt: skip
    """``x @ dequantize(q, s)`` with the kernel; ``config`` as :data:`DEFAULT_CONFIG` (missing
    keys take its values); returns ``out`` (allocated when None); ``counters`` as
    :func:`launcher`'s."""
    if out is None:
        out = torch.empty(x.shape[0], q.shape[1], dtype=x.dtype, device=x.device)
    launcher(x, q, s, out, counters=counters, **{**DEFAULT_CONFIG, **config})()
    return out


def tile_counters(N: int, rows: int, device: torch.device | str) -> torch.Tensor:
    """Per-tile counters for every launch over ``rows`` rows or fewer and ``N`` columns,
    whatever the tiles (BLOCK_N >= 16, BLOCK_M >= 1): keep them and pass them to
    :func:`quant_matmul` or :func:`launcher` in each call.

    Example:
        >>> tile_counters(4096, rows=1, device="cpu").shape  # 256 tiles of 1 x 16 at most
        torch.Size([256])
    """
    return torch.zeros(rows * triton.cdiv(N, 16), dtype=torch.int32, device=device)


def compile_only(
    M: int,
    N: int,
    K: int,
    level: str,
    dtype: torch.dtype | str,
    *,
    BLOCK_M: int,
    BLOCK_N: int,
    BLOCK_K: int,
    SPLIT_K: int,
    num_warps: int,
    num_stages: int,
) -> Any:
    """Compile the kernel without running it for contiguous x, s and y and K-major weights
    (as :func:`quantize` stores them; Triton's ``warmup``: the kernel lands in the on-disk
    cache where the launch finds it); None under the interpreter, which compiles nothing.

    Raises:
        ValueError: see ``check_config``.
        triton.runtime.errors.OutOfResources: more shared memory than the device has.
        triton.compiler.errors.CompilationError, and whatever else Triton raises compiling.

    Example:
        >>> k = compile_only(16, 256, 256, "int4-g128", "bf16", **DEFAULT_CONFIG)
        >>> k is None if INTERPRETED else k.metadata.shared >= 0
        True
    """
    tunables = _checked(level, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT_K, num_warps, num_stages, K=K)
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    if INTERPRETED:
        return None
    group = group_size(level)
    # torch dtypes in pointer positions become MockTensors; x, s and y contiguous, q K-major
    # as quantize stores it
    kernel = _quant_matmul_kernel.warmup(
        dtype, torch.uint8 if group else torch.int8, SCALE_DTYPE, dtype, torch.float32,
        torch.int32, M, N, K,
        K, 1,  # x (M, K)
        1, K // 2 if group else K,  # q (K, N) int8 or (K/2, N) packed, K-major
        N, 1,  # s (groups, N)
        N, 1,  # y (M, N)
        **tunables,
        **{**_constexprs(level, K, BLOCK_M, BLOCK_N, BLOCK_K, num_stages, dtype),
           "UPCAST": False},
        grid=(1,),
    )  # fmt: skip
    check_shared_memory(kernel)
    return kernel


__all__ = [
    "CONFIG_KEYS",
    "DEFAULT_CONFIG",
    "DTYPES",
    "INTERPRETED",
    "LEVELS",
    "ONE_ROW_CONFIG",
    "SCALE_DTYPE",
    "check_config",
    "compile_only",
    "decode_tile",
    "dequantize",
    "group_size",
    "k_major",
    "launcher",
    "level_of",
    "pack_int4",
    "quant_matmul",
    "quantize",
    "quantize_int4",
    "quantize_int8",
    "reference_matmul",
    "reference_quant_matmul",
    "unpack_int4",
    "weight_bytes",
]
