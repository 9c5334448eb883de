"""Tiled Triton matmul ``C = A @ B`` (bf16/fp16 in, fp32 accumulation, result in the input dtype).

Every tunable is a plain argument: the tile ``BLOCK_M x BLOCK_N`` each program computes, the depth
``BLOCK_K`` of one step along K, ``GROUP_M`` (how many tile-rows share one band of the grid, for L2
reuse), and the launch options ``num_warps`` / ``num_stages``. Any M, N, K work: edge tiles are
masked. The module knows nothing about the tuner.

Interpreter: without a CUDA device, importing this module sets ``TRITON_INTERPRET=1`` (unless the
variable is already set, so an explicit ``0`` is respected) before it imports ``triton`` and
decorates the kernel, and the kernel then runs under Triton's interpreter on torch CPU tensors.
Triton reads the variable each time ``@triton.jit`` runs. Its own helpers (``tl.cdiv``,
``tl.zeros``, ...) are ``@triton.jit`` functions decorated when ``triton`` is first imported, and
under the interpreter a kernel calling helpers decorated with the variable unset fails ("Cannot call
@triton.jit'd outside of the scope of a kernel"). This kernel calls builtins only, so it runs under
the interpreter whatever the import order; other kernels need the variable set before the process
first imports ``triton``. ``num_warps``/``num_stages`` are ignored by the interpreter, and
``compile_only`` has nothing to compile there.

Example:
    >>> import torch
    >>> from autotune.kernels.matmul_triton import matmul, reference_matmul
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> a = torch.randn(33, 20, dtype=torch.bfloat16, device=dev)
    >>> b = torch.randn(20, 17, dtype=torch.bfloat16, device=dev)
    >>> c = matmul(a, b, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, GROUP_M=2, num_warps=1, num_stages=1)
    >>> ref = reference_matmul(a, b)
    >>> c.shape, c.dtype, bool((c.float() - ref).norm() / ref.norm() < 1e-2)
    (torch.Size([33, 17]), torch.bfloat16, True)
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


def _cuda_present() -> bool:
    # device_count() asks NVML when it can, so unlike is_available() it does not initialise the
    # CUDA runtime in this process (a process that forks workers later stays fork-safe).
    return torch.cuda.device_count() > 0


if not _cuda_present():
    # Must happen before the @triton.jit below runs: triton.knobs.runtime.interpret reads the
    # environment at decoration time. An explicit TRITON_INTERPRET=0 is respected.
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402 - imported after the interpreter switch, on purpose
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from autotune.kernels import split_k_workspace, tma  # noqa: E402
from autotune.kernels.interpreter import (  # noqa: E402
    check_shared_memory,
    is_pow2,
    pow2_at_least,
    sm_count,
)

#: The tunables ``matmul`` takes, with an untuned but sensible value each (the tiled schedule with
#: the tile of Triton's tutorial).
DEFAULT_CONFIG: dict[str, int | str] = {
    "BLOCK_M": 128,
    "BLOCK_N": 128,
    "BLOCK_K": 64,
    "GROUP_M": 8,
    "SPLIT_K": 1,
    "SCHEDULE": "tiled",
    "num_warps": 4,
    "num_stages": 3,
}
#: The untuned config of a product large enough for one wave of 128x256 tiles: the best config
#: of the recorded H200 grids at 4096^3 and 8192x14336x4096 (benchmarks/data/README.md), and
#: side by side 0.92-1.00x cuBLAS at 8192^3 bf16/fp16, 8192x4096x4096 and 8192x14336x4096
#: against 0.86-0.92x for DEFAULT_CONFIG's 128x128 tile (benchmarks/results/h200-2026-12-02-s22).
WIDE_CONFIG: dict[str, int | str] = {**DEFAULT_CONFIG, "BLOCK_N": 256, "num_warps": 8,
                                     "num_stages": 4}  # fmt: skip
#: Output tile rows up to which a product is a decode product (few rows of activations, all
#: of B to read): :func:`default_config` gives it a tile of its own.
DECODE_M = 64
#: Tunables of one schedule only, off unless a config sets them: ``EPILOGUE_SUBTILE`` (the
#: persistent schedules) stores the C tile in two halves, so shared memory stages half of it.
OPTIONAL_CONFIG: dict[str, int] = {"EPILOGUE_SUBTILE": 0}
CONFIG_KEYS: tuple[str, ...] = (*DEFAULT_CONFIG, *OPTIONAL_CONFIG)
#: ``tiled``: one program per output tile (and per K-split); ``persistent``: one program per
#: SM walking the tiles, operands brought in by the tensor-memory accelerator (TMA
#: descriptors); ``persistent_flat``: the same with the tile and K loops flattened into one
#: software pipeline, so a tile's epilogue overlaps the next tile's first loads;
#: ``stream_k``: ``persistent_flat`` over the whole waves of tiles, and the last, partial wave's
#: K-steps shared out evenly among all the programs (stream-K), so no SM idles through it: at
#: 8192x4096x4096 in 128x256 tiles the last wave is 100 tiles on the H200's 132 SMs, and
#: 3.1% more rows cost the persistent schedule nothing (benchmarks/gpu/wave_tail.py). With
#: fewer tiles than SMs (decode products) every tile is in that wave: a K-split balanced over
#: all the SMs.
SCHEDULES: tuple[str, ...] = ("tiled", "persistent", "persistent_flat", "stream_k")

DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp8": torch.float8_e4m3fn,  # e4m3 operands (compute capability >= 8.9), bf16 result
}
#: The result's dtype for each operand dtype.
OUT_DTYPES: dict[torch.dtype, torch.dtype] = {
    torch.bfloat16: torch.bfloat16,
    torch.float16: torch.float16,
    torch.float8_e4m3fn: torch.bfloat16,
}

# Offsets inside the kernel are int32: every address offset must stay below 2**31 elements.
_INT32_LIMIT = 2**31
# Programs of the persistent schedule under the interpreter (no SMs to count there).
_INTERPRETER_PROGRAMS = 4


@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    MASKED: tl.constexpr,
    UPCAST: tl.constexpr,
    DIV_M: tl.constexpr,
    DIV_N: tl.constexpr,
    DIV_K: tl.constexpr,
    DIV_AM: tl.constexpr,
    DIV_AK: tl.constexpr,
    DIV_BK: tl.constexpr,
    DIV_BN: tl.constexpr,
    DIV_CM: tl.constexpr,
    DIV_CN: tl.constexpr,
):
    # --- what the host knows of the sizes' and strides' alignment (see alignment_hints) ------
    # Each is rewritten as a multiple of its power-of-two divisor, which it already is: the
    # compiler then knows, e.g., that rows of a 1000x500 fp16 A start 8 bytes apart and loads
    # them 8 bytes at a time, asynchronously (Triton by itself only knows "divisible by 16" or
    # nothing, and nothing means one 2-byte load per element). Only divisors 2, 4 and 8 need
    # it: a multiple of 16 is already marked so by Triton's launch (and a 1 made a constant),
    # and rewriting it anyway leaves signed-division code in the compiled prologue.
    if DIV_M < 16:
        M = M // DIV_M * DIV_M
    if DIV_N < 16:
        N = N // DIV_N * DIV_N
    if DIV_K < 16:
        K = K // DIV_K * DIV_K
    if DIV_AM < 16:
        stride_am = stride_am // DIV_AM * DIV_AM
    if DIV_AK < 16:
        stride_ak = stride_ak // DIV_AK * DIV_AK
    if DIV_BK < 16:
        stride_bk = stride_bk // DIV_BK * DIV_BK
    if DIV_BN < 16:
        stride_bn = stride_bn // DIV_BN * DIV_BN
    if DIV_CM < 16:
        stride_cm = stride_cm // DIV_CM * DIV_CM
    if DIV_CN < 16:
        stride_cn = stride_cn // DIV_CN * DIV_CN
    # --- which output tile this program owns -------------------------------------------------
    # Programs are handed out band by band; a band is GROUP_M tile-rows of C. Inside a band the
    # tile-row index moves fastest, so consecutive programs reuse the same tile-column of B (and
    # the band's GROUP_M tile-rows of A) while those are still in L2.
    # e.g. tiles_m=5, tiles_n=3, GROUP_M=2: pid 0..5 -> band 0 (rows 0-1), (m,n) = (0,0) (1,0)
    # (0,1) (1,1) (0,2) (1,2); pid 12..14 -> band 2, which holds only row 4.
    # (Only builtins below: no tl.cdiv / tl.zeros, which are themselves @triton.jit functions;
    # see the module docstring.)
    pid = tl.program_id(0)
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M  # ceil(M / BLOCK_M)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    programs_per_band = GROUP_M * tiles_n
    band = pid // programs_per_band
    first_row = band * GROUP_M
    rows_here = tl.minimum(tiles_m - first_row, GROUP_M)  # the last band may be shorter
    rank = pid - band * programs_per_band  # position inside the band
    tile_m = first_row + rank % rows_here
    tile_n = rank // rows_here

    # --- pointers to the first K-slab of A (BLOCK_M x BLOCK_K) and B (BLOCK_K x BLOCK_N) -----
    # Rows past M and columns past N wrap around (modulo): the loads stay inside the matrices
    # and only the store is masked. The K-mask is kept on every load, even where K divides
    # evenly. Both are the Triton tutorial kernel's form; measured on the H200 at 8192^3 and
    # 8192x4096x4096 with its tile (128x128x64, 4 warps, 3 stages), the modulo is 6-10% faster
    # than the same kernel without it, and the K-mask a further 1-3% (benchmarks/results/
    # h200-2026-12-02).
    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = tl.arange(0, BLOCK_K)
    # The offsets are summed in int32 first and added to the pointer once (the parentheses):
    # without them each term is its own 64-bit pointer add, and the compiled K loop carries
    # twice the 64-bit address updates (sm_90 SASS).
    a_ptrs = a_ptr + (rows[:, None] * stride_am + ks[None, :] * stride_ak)
    b_ptrs = b_ptr + (ks[:, None] * stride_bk + cols[None, :] * stride_bn)

    # --- march along K, accumulating in fp32 ---------------------------------------------------
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
    for step in range(0, (K + BLOCK_K - 1) // BLOCK_K):
        # ks past K read as 0, which adds nothing to the sum
        k_left = K - step * BLOCK_K
        a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        if UPCAST:
            # interpreter only (see _upcast): bf16 -> fp32 is exact, so the sum is unchanged
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    # --- write the tile back in C's dtype -------------------------------------------------------
    c = acc.to(c_ptr.dtype.element_ty)
    out_rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    if MASKED:  # the launcher always masks (see _plan); unmasked needs tiles that divide C
        tl.store(c_ptrs, c, mask=(out_rows[:, None] < M) & (out_cols[None, :] < N))
    else:
        tl.store(c_ptrs, c)


# The same product with one tile's K range shared by SPLIT_K programs (decode shapes: few tiles,
# long K). Its loads wrap around the edges instead of masking, and only a partial last K-step
# is masked.
@triton.jit
def _matmul_split_k_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    ws_ptr,
    lock_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr,
    EVEN_K: tl.constexpr,
    UPCAST: tl.constexpr,
    DIV_M: tl.constexpr,
    DIV_N: tl.constexpr,
    DIV_K: tl.constexpr,
    DIV_AM: tl.constexpr,
    DIV_AK: tl.constexpr,
    DIV_BK: tl.constexpr,
    DIV_BN: tl.constexpr,
    DIV_CM: tl.constexpr,
    DIV_CN: tl.constexpr,
):
    # the sizes and strides as multiples of their known divisors (see _matmul_kernel)
    M, N, K = M // DIV_M * DIV_M, N // DIV_N * DIV_N, K // DIV_K * DIV_K
    stride_am, stride_ak = stride_am // DIV_AM * DIV_AM, stride_ak // DIV_AK * DIV_AK
    stride_bk, stride_bn = stride_bk // DIV_BK * DIV_BK, stride_bn // DIV_BN * DIV_BN
    stride_cm, stride_cn = stride_cm // DIV_CM * DIV_CM, stride_cn // DIV_CN * DIV_CN
    # --- which output tile this program owns -------------------------------------------------
    # Programs are handed out band by band; a band is GROUP_M tile-rows of C. Inside a band the
    # tile-row index moves fastest, so consecutive programs reuse the same tile-column of B (and
    # the band's GROUP_M tile-rows of A) while those are still in L2.
    # e.g. tiles_m=5, tiles_n=3, GROUP_M=2: pid 0..5 -> band 0 (rows 0-1), (m,n) = (0,0) (1,0)
    # (0,1) (1,1) (0,2) (1,2); pid 12..14 -> band 2, which holds only row 4.
    # (Only builtins below: no tl.cdiv / tl.zeros, which are themselves @triton.jit functions;
    # see the module docstring.)
    pid = tl.program_id(0)
    split = tl.program_id(1)  # which share of K this program sums (SPLIT_K of them)
    tiles_m = (M + BLOCK_M - 1) // BLOCK_M  # ceil(M / BLOCK_M)
    tiles_n = (N + BLOCK_N - 1) // BLOCK_N
    programs_per_band = GROUP_M * tiles_n
    band = pid // programs_per_band
    first_row = band * GROUP_M
    rows_here = tl.minimum(tiles_m - first_row, GROUP_M)  # the last band may be shorter
    rank = pid - band * programs_per_band  # position inside the band
    tile_m = first_row + rank % rows_here
    tile_n = rank // rows_here

    # --- the K-steps of this split: [first, last) of ceil(K / BLOCK_K) ------------------------
    # e.g. K=4096, BLOCK_K=128, SPLIT_K=4: 32 steps, 8 each; split 2 sums steps 16..23
    steps = (K + BLOCK_K - 1) // BLOCK_K
    per_split = (steps + SPLIT_K - 1) // SPLIT_K
    first = tl.minimum(split * per_split, steps)
    last = tl.minimum(first + per_split, steps)
    if EVEN_K:  # noqa: SIM108 - a compile-time branch, kept apart from the runtime ones
        full_last = last
    else:
        full_last = tl.minimum(last, steps - 1)  # the last step is partial: masked below

    # --- pointers to this split's first K-slab of A (BLOCK_M x BLOCK_K) and B -----------------
    # Rows past M and columns past N wrap around (modulo), so every load stays inside the
    # matrices and needs no mask; only the store is masked.
    rows = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    cols = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    ks = first * BLOCK_K + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn

    # --- march along K, accumulating in fp32 ---------------------------------------------------
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
    for _ in range(first, full_last):
        a = tl.load(a_ptrs)
        b = tl.load(b_ptrs)
        if UPCAST:
            # interpreter only (see _upcast): bf16 -> fp32 is exact, so the sum is unchanged
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    # runtime conditions nest: Triton lowers each `if` on a scalar to its own branch
    if not EVEN_K:  # noqa: SIM102
        if last == steps:  # noqa: SIM102
            if first < last:  # this split owns the partial last step: ks past K read as 0
                k_left = K - full_last * BLOCK_K
                inner = tl.arange(0, BLOCK_K)
                a = tl.load(a_ptrs, mask=inner[None, :] < k_left, other=0.0)
                b = tl.load(b_ptrs, mask=inner[:, None] < k_left, other=0.0)
                if UPCAST:
                    a = a.to(tl.float32)
                    b = b.to(tl.float32)
                acc = tl.dot(a, b, acc)

    # --- write the tile back in C's dtype -------------------------------------------------------
    out_rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    out_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=inside)
    else:
        # Each split leaves its fp32 partial tile in the workspace [SPLIT_K, M, N], then takes a
        # ticket; the split that draws the last ticket adds the partials up, writes C and resets
        # the tile's counter for the next launch: one launch, no memset.
        partial = ws_ptr + out_rows[:, None] * N + out_cols[None, :]
        tl.store(partial + split * M * N, acc, mask=inside)
        tl.debug_barrier()  # every thread's partial is written before the ticket is taken
        tile = tile_m * tiles_n + tile_n
        ticket = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel")
        if ticket == SPLIT_K - 1:
            total = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
            for s in tl.static_range(SPLIT_K):
                # .cg: read past L1, which may hold another SM's stale view
                total += tl.load(partial + s * M * N, mask=inside, other=0.0, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=inside)
            tl.atomic_xchg(lock_ptr + tile, 0)


@triton.jit
def _descriptors(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_b, stride_cm,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_KMAJOR: tl.constexpr,
    C_N: tl.constexpr,
):  # fmt: skip
    # Tensor descriptors: the TMA unit copies whole tiles, zero-filling reads past the edges and
    # clipping writes, so nothing here is masked. Made once per program, outside the loops
    # (Triton 3.6 cannot pipeline a loop that makes one).
    a_desc = tl.make_tensor_descriptor(
        a_ptr, shape=[M, K], strides=[stride_am, 1], block_shape=[BLOCK_M, BLOCK_K]
    )
    if B_KMAJOR:  # B is the transpose of an (N, K) row-major matrix, as nn.Linear keeps weights
        b_desc = tl.make_tensor_descriptor(
            b_ptr, shape=[N, K], strides=[stride_b, 1], block_shape=[BLOCK_N, BLOCK_K]
        )
    else:
        b_desc = tl.make_tensor_descriptor(
            b_ptr, shape=[K, N], strides=[stride_b, 1], block_shape=[BLOCK_K, BLOCK_N]
        )
    c_desc = tl.make_tensor_descriptor(
        c_ptr, shape=[M, N], strides=[stride_cm, 1], block_shape=[BLOCK_M, C_N]
    )
    return a_desc, b_desc, c_desc


@triton.jit
def _tile_counts(M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # tiles of C along M and N, and K-steps a tile
    return (M + BLOCK_M - 1) // BLOCK_M, (N + BLOCK_N - 1) // BLOCK_N, (K + BLOCK_K - 1) // BLOCK_K


@triton.jit
def _tile_origin(
    tile, tiles_m, programs_per_band,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr,
):  # fmt: skip
    # the first row and column of C of a tile in the banded order of the tiled kernel
    band = tile // programs_per_band
    first_row = band * GROUP_M
    rows_here = tl.minimum(tiles_m - first_row, GROUP_M)
    rank = tile - band * programs_per_band
    return (first_row + rank % rows_here) * BLOCK_M, (rank // rows_here) * BLOCK_N


@triton.jit
def _tile_steps(
    a_desc, b_desc, off_m, off_n, first, last,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, B_KMAJOR: tl.constexpr,
    UPCAST: tl.constexpr,
):  # fmt: skip
    # one tile's product over the K-steps [first, last), in fp32
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
    for step in range(first, last):
        a = a_desc.load([off_m, step * BLOCK_K])
        if B_KMAJOR:
            b = b_desc.load([off_n, step * BLOCK_K]).T
        else:
            b = b_desc.load([step * BLOCK_K, off_n])
        if UPCAST:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _store_tile(
    c_desc, acc, off_m, off_n,
    BLOCK_M: tl.constexpr, C_N: tl.constexpr, SUBTILE: tl.constexpr,
):  # fmt: skip
    # C_N = BLOCK_N, or half of it with SUBTILE (two stores of half a tile each)
    if SUBTILE:
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, C_N)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left.to(c_desc.dtype))
        c_desc.store([off_m, off_n + C_N], right.to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def _matmul_persistent_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_b,
    stride_cm,
    PROGRAMS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    FLATTEN: tl.constexpr,
    UPCAST: tl.constexpr,
    SUBTILE: tl.constexpr,
):
    # SUBTILE: C goes out in two halves along N, so shared memory stages half a C tile (e.g.
    # 128x256 in bf16: 32 KiB instead of 64, room for a fourth stage of A and B)
    C_N: tl.constexpr = BLOCK_N // 2 if SUBTILE else BLOCK_N
    a_desc, b_desc, c_desc = _descriptors(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_b,
                                          stride_cm, BLOCK_M, BLOCK_N, BLOCK_K, B_KMAJOR, C_N)
    tiles_m, tiles_n, steps = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    programs_per_band = GROUP_M * tiles_n
    # Program p takes tiles p, p + PROGRAMS, p + 2 PROGRAMS, ... in the banded order above.
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=FLATTEN):
        off_m, off_n = _tile_origin(tile, tiles_m, programs_per_band, BLOCK_M, BLOCK_N, GROUP_M)
        acc = _tile_steps(a_desc, b_desc, off_m, off_n, 0, steps, BLOCK_M, BLOCK_N, BLOCK_K,
                          B_KMAJOR, UPCAST)
        _store_tile(c_desc, acc, off_m, off_n, BLOCK_M, C_N, SUBTILE)


# The persistent schedule with the last, partial wave spread over every program (stream-K):
# whole waves of tiles first, as above, then the remaining tiles' K-steps cut into equal
# shares, one a program. A tile whose steps fall to several programs is summed by the last of
# them to finish, from the fp32 partials the others left in the workspace.
@triton.jit
def _matmul_stream_k_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    ws_ptr,
    count_ptr,
    M,
    N,
    K,
    stride_am,
    stride_b,
    stride_cm,
    PROGRAMS,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    B_KMAJOR: tl.constexpr,
    UPCAST: tl.constexpr,
    SUBTILE: tl.constexpr,
):
    C_N: tl.constexpr = BLOCK_N // 2 if SUBTILE else BLOCK_N
    a_desc, b_desc, c_desc = _descriptors(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_b,
                                          stride_cm, BLOCK_M, BLOCK_N, BLOCK_K, B_KMAJOR, C_N)
    tiles_m, tiles_n, steps = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    programs_per_band = GROUP_M * tiles_n
    pid = tl.program_id(0)
    # --- whole waves: e.g. 1024 tiles on 132 programs, 7 each (tiles 0..923); none when there
    # are fewer tiles than programs (64 x 4096 in 64 x 128 tiles: 32, all in the shares below) ---
    tiles = tiles_m * tiles_n
    tail = tiles % PROGRAMS
    whole = tiles - tail
    for tile in tl.range(pid, whole, PROGRAMS, flatten=True):
        off_m, off_n = _tile_origin(tile, tiles_m, programs_per_band, BLOCK_M, BLOCK_N, GROUP_M)
        acc = _tile_steps(a_desc, b_desc, off_m, off_n, 0, steps, BLOCK_M, BLOCK_N, BLOCK_K,
                          B_KMAJOR, UPCAST)
        _store_tile(c_desc, acc, off_m, off_n, BLOCK_M, C_N, SUBTILE)
    # --- the tail's tile x K-step iterations in equal shares: e.g. 100 tiles x 64 steps over
    # 132 programs, 49 each; program 1 takes tile 0's steps 49..63 and tile 1's 0..33 ---------
    share = (tail * steps + PROGRAMS - 1) // PROGRAMS
    it = pid * share
    end = tl.minimum(it + share, tail * steps)
    while it < end:
        t = it // steps
        first = it - t * steps
        last = tl.minimum(steps, first + end - it)
        off_m, off_n = _tile_origin(whole + t, tiles_m, programs_per_band, BLOCK_M, BLOCK_N,
                                    GROUP_M)
        acc = _tile_steps(a_desc, b_desc, off_m, off_n, first, last, BLOCK_M, BLOCK_N, BLOCK_K,
                          B_KMAJOR, UPCAST)
        if first == 0 and last == steps:  # the whole tile is this program's
            _store_tile(c_desc, acc, off_m, off_n, BLOCK_M, C_N, SUBTILE)
        else:
            # the programs sharing tile t: those whose shares hold its first and last step.
            # Program p leaves its partial of tile t in slot p + t: a program's tiles follow
            # each other and the next program starts at its last tile or after, so no two
            # (program, tile) pairs meet in a slot, and PROGRAMS + tail slots are enough
            inner = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
            owner = (t * steps) // share
            parts = ((t + 1) * steps - 1) // share - owner + 1
            slots = ws_ptr + (owner + t) * BLOCK_M * BLOCK_N
            tl.store(slots + (pid - owner) * BLOCK_M * BLOCK_N + inner, acc)
            tl.debug_barrier()  # every thread's part of the partial is stored before the ticket
            ticket = tl.atomic_add(count_ptr + t, 1, sem="acq_rel")
            if ticket == parts - 1:  # the last to finish adds the partials in slot order
                total = tl.full((BLOCK_M, BLOCK_N), 0.0, dtype=tl.float32)
                for slot in range(0, parts):
                    # .cg: read L2, where the other programs' stores are, not a stale L1 line
                    total += tl.load(slots + slot * BLOCK_M * BLOCK_N + inner, cache_modifier=".cg")
                _store_tile(c_desc, total, off_m, off_n, BLOCK_M, C_N, SUBTILE)
                tl.atomic_xchg(count_ptr + t, 0)  # ready for the next launch
        it += last - first


#: True when the kernel runs under Triton's interpreter (no GPU compile, CPU tensors). Read off the
#: decorated kernel itself: @triton.jit returns an InterpretedFunction instead of a JITFunction.
INTERPRETED: bool = not isinstance(_matmul_kernel, JITFunction)


def check_config(
    *,
    BLOCK_M: int,
    BLOCK_N: int,
    BLOCK_K: int,
    GROUP_M: int,
    num_warps: int,
    num_stages: int,
    SPLIT_K: int = 1,
    SCHEDULE: str = "tiled",
    EPILOGUE_SUBTILE: int = 0,
) -> None:
    """Reject a config the kernel cannot express, before anything is compiled.

    Raises:
        ValueError: tile sizes not powers of two >= 16 (``tl.arange`` and ``tl.dot`` need that),
            ``num_warps`` not a power of two in 1..32, ``GROUP_M``, ``num_stages`` or
            ``SPLIT_K`` below 1, an unknown ``SCHEDULE``, a K-split of a persistent one, or an
            epilogue subtile of the tiled one.

    Example:
        >>> check_config(**DEFAULT_CONFIG)
        >>> check_config(**{**DEFAULT_CONFIG, "BLOCK_K": 48})
        Traceback (most recent call last):
        ...
        ValueError: BLOCK_K=48 must be a power of two >= 16
    """
    for name, value in (("BLOCK_M", BLOCK_M), ("BLOCK_N", BLOCK_N), ("BLOCK_K", BLOCK_K)):
        if not (is_pow2(int(value)) and value >= 16):
            raise ValueError(f"{name}={value} must be a power of two >= 16")
    if not (is_pow2(int(num_warps)) and num_warps <= 32):  # 32 warps x 32 threads = 1024
        raise ValueError(f"num_warps={num_warps} must be a power of two in 1..32")
    if GROUP_M < 1:
        raise ValueError(f"GROUP_M={GROUP_M} must be >= 1")
    if num_stages < 1:
        raise ValueError(f"num_stages={num_stages} must be >= 1")
    if SPLIT_K < 1:
        raise ValueError(f"SPLIT_K={SPLIT_K} must be >= 1")
    if SCHEDULE not in SCHEDULES:
        raise ValueError(f"SCHEDULE={SCHEDULE!r} is not one of {', '.join(SCHEDULES)}")
    if SPLIT_K > 1 and SCHEDULE != "tiled":
        raise ValueError(f"SPLIT_K={SPLIT_K} needs the tiled schedule, not {SCHEDULE}")
    if EPILOGUE_SUBTILE not in (0, 1, False, True):
        raise ValueError(f"EPILOGUE_SUBTILE={EPILOGUE_SUBTILE} must be 0 or 1")
    if EPILOGUE_SUBTILE and SCHEDULE == "tiled":
        raise ValueError("EPILOGUE_SUBTILE=1 needs a persistent schedule (a TMA store of C)")


def default_config(M: int, N: int, K: int, sms: int | None = None) -> dict[str, int | str]:
    """The untuned config for an (M, N, K) product: :data:`WIDE_CONFIG` where its 128x256
    tiles fill the ``sms`` at least once (default: this device's, 132 under the interpreter),
    else :data:`DEFAULT_CONFIG` (the tutorial's tile), except for decode products
    (M <= :data:`DECODE_M`), which get one tile-row of 16-64 rows and split K until the
    programs would outnumber the ``sms``: a 128 x 128 tile there computes mostly padding on a
    few programs. The decode tiles are the best of grids measured on an H200 at N = K = 4096
    (benchmarks/results/h200-2026-12-02-late: 16x128x64 split 4 at M = 1 and 16, 64x32x128
    unsplit at M = 64; timed streamed); at M = 64, 6 stages read 0.946x cuBLAS against 0.912x
    for 5 and 0.923-0.930x for 7-8 (benchmarks/results/h200-2026-12-02-s22).

    Example:
        >>> default_config(8192, 8192, 8192, sms=132) == WIDE_CONFIG  # 2048 tiles of 128x256
        True
        >>> default_config(1000, 3000, 500, sms=132) == DEFAULT_CONFIG  # 96 tiles of 128x256
        True
        >>> c = default_config(1, 4096, 4096, sms=132)  # 32 tiles, split 4: 128 programs
        >>> c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["SPLIT_K"]
        (16, 128, 64, 4)
        >>> c = default_config(64, 4096, 4096, sms=132)  # 128 tiles: no split
        >>> c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["SPLIT_K"], c["num_stages"]
        (64, 32, 128, 1, 6)
    """
    if sms is None:
        sms = sm_count()  # an H200's 132 under the interpreter: a CPU sweep starts there too
    if M > DECODE_M:
        return dict(WIDE_CONFIG if _grid_size(M, N, 128, 256) >= sms else DEFAULT_CONFIG)
    block_m = min(DECODE_M, max(16, pow2_at_least(M)))
    # over 16 rows each program reads its K-slabs of A too: narrow tiles of B, deep K-steps
    block_n = min(128 if M <= 16 else 32, max(32, pow2_at_least(N)))
    block_k = min(64 if M <= 16 else 128, max(32, pow2_at_least(K)))
    tiles = _grid_size(M, N, block_m, block_n)
    split = 1
    while tiles * split * 2 <= sms and split * 2 * block_k <= K:
        split *= 2
    return {**DEFAULT_CONFIG, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK_K": block_k,
            "GROUP_M": 1, "SPLIT_K": split, "num_warps": 4,
            "num_stages": 4 if M <= 16 else 6}  # fmt: skip


def shared_memory_bytes(
    BLOCK_M: int, BLOCK_N: int, BLOCK_K: int, num_stages: int, dtype: torch.dtype | str
) -> int:
    """Estimate the shared memory one program needs: ``num_stages`` buffered A and B slabs.

    An estimate, not Triton's figure (the compiler may add or reuse scratch space); the real check
    happens when a compiled kernel is loaded (``compile_only`` applies it too).

    Example:
        >>> shared_memory_bytes(128, 128, 64, 3, torch.bfloat16)  # 3 * (128*64 + 64*128) * 2
        98304
    """
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    itemsize = torch.empty((), dtype=dtype).element_size()
    return num_stages * (BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * itemsize


def _check_operands(a: torch.Tensor, b: torch.Tensor) -> None:
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"matmul needs 2-D operands, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner sizes differ: A is {tuple(a.shape)}, B is {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in DTYPES.values():
        raise ValueError(f"operands must both be bf16, fp16 or fp8, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise ValueError(f"operands on different devices: {a.device} and {b.device}")


def _offset_bound(t: torch.Tensor, pad: int) -> int:
    # largest element offset the kernel forms for t, tiles overhanging the edge included:
    # sum over dims of (size - 1 + pad) * stride
    return sum((size - 1 + pad) * stride for size, stride in zip(t.shape, t.stride(), strict=True))


def _grid_size(M: int, N: int, BLOCK_M: int, BLOCK_N: int) -> int:
    # one program per output tile, e.g. M=N=4096 with 128x128 tiles: 32 * 32 = 1024 programs
    return triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N)


def persistent_programs(M: int, N: int, BLOCK_M: int, BLOCK_N: int) -> int:
    """Programs of the persistent schedule: one per SM, no more than there are tiles
    (e.g. 8192 x 4096 in 128 x 256 tiles: 1024 tiles over the H200's 132 SMs)."""
    return max(1, min(_programs_available(), _grid_size(M, N, BLOCK_M, BLOCK_N)))


def stream_k_programs(M: int, N: int, K: int, BLOCK_M: int, BLOCK_N: int, BLOCK_K: int) -> int:
    """Programs of the stream-K schedule: one per SM, fewer only when there are fewer tile x
    K-step iterations than SMs. Unlike :func:`persistent_programs`, fewer tiles than SMs do not
    leave SMs idle: a decode product's few tiles have their K-steps shared out among all of
    them (e.g. 64 x 4096 x 4096 in 64 x 128 x 128 tiles: 32 tiles x 32 steps over 132 SMs).

    Example:
        >>> stream_k_programs(16, 64, 64, 16, 32, 32) == min(2 * 2, _programs_available())
        True
    """
    iterations = _grid_size(M, N, BLOCK_M, BLOCK_N) * triton.cdiv(K, BLOCK_K)
    return max(1, min(_programs_available(), iterations))


def _programs_available() -> int:
    # one program per SM; the interpreter has no SMs to count
    return _INTERPRETER_PROGRAMS if INTERPRETED else sm_count()


#: The largest divisor :func:`alignment_hints` tells the kernel of: 16 elements, the most
#: that Triton's own specialisation of an integer argument states.
_MAX_DIVISOR = 16


def _pow2_divisor(value: int) -> int:
    # the largest power of two <= _MAX_DIVISOR dividing value (0 is divisible by anything)
    return _MAX_DIVISOR if value == 0 else min(_MAX_DIVISOR, value & -value)


def alignment_hints(M: int, N: int, K: int, strides: dict[str, tuple[int, int]]) -> dict[str, int]:
    """The tiled kernels' ``DIV_*`` arguments: the power-of-two divisor (at most 16) of each
    size and stride, which the kernel states to the compiler so that odd shapes still get
    vector loads. ``strides`` maps "a", "b", "c" to their (row, column) strides.

    Example:
        >>> hints = alignment_hints(1000, 3000, 500, {"a": (500, 1), "b": (3000, 1),
        ...                                           "c": (3000, 1)})
        >>> hints["DIV_K"], hints["DIV_AM"], hints["DIV_BK"], hints["DIV_AK"]
        (4, 4, 8, 1)
    """
    (sam, sak), (sbk, sbn), (scm, scn) = strides["a"], strides["b"], strides["c"]
    values = {"M": M, "N": N, "K": K, "AM": sam, "AK": sak, "BK": sbk, "BN": sbn, "CM": scm,
              "CN": scn}  # fmt: skip
    return {f"DIV_{name}": _pow2_divisor(int(v)) for name, v in values.items()}


def _upcast(dtype: torch.dtype) -> bool:
    # Triton's interpreter keeps bf16 as uint16 bit patterns and its tl.dot multiplies those
    # (triton-lang/triton#11584, "not supported yet"); widening first gives the exact products a
    # GPU's tensor cores form. Compiled kernels never take this branch.
    return INTERPRETED and dtype in (torch.bfloat16, torch.float8_e4m3fn)


def _checked(config: dict[str, Any]) -> dict[str, Any]:
    """The tunables, completed from the default and checked, as the kernel wrapper's keyword
    arguments."""
    unknown = set(config) - set(CONFIG_KEYS)
    if unknown:
        raise ValueError(f"unknown matmul config keys {sorted(unknown)}")
    tunables = {**DEFAULT_CONFIG, **OPTIONAL_CONFIG, **config}
    check_config(**tunables)
    return tunables


def _b_layout(b: torch.Tensor) -> tuple[bool, int]:
    """(B is K-major, B's row stride for a descriptor); ValueError when neither dim is unit."""
    if b.stride(1) == 1:
        return False, b.stride(0)
    if b.stride(0) == 1:
        return True, b.stride(1)
    raise ValueError(f"the persistent schedule needs B with a unit stride, got {b.stride()}")


def _check_tma(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
    # TMA descriptors need unit inner strides and 16-byte aligned row strides and bases
    _b_layout(b)
    for name, t, stride in (("A", a, a.stride(0)), ("C", out, out.stride(0))):
        if t.stride(1) != 1:
            raise ValueError(f"the persistent schedule needs {name} row-major")
        if (stride * t.element_size()) % 16 or t.data_ptr() % 16:
            raise ValueError(
                f"the persistent schedule needs {name}'s rows 16-byte aligned "
                f"({stride} elements of {t.element_size()} bytes)"
            )
    if (_b_layout(b)[1] * b.element_size()) % 16 or b.data_ptr() % 16:
        raise ValueError("the persistent schedule needs B's rows 16-byte aligned")


@dataclass(frozen=True)
class _Plan:
    """One launch, worked out once: the kernel, its grid, the arguments after the pointers,
    and the compile-time ones. The launcher and ``compile_only`` share it, so a kernel compiled
    ahead is exactly the one the launch looks up in Triton's cache."""

    kernel: Any
    grid: tuple[int, ...]
    args: tuple[int, ...]
    constexprs: dict[str, Any]
    pointers: int  # how many pointer arguments come first
    workspace: tuple[int, int] = (0, 0)  # fp32 partials and int32 counters the launch needs


def _plan(
    M: int, N: int, K: int, dtype: torch.dtype, strides: dict[str, tuple[int, int]],
    cfg: dict[str, Any],
) -> _Plan:  # fmt: skip
    BM, BN = cfg["BLOCK_M"], cfg["BLOCK_N"]
    launch = {"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]}
    meta = {"BLOCK_M": BM, "BLOCK_N": BN, "BLOCK_K": cfg["BLOCK_K"], "GROUP_M": cfg["GROUP_M"]}
    upcast = _upcast(dtype)
    (sam, sak), (sbk, sbn), (scm, scn) = strides["a"], strides["b"], strides["c"]
    if cfg["SCHEDULE"] != "tiled":
        b_kmajor = sbn != 1
        programs = (
            stream_k_programs(M, N, K, BM, BN, cfg["BLOCK_K"])
            if cfg["SCHEDULE"] == "stream_k"
            else persistent_programs(M, N, BM, BN)
        )
        constexprs = {**meta, "B_KMAJOR": b_kmajor, "UPCAST": upcast,
                      "SUBTILE": bool(cfg["EPILOGUE_SUBTILE"])}  # fmt: skip
        args = (M, N, K, sam, sbn if b_kmajor else sbk, scm, programs)
        if cfg["SCHEDULE"] == "stream_k":
            # a partial tile a program at most, plus one more a tile it shares (the kernel's
            # slots); a counter a tile of the last wave
            tail = _grid_size(M, N, BM, BN) % programs
            workspace = ((programs + tail) * BM * BN, tail) if tail else (0, 0)
            return _Plan(_matmul_stream_k_kernel, (programs,), args, {**constexprs, **launch}, 5,
                         workspace)  # fmt: skip
        constexprs["FLATTEN"] = cfg["SCHEDULE"] == "persistent_flat"
        return _Plan(_matmul_persistent_kernel, (programs,), args, {**constexprs, **launch}, 3)
    split_k = cfg["SPLIT_K"]
    args = (M, N, K, sam, sak, sbk, sbn, scm, scn)
    hints = alignment_hints(M, N, K, strides)
    if split_k == 1:  # one program per tile
        # The store is masked whatever the shape, as in Triton's tutorial kernel: on even shapes
        # the unmasked store saves 8 compares in the epilogue, but M and N then die before the
        # K loop and ptxas allocates and schedules the loop differently (sm_90 SASS at
        # 128x128x64, 4 warps, 3 stages: same instructions, another order). Masked, the
        # compiled kernel is instruction for instruction the tutorial's.
        constexprs = {**meta, "MASKED": True, "UPCAST": upcast, **hints}
        return _Plan(_matmul_kernel, (_grid_size(M, N, BM, BN),), args, {**constexprs, **launch}, 3)
    constexprs = {**meta, "SPLIT_K": split_k, "EVEN_K": K % cfg["BLOCK_K"] == 0, "UPCAST": upcast,
                  **hints}  # fmt: skip
    grid = (_grid_size(M, N, BM, BN), split_k)
    workspace = (split_k * M * N, grid[0])
    return _Plan(_matmul_split_k_kernel, grid, args, {**constexprs, **launch}, 5, workspace)


def launcher(
    a: torch.Tensor,
    b: torch.Tensor,
    out: torch.Tensor,
    *,
    shared_workspace: bool = True,
    **config: int | str,
) -> Callable[[], None]:
    """Return a no-argument function that computes ``out = a @ b`` with this config.

    Shapes, strides, the grid and (for a K-split) the fp32 workspace and the tile counters are
    worked out once, so each call is one kernel launch: what a timing loop should call. The
    workspace is the one every K-split launcher on this device and stream shares
    (:mod:`~autotune.kernels.split_k_workspace`: its lines stay in L2), or with
    ``shared_workspace=False`` the launcher's own. ``out``
    must be an (M, N) tensor of the result dtype (bf16 for fp8 operands) on the operands'
    device; on CUDA the tensors must live on the current device. ``config`` holds the tunables
    of :data:`DEFAULT_CONFIG` (missing ones take its values).

    Example:
        >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
        >>> a = torch.ones(40, 24, dtype=torch.float16, device=dev)
        >>> c = torch.empty(40, 8, dtype=torch.float16, device=dev)
        >>> run = launcher(a, a[:8].t(), c, BLOCK_M=32, BLOCK_N=16, BLOCK_K=16, GROUP_M=4,
        ...                num_warps=4, num_stages=2, SPLIT_K=2)
        >>> run(); c[39, 7].item()  # 24 * (1 * 1)
        24.0
    """
    cfg = _checked(config)
    _check_operands(a, b)
    (M, K), N = a.shape, b.shape[1]
    out_dtype = OUT_DTYPES[a.dtype]
    if tuple(out.shape) != (M, N) or out.dtype != out_dtype or out.device != a.device:
        raise ValueError(
            f"out must be ({M}, {N}) {out_dtype} on {a.device}, "
            f"got {tuple(out.shape)} {out.dtype} on {out.device}"
        )
    pad = max(cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"])
    for name, t in (("A", a), ("B", b), ("C", out)):
        if _offset_bound(t, pad) >= _INT32_LIMIT:
            raise ValueError(f"{name} {tuple(t.shape)} is too large for the kernel's int32 offsets")
    if M == 0 or N == 0:
        return lambda: None
    if cfg["SCHEDULE"] != "tiled":
        _check_tma(a, b, out)
        if not INTERPRETED:
            tma.ensure_allocator()
    strides = {"a": a.stride(), "b": b.stride(), "c": out.stride()}
    plan = _plan(M, N, K, a.dtype, strides, cfg)
    pointers = _pointers(plan, a, b, out, cfg, shared_workspace=shared_workspace)
    kernel = plan.kernel[plan.grid]
    args = (*pointers, *plan.args)

    def run() -> None:
        kernel(*args, **plan.constexprs)

    return run


def _pointers(
    plan: _Plan, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, cfg: dict[str, Any], *,
    shared_workspace: bool,
) -> tuple[torch.Tensor, ...]:  # fmt: skip
    # A, B, C and, for a K-split or stream-K, the fp32 workspace and the int32 tile counters:
    # typed even where the plan has no use for them (a bf16 pointer fails to compile:
    # atomic_xchg does not support bf16)
    if plan.pointers == 3:
        return a, b, out
    partials, tiles = plan.workspace
    if partials >= _INT32_LIMIT:
        raise ValueError(
            f"SCHEDULE={cfg['SCHEDULE']}, SPLIT_K={cfg['SPLIT_K']}: a {partials}-value "
            f"workspace is too large for {a.shape[0]} x {b.shape[1]}"
        )
    take = split_k_workspace.buffers if shared_workspace else split_k_workspace.own
    return a, b, out, *take(a.device, partials=partials, tiles=tiles)


def matmul(
    a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None, **config: int | str
) -> torch.Tensor:
    """Compute ``a @ b`` with the Triton kernel; returns ``out`` (allocated when None).

    Args:
        a: (M, K) bf16, fp16 or fp8 (e4m3), any strides.
        b: (K, N), same dtype and device as ``a``.
        out: optional (M, N) result tensor (bf16 for fp8 operands, else the operands' dtype).
        config: the tunables of :data:`DEFAULT_CONFIG`: ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``
            (tile sizes, powers of two >= 16), ``GROUP_M`` (tile-rows per band of the program
            order; 1 = row-major order), ``SPLIT_K`` (programs sharing one tile's K range),
            ``SCHEDULE`` (one of :data:`SCHEDULES`), ``num_warps``, ``num_stages`` (launch
            options, ignored by the interpreter).

    Example:
        >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
        >>> a = torch.ones(3, 5, dtype=torch.float16, device=dev)
        >>> matmul(a, a.t(), BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)[0, 0].item()  # 5 * (1 * 1)
        5.0
    """
    _check_operands(a, b)
    if out is None:
        out = torch.empty(a.shape[0], b.shape[1], dtype=OUT_DTYPES[a.dtype], device=a.device)
    launcher(a, b, out, **config)()
    return out


def compile_only(
    M: int, N: int, K: int, dtype: torch.dtype | str, *, b_kmajor: bool = False,
    **config: int | str,
) -> Any:  # fmt: skip
    """Compile the kernel for contiguous (M, K) @ (K, N) operands of ``dtype`` without running it
    (``b_kmajor``: B is the transpose of a contiguous (N, K) matrix).

    Uses ``JITFunction.warmup`` with the launcher's own plan: the compiled kernel lands in this
    process's kernel cache and in Triton's on-disk cache (``TRITON_CACHE_DIR``), so worker
    processes can precompile many configs in parallel and the process that later runs
    ``matmul`` with the same shapes, dtype and config loads it from disk. Triton specialises on
    the integer arguments only by "equals 1" and "divisible by 16", so any shapes of the same
    class hit the same entry. Warmup still asks torch for the current CUDA device, so each
    compiling process opens a CUDA context.

    Returns:
        Triton's compiled kernel (``.metadata.shared``, ``.asm``), or None under the interpreter,
        where there is nothing to compile.

    Raises:
        ValueError: see ``check_config``.
        triton.runtime.errors.OutOfResources: the compiled kernel needs more shared memory than
            the device has (the check Triton itself makes when it first loads the kernel).
        triton.compiler.errors.CompilationError, and whatever else Triton raises while compiling.

    Example:
        >>> k = compile_only(256, 256, 256, "bf16", **DEFAULT_CONFIG)
        >>> k is None if INTERPRETED else k.metadata.shared > 0
        True
    """
    cfg = _checked(config)
    dtype = DTYPES[dtype] if isinstance(dtype, str) else dtype
    if INTERPRETED:
        return None
    strides = {"a": (K, 1), "b": (1, K) if b_kmajor else (N, 1), "c": (N, 1)}
    plan = _plan(M, N, K, dtype, strides, cfg)
    # torch dtypes in pointer positions are wrapped by warmup into MockTensors (data_ptr 0, which
    # Triton treats as 16-byte aligned, as are real allocations)
    pointers = (dtype, dtype, OUT_DTYPES[dtype], torch.float32, torch.int32)[: plan.pointers]
    kernel = plan.kernel.warmup(*pointers, *plan.args, **plan.constexprs, grid=(1,))
    check_shared_memory(kernel)
    return kernel


def reference_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` computed in float64, returned as float32: the figure results are checked against.

    float64 keeps the reference free of TF32 or reduced-precision settings a process may have
    turned on; its own error is far below bf16/fp16 rounding.

    Example:
        >>> a = torch.tensor([[1.0, 2.0]], dtype=torch.bfloat16)
        >>> reference_matmul(a, a.t())  # 1*1 + 2*2
        tensor([[5.]])
    """
    return torch.matmul(a.double(), b.double()).float()


__all__ = [
    "CONFIG_KEYS",
    "SCHEDULES",
    "DEFAULT_CONFIG",
    "WIDE_CONFIG",
    "DTYPES",
    "default_config",
    "INTERPRETED",
    "check_config",
    "compile_only",
    "launcher",
    "matmul",
    "reference_matmul",
    "shared_memory_bytes",
]
