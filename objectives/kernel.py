"""The shared shape of a kernel objective: what every Triton workload does the same way.

A trial of a kernel objective: check the config (a config the kernel cannot express is
``infeasible``), compile it (``compile``: typed failures; the compile-ahead pool calls the
same method through :meth:`KernelObjective.prepare`), draw fresh random inputs, poison the
outputs, run the kernel once and check it against a higher-precision reference (the
correctness gate, :mod:`autotune.correctness`), then time the kernel and its references
interleaved in one process (:func:`autotune.timing.interleaved`), and turn the times into
figures. A subclass writes only what differs:

========================  ==================================================================
``problem_keys``          the problem's keys (anything else is refused)
``default_problem``       sized to the device
``default_config``        the untuned config (trial 0)
``checked_config``        the config as the kernel's arguments; ``ValueError`` if inexpressible
``compile``               compile without running (optional; Triton's ``warmup``)
``inputs``                fresh inputs and the output buffers, from a seeded generator
``outputs``               names of the tensors the kernel writes (poisoned first)
``launcher``              a no-argument function that launches the kernel once
``check``                 compare the outputs with the reference; returns the error figures
``references``            what the kernel is timed against, e.g. ``{"cublas": fn}``
``figures``               values (what the sampler ranks) and metrics, from the times
``footprint_bytes``       bytes one launch touches (sizes the rotation of input sets)
========================  ==================================================================

A problem whose footprint fits in L2 twice over is timed *streamed*: the kernel and each
reference launched back to back from a CUDA graph over several input sets drawn alike, which
together span four L2 caches (:func:`input_sets`, :func:`autotune.timing.bench_streamed`);
only the first set is checked.

Example (the RMSNorm objective, under the interpreter on a CPU machine):
    >>> from autotune.objectives import get_objective
    >>> obj = get_objective("rmsnorm")({"M": 4, "N": 64, "dtype": "bf16", "residual": True})
    >>> m = obj.evaluate({"BLOCK_N": 64, "ROWS": 2, "num_warps": 1})
    >>> sorted(m.values), m.metrics["compile_s"] >= 0
    (['copy_fraction', 'gbps'], True)
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import torch

from autotune.correctness import poison
from autotune.device import read_telemetry
from autotune.failures import Infeasible, TrialFailure, WrongResult, classify
from autotune.kernels import split_k_workspace
from autotune.kernels.interpreter import cuda_present
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.timing import Timing, interleaved
from autotune.triton_failures import compile_failure

#: the largest size of a kernel problem: the kernels index with 32-bit offsets
MOST_SIZE = 2**31 - 1


def memory_bytes(device: str) -> int:
    """The memory of ``device`` ("cuda": the current GPU's; "cpu": the machine's), or 0
    where it cannot be read.

    Example:
        >>> memory_bytes("cpu") > 0
        True
    """
    try:
        if device == "cuda":
            return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError, RuntimeError):
        return 0


#: On the GPU: the kernel and its references alternate launch by launch, each launch timed
#: alone after an L2 flush, the order shuffled every iteration, for 5 ms of warm-up and 3 x
#: 15 ms of timed launches each (:func:`autotune.timing.alternating`; or, for a problem that
#: fits in L2 twice over, 3 rounds of :data:`STREAMED_REP_MS` of launches streamed over rotated
#: input sets from a CUDA graph, see :func:`input_sets`, a candidate's time the median of its
#: round medians).
GPU_TIMING: dict[str, float] = {"rounds": 3, "warmup_ms": 5.0, "rep_ms": 15.0}
#: Streamed, a round's graph holds about 3 ms of launches (e.g. about 240 of a 12.5-us decode
#: product on an H200, 30 passes over 8 sets), replayed 10 times: each sample is a mean of many
#: launches.
STREAMED_REP_MS = 3.0
#: Under the interpreter: one untimed and one timed call each, enough to exercise the path.
CPU_TIMING: dict[str, float] = {"rounds": 1, "warmup_ms": 0.0, "rep_ms": 0.0}

Tensors = dict[str, torch.Tensor]

#: A problem whose kernel footprint (``footprint_bytes``) is under this many L2 caches is timed
#: streamed: launches over rotated input sets, back to back
#: (:func:`autotune.timing.bench_streamed`).
STREAM_BELOW_L2 = 2
#: ... with enough sets that together they span this many L2 caches (no launch finds its
#: inputs there), at most :data:`MAX_INPUT_SETS`.
STREAM_SPAN_L2 = 4
MAX_INPUT_SETS = 64


def input_sets(footprint_bytes: int, l2_bytes: int) -> int:
    """How many input sets a trial's launches rotate through, from the bytes one launch of the
    kernel touches: 1 (one set, timed with L2 flushed between runs) for a footprint of at least
    :data:`STREAM_BELOW_L2` L2 caches or a device of unknown L2, else enough sets that their
    footprints together span :data:`STREAM_SPAN_L2` L2 caches.

    Example (a 50 MiB L2, as on an H100 or H200):
        >>> l2 = 50 * 2**20
        >>> input_sets(2**30, l2)  # 8192^2 bf16 operands: far larger than L2
        1
        >>> input_sets(32 * 2**20, l2)  # a 1 x 4096 x 4096 bf16 product: B is 32 MiB
        7
        >>> input_sets(9 * 2**20, l2)  # the same product with int4 weights
        23
    """
    if l2_bytes <= 0 or footprint_bytes >= STREAM_BELOW_L2 * l2_bytes:
        return 1
    span = STREAM_SPAN_L2 * l2_bytes
    return min(MAX_INPUT_SETS, max(2, -(-span // max(1, footprint_bytes))))


def check_dtype(name: str, dtypes: Iterable[str]) -> None:
    """Refuse a ``dtype`` problem value the kernel has no type for, naming the value given and
    those it takes (as ``model=`` presets are named).

    Example:
        >>> check_dtype("float7", ("bf16", "fp16"))
        Traceback (most recent call last):
        ...
        ValueError: dtype='float7' is not one of bf16, fp16
    """
    if name not in dtypes:
        raise ValueError(f"dtype={name!r} is not one of {', '.join(sorted(dtypes))}")


def tensor_bytes(tensors: Tensors) -> int:
    """Bytes of the distinct storages among ``tensors`` (a view counts with its base once).

    Example:
        >>> a = torch.zeros(4, 8)
        >>> tensor_bytes({"a": a, "a_t": a.t(), "b": torch.zeros(2, dtype=torch.int8)})
        130
    """
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for t in tensors.values() if isinstance(t, torch.Tensor)}  # fmt: skip
    return sum(storages.values())


class KernelObjective(Objective):
    """Base of the Triton kernel objectives; see the module docstring."""

    problem_keys: ClassVar[tuple[str, ...]] = ()
    #: names of the tensors (in :meth:`inputs`) that the kernel writes
    outputs: ClassVar[tuple[str, ...]] = ()
    #: what the first reference is, in words, for the record
    baseline: ClassVar[str] = ""
    #: False: always one input set, L2 flushed (e.g. a compute-bound kernel whose references
    #: are not all known to run from a CUDA graph)
    streams: ClassVar[bool] = True
    compiles = True

    @classmethod
    def slo_metrics(cls) -> tuple[str, ...]:
        """The kernel's own median time, spread and compile time (:meth:`evaluate` reports
        them all)."""
        return ("ms", "spread", "compile_s")

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(problem)
        unknown = set(self.problem) - set(self.problem_keys)
        if unknown:
            raise ValueError(f"unknown {self.name} problem keys {sorted(unknown)}")
        #: "cuda", or "cpu" where the kernels run under Triton's interpreter
        self.device = "cuda" if cuda_present() else "cpu"
        #: the L2 cache the rotation of input sets must outrun (:func:`input_sets`); none
        #: is emulated on the CPU, where one set is timed
        self.l2_bytes = 0
        if self.device == "cuda":
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            self.l2_bytes = int(getattr(props, "L2_cache_size", 0))
        self._draws = 0  # seeds each trial's fresh inputs

    # -- what a subclass writes ---------------------------------------------------------
    def config_keys(self) -> tuple[str, ...]:
        """The tunables a config may set: the default's, unless the kernel has optional ones
        (a schedule's own parameter, off by default)."""
        return tuple(self.default_config() or {})

    def checked_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` completed from the default and checked; ValueError if the kernel
        cannot express it."""
        return {**(self.default_config() or {}), **config}

    def compile(self, cfg: dict[str, Any]) -> Any:
        """Compile ``cfg`` for this problem without running it; return Triton's compiled
        kernel (or None: it compiles at its first launch)."""
        return None

    def inputs(self, generator: torch.Generator) -> Tensors:
        raise NotImplementedError

    def launcher(self, cfg: dict[str, Any], tensors: Tensors) -> Callable[[], None]:
        raise NotImplementedError

    def check(self, tensors: Tensors) -> dict[str, float]:
        raise NotImplementedError

    def references(self, tensors: Tensors) -> dict[str, Callable[[], None]]:
        return {}

    def figures(
        self, times: dict[str, Timing], tensors: Tensors
    ) -> tuple[dict[str, float], dict[str, Any]]:
        raise NotImplementedError

    def check_sizes(
        self,
        sizes: dict[str, int],
        tensor_elements: int,
        element_bytes: int = 2,
        reference_elements: int = 0,
    ) -> None:
        """Refuse, before any trial, a size below 1 or past :data:`MOST_SIZE` (the kernels'
        32-bit offsets), or tensors (``tensor_elements`` of ``element_bytes``, and the
        ``reference_elements`` of float64 its correctness check computes beside them) larger
        than the device's memory: every trial would crash or run out of memory.

        Example:
            >>> from autotune.objectives import get_objective
            >>> get_objective("rmsnorm")({"M": 0, "N": 64})
            Traceback (most recent call last):
            ...
            ValueError: M=0 must be a whole number in 1..2147483647
        """
        for name, value in sizes.items():
            if not 1 <= value <= MOST_SIZE:
                raise ValueError(f"{name}={value} must be a whole number in 1..{MOST_SIZE}")
        need = tensor_elements * element_bytes + 8 * reference_elements
        have = memory_bytes(self.device)
        if have and need > have:
            shown = ",".join(f"{name}={value}" for name, value in sizes.items())
            check = " with the float64 reference of the check" if reference_elements else ""
            raise ValueError(f"{shown}: the problem's tensors take {need / 2**30:,.1f} GiB"
                             f"{check}, more than the {self.device}'s {have / 2**30:,.1f} GiB "
                             "of memory")  # fmt: skip

    def footprint_bytes(self, tensors: Tensors) -> int:
        """Bytes one launch of the kernel reads and writes, which sizes the rotation of input
        sets (:func:`input_sets`); by default every tensor of the set."""
        return tensor_bytes(tensors)

    # -- shared -------------------------------------------------------------------------
    @property
    def timing(self) -> dict[str, float]:
        return GPU_TIMING if self.device == "cuda" else CPU_TIMING

    def config_or_infeasible(self, config: dict[str, Any]) -> dict[str, Any]:
        """The checked config; Infeasible when the kernel cannot express it.

        Raises:
            ValueError: a key the kernel does not have (a mistake, not a config to learn from).
        """
        unknown = set(config) - set(self.config_keys())
        if unknown:
            raise ValueError(f"unknown {self.name} config keys {sorted(unknown)}")
        try:
            return self.checked_config(config)
        except ValueError as exc:
            raise Infeasible(str(exc)) from exc

    def prepare(self, config: dict[str, Any]) -> None:
        """Compile ``config`` only (the compile-ahead pool calls this): the kernel lands in
        Triton's on-disk cache, where the trial that runs it finds it.

        Raises:
            Infeasible, CompileError, OutOfResources: as the trial itself would.
        """
        cfg = self.config_or_infeasible(config)
        try:
            self.compile(cfg)
        except Exception as exc:  # noqa: BLE001 - every compile failure becomes a typed one
            raise compile_failure(exc) from exc

    def generator(self) -> torch.Generator:
        """A generator seeded anew for each trial: fresh inputs, reproducible per trial."""
        self._draws += 1
        return torch.Generator(device=self.device).manual_seed(self._draws)

    def sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Check, compile, run once and check the result, then time against the references.

        Raises:
            Infeasible: a config the kernel cannot express.
            CompileError, OutOfResources: compiling or loading the kernel failed.
            WrongResult: the result is off, before anything is timed; or the timed launches
                left a K-split tile counter off zero (not every tile summed).
            TrialFailure: whatever else went wrong, typed by ``classify``.
        """
        cfg = self.config_or_infeasible(config)
        started = time.perf_counter()
        # K-split tile counters start at zero whatever an earlier trial left in them
        split_k_workspace.counters_off_zero(self.device, reset=True)
        tensors = self.inputs(self.generator())
        try:
            compiled = self.compile(cfg)
            run = self.launcher(cfg, tensors)
            poison(*(tensors[name] for name in self.outputs))
            run()  # compiles here when ``compile`` did not
            self.sync()
        except TrialFailure:
            raise
        except ValueError as exc:  # the launcher refused the config for this problem
            raise Infeasible(str(exc)) from exc
        except Exception as exc:  # noqa: BLE001 - a compile or launch failure is data
            raise compile_failure(exc) from exc
        compile_s = time.perf_counter() - started
        errors = self.check(tensors)
        sets = input_sets(self.footprint_bytes(tensors), self.l2_bytes) if self.streams else 1
        try:
            candidates = self._candidates(cfg, run, tensors, sets)
            timing = dict(self.timing)
            if sets > 1 and self.device == "cuda":
                # a graph's capture and first replay are the warm-up
                timing.update(warmup_ms=0.0, rep_ms=STREAMED_REP_MS)
            times = interleaved(candidates, device_type=self.device, **timing)
        except TrialFailure:
            raise
        except Exception as exc:  # noqa: BLE001
            raise classify(exc) from exc
        left = split_k_workspace.counters_off_zero(self.device, reset=True)
        if left:
            raise WrongResult(
                f"{left} K-split tile counters left off zero by the timed launches: some tiles "
                "were not summed, so the timings are not of the whole product"
            )
        values, metrics = self.figures(times, tensors)
        metrics = {
            "ms": times["kernel"].median_ms,
            "spread": times["kernel"].spread,
            **{f"{name}_ms": t.median_ms for name, t in times.items() if name != "kernel"},
            **metrics,
            "compile_s": compile_s,
            "baseline": self.baseline,
            "timing_protocol": self.protocol(list(times), sets),
            "input_sets": sets,
            **errors,
        }
        shared = getattr(getattr(compiled, "metadata", None), "shared", None)
        if shared is not None:
            metrics["shared_memory_bytes"] = int(shared)
        return Measurement(values=values, metrics=metrics, telemetry=read_telemetry())

    def _candidates(
        self, cfg: dict[str, Any], run: Callable[[], None], tensors: Tensors, sets: int
    ) -> dict[str, Callable[[], None] | list[Callable[[], None]]]:
        """The kernel and its references, each one function, or with ``sets`` > 1 a list of
        one function per input set: the checked set first, then fresh sets drawn like it."""
        if sets == 1:
            return {"kernel": run, **self.references(tensors)}
        generator = self.generator()
        every = [tensors] + [self.inputs(generator) for _ in range(sets - 1)]
        launches: dict[str, list[Callable[[], None]]] = {"kernel": [run]}
        for extra in every[1:]:
            launches["kernel"].append(self.launcher(cfg, extra))
        for one in every:
            for name, fn in self.references(one).items():
                launches.setdefault(name, []).append(fn)
        return launches

    def protocol(self, names: list[str], sets: int = 1) -> str:
        t = self.timing
        text = (
            f"interleaved {'/'.join(names)}, alternating launch by launch (each launch alone "
            f"after an L2 flush, the order shuffled every iteration; warmup {t['warmup_ms']:g} "
            f"ms, {t['rounds'] * t['rep_ms']:g} ms of timed launches each), medians"
        )
        if sets > 1:
            text = (
                f"interleaved {'/'.join(names)}, {t['rounds']:g} rounds of a CUDA graph of "
                f"{STREAMED_REP_MS:g} ms of launches back to back over {sets} rotated input sets "
                f"(do_bench_cudagraph, 10 replays; no L2 flush, the sets span {STREAM_SPAN_L2} "
                "L2 caches), median of round medians"
            )
        if self.device != "cuda":
            text = f"cpu interpreter wall clock, 1 timed run each of {'/'.join(names)}"
            text += f" over {sets} input sets" if sets > 1 else ""
            text += ": not a GPU figure"
        return text

    def close(self) -> None:
        if self.device == "cuda":
            torch.cuda.empty_cache()
