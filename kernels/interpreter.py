"""Switch Triton to its interpreter on a machine without CUDA: import this before ``triton``.

Triton reads ``TRITON_INTERPRET`` when ``@triton.jit`` runs, so a kernel module imports this
first (see ``matmul_triton``'s docstring for why the order matters); an explicit
``TRITON_INTERPRET=0`` is respected.

Example:
    >>> import os
    >>> cuda_present() or os.environ.get("TRITON_INTERPRET") == "1"
    True
"""

from __future__ import annotations

import os

import torch


def cuda_present() -> bool:
    """True when a CUDA device is visible (asked of NVML when it can: no CUDA context)."""
    return torch.cuda.device_count() > 0


if not cuda_present():
    os.environ.setdefault("TRITON_INTERPRET", "1")
