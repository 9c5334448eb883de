"""The correctness gate every kernel objective shares: a result is compared with a reference
computed in higher precision before anything is timed, and outputs are poisoned before a run so
that a kernel that writes nothing cannot pass on stale data.

Two figures, both in units a person can check: the relative Frobenius error
``||out - ref|| / ||ref||`` and the largest single-element error in units of ``RMS(ref)``.
An element may be off by ``element_factor * tolerance`` of ``RMS(ref)`` plus ``tolerance`` of
its own magnitude: rounding to the output dtype is relative to each element, and outputs of
uneven magnitude (attention rows that see one key next to rows that average thousands) put
elements far above the RMS whose rounding alone exceeds a bound in RMS units.

Example:
    >>> import torch
    >>> ref = torch.tensor([[3.0, 4.0]])
    >>> check_close(ref.half(), ref, tolerance=2e-3)
    {'rel_error': 0.0, 'max_error_rms': 0.0}
    >>> check_close(torch.tensor([[3.0, 3.0]]), ref, tolerance=2e-3)  # ||(0, 1)|| / 5 = 0.2
    Traceback (most recent call last):
    ...
    autotune.failures.WrongResult: relative error 0.2 (limit 0.002), largest element error ...
"""

from __future__ import annotations

import math
from typing import Any

from autotune.failures import WrongResult

#: The largest single-element error may be this many times the tolerance, in units of RMS(ref):
#: bf16 rounds by at most 2^-8 relative (2^-7 under the interpreter, which truncates), and the
#: largest |ref| of 16M Gaussian entries is ~5.5 RMS: 5.5 * 2^-7 = 0.043 < 10 * 1e-2.
ELEMENT_FACTOR = 10.0
#: Relative tolerance by output dtype: rounding an fp32 result to bf16 (8 significant bits)
#: alone gives about 1e-3, to fp16 (11 bits) about 1.5e-4; a dropped 64-slab of K=4096 in a
#: matmul gives sqrt(64/4096) = 0.125, far above either.
TOLERANCE: dict[str, float] = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5}


def poison(*tensors: Any) -> None:
    """Fill outputs with NaN before a run (a kernel that skips a tile then fails the gate)."""
    for tensor in tensors:
        tensor.fill_(float("nan"))


def check_close(
    out: Any, ref: Any, *, tolerance: float, element_factor: float = ELEMENT_FACTOR
) -> dict[str, float]:
    """Compare ``out`` with ``ref`` (float32 or better); return the error figures.

    Raises:
        WrongResult: a shape mismatch, NaN/inf in ``out``, a relative error above
            ``tolerance``, or one element off by more than ``element_factor * tolerance``
            times RMS(ref).
    """
    if tuple(out.shape) != tuple(ref.shape):
        raise WrongResult(f"result shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.numel() == 0:
        return {"rel_error": 0.0, "max_error_rms": 0.0}
    import torch

    out32, ref32 = out.float(), ref.float()
    finite = torch.isfinite(out32)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise WrongResult(f"{bad} of {out.numel()} outputs are NaN or inf")
    diff = out32 - ref32
    ref_norm, diff_norm = float(ref32.norm()), float(diff.norm())
    # RMS(ref) = ||ref|| / sqrt(numel); with an all-zero reference, compare absolute errors
    rms = ref_norm / math.sqrt(ref.numel()) or 1.0
    rel = diff_norm / ref_norm if ref_norm else diff_norm
    max_err = float(diff.abs().max()) / rms
    # per element: element_factor * tolerance * RMS(ref) + tolerance * |ref|
    excess = diff.abs() - element_factor * tolerance * rms - tolerance * ref32.abs()
    if rel > tolerance or bool((excess > 0).any()):
        raise WrongResult(
            f"relative error {rel:.3g} (limit {tolerance:g}), largest element error "
            f"{max_err:.3g} x RMS(ref) (limit {element_factor * tolerance:g} + {tolerance:g} "
            "of the element)"
        )
    return {"rel_error": rel, "max_error_rms": max_err}
