"""The host set-up that Triton's in-kernel tensor descriptors need, shared by the kernels that
make them (the persistent matmul, attention with ``TMA=1``).

A kernel that makes a descriptor (``tl.make_tensor_descriptor``) asks, at each launch, for a
global scratch buffer to hold it; Triton takes that buffer from the process's allocator, which
:func:`ensure_allocator` sets once to torch's caching allocator (cheap after the first launch).
The interpreter allocates nothing, so a caller running under it need not call this.

Example:
    >>> import torch
    >>> if torch.cuda.is_available():
    ...     ensure_allocator()  # idempotent
    >>> has_tma("cpu")
    False
"""

from __future__ import annotations

from typing import Any

import torch
import triton

_SET = False
#: the first compute capability with the tensor memory accelerator (Hopper)
TMA_MIN_MAJOR = 9


def has_tma(device: str = "cuda") -> bool:
    """Whether ``device`` ("cuda": the current GPU) has the tensor memory accelerator that
    tensor descriptors load through (compute capability 9.0+); False on a CPU, where the
    interpreter takes TMA code paths too but nothing favours them."""
    return device == "cuda" and torch.cuda.get_device_capability()[0] >= TMA_MIN_MAJOR


def ensure_allocator() -> None:
    """Give Triton torch's CUDA allocator for descriptor scratch space, once per process."""
    global _SET
    if _SET:
        return

    def alloc(size: int, alignment: int, stream: Any) -> torch.Tensor:
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)
    _SET = True
