"""Server workload: tune any OpenAI-compatible server (vLLM, SGLang, the project's own engine)
started per trial from a command template, measured over real HTTP with streaming.

Each trial formats ``command`` with the config and the problem (``{max_num_seqs}``, ``{port}``:
a free port picked per trial), starts it in its own process group (no shell: the template is
split into arguments, never evaluated), waits until ``GET {health_path}`` answers 200, replays
the trace (Poisson arrivals, random token-id prompts) as streaming ``POST /v1/completions``
requests, timing each one's first token (TTFT) and the mean gap between its later tokens
(TPOT), counting tokens, not the events that carry them
(:class:`~autotune.objectives.server_stream.StreamTokens`: a server's ``usage``, which the
requests ask for, else token ids, else the ``max_tokens`` each request forces where it finished
for ``length``), with ``Authorization: Bearer KEY`` where the command passes ``--api-key KEY``,
and stops the whole process group (SIGTERM, then SIGKILL), so its port is free for the next
trial. The group ends however the trial ends (:mod:`~autotune.objectives.server_process`): a
watchdog process started beside the server stops it when the trial's process dies, even by
SIGKILL (a trial timeout), where no ``finally`` runs. ``trace=FILE.jsonl`` replays a recorded
trace instead of the Poisson one (:func:`~autotune.objectives.serving_trace.load_trace`). A
server that exits before it is healthy, or while it serves the trace, is a ``crashed`` trial
with the last lines of its output (``oom`` where they say out of memory), one that never
becomes healthy a ``timeout``, one that fails any request (an error status or event, a stream
cut short before ``[DONE]``, fewer tokens than the request forces:
:func:`~autotune.objectives.server_stream.incomplete`) ``crashed`` with how many failed and the
first failure; a failed request counts in no token, goodput or latency. Metrics and goodput are
the serving workload's.

    autotune tune server --problem 'command=vllm serve MODEL --port {port} --max-num-seqs
        {max_num_seqs} --max-num-batched-tokens {max_num_batched_tokens}' --space my_vllm.yaml
"""

from __future__ import annotations

import contextlib
import http.client
import random
import shlex
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, ClassVar

from autotune.failures import Crashed, Infeasible, OutOfMemory, TrialFailure, TrialTimeout
from autotune.measurement import Measurement
from autotune.objectives.base import Objective, Reporter, no_reporting
from autotune.objectives.engine_server_flags import engine_knobs
from autotune.objectives.server_process import OutputTail, running
from autotune.objectives.server_program import server_program_parts
from autotune.objectives.server_startup import never_starts
from autotune.objectives.server_stream import api_key, stream_request
from autotune.objectives.server_template import (
    AnyValue,
    check_formats,
    check_program,
    format_command,
    template_names,
)
from autotune.objectives.serving_config import check_space_values
from autotune.objectives.serving_metrics import LATENCY_FIGURES, RequestTiming, latency_summary
from autotune.objectives.serving_problem import SLO_PROBLEM_KEYS
from autotune.objectives.serving_trace import (
    POISSON_KEYS,
    TraceEntry,
    check_positive,
    check_span,
    check_tpot_measurable,
    problem_trace,
    without_poisson_keys,
)
from autotune.objectives.train_parallel import free_port
from autotune.redact import redact, secrets_in
from autotune.space.params import Param

