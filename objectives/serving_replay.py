"""One serving trial's replay and what it measured: a paged KV cache of the config's blocks, a
warm-up on the trace's first two requests (sent at once), then the trace replayed in real time
through the continuous-batching engine (:func:`~autotune.objectives.serving_engine.run_trace`)
under the config's attention backend and CUDA graphs, timed, with the GPU's energy and the
replay's peak memory; then its figures (:func:`replay_metrics`).

Example:
    >>> import torch
    >>> from autotune.kernels.llama import Llama, LlamaConfig
    >>> from autotune.kernels.llama_infer import InferenceModel
    >>> from autotune.objectives.serving_trace import TraceEntry
    >>> _ = torch.manual_seed(0)
    >>> model = InferenceModel(Llama(LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2,
    ...                                          seq_len=64)))
    >>> config = {"max_num_seqs": 4, "max_num_batched_tokens": 64, "block_size": 8,
    ...           "kv_dtype": "bf16", "policy": "fcfs", "attention_backend": "default",
    ...           "cuda_graphs": False}
    >>> trace = [TraceEntry(0.0, 12, 4), TraceEntry(0.01, 12, 4), TraceEntry(0.02, 12, 4)]
    >>> run = replay(model, config, num_blocks=16, entries=trace, device=torch.device("cpu"),
    ...              seed=0, vocab=64, deadline_s=60.0)
    >>> metrics = replay_metrics(run, slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    >>> metrics["finished"], metrics["within_slo"], unserved(run.done, 60.0) is None
    (3, 3, True)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama_infer import InferenceModel
from autotune.objectives.serving_engine import Request, Scheduler, run_trace
from autotune.objectives.serving_metrics import RequestTiming, latency_summary
from autotune.objectives.serving_trace import TraceEntry
from autotune.objectives.train_loop import peak_rss_bytes, reset_peak_rss

#: SDPA's backend over the gathered blocks; ``paged``: the Triton kernel reads them in place
ATTENTION = {"default": None, "math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
             "paged": None}  # fmt: skip


@dataclass
class Replay:
    """A measured replay: its requests (with their times), its seconds, the scheduler and the
    decode graphs it ran with, the GPU energy it used (millijoules; None: not measured) and
    whether a CPU's peak resident set was reset before it (:func:`peak_memory_gb`)."""

    done: list[Request]
    wall_s: float
    scheduler: Scheduler
    graphs: DecodeGraphs | None
    energy_mj: float | None
    rss_reset: bool


