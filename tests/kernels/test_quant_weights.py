"""The weights' format of the quantized matmul: quantizers, nibble packing, dequantization
(plain torch on the CPU)."""

import pytest
import torch

from autotune.kernels import quant_weights as qw


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(dtype)


def _expanded_scales(q: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    group = qw.group_size(qw.level_of(q, s))
    K = 2 * q.shape[0] if group else q.shape[0]
    return s.float().repeat_interleave(group or K, dim=0)  # (K, N): each weight's step


@pytest.mark.parametrize("level", list(qw.LEVELS))
def test_quantizers_round_trip_within_half_a_step(level):
    w = _randn(256, 40, seed=1, dtype=torch.bfloat16)
    q, s = qw.quantize(w, level)
    assert qw.level_of(q, s) == level and s.dtype == torch.float16
    assert q.shape == ((256, 40) if level == "int8" else (128, 40))
    step = _expanded_scales(q, s)
    err = (qw.dequantize(q, s) - w.float()).abs()
    # round to nearest: at most half a step (an fp16 scale rounded down may clamp the largest
    # weight, by 127 * 2^-11 of a step at most)
    assert bool((err <= 0.5 * step * 1.01).all())
    # the steps are max|w| / 127 per column, or max|w| / 7 per group of rows
    group = qw.group_size(level)
    amax = w.float().abs().reshape(-1, group or 256, 40).amax(dim=1)
    torch.testing.assert_close(s.float(), amax / (7 if group else 127), rtol=2**-10, atol=0)


def test_int4_round_trip_is_exact_on_its_own_grid():
    # weights that are already multiples of the step come back unchanged
    s = torch.tensor([[0.5, 2.0], [0.25, 1.0]])
    q = torch.tensor([[7, -7], [-3, 0], [1, 2], [-7, 7]])  # two groups of 2 rows
    w = q.float() * s.repeat_interleave(2, dim=0)
    packed, scales = qw.quantize_int4(w, group=2)
    assert torch.equal(qw.unpack_int4(packed), q.to(torch.int8))
    assert torch.equal(qw.dequantize(packed, scales), w)


def test_nibbles_pack_two_rows_to_a_byte_and_unpack_back():
    values = torch.arange(-8, 8).reshape(16, 1).repeat(1, 3)  # every int4 value, 3 columns
    packed = qw.pack_int4(values)
    assert packed.shape == (8, 3) and packed.dtype == torch.uint8
    # byte[k2] = (q[2 k2] + 8) | (q[2 k2 + 1] + 8) << 4: rows (-8, -7) -> 0 | 1 << 4 = 16
    assert packed[:, 0].tolist() == [(2 * j) | (2 * j + 1) << 4 for j in range(8)]
    assert torch.equal(qw.unpack_int4(packed), values.to(torch.int8))
    with pytest.raises(ValueError, match=r"\[-8, 7\]"):
        qw.pack_int4(torch.tensor([[8], [0]]))
    with pytest.raises(ValueError, match="K even"):
        qw.pack_int4(torch.zeros(3, 2, dtype=torch.int8))


def test_scales_that_do_not_fit_the_weights_are_refused():
    q, s = qw.quantize(torch.ones(256, 8), "int4-g128")
    with pytest.raises(ValueError, match="do not fit"):
        qw.level_of(q, s[:, :4])
    with pytest.raises(ValueError, match="int8 scales must be"):
        qw.level_of(torch.zeros(4, 8, dtype=torch.int8), torch.ones(2, 8))
    with pytest.raises(ValueError, match="must be one of"):
        qw.quantize(torch.ones(4, 4), "int3")