#: the project's engine behind its OpenAI-compatible server: what a sweep runs by default
ENGINE_COMMAND = (
    f"{shlex.quote(sys.executable)} -m autotune.objectives.engine_server --port {{port}} "
    "--max-num-seqs {max_num_seqs} --max-num-batched-tokens {max_num_batched_tokens} "
    "--block-size {block_size} --policy {policy}"
)


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
                "prompt_len": 48, "output_len": 16, "seed": 0, "trace": "",
                "slo_ttft_ms": 500.0, "slo_tpot_ms": 50.0}  # fmt: skip

    @classmethod
    def resolve_problem(cls, problem: dict[str, Any]) -> dict[str, Any]:
        """The problem less the Poisson trace's keys (``rate``, ...) that ``trace=FILE.jsonl``
        replaces (:func:`~autotune.objectives.serving_trace.without_poisson_keys`)."""
        return without_poisson_keys(problem)

    def __init__(self, problem: dict[str, Any]) -> None:
        """Refuse, before any trial, a command no trial could run (``ValueError``, which
        ``autotune tune`` reports in one line): an empty one, one that does not parse as a
        shell command line, a malformed placeholder (:func:`template_names`), a format spec a
        problem value or the port does not take (``{port:x}`` is fine, ``{port:q}`` is not),
        or no ``{port}``, where every trial would wait out ``startup_timeout_s`` for a server
        listening elsewhere; and a ``trace`` file no server could replay.

        Example:
            >>> problem = ServerObjective.default_problem({})
            >>> ServerObjective({**problem, "command": "serve --port {port:d}"}).problem["command"]
            'serve --port {port:d}'
            >>> ServerObjective({**problem, "command": "serve --port {port!z}"})
            Traceback (most recent call last):
            ...
            ValueError: command='serve --port {port!z}': {port!z}: unknown conversion (!s, !r or !a)
        """
        super().__init__(self.resolve_problem(problem))
        template = str(self.problem.get("command", ""))
        names = template_names(template)
        if not shlex.split(template):
            raise ValueError("command is empty: pass the server's command line, e.g. "
                             "command='vllm serve MODEL --port {port} --max-num-seqs "
                             "{max_num_seqs}'")  # fmt: skip
        if "port" not in names:
            raise ValueError(f"command={template!r} never names {{port}}: each trial's server "
                             "must listen on the port the trial gives it")  # fmt: skip
        probe: dict[str, Any] = {name: AnyValue() for name in names}
        probe.update({k: v for k, v in self.problem.items() if k in probe}, port=8000)
        try:
            format_command(template, probe)
        except Infeasible as exc:
            raise ValueError(str(exc)) from None
        p = self.problem
        check_positive(p, (*POISSON_KEYS, "startup_timeout_s", "vocab", "slo_ttft_ms",
                           "slo_tpot_ms"))  # fmt: skip
        path = str(p.get("health_path", "/health"))
        if not path.startswith("/") or any(c.isspace() or not c.isprintable() for c in path):
            raise ValueError(f"health_path={path!r} is no URL path (it starts with / and holds "
                             "no space): every trial would fail asking it")  # fmt: skip
        #: the requests every trial replays: ``trace=FILE.jsonl``'s, or Poisson arrivals
        self.trace: list[TraceEntry] = problem_trace(p)

    def check_space(self, names: Iterable[str] | Mapping[str, Any]) -> None:
        """Refuse, before the sweep, a template placeholder that no config or problem fills:
        one that is neither a parameter of the space (``names``), a problem value nor
        ``{port}`` would make every trial infeasible; and, where ``names`` maps each name to
        its parameter (:class:`~autotune.space.params.Param`, as ``autotune tune`` passes
        them), a format spec one of the parameter's values does not take (``{max_num_seqs:s}``
        over a pow2 parameter), which would reject every config the sweep drew.

        Raises:
            ValueError: naming the template and the first such placeholder (or value).

        Example:
            >>> problem = ServerObjective.default_problem({})
            >>> obj = ServerObjective({**problem, "command": "srv --port {port} {bogus}"})
            >>> obj.check_space(["max_num_seqs"])
            Traceback (most recent call last):
            ...
            ValueError: command='srv --port {port} {bogus}' names {bogus}, which is neither ...
        """
        names_given, names = names, list(names)
        known = {*names, *self.problem, "port"}
        template = str(self.problem["command"])
        unknown = [name for name in template_names(template) if name not in known]
        if unknown:
            raise ValueError(f"command={template!r} names {{{unknown[0]}}}, which is neither a "
                             f"parameter of the space ({', '.join(names) or 'none'}), a problem "
                             "value nor {port}")  # fmt: skip
        # a parameter no placeholder passes on reached no server: its "best" value was noise,
        # and the exports wrote it as a tuned flag
        unused = [name for name in names if name not in template_names(template)]
        if unused:
            raise ValueError(f"command={template!r} never names {{{unused[0]}}}, a parameter of "
                             "the space: no trial would pass it to the server; name it in the "
                             "command or tune a --space without it")  # fmt: skip
        if isinstance(names_given, Mapping):
            check_formats(template, names_given, self.problem)
        check_program(template, self.problem)

    def check_space_values(self, params: Mapping[str, Param]) -> None:
        """Refuse, before the sweep, a value of the space that the engine server (the default
        command, :data:`ENGINE_COMMAND`) refuses at its start, where the template passes the
        parameter to a flag of a serving knob (``--block-size {block_size}``): as the serving
        workload refuses it (:func:`~autotune.objectives.serving_config.check_space_values`),
        where each such trial would end ``crashed``. Another server's flags are its own.

        Raises:
            ValueError: naming the parameter and its first such value.
        """
        knobs = engine_knobs(str(self.problem["command"]))
        check_space_values({name: params[name] for name in knobs if name in params}, knobs)

    @classmethod
    def futile(
        cls, problem: dict[str, Any], outcomes: list[tuple[str, str]], served_before: bool
    ) -> str | None:
        """The sweep's stop where the server cannot start for any config (the first trials
        each exited before they were healthy, alike: :func:`~autotune.objectives.
        server_startup.never_starts`, whose docstring says why a sweep where only some
        configs crash goes on)."""
        return never_starts(str(problem.get("command", "")), outcomes, served_before)

    def cache_parts(self) -> dict[str, str]:
        """The server program's files and package version, for the tuning cache's key
        (:func:`~autotune.objectives.server_program.server_program_parts`)."""
        return server_program_parts(str(self.problem["command"]))

    def check_slo(self, slo: dict[str, float]) -> None:
        """Refuse a ``--slo`` limit no trial could measure (:func:`~autotune.objectives.
        serving_trace.check_tpot_measurable`)."""
        check_tpot_measurable(self.trace, slo)

    def check_trial_timeout(self, timeout_s: float) -> None:
        """Refuse, before the sweep, a trace every trial would replay past the trial timeout
        (:func:`~autotune.objectives.serving_trace.check_span`)."""
        check_span(self.trace, timeout_s, self.problem)

    def default_config(self) -> dict[str, Any]:
        """The engine server's defaults for the knobs the command passes: what an untuned
        server runs (trial 0). A knob no placeholder passes reached no server (``vllm serve
        ... --max-num-seqs {max_num_seqs}`` ran vLLM's own block size, not the engine's 16):
        it is no untuned default, and the exports do not list it as one (``untuned``).

        Example:
            >>> problem = ServerObjective.default_problem({})
            >>> ServerObjective({**problem, "command": "srv --port {port} -n {max_num_seqs}"}
            ...                 ).default_config()
            {'max_num_seqs': 256}
        """
        defaults = {"max_num_seqs": 256, "max_num_batched_tokens": 2048, "block_size": 16,
                    "policy": "fcfs"}  # fmt: skip
        passed = template_names(str(self.problem["command"]))
        return {k: v for k, v in defaults.items() if k in passed}

    def evaluate(self, config: dict[str, Any], report: Reporter = no_reporting) -> Measurement:
        p = self.problem
        port = free_port()
        argv = format_command(str(p["command"]), {**p, **config, "port": port})
        # the template's own passwords are known to the driver; one filled in from a
        # placeholder (--api-key sk-{port}) is known only here, in this trial's command line
        with _passwords_left_out(secrets_in(shlex.join(argv))):
            log = OutputTail()  # the last of what it prints: kept for a failure's reason
            with running(argv, log) as proc:
                self._wait_healthy(proc, port, log)
                bodies = self._bodies()  # built before the clock: not in the served time
                started = time.perf_counter()
                results = self._replay(port, api_key(argv), proc, bodies)
                wall = time.perf_counter() - started
                failed = [r["error"] for r in results if "error" in r]
                if failed and proc.poll() is None:  # a crash cut the streams: its exit may
                    with contextlib.suppress(subprocess.TimeoutExpired):  # lag a moment
                        proc.wait(timeout=2)
                if proc.poll() is not None:  # it exited during the trace: what it served is
                    share = f" ({len(failed)}/{len(results)} requests failed)" if failed else ""
                    raise _exit_failure(proc.returncode, log, serving=share)  # no measurement
            # a request that failed served nothing: a server that fails some under this load
            # (an error status, an error event, a stream cut short) is no config to take
            if failed:
                raise Crashed(f"{len(failed)}/{len(results)} requests failed: {failed[0]}")
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
                raise _exit_failure(proc.returncode, log)
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

    def _bodies(self) -> list[dict[str, Any]]:
        """Each request's body: the trace's lengths, a prompt of random token ids (from
        ``seed`` + 1) and the output its ``max_tokens`` forces."""
        p = self.problem
        rng = random.Random(int(p["seed"]) + 1)
        return [
            {"model": p["model"], "max_tokens": e.output_len, "stream": True,
             "prompt": [rng.randrange(int(p["vocab"])) for _ in range(e.prompt_len)],
             "stream_options": {"include_usage": True}, "ignore_eos": True,
             "min_tokens": e.output_len}
            for e in self.trace
        ]  # fmt: skip

    def _replay(
        self,
        port: int,
        key: str | None = None,
        proc: subprocess.Popen | None = None,
        bodies: list[dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Each request of the trace streamed at its arrival time, on a thread of its own: what
        :func:`~autotune.objectives.server_stream.stream_request` recorded of each, or its
        ``error``. Once ``proc`` (the server) has exited, no further request is sent.

        A request's ``sent`` is its arrival in the trace (on the ``perf_counter`` clock), not
        the moment its thread got to send it, as the engine's replay counts from the arrival:
        a burst's later requests wait on this process (a 64-request burst of 4,000-token
        prompts was sent up to 369 ms late, prompts built one by one as it ran), and a TTFT
        from the send left that wait out. The prompts (``bodies``, else :meth:`_bodies`) are
        built before the clock starts."""
        trace = self.trace
        bodies = self._bodies() if bodies is None else bodies
        results: list[dict[str, Any]] = [{} for _ in trace]
        start = time.perf_counter()
        threads = []
        for index, (entry, body) in enumerate(zip(trace, bodies, strict=True)):
            delay = entry.arrival_s - (time.perf_counter() - start)
            if delay > 0:
                time.sleep(delay)
            if proc is not None and proc.poll() is not None:
                for unsent in results[index:]:
                    unsent["error"] = "not sent: the server had exited"
                break
            due = start + entry.arrival_s
            t = threading.Thread(target=stream_request, args=(port, body, results[index], key),
                                 kwargs={"due": due}, daemon=True)  # fmt: skip
            t.start()
            threads.append(t)
        for t in threads:
            t.join(timeout=600)
        for result in results:  # a thread still waiting, or one that died unrecorded
            if "error" not in result and result.get("first") is None:
                result["error"] = "no answer within 600 s"
        return results


def summarise(
    results: list[dict[str, Any]], wall: float, slo_ttft_ms: float, slo_tpot_ms: float
) -> dict[str, Any]:
    """TTFT/TPOT percentiles, throughput and goodput of the streamed requests; a failed one
    (its ``error``) counts in ``errors`` alone, never in the tokens or the latencies.

    Example:
        >>> served = {"sent": 0.0, "first": 0.1, "last": 0.4, "tokens": 4}
        >>> cut = {**served, "error": "the stream ended without [DONE] after 4 tokens"}
        >>> m = summarise([served, cut], wall=1.0, slo_ttft_ms=500, slo_tpot_ms=200)
        >>> m["output_tok_s"], m["goodput_tok_s"], m["errors"]
        (4.0, 4.0, 1)
    """
    rows = [
        RequestTiming(r["sent"], r["first"], r["last"], r["tokens"], complete=True)
        for r in results
        if "error" not in r and r.get("first") is not None
    ]
    return {
        **latency_summary(rows, wall, slo_ttft_ms, slo_tpot_ms),
        "requests": len(results),
        "errors": sum("error" in r for r in results),
    }


@contextlib.contextmanager
def _passwords_left_out(secrets: frozenset[str]) -> Iterator[None]:
    """A trial failure raised inside, of the same kind, with ``secrets`` left out of its
    reason (a server that echoes its command line or a refused key).

    Example:
        >>> with _passwords_left_out(frozenset({"sk-8123"})):
        ...     raise Crashed("key sk-8123 refused")
        Traceback (most recent call last):
        ...
        autotune.failures.Crashed: key *** refused
    """
    try:
        yield
    except TrialFailure as exc:
        text = str(exc)
        clean = redact(text, secrets)
        if clean == text:
            raise
        raise type(exc)(clean) from None


def _exit_failure(code: int, log: OutputTail, serving: str | None = None) -> TrialFailure:
    """A server that exited with ``code``: ``oom`` where its last lines say out of memory,
    else ``crashed``, with those lines; while starting, or (``serving``: what it left of the
    requests, ``" (1/8 requests failed)"`` or ``""``) while it served the trace."""
    tail = deque(log.text().splitlines(), maxlen=3)
    text = " | ".join(line.strip() for line in tail)[-400:] or "(it printed nothing)"
    oom = "out of memory" in text.lower()
    if serving is not None:
        if oom:
            return OutOfMemory(f"the server ran out of memory while serving the trace{serving}: "
                               f"{text}")  # fmt: skip
        return Crashed(f"the server exited with code {code} while serving the trace{serving}: "
                       f"{text}")  # fmt: skip
    if oom:
        return OutOfMemory(f"the server ran out of memory while starting: {text}")
    return Crashed(f"the server exited with code {code} before it was healthy: {text}")


OBJECTIVE = ServerObjective
