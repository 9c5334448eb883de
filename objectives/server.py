"""Server workload: tune any OpenAI-compatible server (vLLM, SGLang, the project's own engine)
started per trial from a command template, measured over real HTTP with streaming.

Each trial formats ``command`` with the config and the problem (``{max_num_seqs}``, ``{port}``:
a free port picked per trial), starts it in its own process group (no shell: the template is
split into arguments, never evaluated), waits until ``GET {health_path}`` answers 200, replays
the trace (Poisson arrivals, random token-id prompts) as streaming ``POST /v1/completions``
requests, timing each one's first token (TTFT) and the mean gap between its later tokens
(TPOT), counting tokens, not the events that carry them (:class:`StreamTokens`: a server's
``usage``, which the requests ask for, else token ids, else the ``max_tokens`` each request
forces where it finished for ``length``), with ``Authorization: Bearer KEY`` where the command
passes ``--api-key KEY``, and stops the whole process group (SIGTERM, then SIGKILL), so its
port is free for the next trial. The group ends however the trial ends
(:mod:`~autotune.objectives.server_process`): a watchdog process started beside the server
stops it when the trial's process dies, even by SIGKILL (a trial timeout), where no ``finally``
runs. ``trace=FILE.jsonl`` replays a recorded trace instead of the Poisson one
(:func:`~autotune.objectives.serving_trace.load_trace`). A server that exits before it is
healthy, or while it serves the trace, is a ``crashed`` trial with the last lines of its output
(``oom`` where they say out of memory), one that never becomes healthy a ``timeout``, one that
fails any request (an error status or event, a stream cut short before ``[DONE]``, fewer tokens
than the request forces: :func:`_incomplete`) ``crashed`` with how many failed and the first
failure; a failed request counts in no token, goodput or latency. Metrics and goodput are the
serving workload's.

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
import shutil
import string
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
from autotune.objectives.server_process import OutputTail, running
from autotune.objectives.server_program import server_program_parts
from autotune.objectives.serving import (
    LATENCY_FIGURES,
    SLO_PROBLEM_KEYS,
    RequestTiming,
    latency_summary,
)
from autotune.objectives.serving_trace import (
    POISSON_KEYS,
    TraceEntry,
    check_positive,
    check_tpot_measurable,
    problem_trace,
    without_poisson_keys,
)
from autotune.objectives.train_parallel import free_port
from autotune.redact import redact, secrets_in

#: the project's engine behind its OpenAI-compatible server: what a sweep runs by default
ENGINE_COMMAND = (
    f"{shlex.quote(sys.executable)} -m autotune.objectives.engine_server --port {{port}} "
    "--max-num-seqs {max_num_seqs} --max-num-batched-tokens {max_num_batched_tokens} "
    "--block-size {block_size} --policy {policy}"
)


def format_command(template: str, values: dict[str, Any]) -> list[str]:
    """The template's arguments with ``{name}`` filled from ``values``.

    Raises:
        Infeasible: the template names a value that is neither a parameter nor a problem key,
            or formats one in a way its value does not take (``{policy:d}``).

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
    except (ValueError, IndexError, AttributeError, TypeError, OverflowError) as exc:
        raise Infeasible(f"command={template!r} cannot be filled in: {exc}") from None


def template_names(template: str) -> list[str]:
    """The names the ``{placeholders}`` of a command template read, in order, once each.

    Raises:
        ValueError: naming the template and what is wrong with it: a line that does not parse
            as a command line, a lone ``{`` or ``}`` (``{{`` and ``}}`` are braces), a
            placeholder that is not a name (``{}``, ``{0}``, ``{a.b}``, ``{a[0]}``), an unknown
            conversion (``{port!x}``).

    Example:
        >>> template_names("serve --port {port!s} --max-num-seqs {max_num_seqs:d} {{x}}")
        ['port', 'max_num_seqs']
        >>> template_names("serve --port {port} {0}")
        Traceback (most recent call last):
        ...
        ValueError: command='serve --port {port} {0}': {0} is not a name: a placeholder names ...
    """
    try:
        parts = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"command={template!r} does not parse: {exc}") from None
    names: list[str] = []
    for part in parts:
        _placeholders(template, part, names)
    return names


