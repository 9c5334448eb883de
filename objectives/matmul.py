"""The ``matmul`` objective: the Triton matmul against cuBLAS, checked first.

The sampler ranks ``ratio_to_cublas``, the kernel's speed over ``torch.matmul``'s (cuBLAS)
timed in the same interleaved rounds, so clock and power drift move both alike; ``tflops`` is
kept beside it. The shared steps (fresh inputs, poisoned output, the float64 check, the timing)
are :class:`~autotune.objectives.kernel.KernelObjective`'s.

Problem keys: ``M``, ``N``, ``K`` (ints); ``dtype`` (``bf16``, ``fp16``, or ``fp8``: e4m3
operands with a bf16 result, against ``torch._scaled_mm``); ``layout``: ``kn`` (B stored
(K, N) row-major) or ``nk`` (B the transpose of an (N, K) matrix, as ``nn.Linear`` keeps its
weight; fp8 always). For skinny products (M <= 256, decode) a device copy of B is timed in the
same rounds too, and ``roofline_fraction`` says how close the kernel's bytes per second come to
it (weights read once, which is what bounds decode).

On a machine without CUDA the kernel runs under Triton's interpreter: the trial still goes end to
end (compile checks, result check, a token timing), but its figures say nothing about a GPU.

Example:
    >>> obj = MatmulObjective({"M": 40, "N": 24, "K": 33, "dtype": "fp16"})
    >>> cfg = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}
    >>> m = obj.evaluate({**obj.default_config(), **cfg})
    >>> m.values["tflops"] > 0 and m.metrics["rel_error"] < 1e-2
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autotune.correctness import TOLERANCE, check_close
from autotune.device import detect_device
from autotune.failures import OutOfResources
from autotune.kernels import matmul_triton as kern
from autotune.objectives.kernel import KernelObjective, Tensors, check_dtype, tensor_bytes
from autotune.timing import Timing

#: Up to this M a product is bound by reading B: its roofline is a copy of B.
SKINNY_M = 256


class MatmulObjective(KernelObjective):
    """Throughput of ``C = A @ B`` with the Triton kernel, checked against a float64 reference."""

    name = "matmul"
    space = "matmul.yaml"
    directions = {"ratio_to_cublas": "maximize", "tflops": "maximize"}
    problem_keys = ("M", "N", "K", "dtype", "layout")
    outputs = ("c",)

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        self.M, self.N, self.K = (int(self.problem[key]) for key in ("M", "N", "K"))
        self.dtype_name = str(self.problem.get("dtype", "bf16"))
        check_dtype(self.dtype_name, kern.DTYPES)
        M, N, K = self.M, self.N, self.K
        # A, B twice (b_copy), C twice (cublas_out); the check's float64 A, B and product and
        # its float32 copy: M=N=K=32768 takes 38 GiB where A, B and C alone are 6
        self.check_sizes({"M": M, "N": N, "K": K}, M * K + 2 * K * N + 2 * M * N,
                         reference_elements=M * K + K * N + M * N + M * N // 2)  # fmt: skip
        self.layout = "nk" if self.dtype_name == "fp8" else str(self.problem.get("layout", "kn"))
        if self.layout not in ("kn", "nk"):
            raise ValueError(f"layout must be kn or nk, got {self.layout!r}")
        self.dtype = kern.DTYPES[self.dtype_name]
        self.out_dtype = kern.OUT_DTYPES[self.dtype]
        on_gpu = self.device == "cuda"
        self.baseline = "torch.matmul (cuBLAS)" if on_gpu else "torch.matmul on cpu (stand-in)"
        if self.dtype_name == "fp8":
            self.baseline = "torch._scaled_mm (cuBLAS fp8)" if on_gpu else self.baseline

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """4096^3 bf16 on a GPU; 64^3 on the CPU, where one interpreted trial takes ~0.1-1 s."""
        size = 4096 if device.get("type") == "cuda" else 64
        return {"M": size, "N": size, "K": size, "dtype": "bf16", "layout": "kn"}

    def default_config(self) -> dict[str, Any]:
        """128x128 tiles, 64-deep K steps, bands of 8 tile-rows, 4 warps, 3 stages, no split;
        a decode product (M <= 64) one tile-row with K split (``kern.default_config``)."""
        return kern.default_config(self.M, self.N, self.K)

    def config_keys(self) -> tuple[str, ...]:
        """The default's tunables and the persistent schedules' ``EPILOGUE_SUBTILE``."""
        return kern.CONFIG_KEYS

    def checked_config(self, config: dict[str, Any]) -> dict[str, Any]:
        cfg = super().checked_config(config)
        cfg = {k: v if k == "SCHEDULE" else int(v) for k, v in cfg.items()}
        kern.check_config(**cfg)
        return cfg

    @property
    def flops(self) -> int:
        """Floating-point operations of one product: a multiply and an add per (m, n, k)."""
        return 2 * self.M * self.N * self.K

    def compile(self, cfg: dict[str, Any]) -> Any:
        """On CUDA: compile into Triton's cache, shared memory checked against the device.
        Under the interpreter: check the shared memory the kernel would need (its ``num_stages``
        A and B slabs, what Triton allocates on sm_90) against the emulated device, so a CPU
        sweep rejects what an H100/H200 would."""
        if kern.INTERPRETED:
            need = kern.shared_memory_bytes(
                cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], cfg["num_stages"], self.dtype
            )
            limit = detect_device().max_shared_memory
            if need > limit:
                raise OutOfResources(
                    f"shared memory: {need} B needed > {limit} B (emulated device limit; "
                    "the interpreter itself has none)"
                )
            return None
        return kern.compile_only(self.M, self.N, self.K, self.dtype, b_kmajor=self.layout == "nk",
                                 **cfg)  # fmt: skip

    def inputs(self, generator: torch.Generator) -> Tensors:
        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=generator, device=self.device).to(self.dtype)

        a = randn(self.M, self.K)
        b = randn(self.N, self.K).t() if self.layout == "nk" else randn(self.K, self.N)
        c = torch.empty(self.M, self.N, dtype=self.out_dtype, device=self.device)
        return {"a": a, "b": b, "c": c, "cublas_out": torch.empty_like(c),
                "b_copy": torch.empty_like(b)}  # fmt: skip

    def launcher(self, cfg: dict[str, Any], t: Tensors) -> Callable[[], None]:
        return kern.launcher(t["a"], t["b"], t["c"], **cfg)

    def footprint_bytes(self, t: Tensors) -> int:
        """A, B and C: what one product reads and writes."""
        return tensor_bytes({name: t[name] for name in ("a", "b", "c")})

    def check(self, t: Tensors) -> dict[str, float]:
        ref = kern.reference_matmul(t["a"], t["b"])
        return check_close(t["c"], ref, tolerance=TOLERANCE["bf16" if self.dtype_name == "fp8"
                                                             else self.dtype_name])  # fmt: skip

    def references(self, t: Tensors) -> dict[str, Callable[[], None]]:
        a, b, out = t["a"], t["b"], t["cublas_out"]
        if self.dtype_name == "fp8" and self.device == "cuda":
            one = torch.ones((), device=self.device)

            def cublas() -> None:
                torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=out.dtype, out=out)
        elif self.dtype_name == "fp8":  # the CPU has no fp8 product: a stand-in of the same shape

            def cublas() -> None:
                torch.matmul(a.to(out.dtype), b.to(out.dtype), out=out)
        else:

            def cublas() -> None:
                torch.matmul(a, b, out=out)

        refs = {"cublas": cublas}
        if self.M <= SKINNY_M:
            refs["copy"] = lambda: t["b_copy"].copy_(b)
        return refs

    def figures(
        self, times: dict[str, Timing], t: Tensors
    ) -> tuple[dict[str, float], dict[str, Any]]:
        # TFLOP/s = flops / (ms * 1e-3 s) / 1e12 = flops / ms / 1e9
        # e.g. 2 * 4096^3 = 1.374e11 flops in 0.2 ms -> 687 TFLOP/s
        ms, cublas_ms = times["kernel"].median_ms, times["cublas"].median_ms
        tflops = self.flops / ms / 1e9
        metrics: dict[str, Any] = {
            "cublas_tflops": self.flops / cublas_ms / 1e9,
            "cublas_spread": times["cublas"].spread,
        }
        if "copy" in times:
            # bytes the product must move: A and B read once, C written once; the copy of B
            # reads and writes B, e.g. M=1, N=K=4096 bf16: 2 * 4096^2 * 2 B = 67 MB in ~16 us
            nbytes = (t["a"].numel() + t["b"].numel()) * t["a"].element_size()
            nbytes += t["c"].numel() * t["c"].element_size()
            copy_gbps = 2 * t["b"].numel() * t["b"].element_size() / times["copy"].median_ms / 1e6
            gbps, cublas_gbps = nbytes / ms / 1e6, nbytes / cublas_ms / 1e6
            metrics.update(gbps=gbps, copy_gbps=copy_gbps, roofline_fraction=gbps / copy_gbps,
                           cublas_roofline_fraction=cublas_gbps / copy_gbps)  # fmt: skip
        return {"ratio_to_cublas": cublas_ms / ms, "tflops": tflops}, metrics


OBJECTIVE = MatmulObjective
