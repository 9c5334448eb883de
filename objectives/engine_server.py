"""The project's serving engine behind a small OpenAI-compatible HTTP server: what the
``server`` workload's tests start, as they would start ``vllm serve``.

Endpoints: ``GET /health``, ``GET /v1/models`` and ``POST /v1/completions`` (``prompt`` as a
list of token ids or a string, taken byte by byte; ``max_tokens``; ``stream`` for server-sent
events, one ``data: {...}`` per token, then ``data: [DONE]``). Every request is generated to
``max_tokens`` (no end-of-sequence token: random weights). One engine thread runs the
continuous-batching scheduler; HTTP threads hand it requests and read their tokens.

A request the engine cannot serve is answered 400 with the limit it breaks: a prompt and
``max_tokens`` longer than ``--max-context`` or than the KV cache holds, ``max_tokens`` below 1.
An error inside the engine's step fails the requests in flight (500, or an ``error`` event on a
stream already answered) and the engine goes on serving; ``/health`` answers 503 should its
thread ever stop.

    python -m autotune.objectives.engine_server --port 8000 --max-num-seqs 64 \\
        --max-num-batched-tokens 2048 --block-size 16 --policy fcfs [--attention-reads paged]
        [--cuda-graphs] [--d-model 128 ...]
"""

from __future__ import annotations

import argparse
import hmac
import itertools
import json
import queue
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import ATTENTION_READS, WEIGHTS, InferenceModel
from autotune.kernels.paged_kv import KV_DTYPES
from autotune.objectives.serving_engine import POLICIES, Request, Scheduler, step_logits

_DONE = None


class EngineError(Exception):
    """What a request's queue ends with instead of ``None`` when the engine's step failed."""


class Engine:
    """The scheduler and model, stepped by one thread; requests come in through ``submit``.

    Example:
        >>> from autotune.kernels.llama import Llama, LlamaConfig
        >>> _ = torch.manual_seed(0)
        >>> model = InferenceModel(Llama(LlamaConfig(vocab=64, d_model=32, n_layers=1,
        ...                                          n_heads=2, seq_len=16)))
        >>> engine = Engine(model, Scheduler(model.new_cache(8, 4, "fp32"), 4, 64))
        >>> len(list(iter(engine.submit([1, 2, 3], 4).get, None)))  # four tokens, then None
        4
        >>> engine.check(12, 8)
        Traceback (most recent call last):
        ...
        ValueError: a prompt of 12 tokens and max_tokens=8 (20 tokens) is longer than ...
        >>> engine.close()
    """

    def __init__(
        self, model: InferenceModel, scheduler: Scheduler, graphs: DecodeGraphs | None = None
    ) -> None:
        self.model, self.scheduler, self.graphs = model, scheduler, graphs
        self.max_context = model.cfg.seq_len
        cache = scheduler.cache
        self.cache_tokens = cache.free_blocks * cache.block_size  # the graphs' scratch taken
        self.inbox: queue.Queue[tuple[Request, queue.Queue]] = queue.Queue()
        self.outputs: dict[int, tuple[Request, queue.Queue]] = {}
        self.next_id = 0
        self.lock = threading.Lock()
        self._closing = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop the engine's thread (after the step it is in)."""
        self._closing.set()
        self.thread.join()

    def check(self, prompt_len: int, max_tokens: int) -> None:
        """Refuse a request the engine could never finish: its positions would run past the
        model's ``--max-context`` (an IndexError in the step), or its blocks would never fit
        the cache (it would wait for good, and every request after it).

        Raises:
            ValueError: naming the request's sizes and the limit it breaks.
        """
        if max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens} must be at least 1")
        total = prompt_len + max_tokens
        sizes = f"a prompt of {prompt_len} tokens and max_tokens={max_tokens} ({total} tokens)"
        if total > self.max_context:
            raise ValueError(f"{sizes} is longer than --max-context={self.max_context}")
        if total > self.cache_tokens:
            raise ValueError(f"{sizes} does not fit the KV cache's {self.cache_tokens} tokens "
                             "(--num-blocks x --block-size)")  # fmt: skip

    def submit(self, prompt: list[int], max_tokens: int) -> queue.Queue:
        """Queue a request (token ids below the model's vocab); its tokens arrive on the
        returned queue, then ``None``, or an :class:`EngineError` if a step fails under it.

        Raises:
            ValueError: a request the engine could never finish (:meth:`check`).
        """
        self.check(len(prompt), max_tokens)
        with self.lock:
            rid, self.next_id = self.next_id, self.next_id + 1
        out: queue.Queue = queue.Queue()
        self.inbox.put((Request(rid, time.perf_counter(), prompt, max_tokens), out))
        return out

    def _loop(self) -> None:
        while not self._closing.is_set():
            block = self.scheduler.idle
            try:
                while True:
                    request, out = self.inbox.get(timeout=0.05 if block else 0)
                    self.outputs[request.id] = (request, out)
                    self.scheduler.add(request)
                    block = False
            except queue.Empty:
                pass
            try:
                self._step()
            except Exception as exc:  # noqa: BLE001 - fail the requests, keep serving
                traceback.print_exc(file=sys.stderr)
                self._fail(f"the engine's step failed: {type(exc).__name__}: {exc}")

    def _step(self) -> None:
        step = self.scheduler.schedule()
        if not step:
            time.sleep(0.001)  # nothing can run yet (a full cache waits for arrivals)
            return
        sent = {r.id: len(r.generated) for r, _ in step}
        chunks = [chunk for _, chunk in step]
        logits = step_logits(self.model, chunks, self.scheduler.cache, self.graphs)
        self.scheduler.complete(step, logits, time.perf_counter())
        for request, _ in step:
            _, out = self.outputs[request.id]
            for token in request.generated[sent[request.id] :]:
                out.put(token)
            if request.done:
                out.put(_DONE)
                del self.outputs[request.id]

    def _fail(self, message: str) -> None:
        """End every request in flight with ``message`` and start the scheduler afresh: the
        failed step may have left its sequences' blocks and counts half updated."""
        first_line = message.strip().splitlines()[0] if message.strip() else message
        for request, out in self.outputs.values():
            self.scheduler.cache.free(request.id)
            out.put(EngineError(first_line))
        self.outputs.clear()
        self.scheduler.waiting.clear()
        self.scheduler.running.clear()


