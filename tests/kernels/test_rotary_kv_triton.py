import pytest
import torch

from autotune.kernels.llama import apply_rotary
from autotune.kernels.rotary_kv_triton import rotary_kv


@pytest.mark.parametrize("heads,hd", [(2, 8), (3, 24), (1, 96)])
def test_matches_torchs_rotation_and_indexed_cache_write(heads, hd):
    torch.manual_seed(0)
    tokens, rows = 5, 12
    a = torch.randn(tokens, heads, 3, hd)
    angle = torch.rand(tokens, hd // 2) * 6
    cos, sin = angle.cos(), angle.sin()
    slots = torch.tensor([9, 0, 3, 11, 4])
    k_cache, v_cache = torch.zeros(rows, heads, hd), torch.zeros(rows, heads, hd)
    q = rotary_kv(a, cos, sin, slots, k_cache, v_cache)
    qk = apply_rotary(a[:, :, :2], cos[:, None, None, :], sin[:, None, None, :])
    torch.testing.assert_close(q, qk[:, :, 0])
    torch.testing.assert_close(k_cache[slots], qk[:, :, 1])
    assert torch.equal(v_cache[slots], a[:, :, 2])
    untouched = [r for r in range(rows) if r not in slots.tolist()]
    assert k_cache[untouched].abs().sum() == 0 and v_cache[untouched].abs().sum() == 0


def test_shapes_it_cannot_take_are_refused():
    a = torch.zeros(2, 1, 3, 7)  # odd head dim: no rotation pairs
    cache = torch.zeros(4, 1, 7)
    with pytest.raises(ValueError, match="even head_dim"):
        rotary_kv(a, torch.zeros(2, 3), torch.zeros(2, 3), torch.tensor([0, 1]), cache, cache)
