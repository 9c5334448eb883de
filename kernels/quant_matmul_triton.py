"""Weight-only quantized matmul ``y = x @ W`` in Triton, for decode (few rows, large weights).

``x`` is (M, K) bf16 or fp16; ``W`` (K, N) is stored quantized and dequantized inside the
kernel; products accumulate in fp32 and ``y`` (M, N) comes out in x's dtype. With M of 1..64
the kernel is bound by reading weights, so fewer weight bytes means a faster kernel. The
levels and the weights' format (int8 per channel, int4 per group of K rows packed two to a
byte, fp16 scales) are :mod:`~autotune.kernels.quant_weights`'.

The kernel (:mod:`~autotune.kernels.quant_matmul_kernel`) dequantizes in registers and,
for ``SPLIT_K > 1``, sums the K-shares in one launch. This module checks configs, picks the
decode tiles and launches it; it knows nothing about the tuner.

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
from triton.runtime.jit import JITFunction  # noqa: E402

from autotune.kernels import split_k_workspace  # noqa: E402
from autotune.kernels.interpreter import (  # noqa: E402
    check_shared_memory,
    is_pow2,
)
from autotune.kernels.quant_matmul_kernel import quant_matmul_kernel  # noqa: E402
from autotune.kernels.quant_weights import (  # noqa: E402 - the weights' format, re-exported
    LEVELS,
    SCALE_DTYPE,
    dequantize,
    group_of,
    group_size,
    k_major,
    level_of,
    pack_int4,
    quantize,
    quantize_int4,
    quantize_int8,
    reference_matmul,
    reference_quant_matmul,
    unpack_int4,
    weight_bytes,
)

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

#: whether the int4 tensor-core tile loads a K-block's scales one block ahead (True) or in the
#: block's own iteration (False); None: ahead for tiles 128 and more wide. Side by side on the
#: H200 (benchmarks/results/h200-2026-12-04-s38), ahead made 128-wide tiles 1.05-1.19x faster
#: on all 42 linears and row counts measured and left 64-wide ones where they were (0.94-1.03x,
#: geometric means 0.997 and 0.992 over 16 and 20).
SCALES_AHEAD: bool | None = None
# Offsets inside the kernel are int32: every address offset must stay below 2**31 elements.
_INT32_LIMIT = 2**31


#: True under Triton's interpreter (no GPU compile; CPU tensors).
INTERPRETED: bool = not isinstance(quant_matmul_kernel, JITFunction)


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
    group = group_of(q, s)
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
    kernel = quant_matmul_kernel[(tiles, SPLIT_K)]
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
    kernel = quant_matmul_kernel.warmup(
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
