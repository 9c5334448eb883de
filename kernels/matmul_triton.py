"""Triton matmul ``C = A @ B`` (bf16/fp16 in, fp32 accumulation, result in the input dtype):
the config check, the resource model, the launch plan and the API. The kernels live in
:mod:`~autotune.kernels.matmul_tiled` (a program per tile, and split-K) and
:mod:`~autotune.kernels.matmul_persistent` (a program per SM over TMA descriptors, and stream-K).

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
@triton.jit'd outside of the scope of a kernel"). The tiled kernel calls builtins only, so it
runs under the interpreter whatever the import order; other kernels need the variable set before
the process first imports ``triton``. ``num_warps``/``num_stages`` are ignored by the
interpreter, and ``compile_only`` has nothing to compile there.

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
from triton.runtime.jit import JITFunction  # noqa: E402

from autotune.kernels import split_k_workspace, tma  # noqa: E402
from autotune.kernels.interpreter import (  # noqa: E402
    check_shared_memory,
    is_pow2,
    pow2_at_least,
    sm_count,
)
from autotune.kernels.matmul_persistent import (  # noqa: E402
    matmul_persistent_kernel,
    matmul_stream_k_kernel,
)
from autotune.kernels.matmul_tiled import (  # noqa: E402
    matmul_split_k_kernel,
    matmul_tiled_kernel,
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


#: True when the kernel runs under Triton's interpreter (no GPU compile, CPU tensors). Read off the
#: decorated kernel itself: @triton.jit returns an InterpretedFunction instead of a JITFunction.
INTERPRETED: bool = not isinstance(matmul_tiled_kernel, JITFunction)


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
        >>> c = default_config(128, 64, 16, sms=132)  # the tutorial's tile, cut to the product
        >>> c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"]
        (128, 64, 32)
        >>> c = default_config(64, 4096, 4096, sms=132)  # 128 tiles: no split
        >>> c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["SPLIT_K"], c["num_stages"]
        (64, 32, 128, 1, 6)
    """
    if sms is None:
        sms = sm_count()  # an H200's 132 under the interpreter: a CPU sweep starts there too
    if M > DECODE_M:
        config = dict(WIDE_CONFIG if _grid_size(M, N, 128, 256) >= sms else DEFAULT_CONFIG)
        # a product narrower or shallower than the tile gets a tile no larger than it, as the
        # space's tile_fits_* constraints ask (128x64x64 broke tile_fits_n: no trial 0 ran)
        config["BLOCK_N"] = min(int(config["BLOCK_N"]), max(32, pow2_at_least(N)))
        config["BLOCK_K"] = min(int(config["BLOCK_K"]), max(32, pow2_at_least(K)))
        return config
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
            return _Plan(matmul_stream_k_kernel, (programs,), args, {**constexprs, **launch}, 5,
                         workspace)  # fmt: skip
        constexprs["FLATTEN"] = cfg["SCHEDULE"] == "persistent_flat"
        return _Plan(matmul_persistent_kernel, (programs,), args, {**constexprs, **launch}, 3)
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
        grid = (_grid_size(M, N, BM, BN),)
        return _Plan(matmul_tiled_kernel, grid, args, {**constexprs, **launch}, 3)
    constexprs = {**meta, "SPLIT_K": split_k, "EVEN_K": K % cfg["BLOCK_K"] == 0, "UPCAST": upcast,
                  **hints}  # fmt: skip
    grid = (_grid_size(M, N, BM, BN), split_k)
    workspace = (split_k * M * N, grid[0])
    return _Plan(matmul_split_k_kernel, grid, args, {**constexprs, **launch}, 5, workspace)


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
