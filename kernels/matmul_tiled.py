"""The tiled schedules of :mod:`~autotune.kernels.matmul_triton`: one program per output tile
(:func:`matmul_tiled_kernel`), or per tile and K-slice with the slices summed by the last to
finish (:func:`matmul_split_k_kernel`). Launched through ``matmul_triton``'s plan, which
checks the config and sizes the grid; nothing here is called directly.

Example:
    >>> from autotune.kernels.matmul_tiled import matmul_split_k_kernel, matmul_tiled_kernel
    >>> "SPLIT_K" in matmul_split_k_kernel.arg_names, "SPLIT_K" in matmul_tiled_kernel.arg_names
    (True, False)
"""

from __future__ import annotations

from autotune.kernels import interpreter  # noqa: F401 - the interpreter switch, before triton

# isort: split
import triton  # noqa: E402 - imported after the interpreter switch, on purpose
import triton.language as tl  # noqa: E402


@triton.jit
def matmul_tiled_kernel(
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
    # see matmul_triton's module docstring: they would pin the interpreter switch.)
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
def matmul_split_k_kernel(
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
    # the sizes and strides as multiples of their known divisors (see matmul_tiled_kernel)
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
    # see matmul_triton's module docstring: they would pin the interpreter switch.)
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
