"""The ``rmsnorm`` objective: memory throughput of the fused RMSNorm kernel, checked first.

A trial (the shared steps are :class:`~autotune.objectives.kernel.KernelObjective`'s) draws
fresh inputs, poisons the outputs, runs the config once and checks it against a float64
reference, then times three candidates interleaved in one process: the kernel, what a
practitioner runs untuned (``torch.nn.functional.rms_norm``, after the residual add), and a
plain device copy of the same rows, the bandwidth ceiling. The sampler sees
``copy_fraction``, the kernel's bandwidth over the copy's measured in the same rounds, a
figure clock and power drift move little.

Problem keys: ``M`` (rows, tokens), ``N`` (hidden size), ``dtype`` (bf16 or fp16),
``residual`` (bool: fuse the residual add), ``eps``.
Bytes moved per call: x and y (2 M N), plus the residual and h with ``residual`` (4 M N), plus
the weight (N), in the dtype's size.

Example:
    >>> obj = RMSNormObjective({"M": 6, "N": 96, "dtype": "bf16", "residual": True})
    >>> m = obj.evaluate({"BLOCK_N": 32, "ROWS": 2, "num_warps": 1})
    >>> m.values["gbps"] > 0 and m.metrics["rel_error"] < 1e-2
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autotune.correctness import TOLERANCE, check_close
from autotune.kernels import rmsnorm_triton as kern
from autotune.objectives.kernel import KernelObjective, Tensors, check_dtype
from autotune.timing import Timing


class RMSNormObjective(KernelObjective):
    """GB/s of the fused RMSNorm, its fraction of copy bandwidth and its ratio to torch."""

    name = "rmsnorm"
    space = "rmsnorm.yaml"
    directions = {"copy_fraction": "maximize", "gbps": "maximize"}
    problem_keys = ("M", "N", "dtype", "residual", "eps")
    outputs = ("y", "h")
    baseline = "torch.nn.functional.rms_norm (eager) after the residual add"

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        self.M, self.N = int(self.problem["M"]), int(self.problem["N"])
        self.dtype_name = str(self.problem.get("dtype", "bf16"))
        check_dtype(self.dtype_name, kern.DTYPES)
        self.dtype = kern.DTYPES[self.dtype_name]
        self.residual = bool(self.problem.get("residual", True))
        self.eps = float(self.problem.get("eps", 1e-6))
        if not 0 <= self.eps < float("inf"):  # below 0 a row of zeros has no norm
            raise ValueError(f"eps={self.problem.get('eps')} must be 0 or more, and finite")
        M, N = self.M, self.N
        self.check_sizes({"M": M, "N": N}, M * N * (4 if self.residual else 2) + N)

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """8192 tokens of a 4096-wide model on a GPU; 8 x 256 under the CPU's interpreter."""
        big = device.get("type") == "cuda"
        return {"M": 8192 if big else 8, "N": 4096 if big else 256, "dtype": "bf16",
                "residual": True, "eps": 1e-6}  # fmt: skip

    def default_config(self) -> dict[str, Any]:
        """The Triton tutorial's choice: the whole row in one block (up to 64 KB), 8 warps."""
        block = min(max(256, 1 << (self.N - 1).bit_length()), 16384)
        return {"BLOCK_N": block, "ROWS": 1, "num_warps": 8}

    def checked_config(self, config: dict[str, Any]) -> dict[str, Any]:
        cfg = {k: int(v) for k, v in super().checked_config(config).items()}
        kern.check_config(**cfg)
        return cfg

    def compile(self, cfg: dict[str, Any]) -> Any:
        return kern.compile_only(self.M, self.N, self.dtype, residual=self.residual,
                                 eps=self.eps, **cfg)  # fmt: skip

    @property
    def bytes_moved(self) -> int:
        size = torch.empty((), dtype=self.dtype).element_size()
        rows = 4 if self.residual else 2  # x, y (+ residual, h)
        return (rows * self.M * self.N + self.N) * size

    def inputs(self, generator: torch.Generator) -> Tensors:
        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=generator, device=self.device).to(self.dtype)

        x, res = randn(self.M, self.N), randn(self.M, self.N)
        weight = (1.0 + 0.1 * randn(self.N).float()).to(self.dtype)
        return {"x": x, "res": res, "w": weight, "y": torch.empty_like(x), "h": torch.empty_like(x)}

    def launcher(self, cfg: dict[str, Any], t: Tensors) -> Callable[[], None]:
        extra = {"residual": t["res"], "h": t["h"]} if self.residual else {}
        return kern.launcher(t["x"], t["w"], t["y"], eps=self.eps, **extra, **cfg)

    def check(self, t: Tensors) -> dict[str, float]:
        ref_h, ref_y = kern.reference_rmsnorm(
            t["x"], t["w"], t["res"] if self.residual else None, self.eps
        )
        tolerance = TOLERANCE[self.dtype_name]
        errors = check_close(t["y"], ref_y, tolerance=tolerance)
        if ref_h is not None:
            check_close(t["h"], ref_h, tolerance=tolerance)
        return errors

    def references(self, t: Tensors) -> dict[str, Callable[[], None]]:
        def torch_rmsnorm() -> None:
            h = t["x"] + t["res"] if self.residual else t["x"]
            torch.nn.functional.rms_norm(h, (self.N,), t["w"], self.eps)

        def copy() -> None:
            t["y"].copy_(t["x"])

        return {"torch": torch_rmsnorm, "copy": copy}

    def figures(
        self, times: dict[str, Timing], t: Tensors
    ) -> tuple[dict[str, float], dict[str, Any]]:
        # GB/s = bytes / (ms * 1e-3) / 1e9 = bytes / ms / 1e6; the copy moves 2 M N elements
        gbps = self.bytes_moved / times["kernel"].median_ms / 1e6
        copy_gbps = 2 * self.M * self.N * t["x"].element_size() / times["copy"].median_ms / 1e6
        values = {"copy_fraction": gbps / copy_gbps, "gbps": gbps}
        ratio = times["torch"].median_ms / times["kernel"].median_ms
        return values, {"ratio_to_torch": ratio, "copy_gbps": copy_gbps}


OBJECTIVE = RMSNormObjective
