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
``BLOCK_M``, ``BLOCK_N``, ``num_warps``, ``num_stages``; grid (cdiv(Q, BLOCK_M), B * H, shares),
with tiles (tiles * H, 1, shares). A head dim ``D`` that is not a power of two (96 in the 760m
preset) is padded to one in registers and masked: the padding reads and writes nothing.
Without a GPU it runs under Triton's interpreter (slowly: tests and CPU checks only). It calls
``tl.max``/``tl.sum``, Triton's own ``@jit`` helpers (the interpreter reduces them in numpy, five
times faster than a custom combine), so there the process must not import triton before this
module switches the interpreter on, as for every kernel of the suite.

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
from autotune.kernels.interpreter import pow2_at_least, sm_count

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
#: CUDA's limit on a grid's second and third axes (the first takes up to 2^31 - 1)
_MAX_GRID_Y = 65535
#: the most shares a row's keys are cut into (flash-decoding): 32 x 64 keys already cover 2k
MAX_SPLITS = 32


@triton.jit
def _paged_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, table_ptr, pos_ptr, start_ptr, count_ptr,
    stride_qb, stride_qs, stride_qh, stride_qd,
    stride_kn, stride_kp, stride_kh, stride_kd,
    stride_vn, stride_vp, stride_vh, stride_vd,
    stride_ob, stride_os, stride_oh, stride_od,
    stride_tb, stride_pb,
    m_ws_ptr, l_ws_ptr, acc_ws_ptr, counter_ptr,
    B, H, GROUP, Q, qk_scale, kv_scale,
    D: tl.constexpr, BLOCK_D: tl.constexpr, PAGE: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, SPLITS: tl.constexpr,
    UPCAST: tl.constexpr, IEEE: tl.constexpr, CONVERT: tl.constexpr, TILED: tl.constexpr,
    FUSED_COMBINE: tl.constexpr,
):  # fmt: skip
    if TILED:  # a tile's BLOCK_M rows are all its query rows: every (tile, head) on axis 0
        start_m = 0
        bh = tl.program_id(0)
    else:
        start_m = tl.program_id(0) * BLOCK_M
        bh = tl.program_id(1)
    split = tl.program_id(2)  # which share of the keys this program reads (SPLITS of them)
    b = bh // H
    h = bh % H
    kv_h = h // GROUP  # grouped-query: GROUP consecutive query heads share one K/V head
    rows = start_m + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_D)  # the head dim padded to a power of two (96 -> 128)
    in_d = cols < D
    if TILED:  # "sequence" b is a tile: rows start[b] .. + count[b] - 1 of a (T, 1, H, D) q
        flat = tl.load(start_ptr + b) + rows
        in_q = rows < tl.load(count_ptr + b)
        pos = tl.load(pos_ptr + flat * stride_pb, mask=in_q, other=-1)
        q_rows = flat * stride_qb
        o_rows = flat * stride_ob
    else:
        in_q = rows < Q
        pos = tl.load(pos_ptr + b * stride_pb + rows, mask=in_q, other=-1)
        q_rows = b * stride_qb + rows * stride_qs
        o_rows = b * stride_ob + rows * stride_os
    live = pos >= 0  # padding rows (position -1) see nothing and are not stored
    q = tl.load(q_ptr + h * stride_qh + q_rows[:, None] + cols[None, :] * stride_qd,
                mask=live[:, None] & in_d[None, :], other=0.0)  # fmt: skip
    if UPCAST:
        q = q.to(tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, dtype=tl.float32)
    acc = tl.full((BLOCK_M, BLOCK_D), 0.0, dtype=tl.float32)
    # keys 0..the last row's position, cut in SPLITS shares of whole BLOCK_N steps: e.g. 1025
    # keys, BLOCK_N 64, 4 splits: 17 steps, 5 a share; split 3 reads keys 960..1024
    hi = tl.max(pos, 0) + 1
    share = tl.cdiv(tl.cdiv(hi, BLOCK_N), SPLITS) * BLOCK_N
    lo = split * share
    hi = tl.minimum(lo + share, hi)
    for start in range(lo, hi, BLOCK_N):
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
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # padding rows stay finite
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        p = p.to(q.dtype)
        if IEEE:  # noqa: SIM108
            acc = tl.dot(p, v, acc, input_precision="ieee")
        else:
            acc = tl.dot(p, v, acc)
        m_i = m_new
    # padding rows inside Q (or a tile's count) come out as zeros (no key, no weight)
    if SPLITS == 1:
        out = (acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]).to(o_ptr.dtype.element_ty)
        tl.store(o_ptr + h * stride_oh + o_rows[:, None] + cols[None, :] * stride_od, out,
                 mask=in_q[:, None] & in_d[None, :])  # fmt: skip
    else:  # this share's running max, sum and unscaled output, for _combine_kernel
        slot = ((split * B + b) * Q + rows) * H + h  # (SPLITS, B, Q, H) workspaces
        tl.store(m_ws_ptr + slot, m_i, mask=in_q)
        tl.store(l_ws_ptr + slot, l_i, mask=in_q)
        tl.store(acc_ws_ptr + slot[:, None] * BLOCK_D + cols[None, :], acc, mask=in_q[:, None])
        if FUSED_COMBINE:  # the last of the SPLITS programs of these rows and head combines
            tl.debug_barrier()  # every thread's share is stored before the ticket
            group = tl.program_id(0) if TILED else tl.program_id(0) * (B * H) + bh
            ticket = tl.atomic_add(counter_ptr + group, 1, sem="acq_rel")
            if ticket == SPLITS - 1:
                m_all = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
                l_all = tl.full((BLOCK_M,), 0.0, dtype=tl.float32)
                acc_all = tl.full((BLOCK_M, BLOCK_D), 0.0, dtype=tl.float32)
                for other in range(SPLITS):  # in share order: the same sum whoever is last
                    part = ((other * B + b) * Q + rows) * H + h
                    # .cg: from L2, where the other programs' stores are, not a stale L1 line
                    m_s = tl.load(m_ws_ptr + part, mask=in_q, other=float("-inf"),
                                  cache_modifier=".cg")  # fmt: skip
                    l_s = tl.load(l_ws_ptr + part, mask=in_q, other=0.0, cache_modifier=".cg")
                    acc_s = tl.load(acc_ws_ptr + part[:, None] * BLOCK_D + cols[None, :],
                                    mask=in_q[:, None], other=0.0,
                                    cache_modifier=".cg")  # fmt: skip
                    m_new = tl.maximum(m_all, m_s)
                    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
                    keep, weight = tl.exp2(m_all - m_safe), tl.exp2(m_s - m_safe)
                    l_all = l_all * keep + l_s * weight
                    acc_all = acc_all * keep[:, None] + acc_s * weight[:, None]
                    m_all = m_new
                out = acc_all / tl.where(l_all == 0.0, 1.0, l_all)[:, None]
                tl.store(o_ptr + h * stride_oh + o_rows[:, None] + cols[None, :] * stride_od,
                         out.to(o_ptr.dtype.element_ty),
                         mask=in_q[:, None] & in_d[None, :])  # fmt: skip
                tl.atomic_xchg(counter_ptr + group, 0)  # ready for the next launch


