"""The shared correctness gate: what it lets through and what it catches."""

from __future__ import annotations

import pytest
import torch

from autotune.correctness import check_close
from autotune.failures import WrongResult
from autotune.kernels.attention_triton import _offset_bound, reference_attention


def test_rounding_of_outputs_of_uneven_magnitude_passes():
    # Found on the H200: causal attention at S=4096 makes rows that see one key (|out| ~ 1)
    # next to rows that average thousands (|out| ~ 0.02), so RMS(out) is small and the bf16
    # rounding of the large elements alone was 0.13 x RMS, over a bound in RMS units only.
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, 4096, 16, generator=gen) for _ in range(3))
    ref = reference_attention(q, k, v, causal=True)
    rounded = ref.to(torch.bfloat16)  # what a perfect bf16 kernel returns
    errors = check_close(rounded, ref, tolerance=1e-2)
    assert errors["max_error_rms"] > 0.1  # the old bound would have failed a perfect kernel


def test_one_element_far_off_still_fails():
    gen = torch.Generator().manual_seed(1)
    ref = torch.randn(64, 64, generator=gen)
    out = ref.clone()
    rms = float(ref.norm()) / 64
    out[3, 5] = ref[3, 5] + 0.5 * rms + 0.02 * abs(float(ref[3, 5]))  # past both allowances
    with pytest.raises(WrongResult, match="largest element error"):
        check_close(out, ref, tolerance=1e-2)


def test_attention_offsets_are_bounded_by_the_sequence_not_every_dimension():
    # Found on the H200: padding every dimension by a block refused (1, 32, 4096, 128)
    q = torch.empty(1, 32, 4096, 128, device="meta")
    assert _offset_bound(q, 128) == 31 * 4096 * 128 + (4095 + 128) * 128 + 127
    assert _offset_bound(torch.empty(1, 32, 16384, 128, device="meta"), 128) < 2**31
