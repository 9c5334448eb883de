"""The weight-only quantized matmul kernel of :mod:`~autotune.kernels.quant_matmul_triton`,
which checks its configs and launches it; the weights' format is
:mod:`~autotune.kernels.quant_weights`'.

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
once.

Example:
    >>> from autotune.kernels.quant_matmul_kernel import quant_matmul_kernel
    >>> {"SPLIT_K", "GROUP", "SCALES_AHEAD"} <= set(quant_matmul_kernel.arg_names)
    True
"""

from __future__ import annotations

from autotune.kernels import interpreter  # noqa: F401 - the interpreter switch, before triton

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


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
def quant_matmul_kernel(
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
