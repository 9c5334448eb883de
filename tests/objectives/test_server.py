"""The server workload over real sockets: the project's engine behind its OpenAI-compatible
HTTP server, started per trial on the CPU, streamed to, and stopped."""

from __future__ import annotations

import socket
import sys

import pytest

from autotune.failures import Crashed, Infeasible, TrialTimeout
from autotune.objectives.server import ServerObjective, format_command


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
])  # fmt: skip
def test_a_command_no_trial_could_run_is_refused_before_any(command, says) -> None:
    # an empty template crashed every trial; one without {port} had each wait out its startup
    # timeout for a server that listened elsewhere
    with pytest.raises(ValueError, match=says.replace("{", r"\{").replace("}", r"\}")):
        _objective(command=command)
