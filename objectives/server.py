"""Server workload: tune any OpenAI-compatible server (vLLM, SGLang, the project's own engine)
started per trial from a command template, measured over real HTTP with streaming.

Each trial formats ``command`` with the config and the problem (``{max_num_seqs}``,
``{port}``: a free port picked per trial), starts it in its own process group (no shell: the
template is split into arguments, never evaluated), waits until ``GET {health_path}`` answers
200, replays the trace (Poisson arrivals, random token-id prompts) as streaming
``POST /v1/completions`` requests, timing each one's first token (TTFT) and the gaps after
(TPOT), and stops the whole process group (SIGTERM, then SIGKILL), so its port is free for the
next trial. A server that exits before it is healthy is a ``crashed`` trial with the last lines
of its output (``oom`` where they say out of memory), one that never becomes healthy a
``timeout``. Metrics and goodput are the serving workload's.

    autotune tune server --problem 'command=vllm serve MODEL --port {port} --max-num-seqs
        {max_num_seqs} --max-num-batched-tokens {max_num_batched_tokens}' --space my_vllm.yaml
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Any, ClassVar

from autotune.failures import Crashed, Infeasible, OutOfMemory, TrialFailure, TrialTimeout
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.objectives.serving import (
    LATENCY_FIGURES,
    SLO_PROBLEM_KEYS,
    RequestTiming,
    latency_summary,
)
from autotune.objectives.serving_trace import poisson_trace
from autotune.objectives.train_parallel import free_port

#: the project's engine behind its OpenAI-compatible server: what a sweep runs by default
ENGINE_COMMAND = (
    f"{shlex.quote(sys.executable)} -m autotune.objectives.engine_server --port {{port}} "
    "--max-num-seqs {max_num_seqs} --max-num-batched-tokens {max_num_batched_tokens} "
    "--block-size {block_size} --policy {policy}"
)


def format_command(template: str, values: dict[str, Any]) -> list[str]:
    """The template's arguments with ``{name}`` filled from ``values``.

    Raises:
        Infeasible: the template names a value that is neither a parameter nor a problem key.

    Example:
        >>> format_command("serve --max-num-seqs {max_num_seqs} --port {port}",
        ...                {"max_num_seqs": 64, "port": 8001})
        ['serve', '--max-num-seqs', '64', '--port', '8001']
    """
    try:
        return [part.format(**values) for part in shlex.split(template)]
    except KeyError as exc:
        raise Infeasible(f"the command template names {{{exc.args[0]}}}, which is neither a "
                         "parameter nor a problem value") from None  # fmt: skip


class ServerObjective(Objective):
    """Goodput of a server started from ``command`` (see the module docstring)."""

    name: ClassVar[str] = "server"
    space: ClassVar[str] = "server.yaml"
    directions: ClassVar[dict[str, str]] = {"goodput_tok_s": "maximize", "ttft_p99_ms": "minimize"}
    slo_problem_keys: ClassVar[dict[str, tuple[str, ...]]] = SLO_PROBLEM_KEYS

    @classmethod
    def slo_metrics(cls) -> tuple[str, ...]:
        return LATENCY_FIGURES

    @classmethod
    def default_problem(cls, device: dict[str, Any]) -> dict[str, Any]:
        return {"command": ENGINE_COMMAND, "health_path": "/health", "startup_timeout_s": 120.0,
                "model": "autotune-llama", "vocab": 512, "rate": 20.0, "num_requests": 16,
                "prompt_len": 48, "output_len": 16, "seed": 0, "slo_ttft_ms": 500.0,
                "slo_tpot_ms": 50.0}  # fmt: skip

    def __init__(self, problem: dict[str, Any]) -> None:
        """Refuse, before any trial, a command no trial could run (``ValueError``, which
        ``autotune tune`` reports in one line): an empty one, one that does not parse as a
        shell command line, or one without ``{port}``, where every trial would wait out
        ``startup_timeout_s`` for a server listening elsewhere."""
        super().__init__(problem)
        template = str(self.problem.get("command", ""))
        try:
            argv = shlex.split(template)
        except ValueError as exc:
            raise ValueError(f"command={template!r} does not parse: {exc}") from None
        if not argv:
            raise ValueError("command is empty: pass the server's command line, e.g. "
                             "command='vllm serve MODEL --port {port} --max-num-seqs "
                             "{max_num_seqs}'")  # fmt: skip
        if "{port}" not in template:
            raise ValueError(f"command={template!r} never names {{port}}: each trial's server "
                             "must listen on the port the trial gives it")  # fmt: skip

    def default_config(self) -> dict[str, Any]:
        return {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "block_size": 16,
                "policy": "fcfs"}  # fmt: skip

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        p = self.problem
        port = free_port()
        argv = format_command(str(p["command"]), {**p, **config, "port": port})
        with tempfile.TemporaryFile(mode="w+") as log:
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)  # fmt: skip
            except OSError as exc:
                raise Crashed(f"the server command cannot start: {exc}") from None
            try:
                self._wait_healthy(proc, port, log)
                started = time.perf_counter()
                results = self._replay(port)
                wall = time.perf_counter() - started
            finally:
                stop(proc)
        metrics = summarise(results, wall, float(p["slo_ttft_ms"]), float(p["slo_tpot_ms"]))
        report(0, metrics["goodput_tok_s"])
        values = {"goodput_tok_s": metrics.pop("goodput_tok_s")}
        if metrics.get("ttft_p99_ms") is not None:
            values["ttft_p99_ms"] = metrics["ttft_p99_ms"]
        metrics["port"] = port
        return Measurement(values=values, metrics=metrics)

    def _wait_healthy(self, proc: subprocess.Popen, port: int, log: Any) -> None:
        deadline = time.monotonic() + float(self.problem["startup_timeout_s"])
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise _startup_failure(proc.returncode, log)
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", str(self.problem["health_path"]))
                if conn.getresponse().status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise TrialTimeout(f"the server was not healthy within {self.problem['startup_timeout_s']}"
                           " s")  # fmt: skip

    def _replay(self, port: int) -> list[dict[str, Any]]:
        p = self.problem
        trace = poisson_trace(float(p["rate"]), int(p["num_requests"]), int(p["prompt_len"]),
                              int(p["output_len"]), int(p["seed"]))  # fmt: skip
        rng = random.Random(int(p["seed"]) + 1)
        results: list[dict[str, Any]] = [{} for _ in trace]
        start = time.perf_counter()
        threads = []
        for index, entry in enumerate(trace):
            delay = entry.arrival_s - (time.perf_counter() - start)
            if delay > 0:
                time.sleep(delay)
            prompt = [rng.randrange(int(p["vocab"])) for _ in range(entry.prompt_len)]
            body = {"model": p["model"], "prompt": prompt, "max_tokens": entry.output_len,
                    "stream": True, "ignore_eos": True, "min_tokens": entry.output_len}  # fmt: skip
            t = threading.Thread(target=_stream, args=(port, body, results[index]), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(timeout=600)
        return results


def _stream(port: int, body: dict[str, Any], out: dict[str, Any]) -> None:
    """One streaming completion: the send time, each token's arrival, or the error."""
    sent = time.perf_counter()
    times: list[float] = []
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        if response.status != 200:
            out["error"] = f"HTTP {response.status}"
            return
        while True:
            line = response.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            count = max(1, len(event["choices"][0].get("token_ids") or [0]))
            now = time.perf_counter()
            times.extend([now] * count)
    except (OSError, ValueError, KeyError) as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    out.update(sent=sent, times=times)


def summarise(
    results: list[dict[str, Any]], wall: float, slo_ttft_ms: float, slo_tpot_ms: float
) -> dict[str, Any]:
    """TTFT/TPOT percentiles, throughput and goodput of the streamed requests."""
    rows = [
        RequestTiming(
            r["sent"], r["times"][0], r["times"][-1], len(r["times"]), complete="error" not in r
        )
        for r in results
        if r.get("times")
    ]
    return {
        **latency_summary(rows, wall, slo_ttft_ms, slo_tpot_ms),
        "requests": len(results),
        "errors": sum("error" in r for r in results),
    }


def stop(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End the server's whole process group: SIGTERM, then SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        except ProcessLookupError:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # children left in the group after the leader


def _startup_failure(code: int, log: Any) -> TrialFailure:
    log.seek(0)
    tail = deque(log.read().splitlines(), maxlen=3)
    text = " | ".join(line.strip() for line in tail)[-400:]
    if "out of memory" in text.lower():
        return OutOfMemory(f"the server ran out of memory while starting: {text}")
    return Crashed(f"the server exited with code {code} before it was healthy: {text}")


OBJECTIVE = ServerObjective
