"""The streamed bf16 decode product the GPU scripts compare kernels on (`split_k_stream.py`,
`skinny_stream_k.py`): input sets spanning four L2 caches, as the objective streams them,
an output per set, cuBLAS and a copy of B as candidates over the sets, and cuBLAS's result
on the first set as the reference.

Example (a script's body on the GPU machine):
    problem = StreamedProduct.make(16, 4096, 4096, l2_bytes)
    fns = {**problem.baselines(), "mine": [launcher(a, b, c) for (a, b), c in problem.pairs()]}
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from autotune.objectives.kernel import input_sets


@dataclass
class StreamedProduct:
    """``inputs`` (A, B) per set, ``outs`` (one C per set), ``copies`` (one B-sized target a
    set), ``ref`` (cuBLAS's C of the first set, float32), ``footprint`` (bytes a launch reads
    and writes)."""

    inputs: list[tuple[torch.Tensor, torch.Tensor]]
    outs: list[torch.Tensor]
    copies: list[torch.Tensor]
    ref: torch.Tensor
    footprint: int

    @classmethod
    def make(cls, M: int, N: int, K: int, l2_bytes: int) -> StreamedProduct:
        footprint = 2 * (M * K + K * N + M * N)
        sets = input_sets(footprint, l2_bytes)
        gen = torch.Generator(device="cuda").manual_seed(M)
        inputs = [(torch.randn(M, K, generator=gen, device="cuda").bfloat16(),
                   torch.randn(K, N, generator=gen, device="cuda").bfloat16())
                  for _ in range(sets)]  # fmt: skip
        outs = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
        copies = [torch.empty_like(b) for _, b in inputs]
        return cls(inputs, outs, copies, torch.matmul(*inputs[0]).float(), footprint)

    def pairs(self) -> list[tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]]:
        """((A, B), C) per set."""
        return list(zip(self.inputs, self.outs, strict=True))

    def baselines(self) -> dict[str, list[Callable[[], object]]]:
        """cuBLAS into each set's C, and a copy of each set's B."""
        return {
            "cublas": [lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)
                       for (a, b), c in self.pairs()],
            "copy": [lambda b=b, d=d: d.copy_(b)
                     for (_, b), d in zip(self.inputs, self.copies, strict=True)],
        }  # fmt: skip
