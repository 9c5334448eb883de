"""The project engine's OpenAI-compatible server, in this process over a real socket: requests
it cannot serve are refused with the limit they break, and an error in the engine's step fails
the requests in flight without taking the engine down."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from typing import Any

import pytest
import torch

from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import InferenceModel
from autotune.objectives.engine_server import Engine, EngineError, make_handler
from autotune.objectives.serving_engine import Scheduler

VOCAB = 64


def _model(n_layers: int = 1) -> InferenceModel:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab=VOCAB, d_model=32, n_layers=n_layers, n_heads=2, seq_len=64)
    return InferenceModel(Llama(cfg))


def _serve(engine: Engine) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(engine, "m", VOCAB))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        engine.close()


@pytest.fixture
def port() -> Iterator[int]:
    model = _model()
    yield from _serve(Engine(model, Scheduler(model.new_cache(32, 4, "fp32"), 4, 64)))


@pytest.fixture
def broken_port() -> Iterator[int]:
    # a cache of one layer under a model of two: every step fails inside the engine's thread
    model = _model(n_layers=2)
    yield from _serve(Engine(model, Scheduler(_model().new_cache(32, 4, "fp32"), 4, 64)))


def _post(port: int, body: dict[str, Any]) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", "/v1/completions", json.dumps(body))
    response = conn.getresponse()
    return response.status, response.read().decode()


def _health(port: int) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/health")
    return conn.getresponse().status


@pytest.mark.parametrize("body, says", [
    ({"prompt": list(range(70)), "max_tokens": 4},
     "a prompt of 70 tokens and max_tokens=4 (74 tokens) is longer than --max-context=64"),
    ({"prompt": list(range(60)), "max_tokens": 5}, "(65 tokens) is longer than --max-context=64"),
    ({"prompt": [1, 2], "max_tokens": 0}, "max_tokens=0 must be at least 1"),
    ({"prompt": [1, 2], "max_tokens": 2.5}, "max_tokens must be a whole number, not 2.5"),
    ({"prompt": []}, "prompt must be a string or a non-empty list of token ids"),
])  # fmt: skip
def test_a_request_the_engine_cannot_serve_is_refused_naming_the_limit(port, body, says) -> None:
    # a prompt past --max-context raised IndexError in the engine's thread, which died: every
    # later request timed out while /health said 200
    status, text = _post(port, body)
    assert status == 400 and json.loads(text)["error"]["message"].endswith(says)
    status, text = _post(port, {"prompt": [1, 2, 3], "max_tokens": 4})  # still serving
    assert status == 200 and len(json.loads(text)["choices"][0]["token_ids"]) == 4


def test_a_request_larger_than_the_kv_cache_is_refused() -> None:
    model = _model()
    engine = Engine(model, Scheduler(model.new_cache(2, 4, "fp32"), 4, 64))
    try:
        with pytest.raises(ValueError, match=r"\(12 tokens\) does not fit the KV cache's 8 tok"):
            engine.submit([1] * 8, 4)  # it would have waited for blocks for good
    finally:
        engine.close()


@pytest.mark.parametrize("stream", [False, True])
def test_an_error_in_the_engines_step_answers_500_and_the_server_goes_on(broken_port, stream):
    for _ in range(2):  # the second is answered too, not left to time out
        status, text = _post(broken_port, {"prompt": [1, 2], "max_tokens": 2, "stream": stream})
        assert status == 500
        assert "the engine's step failed: IndexError" in json.loads(text)["error"]["message"]
    assert _health(broken_port) == 200


def test_the_engine_fails_the_requests_of_a_failed_step_and_serves_the_next() -> None:
    model = _model()
    engine = Engine(model, Scheduler(model.new_cache(32, 4, "fp32"), 4, 64))
    try:
        bad = engine.submit([VOCAB + 5], 3)  # a token id past the embedding: the step raises
        failed = bad.get(timeout=30)
        assert isinstance(failed, EngineError) and "IndexError" in str(failed)
        good = engine.submit([1, 2, 3], 3)
        tokens = [good.get(timeout=30) for _ in range(4)]
        assert all(isinstance(t, int) for t in tokens[:3]) and tokens[3] is None
        assert engine.thread.is_alive()
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("args", "says"),
    [(["--block-size", "0"], "argument --block-size: 0 is not a whole number of at least 1"),
     (["--max-num-seqs", "-3"], "argument --max-num-seqs: -3 is not a whole number of at least 1"),
     (["--kv-cache-dtype", "fp4"], "argument --kv-cache-dtype: invalid choice: 'fp4'"),
     (["--policy", "lifo"], "argument --policy: invalid choice: 'lifo'"),
     (["--d-model", "130"], "d_model=130 is not divisible by n_heads=4")],
)  # fmt: skip
def test_a_flag_the_engine_cannot_serve_with_is_a_one_line_usage_error(args, says) -> None:
    # --block-size 0 or --kv-cache-dtype fp4 ended the server in a traceback (a KeyError for
    # fp4), which a server sweep's trial kept as its reason
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "autotune.objectives.engine_server", "--port", "0", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert says in done.stderr.splitlines()[-1]