def _check_program(template: str) -> None:
    """Refuse a template whose program this machine cannot run: every trial's server would
    fail to start, each one a ``crashed`` trial. A program named by a placeholder
    (``{engine} serve ...``) is left to the trials.

    Raises:
        ValueError: naming the template and the program.

    Example:
        >>> _check_program("no-such-server-xyz --port {port}")
        Traceback (most recent call last):
        ...
        ValueError: command='no-such-server-xyz --port {port}': no program no-such-server-xyz ...
    """
    program = shlex.split(template)[0]
    if "{" in program:
        return
    name, equals, _ = program.partition("=")
    if equals and name.isidentifier():  # HF_TOKEN=... vllm serve: a shell's way
        raise ValueError(f"command={template!r}: {name}= sets a variable, which only a shell "
                         "reads, and the command runs without one: write env "
                         f"{name}=... before the program")  # fmt: skip
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ValueError(f"command={template!r}: {program} is not an executable file: no "
                             "trial's server could start")  # fmt: skip
    elif shutil.which(program) is None:
        raise ValueError(f"command={template!r}: no program {program} on PATH: no trial's "
                         "server could start (install it, or give its full path)")  # fmt: skip


def _check_formats(template: str, params: Mapping[str, Any], problem: dict[str, Any]) -> None:
    """Refuse a template that one of a parameter's values cannot fill in (``{n:s}`` over an
    int, ``{x:d}`` over a float or a text choice): each value of a parameter with few of them,
    the ends of one with many (:func:`_standing_values`), the others' values standing in as
    :class:`_AnyValue`.

    Raises:
        ValueError: naming the template, the parameter's value and the formatting's error.

    Example:
        >>> from autotune.space.params import Param
        >>> _check_formats("srv --port {port} -n {n:s}", {"n": Param("n", "pow2", 4, 64)}, {})
        Traceback (most recent call last):
        ...
        ValueError: command='srv --port {port} -n {n:s}' cannot be filled in at n=4, a value of ...
    """
    probe: dict[str, Any] = {name: _AnyValue() for name in template_names(template)}
    probe.update({k: v for k, v in problem.items() if k in probe}, port=8000)
    parts = shlex.split(template)
    for name, param in params.items():
        if name not in probe:
            continue
        for value in _standing_values(param):
            try:
                for part in parts:
                    part.format(**{**probe, name: value})
            except (ValueError, IndexError, AttributeError, TypeError, OverflowError) as exc:
                raise ValueError(f"command={template!r} cannot be filled in at {name}={value!r}, "
                                 f"a value of the space: {exc}") from None  # fmt: skip


def _standing_values(param: Any) -> list[Any]:
    """Values that stand for all a space's parameter takes, as a trial's config holds them:
    every one where it takes at most 64, else its ends (a float's as floats).

    Example:
        >>> from autotune.space.params import Param
        >>> _standing_values(Param("x", "float", low=0, high=1))
        [0.0, 1.0]
        >>> _standing_values(Param("n", "int", low=1, high=10**6))
        [1, 1000000]
    """
    if param.kind == "float" and (param.step is None or param.count() > 64):
        return [float(param.low), float(param.high)]
    if param.kind in ("categorical", "bool") or param.count() <= 64:
        return list(param.values())
    return [int(param.low), int(param.high)]


