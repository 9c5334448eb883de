"""The ``rmsnorm`` objective: memory throughput of the fused RMSNorm kernel, checked first.

A trial draws fresh inputs, poisons the outputs, runs the config once and checks it against a
float64 reference (the shared gate), then times three candidates interleaved in one process:
the kernel, what a practitioner runs untuned (``torch.nn.functional.rms_norm``, after the
residual add), and a plain device copy of the same rows, the bandwidth ceiling. The sampler
sees ``copy_fraction``, the kernel's bandwidth over the copy's measured in the same rounds, a
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

from typing import Any

import torch

from autotune.correctness import TOLERANCE, check_close, poison
from autotune.device import read_telemetry
from autotune.failures import Infeasible, classify
from autotune.kernels import rmsnorm_triton as kern
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.timing import interleaved

# 3 rounds of (kernel, torch, copy), each a do_bench of 5 ms warm-up and 15 ms of repeats, L2
# flushed between runs; each candidate's time is the median of its round medians.
_GPU_TIMING = {"rounds": 3, "warmup_ms": 5.0, "rep_ms": 15.0}
_CPU_TIMING = {"rounds": 1, "warmup_ms": 0.0, "rep_ms": 0.0}  # the interpreter: a token timing


class RMSNormObjective(Objective):
    """GB/s of the fused RMSNorm, its fraction of copy bandwidth and its ratio to torch."""

    name = "rmsnorm"
    space = "rmsnorm.yaml"
    directions = {"copy_fraction": "maximize", "gbps": "maximize"}

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        unknown = set(self.problem) - {"M", "N", "dtype", "residual", "eps"}
        if unknown:
            raise ValueError(f"unknown rmsnorm problem keys {sorted(unknown)}")
        self.M, self.N = int(self.problem["M"]), int(self.problem["N"])
        self.dtype_name = str(self.problem.get("dtype", "bf16"))
        if self.dtype_name not in kern.DTYPES:
            raise ValueError(f"dtype must be one of {sorted(kern.DTYPES)}")
        self.residual = bool(self.problem.get("residual", True))
        self.eps = float(self.problem.get("eps", 1e-6))
        self.device = "cpu" if kern.INTERPRETED else "cuda"
        self._trials = 0

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

    @property
    def bytes_moved(self) -> int:
        size = torch.empty((), dtype=kern.DTYPES[self.dtype_name]).element_size()
        rows = 4 if self.residual else 2  # x, y (+ residual, h)
        return (rows * self.M * self.N + self.N) * size

    def _inputs(self) -> dict[str, torch.Tensor]:
        """Fresh inputs each trial: a kernel cannot pass on what an earlier one left."""
        self._trials += 1
        gen = torch.Generator(device=self.device).manual_seed(self._trials)
        dtype = kern.DTYPES[self.dtype_name]

        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=gen, device=self.device).to(dtype)

        x, res = randn(self.M, self.N), randn(self.M, self.N)
        weight = (1.0 + 0.1 * randn(self.N).float()).to(dtype)
        return {"x": x, "res": res, "w": weight, "y": torch.empty_like(x), "h": torch.empty_like(x)}

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        cfg = {k: int(config.get(k, v)) for k, v in self.default_config().items()}
        try:
            kern.check_config(**cfg)
        except ValueError as exc:
            raise Infeasible(str(exc)) from exc
        t = self._inputs()
        extra = {"residual": t["res"], "h": t["h"]} if self.residual else {}
        try:
            run = kern.launcher(t["x"], t["w"], t["y"], eps=self.eps, **extra, **cfg)
            poison(t["y"], t["h"])
            run()
            self._sync()
        except Exception as exc:  # noqa: BLE001 - a compile or launch failure is data
            from autotune.triton_failures import compile_failure

            raise compile_failure(exc) from exc
        ref_h, ref_y = kern.reference_rmsnorm(
            t["x"], t["w"], t["res"] if self.residual else None, self.eps
        )
        tolerance = TOLERANCE[self.dtype_name]
        errors = check_close(t["y"], ref_y, tolerance=tolerance)
        if ref_h is not None:
            check_close(t["h"], ref_h, tolerance=tolerance)

        def torch_rmsnorm() -> None:
            h = t["x"] + t["res"] if self.residual else t["x"]
            torch.nn.functional.rms_norm(h, (self.N,), t["w"], self.eps)

        def copy() -> None:
            t["y"].copy_(t["x"])

        params = _GPU_TIMING if self.device == "cuda" else _CPU_TIMING
        try:
            ms = interleaved({"kernel": run, "torch": torch_rmsnorm, "copy": copy},
                             device_type=self.device, **params)  # fmt: skip
        except Exception as exc:  # noqa: BLE001
            raise classify(exc) from exc
        # GB/s = bytes / (ms * 1e-3) / 1e9 = bytes / ms / 1e6; the copy moves 2 M N elements
        gbps = self.bytes_moved / ms["kernel"].median_ms / 1e6
        copy_bytes = 2 * self.M * self.N * t["x"].element_size()
        copy_gbps = copy_bytes / ms["copy"].median_ms / 1e6
        return Measurement(
            values={"copy_fraction": gbps / copy_gbps, "gbps": gbps},
            metrics={
                "ms": ms["kernel"].median_ms,
                "torch_ms": ms["torch"].median_ms,
                "ratio_to_torch": ms["torch"].median_ms / ms["kernel"].median_ms,
                "copy_gbps": copy_gbps,
                "spread": ms["kernel"].spread,
                "baseline": "torch.nn.functional.rms_norm (eager) after the residual add",
                "timing_protocol": f"interleaved kernel/torch/copy, {params['rounds']} rounds "
                f"(warmup {params['warmup_ms']:g} ms, rep {params['rep_ms']:g} ms)"
                + ("" if self.device == "cuda" else ": interpreter, not a GPU figure"),
                **errors,
            },
            telemetry=read_telemetry(),
        )

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()


OBJECTIVE = RMSNormObjective
