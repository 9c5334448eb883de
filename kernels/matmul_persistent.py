"""The persistent schedules of :mod:`~autotune.kernels.matmul_triton`: one program per SM
walking the output tiles, operands brought in by TMA tensor descriptors
(:func:`matmul_persistent_kernel`), and stream-K (:func:`matmul_stream_k_kernel`), which
shares the last partial wave's K-steps among all the programs. Launched through
``matmul_triton``'s plan; nothing here is called directly.

Example:
    >>> from autotune.kernels.matmul_persistent import matmul_stream_k_kernel
    >>> "count_ptr" in matmul_stream_k_kernel.arg_names
    True
"""

from __future__ import annotations

from autotune.kernels import interpreter  # noqa: F401 - the interpreter switch, before triton

# isort: split
import triton  # noqa: E402 - imported after the interpreter switch, on purpose
import triton.language as tl  # noqa: E402


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
def matmul_persistent_kernel(
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
    a_desc, b_desc, c_desc = _descriptors(
        a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_b, stride_cm,
        BLOCK_M, BLOCK_N, BLOCK_K, B_KMAJOR, C_N,
    )  # fmt: skip
    tiles_m, tiles_n, steps = _tile_counts(M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)
    programs_per_band = GROUP_M * tiles_n
    # Program p takes tiles p, p + PROGRAMS, p + 2 PROGRAMS, ... in the banded order above.
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, PROGRAMS, flatten=FLATTEN):
        off_m, off_n = _tile_origin(tile, tiles_m, programs_per_band, BLOCK_M, BLOCK_N, GROUP_M)
        acc = _tile_steps(a_desc, b_desc, off_m, off_n, 0, steps, BLOCK_M, BLOCK_N, BLOCK_K,
                          B_KMAJOR, UPCAST)  # fmt: skip
        _store_tile(c_desc, acc, off_m, off_n, BLOCK_M, C_N, SUBTILE)


# The persistent schedule with the last, partial wave spread over every program (stream-K):
# whole waves of tiles first, as above, then the remaining tiles' K-steps cut into equal
# shares, one a program. A tile whose steps fall to several programs is summed by the last of
# them to finish, from the fp32 partials the others left in the workspace.
@triton.jit
def matmul_stream_k_kernel(
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
    a_desc, b_desc, c_desc = _descriptors(
        a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_b, stride_cm,
        BLOCK_M, BLOCK_N, BLOCK_K, B_KMAJOR, C_N,
    )  # fmt: skip
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
                          B_KMAJOR, UPCAST)  # fmt: skip
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
        off_m, off_n = _tile_origin(
            whole + t, tiles_m, programs_per_band, BLOCK_M, BLOCK_N, GROUP_M
        )
        acc = _tile_steps(
            a_desc, b_desc, off_m, off_n, first, last, BLOCK_M, BLOCK_N, BLOCK_K, B_KMAJOR, UPCAST
        )
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
