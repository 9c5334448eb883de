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

import gc
from collections.abc import Callable, Mapping
from itertools import count
from typing import Any, ClassVar

import torch

from autotune.device import detect_device, read_telemetry
from autotune.failures import TrialTimeout
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import InferenceModel
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.objectives.serving_cache import (
    check_cache_fits,
    check_cache_holds_a_request,
    check_model_fits,
    longest_request,
    num_blocks,
)
from autotune.objectives.serving_config import CONFIG_KEYS, check_space_values, checked_config
from autotune.objectives.serving_engine import Request
from autotune.objectives.serving_metrics import (
    LATENCY_FIGURES,
    RequestTiming,
    latency_summary,
    percentile,
)
from autotune.objectives.serving_problem import (
    SEED_OFFSETS,
    SLO_PROBLEM_KEYS,
    STOP_KEYS,
    check_peak_measurable,
    check_problem,
    check_seed,
    default_problem,
)
from autotune.objectives.serving_quality import (
    check_quality,
    compare,
    next_token_logits,
    quality_prompts,
)
from autotune.objectives.serving_replay import (
    ATTENTION,
    peak_memory_gb,
    replay,
    replay_metrics,
    unserved,
)
from autotune.objectives.serving_slo import SloWatch
from autotune.objectives.serving_trace import (
    TraceEntry,
    check_context,
    check_span,
    check_tpot_measurable,
    place,
    problem_trace,
    without_poisson_keys,
)
from autotune.space.params import Param

#: the names this module gave before its parts had modules of their own, still importable here
__all__ = ["ATTENTION", "LATENCY_FIGURES", "SEED_OFFSETS", "SLO_PROBLEM_KEYS", "STOP_KEYS",
           "RequestTiming", "ServingObjective", "check_cache_fits", "check_peak_measurable",
           "check_quality", "check_seed", "latency_summary", "percentile"]  # fmt: skip


class ServingObjective(Objective):
    """Goodput (output tokens/s of requests within the SLO) of the engine under a trace."""

    name: ClassVar[str] = "serving"
    space: ClassVar[str] = "serving.yaml"
    directions: ClassVar[dict[str, str]] = {
        "goodput_tok_s": "maximize",
        "ttft_p99_ms": "minimize",
    }
    #: the quality gate's figure: no --slo limit (a bf16 config reports none), max_kl's
    not_slo: ClassVar[dict[str, str]] = {
        "kl": "is the quality gate's measure, taken of quantized weights and fp8 caches alone "
        "(a bf16 config reports none), and --problem max_kl=N limits it (default 0.05)"
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
        return default_problem(device)

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
        check_problem(p)
        info = detect_device(p.get("device", "auto"))
        check_cache_fits(p["kv_cache_mb"], info)
        self.device = (
            torch.device("cuda", info.index) if info.type == "cuda" else torch.device("cpu")
        )
        self.model_config = LlamaConfig(vocab=int(p["vocab"]), d_model=int(p["d_model"]),
                                        n_layers=int(p["n_layers"]), n_heads=int(p["n_heads"]),
                                        seq_len=int(p["max_context"]))  # fmt: skip
        # model=7b on a 24-GiB CPU: each trial built 27 GB of fp32 weights and ran out
        check_model_fits(self.model_config, p["kv_cache_mb"], info)
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
        check_cache_holds_a_request(params, self.default_config(), self.problem["kv_cache_mb"],
                                    self.model_config, self._longest(),
                                    place(self.problem, self._longest_entry()))  # fmt: skip

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
        check_span(self.entries, timeout_s, self.problem)

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
        return checked_config(config, self.default_config(), self.model_config.d_model,
                              self.device.type)  # fmt: skip

    def _model(self, weights: str, attention_backend: str = "default") -> InferenceModel:
        torch.manual_seed(int(self.problem["seed"]))
        reads = "paged" if attention_backend == "paged" else "gather"
        with torch.device(self.device):
            return InferenceModel(Llama(self.model_config), weights, reads)

    def quality(self, model: InferenceModel, kv_dtype: str) -> dict[str, float]:
        """Mean KL divergence and top-1 agreement of the next-token distributions against the
        bf16 model with a bf16 cache (computed once per process;
        :mod:`~autotune.objectives.serving_quality`)."""
        prompts = quality_prompts(self.model_config, int(self.problem["seed"]))
        if self._reference is None:
            self._reference = next_token_logits(self._model("bf16"), prompts, "bf16")
            gc.collect()
        return compare(self._reference, next_token_logits(model, prompts, kv_dtype))

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        """Serve the trace with ``config``; see the module docstring for what is measured.

        Raises:
            Infeasible: unknown keys or values; a cache too small for one request.
            WrongResult: quantized weights or an fp8 cache beyond ``max_kl``.
            TrialTimeout: requests still unfinished at :meth:`replay_deadline_s`.
        """
        c = self._checked(config)
        blocks = self._num_blocks(c)  # before the model is built: a config and the problem
        p, cuda = self.problem, self.device.type == "cuda"
        if cuda:
            torch.cuda.empty_cache()
        model = self._model(c["weights"], c["attention_backend"])
        quality: dict[str, float] = {}
        if c["weights"] != "bf16" or c["kv_dtype"] == "fp8":
            quality = self.quality(model, c["kv_dtype"])
            check_quality(quality["kl"], float(p["max_kl"]))
        deadline = self.replay_deadline_s()
        run = replay(model, c, blocks, self.entries, device=self.device, seed=int(p["seed"]),
                     vocab=self.model_config.vocab, deadline_s=deadline,
                     watch=lambda measured: self._slo_watch(measured, report))  # fmt: skip
        why_unserved = unserved(run.done, deadline)
        metrics = replay_metrics(run, float(p["slo_ttft_ms"]), float(p["slo_tpot_ms"]))
        metrics.update(quality)
        metrics["weight_gb"] = model.weight_bytes() / 1e9
        if (peak := peak_memory_gb(run, self.device)) is not None:
            metrics["peak_memory_gb"] = peak
        report(0, metrics["goodput_tok_s"])
        model = run = None  # before the next trial builds its model
        gc.collect()
        if why_unserved:  # its percentiles would cover only the requests it got to
            raise TrialTimeout(why_unserved)
        values = {"goodput_tok_s": metrics.pop("goodput_tok_s")}
        if metrics.get("ttft_p99_ms") is not None:
            values["ttft_p99_ms"] = metrics["ttft_p99_ms"]
        return Measurement(values=values, metrics=metrics,
                           telemetry=read_telemetry(self.device.index or 0))  # fmt: skip

    def _num_blocks(self, c: dict[str, Any]) -> int:
        """The KV cache's blocks for config ``c`` (:func:`~autotune.objectives.serving_cache.
        num_blocks`).

        Raises:
            Infeasible: a cache that holds no request of the trace (the decode graphs' scratch
                block aside).
        """
        return num_blocks(self.problem["kv_cache_mb"], self.model_config, c["kv_dtype"],
                          c["block_size"], c["cuda_graphs"], self._longest())  # fmt: skip

    def _longest(self) -> int:
        """The tokens of the trace's longest request (its prompt and output)."""
        return longest_request(self.entries)

    def _longest_entry(self) -> TraceEntry:
        """The trace's longest request (the first of the file's such lines)."""
        longest = self._longest()
        return min((e for e in self.entries if e.prompt_len + e.output_len == longest),
                   key=lambda e: e.line)  # fmt: skip

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

    def close(self) -> None:
        self._reference = None
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


OBJECTIVE = ServingObjective