def replay(
    model: InferenceModel,
    config: dict[str, Any],
    num_blocks: int,
    entries: list[TraceEntry],
    *,
    device: torch.device,
    seed: int,
    vocab: int,
    deadline_s: float,
    watch: Callable[[list[Request]], Callable[[float], None] | None] = lambda requests: None,
) -> Replay:
    """Warm up on the first two of ``entries``, then replay them all with ``config`` until they
    finish or ``deadline_s`` passes; ``watch(requests)`` gives the measured replay's
    ``after_step`` (None: none). Prompts are random tokens drawn from ``seed`` + 1."""
    cuda = device.type == "cuda"
    sync = (lambda: torch.cuda.synchronize(device)) if cuda else (lambda: None)
    backend = ATTENTION[config["attention_backend"]]
    attention = sdpa_kernel(backend) if backend is not None else contextlib.nullcontext()
    gen = torch.Generator().manual_seed(seed + 1)

    def requests(entries: list[TraceEntry]) -> list[Request]:
        return [Request(i, e.arrival_s, torch.randint(0, vocab, (e.prompt_len,),
                                                      generator=gen).tolist(), e.output_len)
                for i, e in enumerate(entries)]  # fmt: skip

    # one cache for the warm-up and the measured replay (the warm-up's requests all end,
    # freeing their blocks), so that decode graphs are captured over it once
    cache = model.new_cache(num_blocks, int(config["block_size"]), config["kv_dtype"])

    def scheduler() -> Scheduler:
        return Scheduler(cache, int(config["max_num_seqs"]),
                         int(config["max_num_batched_tokens"]), config["policy"])  # fmt: skip

    with attention:
        graphs = None
        if config["cuda_graphs"]:  # captured under the trial's SDPA backend
            graphs = DecodeGraphs(model, cache, int(config["max_num_seqs"]),
                                  max_tokens=int(config["max_num_batched_tokens"]))  # fmt: skip
        run = {"sync": sync, "graphs": graphs}
        # the warm-up's two requests at once: the second's gap in the trace (an hour's lull
        # of a recorded one) measures nothing
        warm_up = [replace(e, arrival_s=0.0) for e in entries[:2]]
        run_trace(model, scheduler(), requests(warm_up), **run)
        if graphs is not None:
            graphs.steps = 0
        sched = scheduler()
        measured = requests(entries)
        after_step = watch(measured)
        if cuda:  # the replay's peak: not the build's fp32 copy or the gate's bf16 model
            torch.cuda.reset_peak_memory_stats(device)
        rss_reset = not cuda and reset_peak_rss()  # a CPU's: the process's resident set
        energy_before = energy_mj(device)
        started = time.perf_counter()
        done = run_trace(model, sched, measured, deadline_s=deadline_s, after_step=after_step,
                         **run)  # fmt: skip
        wall = time.perf_counter() - started
        energy = energy_mj(device)
    used = energy - energy_before if energy is not None and energy_before is not None else None
    return Replay(done, wall, sched, graphs, used, rss_reset)


def replay_metrics(run: Replay, slo_ttft_ms: float, slo_tpot_ms: float) -> dict[str, Any]:
    """The replay's latencies and goodput (:func:`~autotune.objectives.serving_metrics.
    latency_summary`), the scheduler's counts, the decode graphs' capture time and share of
    steps, and the energy an output token took."""
    done, sched, graphs = run.done, run.scheduler, run.graphs
    rows = [RequestTiming(r.arrival_s, r.first_token_s, r.finish_s, len(r.generated),
                          complete=r.finish_s is not None) for r in done]  # fmt: skip
    metrics = latency_summary(rows, run.wall_s, slo_ttft_ms, slo_tpot_ms)
    metrics = {**metrics, "finished": sum(r.finish_s is not None for r in done),
               "requests": len(done), "preemptions": sched.preemptions, "steps": sched.steps,
               "peak_running": sched.peak_running}  # fmt: skip
    if graphs is not None:
        metrics["graph_capture_s"] = graphs.capture_s
        metrics["graph_step_share"] = graphs.steps / max(1, sched.steps)
    out_tokens = sum(len(r.generated) for r in done)
    if run.energy_mj is not None and out_tokens:
        metrics["energy_j_per_token"] = run.energy_mj / 1e3 / out_tokens
    return metrics


def peak_memory_gb(run: Replay, device: torch.device) -> float | None:
    """The replay's peak memory: a GPU's allocated memory, a CPU's process resident set (where
    it was reset before the replay); None where it was not measured."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 1e9
    if run.rss_reset and (rss := peak_rss_bytes()) is not None:
        return rss / 1e9
    return None


def unserved(done: list[Request], deadline_s: float) -> str | None:
    """Why a replay that stopped at its deadline measured nothing to keep: how many requests
    it left unfinished (their TTFT and TPOT would be missing from the percentiles, which would
    then cover only the requests the config got to); None when every request finished.

    Example:
        >>> served = Request(0, 0.0, [1], 1, generated=[2], first_token_s=0.1, finish_s=0.1)
        >>> print(unserved([served, Request(1, 0.0, [1], 4)], deadline_s=60.0))
        the replay's deadline (60 s after the trace's start: ...) passed with 1 of 2 requests ...
        >>> unserved([served], deadline_s=60.0) is None
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


def energy_mj(device: torch.device) -> float | None:
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