@triton.jit
def _combine_kernel(
    o_ptr, m_ws_ptr, l_ws_ptr, acc_ws_ptr, start_ptr, count_ptr,
    stride_ob, stride_os, stride_oh, stride_od,
    B, Q, H,
    D: tl.constexpr, BLOCK_D: tl.constexpr, SPLITS: tl.constexpr, TILED: tl.constexpr,
):  # fmt: skip
    """One (sequence or tile, query row, head) per program: its SPLITS shares, each weighed by
    2^(its max - the overall max), summed and divided by the weighed sums."""
    row_head = tl.program_id(0)  # (b * Q + row) * H + h
    h = row_head % H
    row = (row_head // H) % Q
    b = row_head // (H * Q)
    if TILED:  # a row past the tile's count is not one of its rows: nothing to write
        if row >= tl.load(count_ptr + b):
            return
        o_row = (tl.load(start_ptr + b) + row) * stride_ob
    else:
        o_row = b * stride_ob + row * stride_os
    shares = tl.arange(0, SPLITS)
    slot = shares * (B * Q * H) + row_head
    m = tl.load(m_ws_ptr + slot)
    l_s = tl.load(l_ws_ptr + slot)
    m_all = tl.max(m, 0)
    m_safe = tl.where(m_all == float("-inf"), 0.0, m_all)  # a padding row: no share saw a key
    weight = tl.exp2(m - m_safe)
    total = tl.sum(l_s * weight, 0)
    cols = tl.arange(0, BLOCK_D)
    acc = tl.load(acc_ws_ptr + slot[:, None] * BLOCK_D + cols[None, :])
    out = tl.sum(acc * weight[:, None], 0) / tl.where(total == 0.0, 1.0, total)
    o_ptrs = o_ptr + o_row + h * stride_oh + cols * stride_od
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=cols < D)


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


