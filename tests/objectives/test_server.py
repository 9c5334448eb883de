"""The server workload over real sockets: the project's engine behind its OpenAI-compatible
HTTP server, started per trial on the CPU, streamed to, and stopped."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from autotune.failures import Crashed, Infeasible, OutOfMemory, TrialTimeout
from autotune.objectives.server import ENGINE_COMMAND, ServerObjective
from autotune.objectives.server_process import GroupWatchdog, running
from autotune.objectives.server_stream import stream_request
from autotune.objectives.server_template import format_command
from autotune.objectives.train_parallel import free_port
from tests.cli_in_process import autotune_in_process
from tests.server_studies import CLI, one_trial_server_study

ENGINE = ENGINE_COMMAND


def _objective(**problem) -> ServerObjective:
    base = ServerObjective.default_problem({"type": "cpu"})
    return ServerObjective({**base, "num_requests": 6, "rate": 30.0, "output_len": 6,
                            "prompt_len": 12, **problem})  # fmt: skip


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_trial_streams_every_token_over_http_and_frees_the_port() -> None:
    # an SLO of a minute: every request meets it however loaded the machine
    obj = _objective(slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    m = obj.evaluate(obj.default_config())
    assert m.metrics["errors"] == 0 and m.metrics["requests"] == 6
    # 6 requests of 4-8 tokens (output_len 6 +- 50%) all streamed back
    assert m.metrics["output_tok_s"] * m.metrics["wall_s"] == pytest.approx(
        sum(r for r in _lengths(obj)), rel=1e-6
    )
    assert m.metrics["ttft_p99_ms"] >= m.metrics["ttft_p50_ms"] > 0
    assert m.metrics["output_tok_s"] > 0  # every request within the SLO: goodput is all of it
    assert m.values["goodput_tok_s"] == pytest.approx(m.metrics["output_tok_s"])
    assert set(obj.slo_metrics()) <= set(m.all_metrics())  # what --slo may limit
    assert _port_is_free(m.metrics["port"])  # the whole process group is gone


def _lengths(obj: ServerObjective) -> list[int]:
    from autotune.objectives.serving_trace import poisson_trace

    p = obj.problem
    return [e.output_len for e in poisson_trace(p["rate"], p["num_requests"], p["prompt_len"],
                                                p["output_len"], p["seed"])]  # fmt: skip


def test_a_server_that_exits_at_start_is_a_crash_with_its_last_words() -> None:
    command = f"{sys.executable} -c \"import sys; print('no GPU here'); sys.exit(3)\" {{port}}"
    with pytest.raises(Crashed, match="exited with code 3.*no GPU here"):
        _objective(command=command).evaluate({})


def test_a_server_never_healthy_times_out_and_is_stopped() -> None:
    command = f'{sys.executable} -c "import time; time.sleep(60)" {{port}}'
    with pytest.raises(TrialTimeout, match="not healthy within 1"):
        _objective(command=command, startup_timeout_s=1.0).evaluate({})


def test_the_template_is_split_into_arguments_never_run_by_a_shell() -> None:
    argv = format_command("serve --name {name}", {"name": "x; rm -rf /"})
    assert argv == ["serve", "--name", "x; rm -rf /"]  # one argument, not a second command
    with pytest.raises(Infeasible, match="names \\{max_num_seqs\\}"):
        format_command("serve --max-num-seqs {max_num_seqs}", {})


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a GPU can capture graphs")
def test_the_engine_server_refuses_decode_graphs_without_a_gpu() -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "autotune.objectives.engine_server", "--port", "1",
         "--cuda-graphs"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("--cuda-graphs needs a CUDA device")


@pytest.mark.skipif(__import__("torch").cuda.is_available(),
                    reason="on a CPU the paged kernel runs in Triton's interpreter")  # fmt: skip
def test_the_engine_server_streams_through_the_paged_kernel() -> None:
    from autotune.objectives.server import ENGINE_COMMAND

    obj = _objective(command=ENGINE_COMMAND + " --attention-reads paged --n-layers 1",
                     num_requests=2, output_len=3, prompt_len=6)  # fmt: skip
    m = obj.evaluate(obj.default_config())
    assert m.metrics["errors"] == 0 and m.metrics["requests"] == 2
    assert m.metrics["output_tok_s"] * m.metrics["wall_s"] == pytest.approx(
        sum(_lengths(obj)), rel=1e-6
    )


@pytest.mark.parametrize("command, says", [
    ("", "command is empty"),
    ("vllm serve 'MODEL", "does not parse: No closing quotation"),
    ("vllm serve MODEL --max-num-seqs {max_num_seqs}", "never names {port}"),
    # these crashed every trial with IndexError / ValueError (exit code 1)
    ("srv --port {port} {0}", "srv --port {port} {0}': {0} is not a name"),
    ("srv --port {port} {}", "{} is not a name"),
    ("srv --port {port} {a.b}", "{a.b} is not a name"),
    ("srv --port {port} {", "Single '{' encountered in format string (write {{ and }}"),
    ("srv --port {port} }", "Single '}' encountered in format string"),
    ("srv --port {port!x}", "{port!x}: unknown conversion"),
    ("srv --port {port:q}", "cannot be filled in: Unknown format code 'q'"),
    ("srv --port {port} --seed {seed:s}", "cannot be filled in: Unknown format code 's'"),
    # a parameter's: every config was rejected, a study of 0 trials stored
    ("srv --port {port} -n {max_num_seqs:q}", "Invalid format specifier 'q' for a parameter"),
])  # fmt: skip
def test_a_command_no_trial_could_run_is_refused_before_any(command, says) -> None:
    # an empty template crashed every trial; one without {port} had each wait out its startup
    # timeout for a server that listened elsewhere
    with pytest.raises(ValueError, match=re.escape(says)):
        _objective(command=command)


@pytest.mark.parametrize("value", [
    "startup_timeout_s=-5", "startup_timeout_s=0", "slo_ttft_ms=-1", "slo_tpot_ms=nan",
    "num_requests=0", "vocab=0", "output_len=0", "prompt_len=0", "rate=0",
])  # fmt: skip
def test_a_problem_value_that_must_be_above_zero_is_refused_before_any_trial(value) -> None:
    # each trial timed out at once, or the sweep "won" at 0 tokens/s
    key, text = value.split("=")
    with pytest.raises(ValueError, match=rf"^{key}=.* must be above 0$"):
        _objective(**{key: float(text)})


@pytest.mark.parametrize("command", ["true --port {port!s}", "true --port {port:d} {{x}}",
                                     "true --port={port:>6} -n {max_num_seqs!r:>4}"])  # fmt: skip
def test_conversions_and_format_specs_on_known_names_are_taken(command) -> None:
    # {port!s} and {port:d} were refused as "never names {port}"
    obj = _objective(command=command)
    obj.check_space(["max_num_seqs"] if "max_num_seqs" in command else [])
    assert format_command(command, {"port": 8001, "max_num_seqs": 4})[0] == "true"


def test_a_parameter_the_command_never_passes_or_a_bad_health_path_is_refused() -> None:
    # the sweep "tuned" max_num_seqs that no server saw and exported its noise winner; a
    # health path with a space crashed every trial (InvalidURL)
    obj = _objective(command="true --port {port} --n {max_num_seqs}")
    with pytest.raises(ValueError, match=r"never names \{block_size\}, a parameter of the sp"):
        obj.check_space(["max_num_seqs", "block_size"])
    with pytest.raises(ValueError, match=r"health_path='/he alth' is no URL path"):
        _objective(health_path="/he alth")


def test_a_placeholder_no_parameter_or_problem_value_fills_is_refused_naming_it() -> None:
    # every config was "rejected by constraints", no reason shown
    obj = _objective(command="true --port {port} --n {max_num_seqs} {bogus} {seed}")
    with pytest.raises(ValueError) as refused:
        obj.check_space(["max_num_seqs", "block_size"])
    assert str(refused.value) == (
        "command='true --port {port} --n {max_num_seqs} {bogus} {seed}' names {bogus}, which is "
        "neither a parameter of the space (max_num_seqs, block_size), a problem value nor {port}"
    )
    obj.check_space(["max_num_seqs", "bogus"])
    done = autotune_in_process(  # the sweep refuses it before any trial, in one line
        "tune", "server", "--problem", "command=srv --port {port} {bogus}", "--trials", "1",
        "--storage", "memory",
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "names {bogus}, which is neither a parameter of the space" in done.stderr


def test_a_server_that_fails_every_request_is_a_failed_trial_with_the_first_error() -> None:
    # Python's file server answers GET / (healthy) but 501 to every POST: recorded as a
    # success of 0 tokens/s before
    command = f"{sys.executable} -m http.server --bind 127.0.0.1 {{port}}"
    obj = _objective(command=command, health_path="/")
    with pytest.raises(Crashed, match=r"^6/6 requests failed: HTTP 501 Unsupported method"):
        obj.evaluate({})


def test_a_server_started_with_an_api_key_is_sent_it_on_every_request() -> None:
    # every request was refused (401): no server started with --api-key could be tuned
    obj = _objective(command=ENGINE + " --api-key sk-test-1", slo_ttft_ms=60_000.0,
                     slo_tpot_ms=60_000.0)  # fmt: skip
    m = obj.evaluate(obj.default_config())
    assert m.metrics["errors"] == 0 and m.values["goodput_tok_s"] > 0
    # the engine does refuse a request without it
    port = free_port()
    argv = format_command(ENGINE + " --api-key sk-test-1", {**obj.problem, **obj.default_config(),
                                                           "port": port})  # fmt: skip
    with tempfile.TemporaryFile(mode="w+") as log, running(argv, log) as proc:
        obj._wait_healthy(proc, port, log)
        out: dict = {}
        stream_request(port, {"model": "autotune-llama", "prompt": [1, 2], "max_tokens": 2,
                       "stream": True}, out)  # fmt: skip
    assert out["error"].startswith("HTTP 401 Unauthorized")


def test_a_key_filled_in_from_a_placeholder_stays_out_of_the_failures_reason() -> None:
    # the driver blanks the template's own passwords; 'sk-{port}-live' is known only once
    # filled in, and a server that echoed it put the live key in the stored reason
    script = "import sys; print('refused key', sys.argv[4]); sys.exit(3)"
    command = f"{sys.executable} -c {script!r} --port {{port}} --api-key sk-{{port}}-live"
    obj = _objective(command=command)
    with pytest.raises(Crashed, match=r"exited with code 3 before it was healthy") as failed:
        obj.evaluate({})
    assert "refused key ***" in str(failed.value) and "-live" not in str(failed.value)


def test_a_trace_file_is_replayed_by_the_server_workload(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 3}\n'
                     '{"arrival": 0.05, "prompt_len": 9, "output_len": 2}\n')  # fmt: skip
    obj = _objective(trace=str(trace), slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    m = obj.evaluate(obj.default_config())
    assert m.metrics["requests"] == 2 and m.metrics["errors"] == 0
    assert m.metrics["output_tok_s"] * m.metrics["wall_s"] == pytest.approx(5, rel=1e-6)


def test_a_burst_of_requests_is_served_by_the_engine_server_not_reset(tmp_path) -> None:
    # 64 requests sent at once, a quarter of the default's 256 sequences: the server's listen
    # backlog was socketserver's 5, and 22-43 of them read "Connection reset by peer"
    trace = tmp_path / "burst.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 16, "output_len": 2}\n' * 64)
    obj = _objective(trace=str(trace), slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    m = obj.evaluate(obj.default_config())
    assert m.metrics["requests"] == 64 and m.metrics["errors"] == 0
    assert m.metrics["output_tok_s"] * m.metrics["wall_s"] == pytest.approx(128, rel=1e-6)


def test_a_requests_ttft_counts_from_its_arrival_in_the_trace_not_its_send(tmp_path) -> None:
    # a burst: this process sends its requests one thread after another, the later ones
    # tens to hundreds of ms after their arrival; that wait is part of their TTFT, as it is
    # in the engine's replay (the send time left it out)
    trace = tmp_path / "burst.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 64, "output_len": 2}\n' * 16)
    obj = _objective(trace=str(trace))
    port = free_port()
    argv = format_command(ENGINE, {**obj.problem, **obj.default_config(), "port": port})
    with tempfile.TemporaryFile("w+") as log, running(argv, log) as proc:
        obj._wait_healthy(proc, port, log)
        before = time.perf_counter()
        results = obj._replay(port)
    assert not [r["error"] for r in results if "error" in r]
    # every request arrived at once, the replay's start: each one's TTFT counts from there
    assert len({r["sent"] for r in results}) == 1
    assert before <= results[0]["sent"] <= min(r["first"] for r in results)


def test_a_trace_no_server_could_replay_is_refused_before_any_trial(tmp_path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0.0, "prompt_len": 5, "output_len": 3}\n'
                     '{"arrival": Infinity, "prompt_len": 9, "output_len": 2}\n')  # fmt: skip
    with pytest.raises(ValueError, match=r"t\.jsonl:2: arrival must be a finite number"):
        _objective(trace=str(trace))


# A server that binds its port, starts a second process in its group, says who they are, and
# never answers /health: the trial waits on it until its worker is killed.
_SERVER = """
import os, socket, subprocess, sys, time
port, info = int(sys.argv[1]), sys.argv[2]
child = subprocess.Popen(["sleep", "300"])
listener = socket.socket()
listener.bind(("127.0.0.1", port))
listener.listen()
with open(info + ".part", "w") as out:
    out.write(f"{os.getpid()} {child.pid} {port}")
