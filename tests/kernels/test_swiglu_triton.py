"""The fused SwiGLU gate (compiled on a GPU, Triton's interpreter on CPU) against torch's
silu and product, over the engine's block layout."""

import pytest
import torch

from autotune.kernels.swiglu_triton import BLOCK_COLUMNS, reference_silu_mul, silu_mul

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(
    "tokens, blocks, block", [(1, 2, 8), (3, 3, 40), (2, 1, BLOCK_COLUMNS + 24)]
)
def test_the_gate_matches_torchs_silu_times_up(dtype, tokens, blocks, block):
    """Blocks wider and narrower than a program's columns; 40 and 1048 are not powers of 2."""
    g = torch.randn(tokens, 2 * blocks * block, generator=torch.Generator().manual_seed(0))
    g = g.to(dtype).to(DEVICE)
    y = silu_mul(g, block).cpu()
    ref = reference_silu_mul(g.cpu().float(), block)
    assert y.dtype == dtype and y.shape == (tokens, blocks * block)
    tolerance = 1e-6 if dtype == torch.float32 else 1e-2 * ref.abs().max()
    assert (y.float() - ref).abs().max() <= tolerance


def test_a_gate_up_row_that_is_not_whole_blocks_is_refused():
    with pytest.raises(ValueError, match="blocks of 2 x 8"):
        silu_mul(torch.randn(2, 24), block=8)
    with pytest.raises(ValueError, match="unit column stride"):
        silu_mul(torch.randn(32, 2).t(), block=8)


def test_no_tokens_gives_an_empty_result():
    assert silu_mul(torch.randn(0, 32), block=8).shape == (0, 16)
