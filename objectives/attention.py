"""The ``attention`` objective: TFLOP/s of the fused attention forward, against torch SDPA.

A trial (the shared steps are :class:`~autotune.objectives.kernel.KernelObjective`'s) draws
fresh q, k, v, poisons the output, runs the config once and checks it against a reference,
then times the kernel interleaved with ``torch.nn.functional.scaled_dot_product_attention``
through each of its CUDA backends that accepts the input (flash, memory-efficient, cuDNN,
each probed once and dropped when it refuses; grouped-query natively where the backend can,
else on K/V heads repeated before timing) and through its default dispatch. The sampler sees
``ratio_to_sdpa``: the fastest of those backends' time over the kernel's, measured in the
same rounds. Under the interpreter (no GPU) the one reference is the math SDPA on the CPU.

The reference for the gate is float64 on the CPU; on a GPU a float64 reference of a large
problem is too slow, so it is computed there in float32 (TF32 off, in chunks of query rows
so memory stays bounded), whose error (~1e-6) is far below bf16's or fp16's tolerance.

Problem keys: ``B``, ``H`` (query heads), ``H_KV`` (key/value heads, dividing H), ``S``
(sequence length), ``D`` (head dim, a power of two in 16..256), ``causal``, ``dtype``.

Example:
    >>> obj = AttentionObjective({"B": 1, "H": 2, "H_KV": 1, "S": 40, "D": 32,
    ...                           "causal": True, "dtype": "bf16"})
    >>> m = obj.evaluate({"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 4, "num_stages": 1})
    >>> m.values["tflops"] > 0 and m.metrics["rel_error"] < 1e-2, m.metrics["fastest_sdpa"]
    (True, 'sdpa_math')
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.correctness import TOLERANCE, check_close
from autotune.kernels import attention_triton as kern
from autotune.kernels import tma
from autotune.objectives.kernel import KernelObjective, Tensors, check_dtype
from autotune.timing import Timing

#: The SDPA backends timed on a GPU, by reference name.
BACKENDS = {"sdpa_flash": SDPBackend.FLASH_ATTENTION,
            "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION,
            "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION}  # fmt: skip


class AttentionObjective(KernelObjective):
    """TFLOP/s of the fused attention forward and its ratio to the fastest torch SDPA."""

    name = "attention"
    space = "attention.yaml"
    directions = {"ratio_to_sdpa": "maximize", "tflops": "maximize"}
    problem_keys = ("B", "H", "H_KV", "S", "D", "causal", "dtype")
    outputs = ("out",)
    #: compute-bound launches of hundreds of microseconds, against SDPA backends (cuDNN
    #: among them) not all checked under CUDA-graph capture: timed with L2 flushed, one set
    streams = False
    baseline = "torch scaled_dot_product_attention, fastest backend that accepts the input"

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        dims = (int(self.problem[key]) for key in ("B", "H", "H_KV", "S", "D"))
        self.B, self.H, self.H_KV, self.S, self.D = dims
        B, H, H_KV, S, D = self.B, self.H, self.H_KV, self.S, self.D
        self.check_sizes({"B": B, "H": H, "H_KV": H_KV, "S": S}, B * S * D * (2 * H + 2 * H_KV))
        if H % H_KV:
            raise ValueError(f"H={H} must be a multiple of H_KV={H_KV}")
        if self.D not in (16, 32, 64, 128, 256):
            raise ValueError(f"head dim D={self.D} must be a power of two in 16..256")
        self.causal = bool(self.problem.get("causal", True))
        self.dtype_name = str(self.problem.get("dtype", "bf16"))
        check_dtype(self.dtype_name, kern.DTYPES)
        self.dtype = kern.DTYPES[self.dtype_name]
        self._gqa_modes: dict[str, bool] | None = None  # backend -> takes enable_gqa natively
        # tensor descriptors (TMA) by default where the GPU has the copy engine (Hopper, 9.0+)
        self.tma = tma.has_tma(self.device)

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """A Llama-3-8B layer's attention at 4k context on a GPU (32 query heads over 8 K/V
        heads, D=128); 2 heads of 64 x 32 under the CPU's interpreter (~0.1 s a trial)."""
        if device.get("type") == "cuda":
            return {"B": 1, "H": 32, "H_KV": 8, "S": 4096, "D": 128, "causal": True,
                    "dtype": "bf16"}  # fmt: skip
        return {"B": 1, "H": 2, "H_KV": 1, "S": 64, "D": 32, "causal": True, "dtype": "bf16"}

    def default_config(self) -> dict[str, Any]:
        """128 query rows x 64 keys a step, no larger than the sequence; 4 warps (8 for
        D > 128, whose accumulator would not fit 4 warps' registers), 2 stages; loads through
        TMA descriptors on Hopper and later (on the H200 this config with TMA was within 4% of
        the best of 8 tile configs at causal 4k/16k and full 4k, and 1.04-1.27x faster than
        without: benchmarks/results/h200-2026-12-02-s22)."""
        fit = max(16, 1 << (self.S - 1).bit_length())  # the sequence, rounded up to 2^n
        return {"BLOCK_M": min(128, fit), "BLOCK_N": min(64, fit),
                "num_warps": 4 if self.D <= 128 else 8, "num_stages": 2,
                "TMA": int(self.tma)}  # fmt: skip

    def checked_config(self, config: dict[str, Any]) -> dict[str, Any]:
        cfg = {k: int(v) for k, v in super().checked_config(config).items()}
        kern.check_config(**cfg)
        return cfg

    def compile(self, cfg: dict[str, Any]) -> Any:
        return kern.compile_only(self.B, self.H, self.H_KV, self.S, self.D, self.dtype,
                                 self.causal, **cfg)  # fmt: skip

    @property
    def flops(self) -> int:
        # two matmuls (QK^T and PV) of 2*S*S*D each per head: 4 * B * H * S^2 * D; causal
        # computes the half at or below the diagonal, e.g. 1*32*4096^2*128*4 / 2 = 1.37e11
        full = 4 * self.B * self.H * self.S * self.S * self.D
        return full // 2 if self.causal else full

    def inputs(self, generator: torch.Generator) -> Tensors:
        def randn(heads: int) -> torch.Tensor:
            shape = (self.B, heads, self.S, self.D)
            return torch.randn(shape, generator=generator, device=self.device).to(self.dtype)

        q, k, v = randn(self.H), randn(self.H_KV), randn(self.H_KV)
        return {"q": q, "k": k, "v": v, "out": torch.empty_like(q)}

    def launcher(self, cfg: dict[str, Any], t: Tensors) -> Callable[[], None]:
        return kern.launcher(t["q"], t["k"], t["v"], t["out"], causal=self.causal, **cfg)

    def check(self, t: Tensors) -> dict[str, float]:
        precision = torch.float32 if self.device == "cuda" else torch.float64
        ref = kern.reference_attention(t["q"], t["k"], t["v"], self.causal, dtype=precision)
        return check_close(t["out"], ref, tolerance=TOLERANCE[self.dtype_name])

    def _sdpa(self, t: Tensors, backend: Any | None, native: bool) -> Callable[[], None]:
        q, k, v = t["q"], t["k"], t["v"]
        gqa = self.H != self.H_KV
        if gqa and not native:  # repeat the K/V heads here, outside the timed function
            k, v = (x.repeat_interleave(self.H // self.H_KV, dim=1) for x in (k, v))

        # torch's own dispatch when backend is None, else the one backend
        context = contextlib.nullcontext if backend is None else lambda: sdpa_kernel(backend)

        def run() -> None:
            with context():
                F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                               enable_gqa=gqa and native)  # fmt: skip

        return run

    def references(self, t: Tensors) -> dict[str, Callable[[], None]]:
        if self.device != "cuda":
            return {"sdpa_math": self._sdpa(t, SDPBackend.MATH, native=True)}
        if self._gqa_modes is None:  # probe each backend once: natively, then on repeated heads
            self._gqa_modes = {}
            for name, backend in BACKENDS.items():
                for native in (True, False) if self.H != self.H_KV else (True,):
                    try:
                        with warnings.catch_warnings():  # a refusing backend warns why
                            warnings.simplefilter("ignore")
                            self._sdpa(t, backend, native)()
                        self.sync()
                    except RuntimeError:
                        continue
                    self._gqa_modes[name] = native
                    break
        refs = {name: self._sdpa(t, BACKENDS[name], native)
                for name, native in self._gqa_modes.items()}  # fmt: skip
        return {**refs, "sdpa_default": self._sdpa(t, None, native=True)}

    def figures(
        self, times: dict[str, Timing], t: Tensors
    ) -> tuple[dict[str, float], dict[str, Any]]:
        # TFLOP/s = flops / (ms * 1e-3 s) / 1e12 = flops / ms / 1e9
        tflops = {name: self.flops / tm.median_ms / 1e9 for name, tm in times.items()}
        fastest = min((name for name in times if name != "kernel"),
                      key=lambda name: times[name].median_ms)  # fmt: skip
        values = {"ratio_to_sdpa": times[fastest].median_ms / times["kernel"].median_ms,
                  "tflops": tflops.pop("kernel")}  # fmt: skip
        return values, {**{f"{name}_tflops": v for name, v in tflops.items()},
                        "fastest_sdpa": fastest}  # fmt: skip


OBJECTIVE = AttentionObjective
