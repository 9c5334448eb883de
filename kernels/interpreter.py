"""Switch Triton to its interpreter on a machine without CUDA: import this before ``triton``;
and the checks every kernel module shares (shared memory, powers of two).

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


#: the SMs a kernel's launch plan assumes without a GPU (an H200's 132): the interpreter then
#: takes the same tiles and K-splits as the device it stands for
EMULATED_SMS = 132


def sm_count(device: torch.device | int | None = None) -> int:
    """Streaming multiprocessors of ``device`` (default: the current CUDA device), or
    :data:`EMULATED_SMS` without CUDA; launch plans size their grids by it.

    Example:
        >>> sm_count() == (torch.cuda.get_device_properties(0).multi_processor_count
        ...                if cuda_present() else EMULATED_SMS)
        True
    """
    if not cuda_present() or os.environ.get("TRITON_INTERPRET") == "1":
        return EMULATED_SMS
    if device is None:
        device = torch.cuda.current_device()
    return int(torch.cuda.get_device_properties(device).multi_processor_count)


def is_pow2(x: int) -> bool:
    """True for 1, 2, 4, 8, ... (tile sizes and warp counts must be)."""
    return x > 0 and x & (x - 1) == 0


def pow2_at_least(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for n <= 1), e.g. ``pow2_at_least(48) == 64``."""
    return 1 << max(0, n - 1).bit_length()


def check_shared_memory(kernel: object) -> None:
    """Raise Triton's ``OutOfResources`` when a compiled kernel needs more shared memory than the
    current device has: the test Triton makes when it first loads a kernel, made without
    loading it (so that compiling ahead finds it)."""
    from triton.runtime import driver
    from triton.runtime.errors import OutOfResources

    shared = getattr(getattr(kernel, "metadata", None), "shared", None)
    if shared is None:
        return
    device = driver.active.get_current_device()
    limit = driver.active.utils.get_device_properties(device)["max_shared_mem"]
    if shared > limit:
        raise OutOfResources(shared, limit, "shared memory")
