"""What the GPU scripts timing a serving engine's linears share (``decode_rows_ptx.py``,
``int4_decode_tiles.py``, ``decode_tile_heldout.py``, ``int4_scales_ahead.py``): a model
preset's linear shapes, an int4 linear's inputs with cuBLAS beside it, cuBLAS over distinct
weights, launchers run back to back, and rotated rounds of Triton's ``do_bench_cudagraph``.
Each figure is one CUDA graph of a linear over distinct copies of its weights (a decode step
reads each layer's once, so nothing stays in L2), in microseconds a linear; every run is
measured once a round, in an order rotated round to round.

Example:
    >>> preset_linears("125m")["gate_up"]  # (N, K): d_model 768 -> 2 x 2048
    (4096, 768)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from triton.testing import do_bench_cudagraph

from autotune.kernels import quant_matmul_triton as qm
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import _kernel_level
from autotune.objectives.train_step import MODEL_PRESETS


def preset_linears(model: str) -> dict[str, tuple[int, int]]:
    """A preset's four decoder linears as (N, K) (an nn.Linear's weight shape)."""
    block = Llama(LlamaConfig(**{**MODEL_PRESETS[model], "n_layers": 1})).blocks[0]
    return {name: tuple(lin.weight.shape) for name, lin in (
        ("qkv", block.attn.qkv), ("out", block.attn.out), ("gate_up", block.mlp.gate_up),
        ("down", block.mlp.down))}  # fmt: skip


def _dense(x: torch.Tensor, weights: list[torch.Tensor], y: torch.Tensor) -> None:
    for w in weights:
        torch.matmul(x, w.t(), out=y)


def dense_run(x: torch.Tensor, weights: list[torch.Tensor], y: torch.Tensor) -> Callable[[], None]:
    """bf16 cuBLAS (``x @ w.t()``, the engine's bf16 path) over each of ``weights`` in turn."""
    return functools.partial(_dense, x, weights, y)


@dataclass
class Int4Linear:
    """One int4 linear's inputs, as the engine quantizes them, and the runs to time beside it:
    ``runs`` starts with bf16 cuBLAS over distinct copies of the bf16 weight; :meth:`add`
    puts a kernel config's launches (over distinct copies of ``q``, ``s``) beside it."""

    N: int
    K: int
    rows: int
    layer_bytes: float = 256e6
    device: str = "cuda"
    runs: dict[str, Callable[[], None]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        N, K, rows, dev = self.N, self.K, self.rows, self.device
        self.level = _kernel_level("int4", K)
        gen = torch.Generator(device=dev).manual_seed(0)
        w = torch.randn(N, K, device=dev, dtype=torch.bfloat16, generator=gen) / K**0.5
        self.x = torch.randn(rows, K, device=dev, dtype=torch.bfloat16, generator=gen)
        self.y = torch.empty(rows, N, device=dev, dtype=torch.bfloat16)
        self.q, self.s = qm.quantize(w.t(), self.level)
        self.ref = qm.reference_quant_matmul(self.x, self.q, self.s)
        self.copies = max(2, int(self.layer_bytes // qm.weight_bytes(self.q, self.s)))
        self.qs = [(self.q.clone(), self.s.clone()) for _ in range(self.copies)]
        dense = [w.clone() for _ in range(max(2, int(self.layer_bytes // (N * K * 2))))]
        self.runs["cublas bf16"] = dense_run(self.x, dense, self.y)
        self.counts["cublas bf16"] = len(dense)
        self.counters = qm.tile_counters(N, rows=1, device=dev)

    def error(self, config: dict) -> float:
        """The kernel's relative error against the dequantized reference at ``config``."""
        got = qm.quant_matmul(self.x, self.q, self.s, counters=self.counters, **config)
        return ((got.float() - self.ref).norm() / self.ref.norm()).item()

    def add(self, key: str, config: dict) -> None:
        launches = [qm.launcher(self.x, q, s, self.y, counters=self.counters, **config)
                    for q, s in self.qs]  # fmt: skip
        self.runs[key] = launch_all(launches)
        self.counts[key] = self.copies


def _launch_all(launches: list[Callable[[], None]]) -> None:
    for run in launches:
        run()


def launch_all(launches: list[Callable[[], None]]) -> Callable[[], None]:
    """One callable running ``launches`` back to back (one per weight copy)."""
    return functools.partial(_launch_all, launches)


def rotated_rounds(
    runs: dict[str, Callable[[], None]], copies: dict[str, int], keys: list[str], rounds: int
) -> dict[str, list[float]]:
    """Microseconds a linear of each of ``keys``: one reading a round, rotated round to round
    (the runs' graphs cover ``copies[key]`` linears each)."""
    times: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(rounds):
        shift = r * len(keys) // max(1, rounds)
        for key in keys[shift:] + keys[:shift]:
            times[key].append(do_bench_cudagraph(runs[key], rep=40) * 1e3 / copies[key])
    return times