os.rename(info + ".part", info)
time.sleep(300)
"""

# A trial's worker: the objective built and evaluated as the sweep's worker process does.
_WORKER = """
import sys
from autotune.objectives.server import ServerObjective
problem = {**ServerObjective.default_problem({}), "command": sys.argv[1],
           "startup_timeout_s": 300.0}
ServerObjective(problem).evaluate({})
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, which this container's init never reaps, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_killed_worker_takes_its_servers_whole_process_group_down(until, tmp_path) -> None:
    # a trial timeout SIGKILLs the worker: its `finally: stop(proc)` never ran, and the server
    # lived on under init with its port bound
    (tmp_path / "server.py").write_text(_SERVER)
    info = tmp_path / "server.txt"
    command = f"{sys.executable} {tmp_path / 'server.py'} {{port}} {info}"
    worker = subprocess.Popen([sys.executable, "-c", _WORKER, command], start_new_session=True)
    server = child = 0
    try:
        assert until(info.exists, 120), "the server never started"
        server, child, port = map(int, info.read_text().split())
        assert _alive(server) and _alive(child) and not _port_is_free(port)
        os.killpg(worker.pid, signal.SIGKILL)  # the worker's whole group: the watchdog is apart
        worker.wait()
        assert until(lambda: not _alive(server) and not _alive(child), 5)
        assert until(lambda: _port_is_free(port), 5)
    finally:
        worker.kill()
        worker.wait()
        for pid in (server, child):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_sweep_stopped_by_ctrl_c_returns_with_no_server_left(until, tmp_path) -> None:
    # the worker is killed at once; its server, which ignores SIGTERM, got its watchdog's
    # SIGKILL 10 s later, by when `autotune tune` had returned with it still holding its port
    script = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n" + _SERVER
    (tmp_path / "server.py").write_text(script)
    (tmp_path / "seqs.yaml").write_text("name: seqs\nworkload: server\nparameters:\n"
                                        "  n: {type: categorical, choices: [4]}\n")  # fmt: skip
    info = tmp_path / "server.txt"
    command = f"{sys.executable} {tmp_path / 'server.py'} {{port}} {info} {{n}}"
    sweep = subprocess.Popen(
        [*CLI, "tune", "server", "--space", str(tmp_path / "seqs.yaml"), "--problem",
         f"command={command},startup_timeout_s=200", "--trials", "1", "--finish-top", "0",
         "--storage", "memory"],
        start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    server = child = 0
    try:
        assert until(info.exists, 120), "the server never started"
        server, child, port = map(int, info.read_text().split())
        os.killpg(sweep.pid, signal.SIGINT)  # the terminal's Ctrl-C: the sweep's group
        _, err = sweep.communicate(timeout=60)
        assert sweep.returncode == 130, err
        assert not _alive(server) and not _alive(child) and _port_is_free(port)
    finally:
        sweep.kill()
        sweep.wait()
        for pid in (server, child):
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_the_watchdog_kills_a_group_that_ignores_sigterm_after_the_grace() -> None:
    ignores = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    group = subprocess.Popen([sys.executable, "-c", ignores], start_new_session=True)
    try:
        time.sleep(0.3)  # the handler set
        watchdog = GroupWatchdog(grace_s=0.5)
        watchdog.watch(group.pid)
        started = time.monotonic()
        watchdog.abandon()  # the pipe closed unsaid, as when the trial's process dies
        assert group.wait(timeout=10) == -signal.SIGKILL
        assert 0.4 < time.monotonic() - started < 5
        assert watchdog.process.wait(timeout=5) == 0  # and it does not outlive the group
    finally:
        group.kill()
        group.wait()


def test_a_released_watchdog_leaves_the_group_alone() -> None:
    group = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        watchdog = GroupWatchdog(grace_s=0.5)
        watchdog.watch(group.pid)
        watchdog.release()  # the trial stopped its server itself: the watchdog just exits
        assert watchdog.process.returncode == 0
        assert group.poll() is None
    finally:
        group.kill()
        group.wait()


def test_what_a_server_prints_is_kept_to_its_last_bytes() -> None:
    # its output went to a temporary file: `yes` filled 4-5 GB of disk in 4 s, and a failure
    # read all of it into memory for three lines
    from autotune.objectives.server_process import OutputTail

    tail = OutputTail(keep=1000)
    with running(["sh", "-c", "yes | head -c 50000000; echo last line"], tail) as proc:
        assert proc.wait(timeout=60) == 0
    text = tail.text()
    assert len(text) <= 1000 and text.endswith("y\nlast line\n")


def test_a_server_that_exits_saying_nothing_is_said_to_have_printed_nothing() -> None:
    obj = _objective(command=f"{sys.executable} -c 'raise SystemExit(3)' {{port}}")
    with pytest.raises(Crashed, match=r"code 3 before it was healthy: \(it printed nothing\)$"):
        obj.evaluate({})


def test_a_program_this_machine_cannot_run_is_refused_before_the_sweep(tmp_path) -> None:
    # every trial was `crashed` (FileNotFoundError), one server start at a time
    with pytest.raises(ValueError, match=r"no program vllmx on PATH: no trial's server"):
        _objective(command="vllmx serve --port {port}").check_space([])
    not_executable = tmp_path / "serve.sh"
    not_executable.write_text("#!/bin/sh\n")
    with pytest.raises(ValueError, match=r"serve.sh is not an executable file"):
        _objective(command=f"{not_executable} --port {{port}}").check_space([])
    # a program a problem value fills is checked as filled in
    with pytest.raises(ValueError, match=r"no program vllmx on PATH"):
        _objective(command="{engine} --port {port}", engine="vllmx").check_space([])
    _objective(command="{engine} --port {port}", engine="true").check_space([])
    with pytest.raises(ValueError, match=r"HF_TOKEN= sets a variable, .* write env HF_TOKEN="):
        _objective(command="HF_TOKEN=x vllmx serve --port {port}").check_space([])
    _objective(command="env HF_TOKEN=x true --port {port}").check_space([])
    done = autotune_in_process(
        "tune", "server", "--problem",
        "command=" + ENGINE.replace(shlex.quote(sys.executable), "vllmx", 1),
        "--trials", "1", "--storage", "memory",
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "no program vllmx on PATH" in done.stderr


def test_a_program_a_trial_would_fill_from_its_config_is_refused_before_the_sweep() -> None:
    # every trial was `crashed`: "No such file or directory: '256'", then '16', ...
    template = ENGINE.replace(shlex.quote(sys.executable), "{max_num_seqs}", 1)
    done = autotune_in_process("tune", "server", "--problem", f"command={template}", "--trials",
                               "1", "--storage", "memory")  # fmt: skip
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"error: --problem: command={template!r}: the program is "
                                  "{max_num_seqs}, which each trial would fill with a config's "
                                  "value and run: name the server's program first")  # fmt: skip


def test_an_output_that_is_a_file_the_command_runs_is_refused_before_the_sweep(tmp_path):
    # `command=python srv.py ...  --output srv.py` swept, then wrote the best config over the
    # server's script: no resume or later sweep could start the server again
    from autotune.cli_parsing import study_reads

    script = tmp_path / "srv.py"
    source = ("import os, sys\nos.execv(sys.executable, [sys.executable, '-m', "
              "'autotune.objectives.engine_server', *sys.argv[1:]])\n")  # fmt: skip
    script.write_text(source)
    command = f"{sys.executable} {script} --port {{port}} --max-num-seqs {{max_num_seqs}}"
    space = tmp_path / "s.yaml"
    space.write_text("workload: server\nparameters:\n"
                     "  max_num_seqs: {type: categorical, choices: [4]}\n")  # fmt: skip
    done = autotune_in_process(
        "tune", "server", "--space", str(space), "--problem",
        f"command={command},num_requests=2,output_len=2,prompt_len=4", "--trials", "1",
        "--finish-top", "0", "--storage", "memory", "--output", str(script),
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr == (f"error: --output {script}: is {script}, a file --problem's command "
                           "names (writing it would destroy it); name another file\n")  # fmt: skip
    assert script.read_text() == source
    # a stored study's command reads it too, and its program (the interpreter)
    reads = study_reads("s", {"workload": "server", "problem": {"command": command}})
    assert sorted(reads.values()) == sorted([str(script), os.path.abspath(sys.executable)])


# the fake servers' shared part: health, quiet logs, one server-sent event, the stream's end
_HANDLER = """
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def send(self, event):
        self.wfile.write(b"data: " + json.dumps(event).encode() + b"\\n\\n")
        self.wfile.flush()
    def done(self):
        self.wfile.write(b"data: [DONE]\\n\\n")
        self.wfile.flush()
        self.close_connection = True
"""
# ... and their last lines: the server on `port` (each script reads it from its first argument)
_SERVE = """ThreadingHTTPServer.daemon_threads = True
ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


# An OpenAI-compatible server that streams max_tokens tokens of text in events of INTERVAL
# tokens each (SGLang's --stream-interval; vLLM merges deltas so under load), then an empty
# chunk with finish_reason "length". SAYS how many tokens an event holds: "length" nowhere
# (the request forced max_tokens), "ids" in each event's token_ids, "usage" in a last usage
# chunk (where the request asks for one, as vLLM and SGLang send it).
_PACKING = (
    """
import json, sys, time
port, interval, says = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
"""
    + _HANDLER
    + """    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        wanted, sent = body["max_tokens"], 0
        while sent < wanted:
            k = min(interval, wanted - sent)
            sent += k
            time.sleep(0.05)
            choice = {"index": 0, "text": " tok" * k, "finish_reason": None}
            if says == "ids":
                choice["token_ids"] = list(range(k))
            self.send({"choices": [choice]})
        self.send({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
        if says == "usage" and body.get("stream_options", {}).get("include_usage"):
            self.send({"choices": [], "usage": {"completion_tokens": wanted}})
        self.done()
"""
    + _SERVE
)


@pytest.mark.parametrize("interval, says", [(1, "length"), (4, "length"), (16, "length"),
                                            (4, "ids"), (4, "usage")])  # fmt: skip
def test_tokens_are_counted_not_the_events_that_carry_them(tmp_path, interval, says) -> None:
    # each event was one token and the empty last chunk one more: 8 requests of 16 tokens at
    # the same speed read 292, 90 and 39 tokens/s at stream intervals 1, 4 and 16
    (tmp_path / "packing.py").write_text(_PACKING)
    command = f"{sys.executable} {tmp_path / 'packing.py'} {{port}} {interval} {says}"
    obj = _objective(command=command, output_len=8, slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    m = obj.evaluate({})
    assert m.metrics["errors"] == 0
    assert m.metrics["output_tok_s"] * m.metrics["wall_s"] == pytest.approx(sum(_lengths(obj)))
    assert m.values["goodput_tok_s"] == pytest.approx(m.metrics["output_tok_s"])
    if interval == 4:  # 4-8 tokens in 2 events 50 ms apart: about 50 ms over 3-7 gaps
        assert m.metrics["tpot_p99_ms"] < 30  # not 50 ms over the events' 1-2 gaps


# An OpenAI-compatible server that streams each request's max_tokens tokens, one an event, with
# a last usage chunk and [DONE], except its FAULT on request K (1: the first to arrive): "oom"
# and "exit" end the process mid-stream, saying why; "cut" closes the stream before [DONE];
# "short" stops at 2 tokens (finish_reason "stop", and says so in usage); "500" answers every
# request from the K-th on with HTTP 500 every second one.
_FAULTY = (
    """
import json, os, sys, threading
port, fault, k = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
arrived = [0]
lock = threading.Lock()
"""
    + _HANDLER
    + """    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            arrived[0] += 1
            n = arrived[0]
        if fault == "500" and n >= k and n % 2 == 0:
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        wanted = 2 if fault == "short" and n == k else body["max_tokens"]
        for i in range(wanted):
            if n == k and i == 2 and fault in ("oom", "exit"):
                print("RuntimeError: CUDA out of memory" if fault == "oom" else "Aborted: bad step",
                      flush=True)
                os._exit(1)
            if n == k and i == 2 and fault == "cut":
                self.close_connection = True
                return
            self.send({"choices": [{"index": 0, "text": " x", "finish_reason": None}]})
        reason = "stop" if wanted < body["max_tokens"] else "length"
        self.send({"choices": [{"index": 0, "text": "", "finish_reason": reason}]})
        self.send({"choices": [], "usage": {"completion_tokens": wanted}})
        self.done()
"""
    + _SERVE
)


@pytest.mark.parametrize("fault, k, failure, says", [
    # the server exited during the trace: 6 requests, the last cut at its 3rd token
    ("oom", 6, OutOfMemory, r"^the server ran out of memory while serving the trace \(1/6 "
                            r"requests failed\): .*RuntimeError: CUDA out of memory$"),
    ("exit", 6, Crashed, r"^the server exited with code 1 while serving the trace \(1/6 requests "
                         r"failed\): .*Aborted: bad step$"),
    # ... on the 2nd: the requests after it failed too, or were never sent
    ("exit", 2, Crashed, r"^the server exited with code 1 while serving the trace \([2-6]/6 "
                         r"requests failed\): .*Aborted: bad step$"),
    # the server stays up
    ("cut", 3, Crashed, r"^1/6 requests failed: the stream ended without \[DONE\] after 2 tokens "
                        r"\(the server closed it\)$"),
    ("short", 3, Crashed, r"^1/6 requests failed: 2 tokens of the [4-8] the request forces "
                          r"\(ignore_eos, min_tokens\): the server stopped early$"),
    ("500", 1, Crashed, r"^3/6 requests failed: HTTP 500 Internal Server Error$"),
])  # fmt: skip
def test_a_server_that_crashes_or_fails_requests_mid_trace_is_no_ok_trial(
    tmp_path, fault, k, failure, says
) -> None:
    # a server that exited with 'CUDA out of memory' on its last request, a stream cut short
    # without [DONE] (its 3 tokens of 16 counted within the SLO), or HTTP 500 on half the
    # requests was an ok trial, and the crashing configs scored highest and won
    (tmp_path / "faulty.py").write_text(_FAULTY)
    command = f"{sys.executable} {tmp_path / 'faulty.py'} {{port}} {fault} {k}"
    obj = _objective(command=command, slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    with pytest.raises(failure, match=says):
        obj.evaluate({})


def test_the_faulty_server_serves_a_whole_trace_where_it_has_no_fault(tmp_path) -> None:
    (tmp_path / "faulty.py").write_text(_FAULTY)
    command = f"{sys.executable} {tmp_path / 'faulty.py'} {{port}} exit 99"
    obj = _objective(command=command, slo_ttft_ms=60_000.0, slo_tpot_ms=60_000.0)
    m = obj.evaluate({})
    assert m.metrics["errors"] == 0
    assert m.metrics["output_tok_s"] * m.metrics["wall_s"] == pytest.approx(sum(_lengths(obj)))


def test_the_export_lists_as_untuned_only_the_knobs_the_command_passed(tmp_path) -> None:
    # a command that passes --max-num-seqs alone exported the engine's max_num_batched_tokens
    # 2048, block_size 16 and policy fcfs as what the trials ran untuned: no server saw them
    url = one_trial_server_study(tmp_path, "--max-num-seqs {max_num_seqs}")
    exported = autotune_in_process("export", "--storage", url, "--study", "s", "--to", "json")
    assert exported.returncode == 0, exported.stderr
    record = json.loads(exported.stdout)
    assert record["config"] == {"max_num_seqs": 4}
    assert record["untuned"] == {}


@pytest.mark.parametrize("parameter, placeholder, says", [
    ("{type: pow2, low: 4, high: 64}", "{x:s}", "at x=4, a value of the space: Unknown format "
                                                "code 's' for object of type 'int'"),
    ("{type: float, low: 0.5, high: 0.95}", "{x:d}", "at x=0.5, a value of the space: Unknown "
                                                     "format code 'd' for object of type 'float'"),
    ("{type: categorical, choices: [16, auto]}", "{x:d}", "at x='auto', a value of the space"),
    ("{type: int, low: 1, high: 2000000}", "{x:c}", "at x=2000000, a value of the space"),
    ("{type: bool}", "{x:s}", "at x=False, a value of the space"),
])  # fmt: skip
def test_a_format_spec_a_parameters_value_does_not_take_is_refused_before_the_sweep(
    tmp_path, parameter, placeholder, says
) -> None:
    # every config the sweep drew was 'rejected by constraints (not launched)': 0 trials,
    # exit 1, each reason "Unknown format code 's' for object of type 'int'"
    from autotune.setup_error import SetupError
    from autotune.sweep_setup import build_settings

    space = tmp_path / "s.yaml"
    space.write_text(f"workload: server\nparameters:\n  x: {parameter}\n")

    def build(command):
        return build_settings(
            workload="server", space=str(space), problem={"command": command}, objective=None,
            sampler="auto", trials=1, time_budget_s=None, seed=0, storage="memory", study=None,
            trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None,
            params=None, metric=None, maximize=True, command="autotune tune server",
        )  # fmt: skip

    with pytest.raises(SetupError) as refused:
        build(f"true --port {{port}} -x {placeholder}")
    assert str(refused.value).startswith(f"--problem: command='true --port {{port}} -x "
                                         f"{placeholder}' cannot be filled in ")  # fmt: skip
    assert says in str(refused.value)
    build("true --port {port} -x {x!s:>8}")  # a spec every value takes


def test_the_sweep_takes_a_spec_every_value_takes_and_refuses_one_in_one_line(tmp_path) -> None:
    space = tmp_path / "s.yaml"
    space.write_text("workload: server\nparameters:\n  n: {type: pow2, low: 4, high: 64}\n"
                     "  g: {type: float, low: 0.5, high: 0.95}\n"
                     "  c: {type: categorical, choices: [auto, fp8]}\n")  # fmt: skip
    done = autotune_in_process(
        "tune", "server", "--space", str(space), "--problem",
        "command=srv --port {port} -n {n:d} -g {g:.2f} -c {c:>6}", "--trials", "1",
        "--storage", "memory",
    )  # fmt: skip
    # refused for its program alone, after every format spec was taken
    assert done.returncode == 2 and "no program srv on PATH" in done.stderr, done.stderr
    bad = autotune_in_process(
        "tune", "server", "--space", str(space), "--problem",
        "command=true --port {port} -n {n:s} -g {g} -c {c}", "--trials", "1", "--storage",
        "memory",
    )  # fmt: skip
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "cannot be filled in at n=4, a value of the space: Unknown format code 's'" in bad.stderr


def _settings(space, command: str | None = None):
    from autotune.sweep_setup import build_settings

    problem = {} if command is None else {"command": command}
    return build_settings(
        workload="server", space=str(space), problem=problem, objective=None, sampler="auto",
        trials=1, time_budget_s=None, seed=0, storage="memory", study=None,
        trial_timeout_s=None, device={"type": "cpu", "name": "cpu"}, replay=None, params=None,
        metric=None, maximize=True, command="autotune tune server",
    )  # fmt: skip


def test_a_space_value_the_engine_server_refuses_is_refused_before_the_sweep(tmp_path) -> None:
    # block_size: [0, 16] over the default command swept on, each 0 a trial 'crashed' with the
    # engine server's usage error
    space = tmp_path / "s.yaml"
    space.write_text("workload: server\nparameters:\n"
                     "  max_num_seqs: {type: pow2, low: 4, high: 64}\n"
                     "  max_num_batched_tokens: {type: pow2, low: 256, high: 1024}\n"
                     "  block_size: {type: categorical, choices: [0, 16]}\n"
                     "  policy: {type: categorical, choices: [fcfs]}\n")  # fmt: skip
    done = autotune_in_process("tune", "server", "--space", str(space), "--trials", "2",
                               "--storage", "memory")  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr == (f"error: {space}: parameters.block_size: block_size=0 must be at "
                           "least 1: a KV block holds tokens\n")  # fmt: skip


def test_the_engine_servers_flags_are_checked_by_the_flag_not_the_parameters_name(tmp_path):
    from autotune.setup_error import SetupError

    space = tmp_path / "s.yaml"
    space.write_text("workload: server\nparameters:\n"
                     "  bs: {type: float, low: 8, high: 16}\n"
                     "  pol: {type: categorical, choices: [fcfs, lifo]}\n")  # fmt: skip
    engine = f"{shlex.quote(sys.executable)} -m autotune.objectives.engine_server --port {{port}}"
    with pytest.raises(SetupError, match=r"parameters\.bs: a float parameter draws fractions, "
                                         "and block_size takes whole numbers"):  # fmt: skip
        _settings(space, f"{engine} --block-size {{bs}} --policy {{pol}}")
    with pytest.raises(SetupError, match=r"parameters\.pol: policy='lifo' is not one of fcfs"):
        _settings(space, f"{engine} --num-blocks {{bs:.0f}} --policy={{pol}}")
    # another server's flags are its own: no engine server reads them
    _settings(space, "true --port {port} --block-size {bs} --policy {pol}")
