"""Fused RMSNorm (optionally with the residual add before it), in Triton.

``y = x / sqrt(mean(x**2) + eps) * weight`` over the last dimension; with a residual,
``h = x + residual`` is written out too and normalised (the pre-norm block of a Llama layer:
one read of x and the residual, one write of h and y). Each program normalises ``ROWS`` rows;
a row is read in chunks of ``BLOCK_N`` columns: one pass when ``BLOCK_N >= N`` (the row stays
in registers), else two (the sum of squares, then the scaled write, re-reading the row).
``num_warps`` is the launch option. The module knows nothing about the tuner.

Without a GPU the kernel runs under Triton's interpreter on torch CPU tensors (importing this
module switches it on first, see ``interpreter``). It calls ``tl.sum``, one of Triton's own
``@jit`` helpers, so there the process must not have imported triton before the switch.

Example:
    >>> import torch
    >>> dev = "cuda" if torch.cuda.is_available() else "cpu"
    >>> x = torch.randn(5, 48, dtype=torch.bfloat16, device=dev)
    >>> w = torch.rand(48, dtype=torch.bfloat16, device=dev)
    >>> y = rmsnorm(x, w, BLOCK_N=16, ROWS=2, num_warps=1)
    >>> bool(((y.float() - reference_rmsnorm(x, w)[1]).norm() / y.float().norm()) < 1e-2)
    True
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autotune.kernels import interpreter  # noqa: F401 - before triton, on purpose

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

#: The tunables with an untuned but sensible value each (what the Triton tutorial's layer norm
#: picks for a 4096-wide row: the whole row in one block, 8 warps).
DEFAULT_CONFIG: dict[str, int] = {"BLOCK_N": 4096, "ROWS": 1, "num_warps": 8}
CONFIG_KEYS: tuple[str, ...] = tuple(DEFAULT_CONFIG)
DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}


@triton.jit
def _rmsnorm_kernel(
    x_ptr, res_ptr, h_ptr, w_ptr, y_ptr, M, N, eps,
    BLOCK_N: tl.constexpr, ROWS: tl.constexpr, ONE_PASS: tl.constexpr,
    RESIDUAL: tl.constexpr,
):  # fmt: skip
    for r in range(ROWS):
        row = tl.program_id(0) * ROWS + r
        if row < M:
            base = row * N
            if ONE_PASS:  # the whole row in registers: one read, one write
                cols = tl.arange(0, BLOCK_N)
                mask = cols < N
                x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
                if RESIDUAL:
                    x += tl.load(res_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
                    tl.store(h_ptr + base + cols, x.to(h_ptr.dtype.element_ty), mask=mask)
                scale = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)
                w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                tl.store(y_ptr + base + cols, (x * scale * w).to(y_ptr.dtype.element_ty), mask=mask)
            else:
                # pass 1: sum of squares in fp32, chunk by chunk (e.g. N=8192, BLOCK_N=2048:
                # four chunks); with a residual, h = x + residual is written on the way
                acc = tl.full((BLOCK_N,), 0.0, dtype=tl.float32)
                for start in range(0, N, BLOCK_N):
                    cols = start + tl.arange(0, BLOCK_N)
                    mask = cols < N
                    x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
                    if RESIDUAL:
                        x += tl.load(res_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
                        tl.store(h_ptr + base + cols, x.to(h_ptr.dtype.element_ty), mask=mask)
                    acc += x * x
                scale = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
                # pass 2: re-read the row (h with a residual) and write the scaled result
                src = h_ptr if RESIDUAL else x_ptr
                for start in range(0, N, BLOCK_N):
                    cols = start + tl.arange(0, BLOCK_N)
                    mask = cols < N
                    x = tl.load(src + base + cols, mask=mask, other=0.0).to(tl.float32)
                    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
                    y = (x * scale * w).to(y_ptr.dtype.element_ty)
                    tl.store(y_ptr + base + cols, y, mask=mask)


#: True under Triton's interpreter (no GPU compile; CPU tensors).
INTERPRETED: bool = not isinstance(_rmsnorm_kernel, JITFunction)


def check_config(BLOCK_N: int, ROWS: int, num_warps: int) -> None:
    """Raise ValueError for a config the kernel cannot express."""
    for name, value in (("BLOCK_N", BLOCK_N), ("ROWS", ROWS), ("num_warps", num_warps)):
        if value < 1 or value & (value - 1):
            raise ValueError(f"{name}={value} must be a power of two")
    if BLOCK_N > 65536:
        raise ValueError(f"BLOCK_N={BLOCK_N} exceeds Triton's 65536-element block limit")


def launcher(
    x: torch.Tensor,
    weight: torch.Tensor,
    y: torch.Tensor,
    *,
    residual: torch.Tensor | None = None,
    h: torch.Tensor | None = None,
    eps: float = 1e-6,
    BLOCK_N: int,
    ROWS: int,
    num_warps: int,
) -> Callable[[], None]:
    """A no-argument function that writes ``y`` (and ``h`` with a residual): one launch."""
    check_config(BLOCK_N, ROWS, num_warps)
    M, N = x.shape
    if not (x.is_contiguous() and y.is_contiguous() and weight.shape == (N,)):
        raise ValueError("x and y must be contiguous (M, N) and weight of shape (N,)")
    if (residual is None) != (h is None):
        raise ValueError("give both residual and h, or neither")
    grid = (triton.cdiv(M, ROWS),)
    one_pass = BLOCK_N >= N
    res, out_h = (residual, h) if residual is not None else (x, y)  # unused without RESIDUAL

    def run() -> None:
        _rmsnorm_kernel[grid](
            x, res, out_h, weight, y, M, N, eps, BLOCK_N=BLOCK_N, ROWS=ROWS,
            ONE_PASS=one_pass, RESIDUAL=residual is not None, num_warps=num_warps,
        )  # fmt: skip

    return run


def compile_only(
    M: int,
    N: int,
    dtype: torch.dtype,
    *,
    residual: bool,
    eps: float = 1e-6,
    BLOCK_N: int,
    ROWS: int,
    num_warps: int,
) -> object:
    """Compile the kernel for contiguous (M, N) rows of ``dtype`` without running it (Triton's
    ``warmup``: it lands in the on-disk cache where the launch finds it); None under the
    interpreter, which compiles nothing.

    Example:
        >>> k = compile_only(8, 64, torch.bfloat16, residual=True, **DEFAULT_CONFIG)
        >>> k is None if INTERPRETED else k.metadata.shared >= 0
        True
    """
    check_config(BLOCK_N, ROWS, num_warps)
    if INTERPRETED:
        return None
    return _rmsnorm_kernel.warmup(
        dtype, dtype, dtype, dtype, dtype, M, N, eps, BLOCK_N=BLOCK_N, ROWS=ROWS,
        ONE_PASS=BLOCK_N >= N, RESIDUAL=residual, num_warps=num_warps, grid=(1,),
    )  # fmt: skip


def rmsnorm(
    x: torch.Tensor, weight: torch.Tensor, *, eps: float = 1e-6, **config: int
) -> torch.Tensor:
    """RMSNorm of ``x`` (M, N) with ``weight`` (N,); ``config`` as :data:`DEFAULT_CONFIG`."""
    y = torch.empty_like(x)
    launcher(x, weight, y, eps=eps, **config)()
    return y


def reference_rmsnorm(
    x: torch.Tensor,
    weight: torch.Tensor,
    residual: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """(h, y) computed in float64 and returned in float32: the ground truth for the gate.

    Example:
        >>> h, y = reference_rmsnorm(torch.tensor([[3.0, 4.0]]), torch.ones(2), eps=0.0)
        >>> h is None, [round(v, 4) for v in y[0].tolist()]  # rms = sqrt(12.5)
        (True, [0.8485, 1.1314])
    """
    h = x.double() if residual is None else x.double() + residual.double()
    y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps) * weight.double()
    return (None if residual is None else h.float()), y.float()
