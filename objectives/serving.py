"""Serving objective: goodput of the Llama-style decoder served by the project's continuous-
batching engine (:mod:`autotune.objectives.serving_engine`) under a request trace.

Each trial builds the model (random weights, nothing downloaded) in the config's weight format,
a paged KV cache of the problem's size (``kv_cache_mb``: fp8 holds twice the tokens of bf16),
warms up on two requests (sent at once), then replays the trace in real time: Poisson arrivals
at ``rate`` requests a second (or ``trace=FILE.jsonl``, from its first arrival on), lengths
around ``prompt_len`` / ``output_len``.
Per request it times TTFT (arrival to first token) and TPOT (the mean gap between the later
tokens); a request meets the SLO when TTFT <= ``slo_ttft_ms`` and TPOT <= ``slo_tpot_ms``, and
goodput counts the output tokens of those requests a second. ``--slo ttft_p99_ms=500,...``
turns measured percentiles into constraints the sampler is told about, sets those per-request
limits, and stops a trial as soon as its p99 is certain to break one (``stop_ttft_p99_ms``,
``stop_tpot_p99_ms``; :mod:`~autotune.objectives.serving_slo`): ``slo_violated``.

A quality gate guards quantized weights and fp8 caches: the next-token distributions of fixed
prompts must stay within ``max_kl`` (mean KL divergence, nats) of the bf16 model with a bf16
cache, else ``wrong_result``; top-1 agreement is reported too.

Tunables: ``max_num_seqs``, ``max_num_batched_tokens`` (the step's token budget, chunked
prefill), ``block_size``, ``kv_dtype`` (bf16 | fp8), ``weights`` (bf16 | int8 | int4),
``policy`` (fcfs | prefill-first), ``attention_backend`` (default | math | efficient: SDPA's
over the gathered blocks; paged: a Triton kernel that reads the blocks in place), and
``cuda_graphs`` (steps replayed from CUDA graphs captured per bucket of tokens,
:mod:`autotune.kernels.decode_graphs`: decode steps, and with ``paged`` attention the mixed
steps of prefill chunks too; on by default on a GPU, as in vLLM; the capture's seconds are
reported as ``graph_capture_s`` and, like a compile, left out of the served time).

Example (an SLO of a minute, which every request meets however loaded the machine):
    >>> obj = ServingObjective({**ServingObjective.default_problem({"type": "cpu"}),
    ...                         "num_requests": 4, "device": "cpu",
    ...                         "slo_ttft_ms": 60_000.0, "slo_tpot_ms": 60_000.0})
    >>> m = obj.evaluate(obj.default_config())
    >>> m.metrics["finished"], m.metrics["within_slo"], m.values["goodput_tok_s"] > 0
    (4, 4, True)
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from itertools import count
from typing import Any, ClassVar

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.device import DeviceInfo, detect_device, read_telemetry
from autotune.failures import Infeasible, TrialTimeout, WrongResult
from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.kernels.paged_kv import KV_DTYPES
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.objectives.serving_config import (
    CONFIG_KEYS,
    check_config_value,
    check_space_values,
    runnable_values,
)
from autotune.objectives.serving_engine import Request, Scheduler, run_trace
from autotune.objectives.serving_slo import SloWatch
from autotune.objectives.serving_trace import (
    POISSON_KEYS,
    check_context,
    check_positive,
    check_span,
    check_tpot_measurable,
    problem_trace,
    without_poisson_keys,
)
from autotune.objectives.train_loop import peak_rss_bytes, reset_peak_rss
from autotune.space.params import Param

#: SDPA's backend over the gathered blocks; ``paged``: the Triton kernel reads them in place
ATTENTION = {"default": None, "math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "paged": None}  # fmt: skip
_QUALITY_PROMPTS = 8
#: ``--slo ttft_p99_ms=500`` also makes 500 ms the TTFT a request must meet to count in goodput
SLO_PROBLEM_KEYS = {"ttft_p99_ms": ("slo_ttft_ms",), "tpot_p99_ms": ("slo_tpot_ms",)}
#: ... and the limit this engine stops a trial on (:mod:`~autotune.objectives.serving_slo`)
STOP_KEYS = {"ttft_p99_ms": "stop_ttft_p99_ms", "tpot_p99_ms": "stop_tpot_p99_ms"}


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation; None for no values.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([5.0], 99)
        (2.5, 5.0)
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class RequestTiming:
    """When a request was sent, got its first and last token (None: it never did), how many
    tokens it got, and whether it completed (finished, or streamed without an error)."""

    start: float
    first: float | None
    last: float | None
    tokens: int
    complete: bool


#: The latencies :func:`latency_summary` reports, the figures a serving sweep's ``--slo`` may
#: cap.
LATENCY_FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "mean_tpot_ms")


def latency_summary(
    rows: list[RequestTiming], wall: float, slo_ttft_ms: float, slo_tpot_ms: float
) -> dict[str, Any]:
    """TTFT and TPOT percentiles, output tokens/s and goodput (the tokens/s of complete
    requests within both SLO limits) of a replayed trace; the engine's and a server's alike.

    Example:
        >>> rows = [RequestTiming(0.0, 0.1, 0.5, 5, True), RequestTiming(0.0, 0.9, 1.0, 3, True)]
        >>> m = latency_summary(rows, wall=1.0, slo_ttft_ms=500, slo_tpot_ms=200)
        >>> m["goodput_tok_s"], m["output_tok_s"], m["within_slo"]
        (5.0, 8.0, 1)
    """
    ttft = [(r.first - r.start) * 1e3 for r in rows if r.first is not None]
    gaps = {id(r): (r.last - r.first) * 1e3 / (r.tokens - 1) for r in rows
            if r.first is not None and r.last is not None and r.tokens > 1}  # fmt: skip
    tpot = list(gaps.values())
    good = [r for r in rows if r.complete and r.first is not None
            and (r.first - r.start) * 1e3 <= slo_ttft_ms
            and gaps.get(id(r), 0.0) <= slo_tpot_ms]  # fmt: skip
    return {
        "goodput_tok_s": sum(r.tokens for r in good) / wall,
        "output_tok_s": sum(r.tokens for r in rows) / wall,
        "ttft_p50_ms": percentile(ttft, 50), "ttft_p99_ms": percentile(ttft, 99),
        "tpot_p50_ms": percentile(tpot, 50), "tpot_p99_ms": percentile(tpot, 99),
        "mean_tpot_ms": statistics.fmean(tpot) if tpot else None,
        "within_slo": len(good), "wall_s": wall,
    }  # fmt: skip


class ServingObjective(Objective):
    """Goodput (output tokens/s of requests within the SLO) of the engine under a trace."""

    name: ClassVar[str] = "serving"
    space: ClassVar[str] = "serving.yaml"
    directions: ClassVar[dict[str, str]] = {
        "goodput_tok_s": "maximize",
        "ttft_p99_ms": "minimize",
    }
    slo_problem_keys: ClassVar[dict[str, tuple[str, ...]]] = {
        metric: (*keys, STOP_KEYS[metric]) for metric, keys in SLO_PROBLEM_KEYS.items()
    }

    @classmethod
    def slo_metrics(cls) -> tuple[str, ...]:
        """The latencies, and the replay's peak memory (:func:`check_peak_measurable`)."""
        return (*LATENCY_FIGURES, "peak_memory_gb")

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        """A 0.78B model (the 760m preset) at 20 requests/s on a GPU; a 1M one on a CPU.

        Example:
            >>> ServingObjective.default_problem({"type": "cpu"})["d_model"]
            128
        """
        # stop_*: a limit (ms) on the trace's p99 to stop a sweep's trial on once it is
        # certain to be broken (0: off; --slo sets them)
        common = {"seed": 0, "max_kl": 0.05, "trace": "", "model": "", "stop_ttft_p99_ms": 0.0,
                  "stop_tpot_p99_ms": 0.0}  # fmt: skip
        if device.get("type") == "cuda":
            return {**common, "vocab": 32000, "d_model": 1536, "n_layers": 24, "n_heads": 16,
                    "max_context": 2048, "rate": 20.0, "num_requests": 200, "prompt_len": 512,
                    "output_len": 128, "kv_cache_mb": 16384, "slo_ttft_ms": 500.0,
                    "slo_tpot_ms": 50.0}  # fmt: skip
        return {**common, "vocab": 512, "d_model": 128, "n_layers": 2, "n_heads": 4,
                "max_context": 256, "rate": 40.0, "num_requests": 24, "prompt_len": 48,
                "output_len": 16, "kv_cache_mb": 4, "slo_ttft_ms": 250.0,
                "slo_tpot_ms": 25.0}  # fmt: skip

    @classmethod
    def resolve_problem(cls, problem: dict[str, Any]) -> dict[str, Any]:
        """``model=NAME`` takes the training step's preset sizes (``--problem model=760m``);
        ``trace=FILE.jsonl`` drops the Poisson trace's keys it replaces (``rate``, ...).

        Example:
            >>> problem = ServingObjective.default_problem({"type": "cpu"})
            >>> "rate" in ServingObjective.resolve_problem({**problem, "trace": "t.jsonl"})
            False
        """
        from autotune.objectives.train_step import TrainStepObjective

        return without_poisson_keys(TrainStepObjective.resolve_problem(problem))

    def __init__(self, problem: dict[str, Any]) -> None:
        super().__init__(self.resolve_problem(problem))
        p = self.problem
        # a cache of 0 MB ruled out every config one trial at a time (757 in 20 s, exit 1)
        # (max_context: before the model's config refuses it as its seq_len)
        check_positive(p, (*POISSON_KEYS, "slo_ttft_ms", "slo_tpot_ms", "kv_cache_mb",
                           "max_context"))  # fmt: skip
        check_seed(int(p["seed"]))
        for key in STOP_KEYS.values():  # below 0 no trial was watched, as at 0 (off)
            if not float(p.get(key) or 0.0) >= 0:
                raise ValueError(f"{key}={p[key]} must be 0 (off) or above")
        if not float(p["max_kl"]) >= 0:  # below 0 every quantized config failed its gate
            raise ValueError(f"max_kl={p['max_kl']} must be 0 or more")
        info = detect_device(p.get("device", "auto"))
        check_cache_fits(p["kv_cache_mb"], info)
        self.device = (
            torch.device("cuda", info.index) if info.type == "cuda" else torch.device("cpu")
        )
        self.model_config = LlamaConfig(vocab=int(p["vocab"]), d_model=int(p["d_model"]),
                                        n_layers=int(p["n_layers"]), n_heads=int(p["n_heads"]),
                                        seq_len=int(p["max_context"]))  # fmt: skip
        entries = problem_trace(p)
        check_context(entries, p, self.model_config.seq_len)
        self.entries = entries
        self._reference: torch.Tensor | None = None

    def check_space(self, params: Mapping[str, Param]) -> None:
        """Refuse, before the sweep, a KV cache (``kv_cache_mb``) that holds no request of the
        trace at any ``kv_dtype`` and ``block_size`` the space gives (:meth:`_num_blocks`):
        every config would be infeasible (model=1b's 128 KiB a token in the CPU problem's 4
        MB: a sweep refused 3,960 of them in 264 s).

        Raises:
            ValueError: naming ``kv_cache_mb``, the most tokens it holds and the longest
                request.
        """
        default = self.default_config()
        dtypes = runnable_values(params, "kv_dtype", default["kv_dtype"])
        blocks = runnable_values(params, "block_size", default["block_size"])
        if not dtypes or not blocks:  # no value to try: check_space_values refuses the space
            return
        for dtype, block in itertools.product(dtypes, blocks):
            with contextlib.suppress(Infeasible):
                self._num_blocks({"kv_dtype": dtype, "block_size": block, "cuda_graphs": False})
                return
        per_token = {dtype: self._kv_bytes_per_token(dtype) for dtype in dtypes}
        best = min(per_token, key=per_token.__getitem__)
        mb = self.problem["kv_cache_mb"]
        tokens = int(float(mb) * 2**20) // per_token[best]
        raise ValueError(f"kv_cache_mb={mb} holds no request of the trace at any kv_dtype and "
                         f"block_size of the space: at most {tokens} "
                         f"tokens ({best}, {per_token[best] / 1024:g} KiB a token), and its "
                         f"longest request takes {self._longest()}")  # fmt: skip

    def check_space_values(self, params: Mapping[str, Param]) -> None:
        """Refuse a parameter of the space whose values no trial could run
        (:func:`~autotune.objectives.serving_config.check_space_values`)."""
        check_space_values(params)

    def check_slo(self, slo: dict[str, float]) -> None:
        """Refuse a ``--slo`` limit no trial could measure (:func:`~autotune.objectives.
        serving_trace.check_tpot_measurable`)."""
        check_tpot_measurable(self.entries, slo)
        check_peak_measurable(self.device.type, slo)

    def check_trial_timeout(self, timeout_s: float) -> None:
        """Refuse, before the sweep, a trace every trial would replay past the trial timeout
        (:func:`~autotune.objectives.serving_trace.check_span`)."""
        check_span(self.entries, timeout_s)

    def default_config(self) -> dict[str, Any]:
        """vLLM's defaults for online serving: 256 sequences, a 2048-token step budget with
        chunked prefill, 16-token blocks, a bf16 cache and weights, FCFS, decode CUDA graphs
        (on a GPU)."""
        return {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "block_size": 16,
                "kv_dtype": "bf16", "weights": "bf16", "policy": "fcfs",
                "attention_backend": "default",
                "cuda_graphs": self.device.type == "cuda"}  # fmt: skip

    def config_keys(self) -> tuple[str, ...]:
        """Every knob :data:`CONFIG_KEYS` names."""
        return CONFIG_KEYS

    def _checked(self, config: dict[str, Any]) -> dict[str, Any]:
        merged = {**self.default_config(), **config}
        unknown = sorted(set(merged) - set(CONFIG_KEYS))
        if unknown:
            raise Infeasible(f"unknown serving config keys: {', '.join(unknown)}")
        for key in CONFIG_KEYS:
            check_config_value(key, merged[key])
        # int4 groups of 128 input features, or of 64 where 128 does not divide them (the
        # MLP's hidden width is a multiple of 64 already)
        if merged["weights"] == "int4" and self.model_config.d_model % 64:
            raise Infeasible("int4 weights need d_model to be a multiple of 64, their smallest "
                             "group of input features")  # fmt: skip
        if merged["cuda_graphs"] and self.device.type != "cuda":
            raise Infeasible("cuda_graphs=true needs a CUDA device")
        return merged

    def _model(self, weights: str, attention_backend: str = "default") -> InferenceModel:
        torch.manual_seed(int(self.problem["seed"]))
        reads = "paged" if attention_backend == "paged" else "gather"
        with torch.device(self.device):
            return InferenceModel(Llama(self.model_config), weights, reads)

    def _prompts(self) -> list[list[int]]:
        gen = torch.Generator().manual_seed(int(self.problem["seed"]) + 7)
        length = min(64, self.model_config.seq_len)
        return [torch.randint(0, self.model_config.vocab, (length,), generator=gen).tolist()
                for _ in range(_QUALITY_PROMPTS)]  # fmt: skip

    def _logits(self, model: InferenceModel, kv_dtype: str) -> torch.Tensor:
        prompts = self._prompts()
        cache = model.new_cache(len(prompts) * (-(-len(prompts[0]) // 16)), 16, kv_dtype)
        for seq, prompt in enumerate(prompts):
            cache.allocate(seq, len(prompt))
        return model.forward([Chunk(s, 0, p) for s, p in enumerate(prompts)], cache)

    def quality(self, model: InferenceModel, kv_dtype: str) -> dict[str, float]:
        """Mean KL divergence and top-1 agreement of the next-token distributions against the
        bf16 model with a bf16 cache (computed once per process)."""
        if self._reference is None:
            self._reference = self._logits(self._model("bf16"), "bf16")
            gc.collect()
        ref = torch.log_softmax(self._reference, -1)
        got = torch.log_softmax(self._logits(model, kv_dtype), -1)
        kl = float((ref.exp() * (ref - got)).sum(-1).mean())
        agree = float((ref.argmax(-1) == got.argmax(-1)).float().mean())
        return {"kl": kl, "top1_agreement": agree}

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Serve the trace with ``config``; see the module docstring for what is measured.

        Raises:
            Infeasible: unknown keys or values; a cache too small for one request.
            WrongResult: quantized weights or an fp8 cache beyond ``max_kl``.
            TrialTimeout: requests still unfinished at :meth:`replay_deadline_s`.
        """
        c = self._checked(config)
        num_blocks = self._num_blocks(c)  # before the model is built: a config and the problem
        p, cuda = self.problem, self.device.type == "cuda"
        cfg = self.model_config
        if cuda:
            torch.cuda.empty_cache()
        model = self._model(c["weights"], c["attention_backend"])
        quality: dict[str, float] = {}
        if c["weights"] != "bf16" or c["kv_dtype"] == "fp8":
            quality = self.quality(model, c["kv_dtype"])
            check_quality(quality["kl"], float(p["max_kl"]))
        sync = (lambda: torch.cuda.synchronize(self.device)) if cuda else (lambda: None)
        backend = ATTENTION[c["attention_backend"]]
        attention = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
        gen = torch.Generator().manual_seed(int(p["seed"]) + 1)

        def requests(entries) -> list[Request]:
            return [Request(i, e.arrival_s, torch.randint(0, cfg.vocab, (e.prompt_len,),
                                                          generator=gen).tolist(), e.output_len)
                    for i, e in enumerate(entries)]  # fmt: skip

        # one cache for the warm-up and the measured replay (the warm-up's requests all end,
        # freeing their blocks), so that decode graphs are captured over it once
        cache = model.new_cache(num_blocks, int(c["block_size"]), c["kv_dtype"])

        def scheduler() -> Scheduler:
            return Scheduler(cache, int(c["max_num_seqs"]), int(c["max_num_batched_tokens"]),
                             c["policy"])  # fmt: skip

        with attention:
            graphs = None
            if c["cuda_graphs"]:  # captured under the trial's SDPA backend
                graphs = DecodeGraphs(model, cache, int(c["max_num_seqs"]),
                                      max_tokens=int(c["max_num_batched_tokens"]))  # fmt: skip
            run = {"sync": sync, "graphs": graphs}
            # the warm-up's two requests at once: the second's gap in the trace (an hour's lull
            # of a recorded one) measures nothing
            warm_up = [replace(e, arrival_s=0.0) for e in self.entries[:2]]
            run_trace(model, scheduler(), requests(warm_up), **run)
            if graphs is not None:
                graphs.steps = 0
            sched = scheduler()
            measured = requests(self.entries)
            watch = self._slo_watch(measured, report)
            if cuda:  # the replay's peak: not the build's fp32 copy or the gate's bf16 model
                torch.cuda.reset_peak_memory_stats(self.device)
            rss_reset = not cuda and reset_peak_rss()  # a CPU's: the process's resident set
            energy_before = _energy_mj(self.device)
            started = time.perf_counter()
            deadline = self.replay_deadline_s()
            done = run_trace(model, sched, measured, deadline_s=deadline, after_step=watch, **run)
            wall = time.perf_counter() - started
            energy = _energy_mj(self.device)
        unserved = _unserved(done, deadline)
        metrics = self._metrics(done, wall, sched)
        if graphs is not None:
            metrics["graph_capture_s"] = graphs.capture_s
            metrics["graph_step_share"] = graphs.steps / max(1, sched.steps)
        out_tokens = sum(len(r.generated) for r in done)
        if energy is not None and energy_before is not None and out_tokens:
            metrics["energy_j_per_token"] = (energy - energy_before) / 1e3 / out_tokens
        metrics.update(quality)
        metrics["weight_gb"] = model.weight_bytes() / 1e9
        if cuda:
            metrics["peak_memory_gb"] = torch.cuda.max_memory_allocated(self.device) / 1e9
        elif rss_reset and (rss := peak_rss_bytes()) is not None:
            metrics["peak_memory_gb"] = rss / 1e9
        report(0, metrics["goodput_tok_s"])
        model = sched = cache = graphs = None  # before the next trial builds its model
        gc.collect()
        if unserved:  # its percentiles would cover only the requests it got to
            raise TrialTimeout(unserved)
        values = {"goodput_tok_s": metrics.pop("goodput_tok_s")}
        if metrics.get("ttft_p99_ms") is not None:
            values["ttft_p99_ms"] = metrics["ttft_p99_ms"]
        return Measurement(values=values, metrics=metrics,
                           telemetry=read_telemetry(self.device.index or 0))  # fmt: skip

    def _num_blocks(self, c: dict[str, Any]) -> int:
        """The KV cache's blocks: ``kv_cache_mb`` in blocks of the config's size and dtype.

        Raises:
            Infeasible: a cache that holds no request of the trace (the decode graphs' scratch
                block aside).
        """
        per_token = self._kv_bytes_per_token(c["kv_dtype"])
        block = int(c["block_size"])
        num_blocks = int(float(self.problem["kv_cache_mb"]) * 2**20 // (per_token * block))
        longest = self._longest()
        usable = num_blocks - int(c["cuda_graphs"])  # the decode graphs' scratch block
        if usable * block < longest:
            raise Infeasible(f"a KV cache of {usable} blocks holds less than one request")
        return num_blocks

    def _kv_bytes_per_token(self, kv_dtype: str) -> int:
        """The KV cache's bytes a token: its key and value in every layer."""
        element = torch.empty((), dtype=KV_DTYPES[kv_dtype]).element_size()
        return 2 * self.model_config.n_layers * self.model_config.d_model * element

    def _longest(self) -> int:
        """The tokens of the trace's longest request: its prompt and output, as the context
        check counts them (vLLM's contract)."""
        return max(e.prompt_len + e.output_len for e in self.entries)

    def replay_deadline_s(self) -> float:
        """Seconds after the trace's start at which the replay stops: twice its last arrival
        and a minute more (a config that cannot keep up would otherwise serve it until the
        trial timeout)."""
        return self.entries[-1].arrival_s * 2 + 60.0

    def _slo_watch(
        self, requests: list[Request], report: Reporter
    ) -> Callable[[float], None] | None:
        """After each step of the measured trace: stop the trial (through ``report``) once a
        ``stop_*`` limit of the problem is certain to be broken; None without one."""
        limits = {metric: float(self.problem.get(key) or 0.0) for metric, key in STOP_KEYS.items()}
        limits = {metric: limit for metric, limit in limits.items() if limit > 0}
        if not limits:
            return None
        watch, steps = SloWatch(requests, limits), count()
        return lambda now: watch.after_step(now, report, next(steps) + 1)

    def _metrics(self, done: list[Request], wall: float, sched: Scheduler) -> dict[str, Any]:
        p = self.problem
        rows = [RequestTiming(r.arrival_s, r.first_token_s, r.finish_s, len(r.generated),
                              complete=r.finish_s is not None) for r in done]  # fmt: skip
        metrics = latency_summary(rows, wall, float(p["slo_ttft_ms"]), float(p["slo_tpot_ms"]))
        return {**metrics, "finished": sum(r.finish_s is not None for r in done),
                "requests": len(done), "preemptions": sched.preemptions, "steps": sched.steps,
                "peak_running": sched.peak_running}  # fmt: skip

    def close(self) -> None:
        self._reference = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


#: the seeds a trial gives torch: the problem's, and it plus 1 and plus 7
SEED_OFFSETS = (0, 1, 7)


def check_seed(seed: int) -> None:
    """Refuse a seed torch cannot take (it takes -2**63 to 2**64 - 1) with the offsets a trial
    adds (:data:`SEED_OFFSETS`): every trial would crash seeding its model.

    Raises:
        ValueError: naming the seed and the range.

    Example:
        >>> check_seed(0)
        >>> check_seed(10**30)
        Traceback (most recent call last):
        ...
        ValueError: seed=1000000000000000000000000000000 is out of range: a seed is a whole ...
    """
    if not -(2**63) <= seed <= 2**64 - 1 - max(SEED_OFFSETS):
        raise ValueError(f"seed={seed} is out of range: a seed is a whole number from -2**63 "
                         f"to 2**64 - {1 + max(SEED_OFFSETS)}")  # fmt: skip


def check_cache_fits(kv_cache_mb: float, device: DeviceInfo) -> None:
    """Refuse a KV cache larger than the whole memory of the device the trials run on (a
    GPU's total memory, a CPU's physical memory): every trial would run out of memory
    building it (``kv_cache_mb=1e12``: each trial ``oom``). A device whose memory is not known
    (0) is left to the trials.

    Raises:
        ValueError: naming the cache's size and the device's memory.

    Example:
        >>> cpu = DeviceInfo(type="cpu", name="cpu", total_memory=16 * 2**30)
        >>> check_cache_fits(4096, cpu)
        >>> check_cache_fits(10**6, cpu)
        Traceback (most recent call last):
        ...
        ValueError: kv_cache_mb=1000000 (976.6 GiB) is more than the 16 GiB of physical memory ...
    """
    total = device.total_memory
    cache = float(kv_cache_mb) * 2**20
    if not total or cache <= total:
        return
    kind = "physical memory of this CPU" if device.type == "cpu" else f"this GPU ({device.name})"
    memory = f"the {total / 2**30:,.3g} GiB of {kind}"
    raise ValueError(f"kv_cache_mb={kv_cache_mb} ({cache / 2**30:,.1f} GiB) is more than "
                     f"{memory}: no trial could hold the cache")  # fmt: skip


def check_peak_measurable(
    device_type: str, slo: Mapping[str, float], can_reset: Callable[[], bool] | None = None
) -> None:
    """Refuse a ``--slo peak_memory_gb`` cap that no trial could measure: on a CPU the peak is
    the trial process's resident set over the replay (the interpreter, torch and the model
    in it), read only where Linux lets the process reset it (``can_reset``: by default
    :func:`~autotune.objectives.train_loop.reset_peak_rss`, which tries); elsewhere every
    trial would break the cap as not measured.

    Raises:
        ValueError: naming the limit.

    Example:
        >>> check_peak_measurable("cuda", {"peak_memory_gb": 40.0})
        >>> check_peak_measurable("cpu", {"peak_memory_gb": 4.0}, can_reset=lambda: False)
        Traceback (most recent call last):
        ...
        ValueError: peak_memory_gb=4: this CPU's peak resident set cannot be reset ...
    """
    if "peak_memory_gb" not in slo or device_type == "cuda":
        return
    if not (can_reset or reset_peak_rss)():
        raise ValueError(f"peak_memory_gb={slo['peak_memory_gb']:g}: this CPU's peak resident "
                         "set cannot be reset (/proc/self/clear_refs), so no trial could "
                         "measure its replay's peak memory")  # fmt: skip


def check_quality(kl: float, max_kl: float) -> None:
    """The quality gate: a next-token KL divergence against the bf16 model above ``max_kl``
    fails, and so does one that is no number at all (NaN, where the logits broke down),
    which every comparison would let through.

    Raises:
        WrongResult: naming the KL and the limit.

    Example:
        >>> check_quality(0.01, max_kl=0.05)
        >>> check_quality(float("nan"), max_kl=0.05)
        Traceback (most recent call last):
        ...
        autotune.failures.WrongResult: next-token KL against the bf16 model is NaN (logits ...
    """
    if kl <= max_kl:
        return
    if math.isnan(kl):
        raise WrongResult("next-token KL against the bf16 model is NaN (logits holding NaN or "
                          f"infinities), not within max_kl={max_kl:g}")  # fmt: skip
    raise WrongResult(f"next-token KL {kl:.4f} against the bf16 model exceeds max_kl={max_kl:g}")


def _unserved(done: list[Request], deadline_s: float) -> str | None:
    """Why a replay that stopped at its deadline measured nothing to keep: how many requests
    it left unfinished (their TTFT and TPOT would be missing from the percentiles, which would
    then cover only the requests the config got to); None when every request finished.

    Example:
        >>> served = Request(0, 0.0, [1], 1, generated=[2], first_token_s=0.1, finish_s=0.1)
        >>> print(_unserved([served, Request(1, 0.0, [1], 4)], deadline_s=60.0))
        the replay's deadline (60 s after the trace's start: ...) passed with 1 of 2 requests ...
        >>> _unserved([served], deadline_s=60.0) is None
        True
    """
    unfinished = [r for r in done if r.finish_s is None]
    if not unfinished:
        return None
    waiting = sum(r.first_token_s is None for r in unfinished)
    return (f"the replay's deadline ({deadline_s:g} s after the trace's start: twice its last "
            f"arrival and a minute) passed with {len(unfinished)} of {len(done)} requests "
            f"unfinished, {waiting} of them without a first token; percentiles of the rest "
            "would leave them out")  # fmt: skip


def _energy_mj(device: torch.device) -> float | None:
    """The GPU's energy counter (NVML, millijoules since the driver loaded); None on a CPU or
    where NVML has none."""
    if device.type != "cuda":
        return None
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device.index or 0)
        return float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle))
    except Exception:  # noqa: BLE001 - telemetry is optional
        return None


OBJECTIVE = ServingObjective
