"""The fused attention forward against its float64 reference, under Triton's interpreter on the
CPU (compiled on a GPU machine): real runs, fresh random inputs, no mocks."""

import pytest
import torch

from autotune.correctness import TOLERANCE, check_close
from autotune.kernels import attention_triton as at

DEVICE = "cpu" if at.INTERPRETED else "cuda"
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _qkv(B, H, H_KV, S, D, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    shapes = ((B, H, S, D), (B, H_KV, S, D), (B, H_KV, S, D))
    return [torch.randn(s, generator=gen).to(DTYPES[dtype]).to(DEVICE) for s in shapes]


@pytest.mark.parametrize("tma", [0, 1])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize(
    ("H", "H_KV", "S", "D", "BLOCK_M", "BLOCK_N"),
    [
        (4, 2, 64, 32, 16, 16),  # grouped-query, S a multiple of the blocks: no masking
        (4, 2, 40, 64, 16, 16),  # S=40 with 16-blocks: ragged last query and key blocks
        (2, 2, 64, 64, 32, 16),  # multi-head; BLOCK_N < BLOCK_M: several diagonal blocks
        (2, 1, 48, 32, 16, 32),  # multi-query; BLOCK_N > BLOCK_M, ragged key block
        (1, 1, 1, 32, 16, 16),  # a single token
    ],
)
def test_matches_the_reference(H, H_KV, S, D, BLOCK_M, BLOCK_N, causal, dtype, tma):
    # tma=1: q, k, v and out through tensor descriptors over (B*H, S, D); a ragged S then
    # relies on the descriptor's zero fill and clipped store, which these S=40/48 cases check
    q, k, v = _qkv(2, H, H_KV, S, D, dtype, seed=S * D + H)
    out = torch.full_like(q, float("nan"))  # a row the kernel skips stays NaN and fails
    run = at.launcher(q, k, v, out, causal=causal, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,
                      num_warps=4, num_stages=1, TMA=tma)  # fmt: skip
    run()
    ref = at.reference_attention(q, k, v, causal)
    check_close(out, ref, tolerance=TOLERANCE[dtype])


def test_causal_and_full_attention_differ_and_the_scale_is_applied():
    q, k, v = _qkv(1, 2, 1, 32, 32, "fp16", seed=1)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    causal = at.attention(q, k, v, causal=True, **cfg)
    full = at.attention(q, k, v, causal=False, **cfg)
    assert not torch.allclose(causal.float(), full.float(), atol=1e-2)
    # the first query sees only the first key: its output is that key's value row
    torch.testing.assert_close(causal[:, :, 0], v[:, [0, 0], 0])
    scaled = at.attention(q, k, v, causal=False, sm_scale=0.5, **cfg)
    ref = at.reference_attention(q, k, v, False, sm_scale=0.5)
    check_close(scaled, ref, tolerance=TOLERANCE["fp16"])


def test_the_tma_path_writes_no_row_of_a_neighbouring_head():
    # S=40 in 32-row blocks: the second block of head 0 overhangs into head 1's rows of the
    # flattened (B*H, S, D) view; the descriptor clips the store at S, so head 1 keeps what the
    # kernel wrote for it, and a sentinel past the tensor (a larger buffer) stays untouched
    q, k, v = _qkv(1, 2, 2, 40, 32, "bf16", seed=4)
    buffer = torch.full((3, 40, 32), 7.0, dtype=q.dtype, device=q.device)
    out = buffer[:2].view(1, 2, 40, 32)
    at.launcher(q, k, v, out, causal=False, BLOCK_M=32, BLOCK_N=16, num_warps=4,
                num_stages=1, TMA=1)()  # fmt: skip
    check_close(out, at.reference_attention(q, k, v, False), tolerance=TOLERANCE["bf16"])
    assert bool((buffer[2] == 7.0).all())


def test_the_tma_path_refuses_layouts_a_descriptor_cannot_address():
    q, k, v = _qkv(2, 2, 2, 16, 32, "bf16", seed=5)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1, "TMA": 1}
    # (B, S, H, D) memory seen as (B, H, S, D): B's stride is not H times H's
    seq_major = torch.randn(2, 16, 2, 32).to(torch.bfloat16).to(q.device).transpose(1, 2)
    with pytest.raises(ValueError, match="one stride pattern"):
        at.attention(seq_major, k, v, causal=True, **cfg)
    with pytest.raises(ValueError, match="TMA=2 must be 0 or 1"):
        at.check_config(**{**cfg, "TMA": 2})
    with pytest.raises(ValueError, match="sm_scale=0.0 must be > 0"):
        at.attention(q, k, v, causal=True, sm_scale=0.0, **cfg)


def test_the_chunked_float32_reference_matches_the_float64_one():
    q, k, v = _qkv(1, 4, 2, 40, 32, "bf16", seed=2)
    exact = at.reference_attention(q, k, v, True)
    chunked = at.reference_attention(q, k, v, True, dtype=torch.float32, max_scores=4 * 40 * 7)
    check_close(chunked, exact, tolerance=1e-5)


def test_inexpressible_configs_and_operands_are_refused():
    with pytest.raises(ValueError, match="BLOCK_M=48 must be a power of two"):
        at.check_config(BLOCK_M=48, BLOCK_N=16, num_warps=4, num_stages=1)
    with pytest.raises(ValueError, match="BLOCK_N=8"):
        at.check_config(BLOCK_M=16, BLOCK_N=8, num_warps=4, num_stages=1)
    with pytest.raises(ValueError, match="num_stages"):
        at.check_config(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=0)
    cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1}
    q, k, v = _qkv(1, 3, 2, 16, 32, "bf16", seed=3)
    with pytest.raises(ValueError, match="H % H_KV"):
        at.attention(q, k, v, causal=True, **cfg)
    q, k, v = _qkv(1, 2, 1, 16, 48, "bf16", seed=3)
    with pytest.raises(ValueError, match="head dim D=48"):
        at.attention(q, k, v, causal=True, **cfg)
    with pytest.raises(ValueError, match="head dim"):
        at.compile_only(1, 2, 1, 16, 48, "bf16", True, **cfg)
