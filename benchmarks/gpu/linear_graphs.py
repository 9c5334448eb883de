"""What the GPU scripts timing a serving engine's linears share (``decode_rows_ptx.py``,
``int4_decode_tiles.py``, ``decode_tile_heldout.py``): a model preset's linear shapes, cuBLAS
over distinct weights, launchers run back to back, and rotated rounds of Triton's
``do_bench_cudagraph``. Each figure is one CUDA graph of a linear over distinct copies of its
weights (a decode step reads each layer's once, so nothing stays in L2), in microseconds a
linear; every run is measured once a round, in an order rotated round to round.

Example:
    >>> preset_linears("125m")["gate_up"]  # (N, K): d_model 768 -> 2 x 2048
    (4096, 768)
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from triton.testing import do_bench_cudagraph

from autotune.kernels.llama import Llama, LlamaConfig
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
