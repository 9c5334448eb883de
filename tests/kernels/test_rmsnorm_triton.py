"""The fused RMSNorm against its float64 reference, under Triton's interpreter on the CPU."""

import pytest
import torch

from autotune.correctness import TOLERANCE, check_close
from autotune.kernels.rmsnorm_triton import check_config, launcher, reference_rmsnorm, rmsnorm


@pytest.mark.parametrize(
    ("n", "block_n", "rows"),
    [(64, 64, 1), (96, 32, 2), (100, 128, 4), (130, 32, 3 - 1)],  # one pass, two, odd widths
)
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_matches_the_reference_with_and_without_residual(n, block_n, rows, dtype):
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    gen = torch.Generator().manual_seed(n)
    x, res = (torch.randn(7, n, generator=gen).to(torch_dtype) for _ in range(2))
    w = (1 + 0.1 * torch.randn(n, generator=gen)).to(torch_dtype)
    y = rmsnorm(x, w, BLOCK_N=block_n, ROWS=rows, num_warps=1)
    check_close(y, reference_rmsnorm(x, w)[1], tolerance=TOLERANCE[dtype])
    h, y = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    launcher(x, w, y, residual=res, h=h, BLOCK_N=block_n, ROWS=rows, num_warps=1)()
    ref_h, ref_y = reference_rmsnorm(x, w, res)
    check_close(h, ref_h, tolerance=TOLERANCE[dtype])
    check_close(y, ref_y, tolerance=TOLERANCE[dtype])


def test_a_config_the_kernel_cannot_express_is_refused():
    with pytest.raises(ValueError, match="power of two"):
        check_config(BLOCK_N=96, ROWS=1, num_warps=4)
    with pytest.raises(ValueError, match="65536"):
        check_config(BLOCK_N=131072, ROWS=1, num_warps=4)
