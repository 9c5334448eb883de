"""SwiGLU's gate in one Triton launch: ``silu(gate) * up`` over the MLP's fused projection.

The serving engine's MLP projects ``normed`` through one ``gate_up`` weight whose output
columns come in blocks of ``block`` gate columns followed by ``block`` up columns (the layout
of :class:`~autotune.kernels.llama.SwiGLU`). In torch the gate is a SiLU kernel and a product
kernel, each reading and writing the activations; this kernel reads each gate/up pair once
and writes the product: at decode batch 1, one launch a layer instead of two. The product is
formed in fp32 and rounded once.

Without a GPU the kernel runs under Triton's interpreter on torch CPU tensors.

Example:
    >>> import torch
    >>> g = torch.randn(3, 2 * 2 * 4)  # 3 tokens, 2 blocks of 4 gate + 4 up columns
    >>> y = silu_mul(g, block=4)
    >>> ref = reference_silu_mul(g, block=4)
    >>> y.shape, bool((y - ref).abs().max() < 1e-6)
    (torch.Size([3, 8]), True)
"""

from __future__ import annotations

import torch

from autotune.kernels import interpreter  # noqa: F401 - before triton, on purpose

# isort: split
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

#: output columns a program writes
BLOCK_COLUMNS = 1024


@triton.jit
def _silu_mul_kernel(
    g_ptr, y_ptr, F, SWIGLU_BLOCK, stride_g, stride_y, BLOCK: tl.constexpr,
):  # fmt: skip
    token = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)  # output columns
    mask = cols < F
    # output column j is gate column (j // block) * 2 block + j % block; its up is block after
    gate_at = (cols // SWIGLU_BLOCK) * 2 * SWIGLU_BLOCK + cols % SWIGLU_BLOCK
    gate = tl.load(g_ptr + token * stride_g + gate_at, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(g_ptr + token * stride_g + gate_at + SWIGLU_BLOCK, mask=mask, other=0.0)
    y = gate / (1.0 + tl.exp(-gate)) * up.to(tl.float32)
    tl.store(y_ptr + token * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def silu_mul(g: torch.Tensor, block: int) -> torch.Tensor:
    """``silu(gate) * up`` of ``g`` (tokens, 2 F) laid out in blocks of ``block`` gate then
    ``block`` up columns: (tokens, F) in g's dtype."""
    if g.ndim != 2 or g.stride(1) != 1 or g.shape[1] % (2 * block):
        raise ValueError(f"g must be (tokens, 2F) with unit column stride, in blocks of 2 x "
                         f"{block}; got {tuple(g.shape)}")  # fmt: skip
    tokens, features = g.shape[0], g.shape[1] // 2
    y = torch.empty(tokens, features, dtype=g.dtype, device=g.device)
    if tokens:
        grid = (tokens, triton.cdiv(features, BLOCK_COLUMNS))
        _silu_mul_kernel[grid](g, y, features, block, g.stride(0), y.stride(0),
                               BLOCK=BLOCK_COLUMNS, num_warps=4)  # fmt: skip
    return y


def reference_silu_mul(g: torch.Tensor, block: int) -> torch.Tensor:
    """The same in torch: the engine's unfused path."""
    pairs = g.view(*g.shape[:-1], -1, 2, block)
    return (torch.nn.functional.silu(pairs[..., 0, :]) * pairs[..., 1, :]).flatten(-2)