def decode_splits(programs: int, max_keys: int, block_n: int, sms: int) -> int:
    """Shares to cut each row's keys in when ``programs`` (query tiles x sequences x heads)
    leave SMs idle: doubled while the programs stay within four per SM and each share keeps at
    least one ``block_n`` step of the ``max_keys`` a table can hold (a power of two, at most
    :data:`MAX_SPLITS`). Measured on an H200 (16 heads x 96, context 1024, 24 layers' caches a
    CUDA graph; benchmarks/gpu/paged_attention_splits.py): at one sequence 32 shares read the
    keys at 667 GB/s and one share at 172; at 4 sequences 8 shares were best, at 32 one.

    Example:
        >>> decode_splits(16, 2048, 64, 132), decode_splits(64, 2048, 64, 132)
        (32, 8)
        >>> decode_splits(512, 2048, 64, 132), decode_splits(16, 128, 64, 132)
        (1, 2)
    """
    splits = 1
    while (programs * splits * 2 <= 4 * sms and splits * 2 <= MAX_SPLITS
           and max_keys >= splits * 2 * block_n):  # fmt: skip
        splits *= 2
    return splits


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
    splits: int | None = None,
    tiles: tuple[torch.Tensor, torch.Tensor] | None = None,
    counters: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention of ``q`` over the paged keys and values: (B, Q, H, D) in q's dtype;
    rows at position -1 come back as zeros. Every position's block must be in ``tables``.
    ``splits`` (a power of two; default :func:`decode_splits`) cuts each row's keys in shares
    read by programs of their own, whose partial results a second kernel combines.

    ``tiles`` = (starts, counts), int32 (n,): ``q`` is then (T, 1, H, D), one row per token
    with ``positions`` (T, 1), and tile ``i`` is its rows ``starts[i] .. starts[i] +
    counts[i] - 1`` (at most ``BLOCK_M``), all of one sequence, whose table is row ``i`` of
    ``tables`` (n, blocks): the tile's programs read its keys once for all of its rows, where
    rows of their own would each read them. Rows in no tile are not written.

    Example (a chunk of 3 tokens at positions 0-2 and a decode token at 5, of two sequences):
        >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
        >>> k, v = (torch.randn(4, 4, 1, 16, device=dev) for _ in range(2))
        >>> tables = torch.tensor([[0, 2], [1, 3]], dtype=torch.int32, device=dev)
        >>> positions = torch.tensor([[0], [1], [2], [5]], dtype=torch.int32, device=dev)
        >>> q = torch.randn(4, 1, 1, 16, device=dev)
        >>> tiles = (torch.tensor([0, 3], dtype=torch.int32, device=dev),
        ...          torch.tensor([3, 1], dtype=torch.int32, device=dev))
        >>> out = paged_attention(q, k, v, tables, positions, tiles=tiles, BLOCK_N=16)
        >>> per_row = paged_attention(q, k, v, tables[[0, 0, 0, 1]], positions, BLOCK_N=16)
        >>> bool((out - per_row).abs().max() < 1e-5)
        True
    """
    check_config(BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages)
    if tiles is None:
        _check_operands(q, k, v, tables, positions)
        B, Q, H, D = q.shape
        starts = counts = positions  # not read
    else:
        starts, counts = tiles
        if q.ndim != 4 or q.shape[1] != 1 or positions.shape != (q.shape[0], 1):
            raise ValueError(f"tiles need q (T, 1, H, D) and positions (T, 1), got "
                             f"{tuple(q.shape)}, {tuple(positions.shape)}")  # fmt: skip
        if starts.shape != counts.shape or starts.ndim != 1 or starts.dtype != torch.int32 \
                or counts.dtype != torch.int32:  # fmt: skip
            raise ValueError("tiles must be two int32 vectors of one length (starts, counts)")
        # the tiles as sequences of BLOCK_M rows for the checks (and the kernel's B and Q)
        B, Q, H, D = starts.shape[0], BLOCK_M, q.shape[2], q.shape[3]
        _check_operands(q.new_empty(()).expand(1, Q, H, D), k, v, tables[:1],
                        positions.new_empty(()).expand(1, Q))  # fmt: skip
        if tables.shape[0] != B:
            raise ValueError(f"tables must be (n, blocks) for {B} tiles, got {tuple(tables.shape)}")
    programs = triton.cdiv(Q, BLOCK_M) * B * H
    if splits is None:
        splits = decode_splits(programs, tables.shape[1] * k.shape[1], BLOCK_N, sm_count())
    if splits < 1 or splits != pow2_at_least(splits):
        raise ValueError(f"splits={splits} must be a power of two >= 1")
    # every row < Q (every row of a tile) is written: padding rows as zeros
    out = torch.empty_like(q)
    block_d = triton.next_power_of_2(D)
    if splits > 1:  # (splits, B, Q, H) maxima and sums, and unscaled outputs of block_d
        m_ws = torch.empty(splits, B, Q, H, dtype=torch.float32, device=q.device)
        l_ws = torch.empty_like(m_ws)
        acc_ws = torch.empty(splits, B, Q, H, block_d, dtype=torch.float32, device=q.device)
    else:
        m_ws = l_ws = acc_ws = out  # not read
    groups = (B if tiles is not None else triton.cdiv(Q, BLOCK_M) * B) * H
    fused = counters is not None and splits > 1
    if fused and (counters.dtype != torch.int32 or counters.numel() < groups
                  or counters.device != q.device):  # fmt: skip
        raise ValueError(f"counters must be {groups} or more int32 zeros on {q.device}, got "
                         f"{counters.numel()} {counters.dtype} on {counters.device}")  # fmt: skip
    upcast = INTERPRETED and q.dtype == torch.bfloat16  # the interpreter's bf16 is bit patterns
    scale = (D**-0.5 if sm_scale is None else float(sm_scale)) * LOG2E
    # tiles: one program a (tile, head) on the grid's first axis, which takes up to 2^31 - 1
    # (the second takes 65535: 4096 tiles of 16 heads would not fit there)
    grid = (B * H, 1, splits) if tiles is not None else (triton.cdiv(Q, BLOCK_M), B * H, splits)
    _paged_attention_kernel[grid](
        q, k, v, out, tables, positions, starts, counts,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        tables.stride(0), positions.stride(0),
        m_ws, l_ws, acc_ws, counters if fused else out,
        B, H, H // k.shape[2], Q, scale, float(kv_scale),
        D=D, BLOCK_D=block_d, PAGE=k.shape[1], BLOCK_M=BLOCK_M,
        BLOCK_N=BLOCK_N, SPLITS=splits, UPCAST=upcast,
        IEEE=q.dtype == torch.float32,
        CONVERT=upcast or k.dtype != q.dtype or float(kv_scale) != 1.0, TILED=tiles is not None,
        FUSED_COMBINE=fused, num_warps=num_warps, num_stages=num_stages,
    )  # fmt: skip
    if splits > 1 and not fused:
        _combine_kernel[(B * Q * H,)](
            out, m_ws, l_ws, acc_ws, starts, counts, *out.stride(), B, Q, H,
            D=D, BLOCK_D=block_d, SPLITS=splits, TILED=tiles is not None, num_warps=4,
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
