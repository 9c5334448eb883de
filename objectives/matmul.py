"""The ``matmul`` objective: TFLOP/s of the Triton matmul kernel for one config, checked first.

The sampler ranks ``ratio_to_cublas`` (a drift-robust figure); ``tflops`` is kept beside it.

A trial compiles the config (typed failures on the way), runs it once on fresh random inputs
(the output poisoned first) and checks the result against a float64 reference, then times the
kernel and ``torch.matmul`` (cuBLAS) interleaved in the same process, so their ratio is read
under the same clocks.

Problem keys: ``M``, ``N``, ``K`` (ints) and ``dtype`` (``"bf16"`` or ``"fp16"``).
Config keys: ``BLOCK_M``, ``BLOCK_N``, ``BLOCK_K``, ``GROUP_M``, ``num_warps``, ``num_stages``
(missing ones take the default config's value).

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

from dataclasses import dataclass
from typing import Any

import torch

from autotune.correctness import TOLERANCE, check_close, poison
from autotune.device import detect_device, read_telemetry
from autotune.failures import Infeasible, OutOfResources, classify
from autotune.kernels import matmul_triton as kern
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.timing import Timing, interleaved
from autotune.triton_failures import compile_failure

# Interleaved timing on the GPU: 3 rounds of (triton, cublas), each round a do_bench with 5 ms
# warm-up and 15 ms of repeats, L2 flushed between runs; a candidate's time is the median of its
# round medians.
_GPU_TIMING = {"rounds": 3, "warmup_ms": 5.0, "rep_ms": 15.0}
# Under the interpreter one untimed call then one timed call each: enough to exercise the path.
_CPU_TIMING = {"rounds": 1, "warmup_ms": 0.0, "rep_ms": 0.0}


def check_result(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> dict[str, float]:
    """The shared correctness gate (:func:`autotune.correctness.check_close`) at the
    tolerance of ``dtype``.

    Example:
        >>> ref = torch.tensor([[3.0, 4.0]])
        >>> check_result(ref.half(), ref, "fp16")
        {'rel_error': 0.0, 'max_error_rms': 0.0}
    """
    return check_close(out, ref, tolerance=TOLERANCE[dtype])


@dataclass
class _Buffers:
    a: torch.Tensor
    b: torch.Tensor
    out: torch.Tensor  # the Triton kernel writes here
    baseline_out: torch.Tensor  # torch.matmul writes here
    ref: torch.Tensor  # float32, from reference_matmul


class MatmulObjective(Objective):
    """Throughput of ``C = A @ B`` with the Triton kernel, checked against a float64 reference."""

    name = "matmul"
    space = "matmul.yaml"
    # the sampler ranks the ratio to cuBLAS timed in the same rounds: clock and power drift
    # move both alike; --objective tflops ranks the absolute figure instead
    directions = {"ratio_to_cublas": "maximize", "tflops": "maximize"}

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        unknown = set(self.problem) - {"M", "N", "K", "dtype"}
        if unknown:
            raise ValueError(f"unknown matmul problem keys {sorted(unknown)}")
        self.M, self.N, self.K = (int(self.problem[key]) for key in ("M", "N", "K"))
        self.dtype_name = str(self.problem.get("dtype", "bf16"))
        if self.dtype_name not in kern.DTYPES:
            raise ValueError(f"dtype must be one of {sorted(kern.DTYPES)}, got {self.dtype_name!r}")
        if min(self.M, self.N, self.K) < 1:
            raise ValueError(f"M, N, K must be >= 1, got {self.M}, {self.N}, {self.K}")
        self.dtype = kern.DTYPES[self.dtype_name]
        self.device_type = "cuda" if not kern.INTERPRETED else "cpu"
        self._buffers: dict[tuple[int, int, int, str], _Buffers] = {}
        self._draws = 0  # seeds each trial's fresh inputs

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """4096^3 bf16 on a GPU; 64^3 on the CPU, where one interpreted trial takes ~0.1-1 s."""
        size = 4096 if device.get("type") == "cuda" else 64
        return {"M": size, "N": size, "K": size, "dtype": "bf16"}

    def default_config(self) -> dict[str, Any]:
        """128x128 tiles, 64-deep K steps, bands of 8 tile-rows, 4 warps, 3 stages."""
        return dict(kern.DEFAULT_CONFIG)

    @property
    def flops(self) -> int:
        """Floating-point operations of one product: a multiply and an add per (m, n, k)."""
        return 2 * self.M * self.N * self.K

    def _config(self, config: dict[str, Any]) -> dict[str, int]:
        unknown = set(config) - set(kern.CONFIG_KEYS)
        if unknown:
            raise ValueError(f"unknown matmul config keys {sorted(unknown)}")
        cfg = {key: int(config.get(key, default)) for key, default in kern.DEFAULT_CONFIG.items()}
        try:
            kern.check_config(**cfg)
        except ValueError as exc:
            raise Infeasible(str(exc)) from exc
        return cfg

    def prepare(self, config: dict[str, Any]) -> None:
        """Compile ``config`` for this problem without running it (for parallel precompile).

        On CUDA the kernel lands in Triton's on-disk cache and the compiled shared memory is
        checked against the device. Under the interpreter there is nothing to compile, so the
        shared memory the kernel would need (``num_stages`` A and B slabs, the figure Triton 3.7
        reports for sm_90) is checked against the emulated device limit instead, so that a CPU
        sweep rejects what an H100/H200 would.

        Raises:
            Infeasible: a config the kernel cannot express (e.g. a tile size not a power of two).
            OutOfResources: too much shared memory.
            CompileError: Triton failed to compile the config.
        """
        self._compile(self._config(config))

    def _compile(self, cfg: dict[str, int]) -> Any:
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
        try:
            return kern.compile_only(self.M, self.N, self.K, self.dtype, **cfg)
        except Exception as exc:  # noqa: BLE001 - every compile failure becomes a typed one
            raise compile_failure(exc) from exc

    def _get_buffers(self) -> _Buffers:
        """The trial's operands, output buffers and reference: allocated once per problem,
        refilled with fresh random values for every trial (a kernel that reads out of bounds
        or skips work cannot pass by matching what an earlier trial left), the reference
        recomputed for them."""
        key = (self.M, self.N, self.K, self.dtype_name)
        device = torch.device(self.device_type)
        if key not in self._buffers:
            self._buffers[key] = _Buffers(
                a=torch.empty(self.M, self.K, dtype=self.dtype, device=device),
                b=torch.empty(self.K, self.N, dtype=self.dtype, device=device),
                out=torch.empty(self.M, self.N, dtype=self.dtype, device=device),
                baseline_out=torch.empty(self.M, self.N, dtype=self.dtype, device=device),
                ref=torch.empty(0),
            )
        bufs = self._buffers[key]
        self._draws += 1
        gen = torch.Generator(device=device).manual_seed(self._draws)
        for tensor in (bufs.a, bufs.b):
            tensor.copy_(torch.randn(tensor.shape, generator=gen, device=device))
        bufs.ref = kern.reference_matmul(bufs.a, bufs.b)
        return bufs

    def _sync(self) -> None:
        if self.device_type == "cuda":
            torch.cuda.synchronize()

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Compile, run once and check, then time the kernel against ``torch.matmul``.

        Raises:
            Infeasible, OutOfResources, CompileError: see ``prepare``.
            WrongResult: the result is off (see ``check_result``), before anything is timed.
            TrialFailure: whatever else went wrong, typed by ``classify``.
        """
        cfg = self._config(config)
        compiled = self._compile(cfg)
        bufs = self._get_buffers()
        try:
            run = kern.launcher(bufs.a, bufs.b, bufs.out, **cfg)
            poison(bufs.out)  # a kernel that writes nothing must not pass on stale data
            run()
            self._sync()
        except Exception as exc:  # noqa: BLE001 - mapped to a typed failure
            raise classify(exc) from exc
        errors = check_result(bufs.out, bufs.ref, self.dtype_name)

        def baseline() -> None:
            torch.matmul(bufs.a, bufs.b, out=bufs.baseline_out)

        params = _GPU_TIMING if self.device_type == "cuda" else _CPU_TIMING
        try:
            timings = interleaved(
                {"triton": run, "baseline": baseline}, device_type=self.device_type, **params
            )
        except Exception as exc:  # noqa: BLE001
            raise classify(exc) from exc
        return self._measurement(timings["triton"], timings["baseline"], errors, compiled)

    def _measurement(
        self, ours: Timing, theirs: Timing, errors: dict[str, float], compiled: Any
    ) -> Measurement:
        # TFLOP/s = flops / (ms * 1e-3 s) / 1e12 = flops / ms / 1e9
        # e.g. 2 * 4096^3 = 1.374e11 flops in 0.2 ms -> 687 TFLOP/s
        tflops = self.flops / ours.median_ms / 1e9
        base_tflops = self.flops / theirs.median_ms / 1e9
        if self.device_type == "cuda":
            protocol = "interleaved triton/cublas, {rounds} rounds of do_bench (warmup {w:g} ms, "
            protocol += "rep {r:g} ms, L2 flushed), median of round medians"
            baseline = "torch.matmul (cuBLAS)"
        else:
            protocol = "cpu interpreter wall clock, {rounds} round, 1 timed run each: "
            protocol += "not a GPU figure (warmup {w:g} ms, rep {r:g} ms)"
            baseline = "torch.matmul on cpu (stands in for cuBLAS)"
        params = _GPU_TIMING if self.device_type == "cuda" else _CPU_TIMING
        metrics: dict[str, Any] = {
            "ms": ours.median_ms,
            "cublas_ms": theirs.median_ms,
            "cublas_tflops": base_tflops,
            "ratio_to_cublas": tflops / base_tflops,
            "spread": ours.spread,
            "cublas_spread": theirs.spread,
            "baseline": baseline,
            "timing_protocol": protocol.format(
                rounds=params["rounds"], w=params["warmup_ms"], r=params["rep_ms"]
            ),
            **errors,
        }
        shared = getattr(getattr(compiled, "metadata", None), "shared", None)
        if shared is not None:
            metrics["shared_memory_bytes"] = int(shared)
        ratio = metrics.pop("ratio_to_cublas")
        return Measurement(
            values={"ratio_to_cublas": ratio, "tflops": tflops},
            metrics=metrics,
            telemetry=read_telemetry(),
        )

    def close(self) -> None:
        self._buffers.clear()
        if self.device_type == "cuda":
            torch.cuda.empty_cache()


OBJECTIVE = MatmulObjective