def _placeholders(template: str, text: str, names: list[str]) -> None:
    """Add the names ``text``'s placeholders read (those in format specs too) to ``names``."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as exc:  # a lone brace
        raise ValueError(f"command={template!r}: {exc} (write {{{{ and }}}} for braces)") from None
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"command={template!r}: {{{name}}} is not a name: a placeholder "
                             "names a parameter, a problem value or {port} (write {{ and }} "
                             "for braces)")  # fmt: skip
        if conversion not in (None, "s", "r", "a"):
            raise ValueError(f"command={template!r}: {{{name}!{conversion}}}: unknown "
                             "conversion (!s, !r or !a)")  # fmt: skip
        if name not in names:
            names.append(name)
        if spec:
            _placeholders(template, spec, names)


class _AnyValue:
    """Stands for a parameter's value while a template is test-formatted before the sweep
    (its type is the space's to say): it takes a format spec that a number or a text takes
    (``{x:d}``, ``{x:.2f}``, ``{x:>8}``), not one that none takes (``{x:q}``).

    Example:
        >>> format(_AnyValue(), ".2f")
        '1'
        >>> format(_AnyValue(), "q")
        Traceback (most recent call last):
        ...
        ValueError: Invalid format specifier 'q' for a parameter's value (a number or a text)
    """

    def __format__(self, spec: str) -> str:
        for sample in (1, 1.5, "x"):
            try:
                format(sample, spec)
            except (ValueError, TypeError):
                continue
            return "1"
        raise ValueError(f"Invalid format specifier {spec!r} for a parameter's value (a number "
                         "or a text)")  # fmt: skip

    def __str__(self) -> str:
        return "1"


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
        probe: dict[str, Any] = {name: _AnyValue() for name in names}
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
            _check_formats(template, names_given, self.problem)
        _check_program(template)

    def cache_parts(self) -> dict[str, str]:
        """The server program's files and package version, for the tuning cache's key
        (:func:`~autotune.objectives.server_program.server_program_parts`)."""
        return server_program_parts(str(self.problem["command"]))

    def check_slo(self, slo: dict[str, float]) -> None:
        """Refuse a ``--slo`` limit no trial could measure (:func:`~autotune.objectives.
        serving_trace.check_tpot_measurable`)."""
        check_tpot_measurable(self.trace, slo)

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
                started = time.perf_counter()
                results = self._replay(port, api_key(argv), proc)
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

    def _replay(
        self, port: int, key: str | None = None, proc: subprocess.Popen | None = None
    ) -> list[dict[str, Any]]:
        """Each request of the trace streamed at its arrival time, on a thread of its own: what
        :func:`_stream` recorded of each, or its ``error``. Once ``proc`` (the server) has
        exited, no further request is sent."""
        p = self.problem
        trace = self.trace
        rng = random.Random(int(p["seed"]) + 1)
        results: list[dict[str, Any]] = [{} for _ in trace]
        start = time.perf_counter()
        threads = []
        for index, entry in enumerate(trace):
            delay = entry.arrival_s - (time.perf_counter() - start)
            if delay > 0:
                time.sleep(delay)
            if proc is not None and proc.poll() is not None:
                for unsent in results[index:]:
                    unsent["error"] = "not sent: the server had exited"
                break
            prompt = [rng.randrange(int(p["vocab"])) for _ in range(entry.prompt_len)]
            body = {"model": p["model"], "prompt": prompt, "max_tokens": entry.output_len,
                    "stream": True, "stream_options": {"include_usage": True},
                    "ignore_eos": True, "min_tokens": entry.output_len}  # fmt: skip
            t = threading.Thread(target=_stream, args=(port, body, results[index], key),
                                 daemon=True)  # fmt: skip
            t.start()
            threads.append(t)
        for t in threads:
            t.join(timeout=600)
        for result in results:  # a thread still waiting, or one that died unrecorded
            if "error" not in result and result.get("first") is None:
                result["error"] = "no answer within 600 s"
        return results


def api_key(argv: list[str]) -> str | None:
    """The key a server started with ``argv`` wants its requests to carry (vLLM's and
    SGLang's ``--api-key``, as ``--api-key KEY`` or ``--api-key=KEY``), or None.

    Example:
        >>> api_key(["vllm", "serve", "m", "--api-key", "sk-1"]), api_key(["srv", "--api-key=k"])
        ('sk-1', 'k')
        >>> api_key(["srv", "--port", "8000"]) is None
        True
    """
    for index, arg in enumerate(argv):
        if arg == "--api-key" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
    return None


def _stream(port: int, body: dict[str, Any], out: dict[str, Any], key: str | None = None) -> None:
    """One streaming completion: its send time, when its first and last tokens came and how
    many it got (:class:`StreamTokens`), or the error (an HTTP status with its reason and the
    body's error message, an error event, no token at all). ``key``: sent as
    ``Authorization: Bearer KEY``, as OpenAI's clients send it."""
    sent = time.perf_counter()
    tokens = StreamTokens()
    done = False
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request("POST", "/v1/completions", json.dumps(body), headers)
        response = conn.getresponse()
        if response.status != 200:
            out["error"] = _http_error(response)
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
                done = True
                break
            event = json.loads(data)
            if isinstance(event, dict) and "error" in event:
                out["error"] = f"an error event: {_message(event)}"
                break
            tokens.add(event, time.perf_counter())
        if "error" not in out:
            fault = _incomplete(tokens, body, done)
            if fault:
                out["error"] = fault
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError,
            http.client.HTTPException) as exc:  # fmt: skip
        out["error"] = f"{type(exc).__name__}: {exc}"
    out.update(sent=sent, first=tokens.first, last=tokens.last,
               tokens=tokens.count(body))  # fmt: skip


def _incomplete(tokens: StreamTokens, body: dict[str, Any], done: bool) -> str | None:
    """Why a stream that ended without an error is no complete answer to ``body``, or None:
    it closed before ``data: [DONE]`` (a server that crashed, or cut it short), carried no
    token, or fewer than the ``max_tokens`` the request forces (``ignore_eos``,
    ``min_tokens``), by the server's count or, where it gave none, by its events of text
    where it did not finish for ``length``.

    Example:
        >>> s = StreamTokens()
        >>> s.add({"choices": [{"text": " a", "token_ids": [7]}]}, 1.0)
        >>> _incomplete(s, {"max_tokens": 4, "ignore_eos": True}, done=False)
        'the stream ended without [DONE] after 1 token (the server closed it)'
        >>> _incomplete(s, {"max_tokens": 4, "ignore_eos": True}, done=True)
        '1 token of the 4 the request forces (ignore_eos, min_tokens): the server stopped early'
        >>> _incomplete(s, {"max_tokens": 4}, done=True) is None
        True
    """
    count = tokens.count(body)
    if not done:
        return (f"the stream ended without [DONE] after {count} token{'s' * (count != 1)} (the "
                "server closed it)")  # fmt: skip
    if tokens.first is None:
        return "HTTP 200 but no token streamed"
    wanted = body.get("max_tokens")
    if not forced_tokens(body) or not isinstance(wanted, int) or count >= wanted:
        return None
    if tokens.known():
        return (f"{count} token{'s' * (count != 1)} of the {wanted} the request forces "
                "(ignore_eos, min_tokens): the server stopped early")  # fmt: skip
    return (f"{count} events of text, finished for {tokens.finish or 'no reason'}: not the "
            f"{wanted} tokens the request forces (ignore_eos, min_tokens), and no count of them "
            "(usage, token_ids) to tell")  # fmt: skip


class StreamTokens:
    """How many tokens a completion's stream carried, and when the first and the last came.

    An event is not a token: a server packs several into one (SGLang's ``--stream-interval``,
    vLLM under load) and ends with an empty chunk that carries only ``finish_reason``. The
    count is the server's own ``usage.completion_tokens`` (the last event's, which
    ``stream_options: {"include_usage": true}`` asks for) where it sends one; else the
    ``token_ids`` (or ``logprobs``) of the events, where each says; else the ``max_tokens``
    the request forced (``ignore_eos``, or ``min_tokens`` as many) where the stream finished
    for ``length``; else one token an event of text, as few as it could have been. The
    first and last are the first and last events that carried content.

    Example:
        >>> s = StreamTokens()
        >>> s.add({"choices": [{"text": " a b c d", "finish_reason": None}]}, 1.0)
        >>> s.add({"choices": [{"text": " e f", "finish_reason": None}]}, 2.0)
        >>> s.add({"choices": [{"text": "", "finish_reason": "length"}]}, 2.5)
        >>> s.first, s.last, s.count({"max_tokens": 6, "ignore_eos": True})
        (1.0, 2.0, 6)
        >>> s.count({"max_tokens": 6}), s.known()
        (2, False)
        >>> s.add({"choices": [], "usage": {"completion_tokens": 6}}, 2.6)
        >>> s.count({"max_tokens": 6}), s.known()
        (6, True)
    """

    def __init__(self) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.counted = 0  # the tokens of events that said how many
        self.uncounted = 0  # events of text that did not
        self.usage: int | None = None
        self.finish: str | None = None

    def add(self, event: Any, now: float) -> None:
        """Take in one ``data:`` event that arrived at ``now``."""
        usage = event.get("usage")
        if isinstance(usage, dict) and type(usage.get("completion_tokens")) is int:
            self.usage = usage["completion_tokens"]
        for choice in event.get("choices") or []:
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
            carried = _choice_tokens(choice)
            if carried == 0:
                continue
            if self.first is None:
                self.first = now
            self.last = now
            if carried is None:
                self.uncounted += 1
            else:
                self.counted += carried

    def known(self) -> bool:
        """Whether the stream said how many tokens it carried (usage, or every event's ids)."""
        return self.usage is not None or not self.uncounted

    def count(self, body: dict[str, Any]) -> int:
        """The tokens streamed for the request ``body`` (see the class docstring)."""
        if self.usage is not None:
            return self.usage
        if not self.uncounted:
            return self.counted
        if forced_tokens(body) and self.finish == "length":
            return int(body["max_tokens"])
        return self.counted + self.uncounted


def _choice_tokens(choice: dict[str, Any]) -> int | None:
    """The tokens one choice of an event carries: its ``token_ids``' or its ``logprobs``'
    (a completion's ``tokens``, a chat's ``content``) where it has them, 0 for no text, None
    for text that does not say how many."""
    ids = choice.get("token_ids")
    if isinstance(ids, list):
        return len(ids)
    logprobs = choice.get("logprobs")
    if isinstance(logprobs, dict):
        listed = logprobs.get("tokens", logprobs.get("content"))
        if isinstance(listed, list):
            return len(listed)
    text = choice.get("text")
    if text is None and isinstance(choice.get("delta"), dict):
        text = choice["delta"].get("content")
    return None if text else 0


def forced_tokens(body: dict[str, Any]) -> bool:
    """Whether the request ``body`` makes the server generate all its ``max_tokens``
    (``ignore_eos``, or ``min_tokens`` as many: vLLM's and SGLang's sampling options).

    Example:
        >>> forced_tokens({"max_tokens": 8, "ignore_eos": True}), forced_tokens({"max_tokens": 8})
        (True, False)
    """
    wanted = body.get("max_tokens")
    return bool(body.get("ignore_eos")) or (
        isinstance(wanted, int) and (body.get("min_tokens") or 0) >= wanted
    )


def _http_error(response: http.client.HTTPResponse) -> str:
    """``HTTP 501 Unsupported method ('POST')``: a refused request's status and reason, and the
    message of a JSON error body (OpenAI's ``{"error": {"message": ...}}``, vLLM's and the
    project engine's forms), cut short."""
    text = f"HTTP {response.status} {response.reason}".strip()
    try:
        body = json.loads(response.read(65536))
    except (OSError, ValueError, http.client.HTTPException):
        return text
    message = _message(body) if isinstance(body, dict) else ""
    return f"{text}: {message}" if message else text


def _message(body: dict[str, Any]) -> str:
    """The message of an error body: ``{"error": "..."}``, ``{"error": {"message": "..."}}``
    or ``{"message": "..."}``, on one line, cut short.

    Example:
        >>> _message({"error": {"message": "max_tokens must be at least 1", "code": 400}})
        'max_tokens must be at least 1'
    """
    error = body.get("error", body)
    message = error.get("message", "") if isinstance(error, dict) else error
    return " ".join(str(message or "").split())[:200]


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
