"""The ``quant-matmul`` objective: a weight-only int8/int4 matmul for decode, gated twice.

``y = x @ W`` with few rows of activations x (M of 1..64) and large weights W stored quantized
(the config's ``weights``: ``int8``, ``int4-g128`` or ``int4-g64``, searched with the tiles),
dequantized in the kernel. A trial (the shared steps are
:class:`~autotune.objectives.kernel.KernelObjective`'s) draws a fresh Gaussian x and W, quantizes
W to the config's level (not timed; cached per level within the trial), poisons y, runs the
config once and applies two gates before anything is timed:

1. correctness: y against float64 ``x @ dequantize(q, s)`` at the dtype's tolerance
   (:data:`~autotune.correctness.TOLERANCE`): a kernel that computes the wrong thing fails.
2. quality: ``quant_error = ||y - x @ W|| / ||x @ W||`` against the unquantized weights
   (float64); above the problem's ``max_error`` the level is too coarse for this user and the
   trial fails (``WrongResult``) too. Gaussian weights give ~1% for int8 and ~10% for int4.

Then the kernel is timed interleaved with cuBLAS on the unquantized weights (``torch.matmul``
with W in the activation dtype, bf16 by default) and the sampler sees ``ratio_to_cublas``
(cuBLAS ms / kernel ms): how much the fewer weight bytes buy.

Problem keys: ``M``, ``N``, ``K``, ``dtype`` (bf16 or fp16), ``max_error`` (default 0.2, which
admits int4; 0.02 admits int8 only).
Bytes moved per call: the quantized weights and their fp16 scales, x, and y.

Example:
    >>> obj = QuantMatmulObjective({"M": 4, "N": 64, "K": 256, "dtype": "bf16"})
    >>> m = obj.evaluate({**obj.default_config(), "weights": "int4-g64", "BLOCK_K": 32})
    >>> m.values["tflops"] > 0, 0.03 < m.metrics["quant_error"] < 0.2, m.metrics["weight_bytes"]
    (True, True, 8704)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from autotune.correctness import TOLERANCE, check_close
from autotune.failures import WrongResult
from autotune.kernels import quant_matmul_triton as kern
from autotune.kernels.interpreter import EMULATED_SMS, pow2_at_least, sm_count
from autotune.objectives.kernel import KernelObjective, Tensors, check_dtype, tensor_bytes
from autotune.timing import Timing

DEFAULT_MAX_ERROR = 0.2
#: Rows up to which a product is a decode step: the default config is int4 (where the gate
#: allows) with K split across the SMs.
DECODE_ROWS = 16
#: int4-g64's relative error on Gaussian weights is about 0.11 (0.105-0.107 measured at
#: 4096x4096): the default takes int4 for a ``max_error`` with room over that.
INT4_DEFAULT_MIN_ERROR = 0.15


class QuantMatmulObjective(KernelObjective):
    """Speed of a weight-only quantized matmul against bf16 cuBLAS, gated on quality."""

    name = "quant-matmul"
    space = "quant_matmul.yaml"
    directions = {"ratio_to_cublas": "maximize", "tflops": "maximize"}
    problem_keys = ("M", "N", "K", "dtype", "max_error")
    outputs = ("y",)
    baseline = "torch.matmul on the unquantized weights (cuBLAS)"

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        self.M, self.N, self.K = (int(self.problem[key]) for key in ("M", "N", "K"))
        M, N, K = self.M, self.N, self.K
        # x, w, y and cublas_y; the check's float64 x, w and products (its quantized
        # reference's, the exact one's, y's)
        self.check_sizes({"M": M, "N": N, "K": K}, M * K + K * N + 2 * M * N,
                         reference_elements=M * K + K * N + 3 * M * N)  # fmt: skip
        self.dtype_name = str(self.problem.get("dtype", "bf16"))
        check_dtype(self.dtype_name, kern.DTYPES)
        self.dtype = kern.DTYPES[self.dtype_name]
        self.max_error = float(self.problem.get("max_error", DEFAULT_MAX_ERROR))
        if not self.max_error > 0:
            given = self.problem.get("max_error")
            raise ValueError(f"max_error={given} must be above 0 (a relative error)")

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """A 16-token decode step through a 4096 x 4096 projection on a GPU; 4 x 64 x 256
        under the CPU's interpreter (well under a second a trial)."""
        if device.get("type") == "cuda":
            return {"M": 16, "N": 4096, "K": 4096, "dtype": "bf16",
                    "max_error": DEFAULT_MAX_ERROR}  # fmt: skip
        return {"M": 4, "N": 64, "K": 256, "dtype": "bf16", "max_error": DEFAULT_MAX_ERROR}

    def default_config(self) -> dict[str, Any]:
        """Decode rows (M <= 16): int4 where ``max_error`` leaves room over its error on
        Gaussian weights (about 0.11-0.12: ``max_error`` >= 0.15), in groups of 128 where K is
        whole groups of them (else 64), else int8; the tile is ``decode_tile``'s (16 x 64,
        K-blocks of 128 for groups of 128, else 64; K split until two programs an SM; 4
        warps, 3 stages; 128 wide for a wide int4-g128 output), one row included: since the
        tile dequantizes in PTX and reads K-major weights it was 1.52x bf16 cuBLAS at
        1x4096x4096 against 1.37x for the one-row tile on the CUDA cores (``ONE_ROW_CONFIG``,
        the default for one row before),
        and 1.45x at 16x4096x4096 (benchmarks/results/h200-2026-12-04-s37). More rows: int8,
        one tile-row of up to 64 rows, 64 x 64 weight blocks (smaller for a small problem), 4
        warps, 3 stages, K split as ``decode_tile`` splits it: at 32 and 64 rows of three 7-8B
        projections 0.64-1.11x bf16 cuBLAS where the same tile unsplit (the default before)
        read 0.30-0.76x (same session, call 7)."""
        if self.M <= DECODE_ROWS:
            int4 = self.max_error >= INT4_DEFAULT_MIN_ERROR and self.K % 64 == 0  # whole groups
            level = "int8"
            if int4:
                level = "int4-g128" if self.K % 128 == 0 else "int4-g64"
            config = kern.decode_tile(self.N, self.K, level, self.sms)
            block_n = min(config["BLOCK_N"], max(32, pow2_at_least(self.N)))
            return {"weights": level, **config, "BLOCK_N": block_n}
        return {
            "weights": "int8",
            **kern.DEFAULT_CONFIG,
            "BLOCK_M": min(64, max(16, pow2_at_least(self.M))),
            "BLOCK_N": min(64, max(32, pow2_at_least(self.N))),
            "BLOCK_K": 64 if self.K >= 64 else 32,
            "SPLIT_K": kern.decode_tile(self.N, self.K, "int8", self.sms)["SPLIT_K"],
        }

    @property
    def sms(self) -> int:
        """This GPU's SMs (132, an H200's, under the interpreter: a CPU sweep starts where an
        H200's would)."""
        if self.device != "cuda":
            return EMULATED_SMS
        return sm_count()

    def checked_config(self, config: dict[str, Any]) -> dict[str, Any]:
        cfg = super().checked_config(config)
        cfg = {k: (str(v) if k == "weights" else int(v)) for k, v in cfg.items()}
        kern.check_config(**cfg, K=self.K)
        return cfg

    @staticmethod
    def _tunables(cfg: dict[str, Any]) -> dict[str, int]:
        return {k: v for k, v in cfg.items() if k != "weights"}

    def compile(self, cfg: dict[str, Any]) -> Any:
        return kern.compile_only(self.M, self.N, self.K, cfg["weights"], self.dtype,
                                 **self._tunables(cfg))  # fmt: skip

    def inputs(self, generator: torch.Generator) -> Tensors:
        def randn(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, generator=generator, device=self.device).to(self.dtype)

        x, w = randn(self.M, self.K), randn(self.K, self.N)
        y = torch.empty(self.M, self.N, dtype=self.dtype, device=self.device)
        return {"x": x, "w": w, "y": y, "cublas_y": torch.empty_like(y)}

    def _quantized(self, level: str, t: Tensors) -> tuple[torch.Tensor, torch.Tensor]:
        """This trial's weights at ``level``: quantized once per trial and level, kept in the
        trial's tensors (the next trial draws new weights)."""
        if f"q.{level}" not in t:
            t[f"q.{level}"], t[f"s.{level}"] = kern.quantize(t["w"], level)
        return t[f"q.{level}"], t[f"s.{level}"]

    def launcher(self, cfg: dict[str, Any], t: Tensors) -> Callable[[], None]:
        t["q"], t["s"] = self._quantized(cfg["weights"], t)
        return kern.launcher(t["x"], t["q"], t["s"], t["y"], **self._tunables(cfg))

    def footprint_bytes(self, t: Tensors) -> int:
        """x, the quantized weights and their scales, y: what one launch reads and writes."""
        return tensor_bytes({name: t[name] for name in ("x", "q", "s", "y")})

    def check(self, t: Tensors) -> dict[str, float]:
        # 1. the kernel computes what it should with the weights it was given
        ref = kern.reference_quant_matmul(t["x"], t["q"], t["s"])
        errors = check_close(t["y"], ref, tolerance=TOLERANCE[self.dtype_name])
        # 2. what it was given is close enough to the real weights for this user
        exact = kern.reference_matmul(t["x"], t["w"]).double()
        quant_error = float((t["y"].double() - exact).norm() / exact.norm())
        if quant_error > self.max_error:
            level = kern.level_of(t["q"], t["s"])
            raise WrongResult(
                f"{level} weights: quantization error {quant_error:.3g} against the "
                f"unquantized product exceeds max_error {self.max_error:g}"
            )
        return {**errors, "quant_error": quant_error}

    def references(self, t: Tensors) -> dict[str, Callable[[], None]]:
        def cublas() -> None:
            torch.matmul(t["x"], t["w"], out=t["cublas_y"])

        return {"cublas": cublas}

    def figures(
        self, times: dict[str, Timing], t: Tensors
    ) -> tuple[dict[str, float], dict[str, Any]]:
        ms = times["kernel"].median_ms
        # TFLOP/s = 2 M N K / (ms * 1e-3) / 1e12 = 2 M N K / ms / 1e9
        tflops = 2 * self.M * self.N * self.K / ms / 1e9
        # bytes read and written: weights + scales, x, y; e.g. int4-g128, M=16, N=K=4096:
        # 4096/2 * 4096 (nibbles) + 32 * 4096 * 2 (scales) + 16*4096*2 (x) + 16*4096*2 (y)
        # = 8388608 + 262144 + 131072 + 131072 = 8912896 B; GB/s = bytes / ms / 1e6
        weights = kern.weight_bytes(t["q"], t["s"])
        size = t["x"].element_size()
        moved = weights + (self.M * self.K + self.M * self.N) * size
        values = {"ratio_to_cublas": times["cublas"].median_ms / ms, "tflops": tflops}
        return values, {"gbps": moved / ms / 1e6, "weight_bytes": weights}


OBJECTIVE = QuantMatmulObjective