def _tokens(prompt: Any, vocab: int) -> list[int]:
    if isinstance(prompt, str):
        return [b % vocab for b in prompt.encode("utf-8")] or [0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [t % vocab for t in prompt]
    raise ValueError("prompt must be a string or a non-empty list of token ids")


def _answer(out: queue.Queue) -> Iterator[int | EngineError | None]:
    """A request's queue as it fills: its tokens, then ``None`` (done) or an
    :class:`EngineError` (its step failed), which ends it."""
    while True:
        item = out.get()
        yield item
        if item is _DONE or isinstance(item, EngineError):
            return


def make_handler(
    engine: Engine, model_name: str, vocab: int, api_key: str | None = None
) -> type[BaseHTTPRequestHandler]:
    """The server's routes; with ``api_key``, a request to ``/v1/...`` without
    ``Authorization: Bearer API_KEY`` is refused (401), as vLLM's ``--api-key`` does."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # quiet: one line per request is noise
            pass

        def _json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refused(self) -> bool:
            """Answer 401 to a ``/v1/`` request without the key; whether it was."""
            wanted = f"Bearer {api_key}"
            if api_key is None or not self.path.startswith("/v1/"):
                return False
            if hmac.compare_digest(self.headers.get("Authorization", ""), wanted):
                return False
            self._json(401, {"error": {"message": "Unauthorized", "code": 401}})
            return True

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self._refused():
                return
            if self.path == "/health" and not engine.thread.is_alive():
                self._json(503, {"status": "the engine's thread has stopped"})
            elif self.path == "/health":
                self._json(200, {"status": "ok"})
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": model_name, "object": "model"}]})
            else:
                self._json(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if self._refused():
                return
            if self.path != "/v1/completions":
                self._json(404, {"error": f"no route {self.path}"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
                prompt = _tokens(body.get("prompt"), vocab)
                max_tokens = body.get("max_tokens", 16)
                if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
                    raise ValueError(f"max_tokens must be a whole number, not {max_tokens!r}")
                out = engine.submit(prompt, max_tokens)
            except (ValueError, TypeError, RecursionError) as exc:
                self._json(400, {"error": {"message": str(exc), "code": 400}})
                return
            items = _answer(out)
            first = next(items)
            if isinstance(first, EngineError):  # nothing answered yet: a plain 500
                self._json(500, {"error": {"message": str(first), "code": 500}})
                return
            if not body.get("stream"):
                tokens = [item for item in (first, *items) if item is not _DONE]
                failed = [t for t in tokens if isinstance(t, EngineError)]
                if failed:
                    self._json(500, {"error": {"message": str(failed[0]), "code": 500}})
                    return
                self._json(200, {"object": "text_completion", "model": model_name,
                                 "choices": [{"index": 0, "token_ids": tokens, "text": "",
                                              "finish_reason": "length"}]})  # fmt: skip
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for item in itertools.chain([first], items):  # each as it comes
                if item is _DONE:
                    self._chunk("data: [DONE]\n\n")
                elif isinstance(item, EngineError):  # the answer is under way: an error event
                    error = {"error": {"message": str(item), "code": 500}}
                    self._chunk(f"data: {json.dumps(error)}\n\n")
                else:
                    choice = {"index": 0, "text": " ", "token_ids": [item]}
                    event = {"object": "text_completion", "model": model_name, "choices": [choice]}
                    self._chunk(f"data: {json.dumps(event)}\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


class _Server(ThreadingHTTPServer):
    """The HTTP server, its listen backlog as deep as uvicorn's (vLLM's and SGLang's server):
    socketserver's default of 5 reset connections of a burst (64 requests sent at once:
    22-43 of them ``Connection reset by peer`` in five runs), a crashed trial for a config
    that would have served them."""

    daemon_threads = True
    request_queue_size = 2048


def at_least_one(text: str) -> int:
    """A size or count flag's value: a whole number of at least 1 (``--block-size 0`` ended
    the server in a traceback once its cache was built).

    Example:
        >>> at_least_one("16")
        16
        >>> at_least_one("0")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: 0 is not a whole number of at least 1
    """
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a whole number of at least 1")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--max-num-seqs", type=at_least_one, default=256)
    parser.add_argument("--max-num-batched-tokens", type=at_least_one, default=2048)
    parser.add_argument("--block-size", type=at_least_one, default=16)
    parser.add_argument("--num-blocks", type=at_least_one, default=512)
    parser.add_argument("--kv-cache-dtype", choices=tuple(KV_DTYPES), default="bf16")
    parser.add_argument("--weights", choices=WEIGHTS, default="bf16")
    parser.add_argument("--policy", choices=POLICIES, default="fcfs")
    parser.add_argument(
        "--api-key", default=None, help="refuse /v1/ requests without 'Authorization: Bearer KEY'"
    )
    parser.add_argument("--attention-reads", choices=ATTENTION_READS, default="gather",
                        help="SDPA over gathered blocks, or the Triton kernel that reads them "
                             "in place (on a CPU: Triton's interpreter, slow)")  # fmt: skip
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="replay steps from CUDA graphs (a GPU only): decode steps, and "
                             "with --attention-reads paged every step")  # fmt: skip
    for name, default in (("vocab", 512), ("d-model", 128), ("n-layers", 2), ("n-heads", 4),
                          ("max-context", 512)):  # fmt: skip
        parser.add_argument(f"--{name}", type=at_least_one, default=default)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.cuda_graphs and device.type != "cuda":
        parser.error("--cuda-graphs needs a CUDA device")
    try:  # d_model a multiple of n_heads, an even head dim
        cfg = LlamaConfig(vocab=args.vocab, d_model=args.d_model, n_layers=args.n_layers,
                          n_heads=args.n_heads, seq_len=args.max_context)  # fmt: skip
    except ValueError as exc:
        parser.error(str(exc))
    with torch.device(device):
        model = InferenceModel(Llama(cfg), args.weights, args.attention_reads)
    cache = model.new_cache(args.num_blocks, args.block_size, args.kv_cache_dtype)
    graphs = None
    if args.cuda_graphs:
        graphs = DecodeGraphs(model, cache, args.max_num_seqs,
                              max_tokens=args.max_num_batched_tokens)  # fmt: skip
    engine = Engine(model, Scheduler(cache, args.max_num_seqs, args.max_num_batched_tokens,
                                     args.policy), graphs)  # fmt: skip
    handler = make_handler(engine, "autotune-llama", args.vocab, args.api_key)
    server = _Server((args.host, args.port), handler)
    print(f"serving on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
