"""A workload whose configs inject real faults, to prove the sweep survives each one.

Every fault is real: the OOM is an allocation the machine cannot satisfy, the crash a genuine
segmentation fault, the hang a sleep past the trial timeout, the wrong result a product of the
wrong operands caught by the same check the matmul objective uses, the divergence gradient
descent with a step size that makes it blow up, and on a GPU (``cuda_oom``,
``illegal_address``) an allocation the device refuses and a kernel that writes far outside
its buffer.

Example:
    >>> objective = FaultsObjective({})
    >>> objective.evaluate({"fault": "none"}).values["score"]
    1.0
"""

from __future__ import annotations

import ctypes
import math
import os
import time
from typing import Any

# imported with the module, while a worker starts (its start timeout), not inside a trial's
# time: on a loaded 2-core machine torch's import alone takes 4-5 s, more than a short
# trial timeout
import torch

from autotune.correctness import check_close
from autotune.failures import Diverged
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting

FAULTS = (
    "none", "oom", "segfault", "hang", "wrong_result", "diverge", "exception", "compile_error",
    "host_memory", "cuda_oom", "illegal_address",
)  # fmt: skip
#: faults that need a CUDA device (a CPU trial with one is infeasible)
GPU_FAULTS = ("cuda_oom", "illegal_address")

#: Where "compiled" configs are marked, as Triton's on-disk kernel cache keeps kernels: a config
#: compiled by ``prepare`` in one process costs no compile time in the trial that runs it.
CACHE_DIR_ENV = "AUTOTUNE_FAULTS_CACHE"


class FaultsObjective(Objective):
    """Config ``{"fault": NAME, "score": x, "delay": s, "compile_s": c}``: ``score`` (default
    1.0) is returned after ``delay`` seconds when no fault is injected; a config first takes
    ``compile_s`` seconds to "compile" unless ``prepare`` compiled it before (in any process
    sharing the cache directory of ``$AUTOTUNE_FAULTS_CACHE``)."""

    name = "faults"
    space = "faults.yaml"
    directions = {"score": "maximize", "latency_s": "minimize"}
    takes_problem = False  # every figure comes from the config

    @classmethod
    def slo_metrics(cls) -> tuple[str, ...]:
        return ("latency_s",)

    compiles = True

    def prepare(self, config: dict[str, Any]) -> None:
        """Compile: fail for ``fault=compile_error``, else take ``compile_s`` and mark it."""
        self._compile(config)

    def _compile(self, config: dict[str, Any]) -> float:
        from autotune.failures import CompileError

        if config.get("fault") == "compile_error":
            raise CompileError("injected compile error")
        seconds = float(config.get("compile_s", 0.0))
        marker = self._marker(config)
        if seconds and not (marker is not None and marker.exists()):
            time.sleep(seconds)
            if marker is not None:
                marker.touch()
            return seconds
        return 0.0

    @staticmethod
    def _marker(config: dict[str, Any]) -> Any:
        import hashlib
        from pathlib import Path

        root = os.environ.get(CACHE_DIR_ENV)
        if not root:
            return None
        key = hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest()[:16]
        return Path(root) / key

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        start = time.perf_counter()
        compile_s = self._compile(config)
        if config.get("progress_bar"):  # as torch inductor shows one while it compiles
            from tqdm import tqdm

            tqdm(total=1, disable=True).close()
        fault = config.get("fault", "none")
        if fault == "oom":
            # 4 PiB: more than any machine has; the allocator refuses it for real
            torch.empty(2**52, dtype=torch.uint8)
        elif fault == "segfault":
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        elif fault == "hang":
            time.sleep(float(config.get("seconds", 3600)))
        elif fault == "wrong_result":
            generator = torch.Generator().manual_seed(0)
            a = torch.randn(64, 48, generator=generator)
            b = torch.randn(64, 48, generator=generator)
            check_close(a @ b.T, a @ b.T.contiguous().T.T, tolerance=1e-5)  # the same: passes
            check_close(b @ a.T, a @ b.T, tolerance=1e-2)  # the transposed product: fails
        elif fault == "diverge":
            # gradient descent on f(x) = x^2 with step 1.5: x <- x - 1.5 * 2x = -2x, so |x| doubles
            x = 1.0
            for step in range(int(config.get("steps", 40))):
                x -= 1.5 * 2 * x
                report(step, x * x)
                if not math.isfinite(x * x):
                    raise Diverged(f"loss is not finite at step {step}")
            raise Diverged("loss grew for every step and nothing pruned it")
        elif fault == "exception":
            raise ValueError("injected failure")
        elif fault == "host_memory":
            _exhaust_host_memory()
        elif fault in GPU_FAULTS:
            _gpu_fault(fault)
        elif fault != "none":
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(FAULTS)}")
        started_at = time.time()
        time.sleep(float(config.get("delay", 0.0)))  # a trial that takes time, for resume tests
        return Measurement(
            values={
                "score": float(config.get("score", 1.0)),
                "latency_s": time.perf_counter() - start,
            },
            # where and when it ran: executors' tests check pinning and overlap with these
            metrics={
                "pid": os.getpid(),
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "started_at": started_at,
                "ended_at": time.time(),
                "compile_s": compile_s,
            },
        )


OBJECTIVE = FaultsObjective


def _gpu_fault(fault: str) -> None:
    """``cuda_oom``: ask the GPU for 4 PiB; ``illegal_address``: a Triton kernel stores 8 TiB
    past the end of a 4-byte buffer, and the next synchronisation reports the illegal memory
    access (the CUDA context is lost with it: only a fresh process gets the GPU back).

    Raises:
        Infeasible: no CUDA device here.
    """
    from autotune.failures import Infeasible

    if not torch.cuda.is_available():
        raise Infeasible(f"the {fault} fault needs a CUDA device")
    if fault == "cuda_oom":
        torch.empty(2**52, dtype=torch.uint8, device="cuda")
        return
    import triton
    import triton.language as tl

    @triton.jit
    def wild_store(ptr, offset):  # noqa: ANN001, ANN202 - a Triton kernel
        tl.store(ptr + offset, 1.0)

    target = torch.zeros(1, device="cuda")
    wild_store[(1,)](target, 1 << 41)  # elements of 4 bytes: 8 TiB away
    torch.cuda.synchronize()


def _exhaust_host_memory(headroom: int = 512 << 20) -> None:
    """Allocate host memory until it runs out, under an address-space limit of the current
    size plus ``headroom`` (so the machine's other processes never feel it); the limit is put
    back before returning.

    Raises:
        MemoryError: always, as a real allocation failure.
    """
    import resource

    with open("/proc/self/statm") as f:
        current = int(f.read().split()[0]) * resource.getpagesize()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (current + headroom, hard))
    blocks = []
    try:
        while True:
            blocks.append(bytearray(32 << 20))
    finally:
        blocks.clear()
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
