"""The ``matmul`` objective: TFLOP/s of the Triton matmul kernel for one config, checked first.

A trial compiles the config (typed failures on the way), runs it once on fixed random inputs and
checks the result against a float64 reference, then times the kernel and ``torch.matmul`` (cuBLAS)
interleaved in the same process, so their ratio is read under the same clocks.

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

import math
from dataclasses import dataclass
from typing import Any

import torch

from autotune.device import detect_device, read_telemetry
from autotune.failures import (
    CompileError,
    Crashed,
    Infeasible,
    OutOfResources,
    TrialFailure,
    WrongResult,
    classify,
)
from autotune.kernels import matmul_triton as kern
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.timing import Timing, interleaved

#: Largest relative Frobenius error ||out - ref|| / ||ref|| a result may have. Rounding the fp32
#: sum to the output dtype alone gives about 1e-3 (bf16, 8 significant bits) and 1.5e-4 (fp16,
#: 11 bits); a dropped K-slab of 64 out of K=4096 gives sqrt(64/4096) = 0.125.
TOLERANCE: dict[str, float] = {"bf16": 1e-2, "fp16": 2e-3}
#: The largest single-element error may be this many times the tolerance, in units of RMS(ref):
#: bf16 rounds by at most 2^-8 relative (2^-7 under the interpreter, which truncates), and the
#: largest |ref| of 16M Gaussian entries is ~5.5 RMS: 5.5 * 2^-7 = 0.043 < 10 * 1e-2.
ELEMENT_FACTOR = 10.0

# Interleaved timing on the GPU: 3 rounds of (triton, cublas), each round a do_bench with 5 ms
# warm-up and 15 ms of repeats, L2 flushed between runs; a candidate's time is the median of its
# round medians.
_GPU_TIMING = {"rounds": 3, "warmup_ms": 5.0, "rep_ms": 15.0}
# Under the interpreter one untimed call then one timed call each: enough to exercise the path.
_CPU_TIMING = {"rounds": 1, "warmup_ms": 0.0, "rep_ms": 0.0}


def check_result(out: torch.Tensor, ref: torch.Tensor, dtype: str) -> dict[str, float]:
    """Check a kernel result against the fp32 reference; return the error figures.

    Raises:
        WrongResult: NaN/inf in ``out``, a relative Frobenius error above ``TOLERANCE[dtype]``,
            or one element off by more than ``ELEMENT_FACTOR * TOLERANCE[dtype] * RMS(ref)``.

    Example:
        >>> ref = torch.tensor([[3.0, 4.0]])
        >>> check_result(ref.half(), ref, "fp16")
        {'rel_error': 0.0, 'max_error_rms': 0.0}
        >>> check_result(torch.tensor([[3.0, 3.0]]), ref, "fp16")  # ||(0, 1)|| / ||(3, 4)|| = 0.2
        Traceback (most recent call last):
        ...
        autotune.failures.WrongResult: relative error 0.2 (limit 0.002), largest element error ...
    """
    tol = TOLERANCE[dtype]
    if out.shape != ref.shape:
        raise WrongResult(f"result shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.numel() == 0:
        return {"rel_error": 0.0, "max_error_rms": 0.0}
    out32 = out.float()
    finite = torch.isfinite(out32)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        raise WrongResult(f"{bad} of {out.numel()} outputs are NaN or inf")
    diff = out32 - ref
    ref_norm = float(ref.norm())
    diff_norm = float(diff.norm())
    # RMS(ref) = ||ref|| / sqrt(numel); with an all-zero reference, compare absolute errors
    rms = ref_norm / math.sqrt(ref.numel()) or 1.0
    rel = diff_norm / ref_norm if ref_norm else diff_norm
    max_err = float(diff.abs().max()) / rms
    if rel > tol or max_err > ELEMENT_FACTOR * tol:
        raise WrongResult(
            f"relative error {rel:.3g} (limit {tol:g}), largest element error "
            f"{max_err:.3g} x RMS(ref) (limit {ELEMENT_FACTOR * tol:g})"
        )
    return {"rel_error": rel, "max_error_rms": max_err}


def compile_failure(exc: BaseException) -> TrialFailure:
    """Map an exception raised while compiling a config to its typed failure.

    Like :func:`autotune.failures.classify`, but any Triton compilation error (subclasses
    included) becomes a ``CompileError`` carrying Triton's own message (``classify`` would keep
    only the first line, a source position), and an MLIR pass failure (a ``RuntimeError`` from
    Triton's backend) counts as a compile error rather than a crash.

    Example:
        >>> from triton.runtime.errors import OutOfResources as TritonOOR
        >>> compile_failure(TritonOOR(262144, 232448, "shared memory")).status.value
        'out_of_resources'
    """
    if isinstance(exc, TrialFailure):
        return exc
    from triton.compiler.errors import CompilationError

    if isinstance(exc, CompilationError):
        message = (exc.error_message or str(exc).strip().splitlines()[-1]).strip()
        return CompileError(f"{type(exc).__name__}: {message}")
    failure = classify(exc)
    if isinstance(failure, Crashed) and _from_triton_compiler(exc):
        return CompileError(str(failure))
    return failure


def _from_triton_compiler(exc: BaseException) -> bool:
    if type(exc).__module__.startswith("triton"):
        return True
    text = str(exc)
    return "PassManager" in text or "MLIR" in text


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
    directions = {"tflops": "maximize"}

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
        key = (self.M, self.N, self.K, self.dtype_name)
        if key not in self._buffers:
            device = torch.device(self.device_type)
            gen = torch.Generator(device=device).manual_seed(0)

            def normal(rows: int, cols: int) -> torch.Tensor:
                x = torch.randn(rows, cols, generator=gen, device=device, dtype=torch.float32)
                return x.to(self.dtype)

            a, b = normal(self.M, self.K), normal(self.K, self.N)
            self._buffers[key] = _Buffers(
                a=a,
                b=b,
                out=torch.empty(self.M, self.N, dtype=self.dtype, device=device),
                baseline_out=torch.empty(self.M, self.N, dtype=self.dtype, device=device),
                ref=kern.reference_matmul(a, b),
            )
        return self._buffers[key]

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
            bufs.out.fill_(float("nan"))  # a kernel that writes nothing must not pass on stale data
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
        return Measurement(values={"tflops": tflops}, metrics=metrics, telemetry=read_telemetry())

    def close(self) -> None:
        self._buffers.clear()
        if self.device_type == "cuda":
            torch.cuda.empty_cache()


OBJECTIVE = MatmulObjective
