"""The project's serving engine behind a small OpenAI-compatible HTTP server: what the
``server`` workload's tests start, as they would start ``vllm serve``.

Endpoints: ``GET /health``, ``GET /v1/models`` and ``POST /v1/completions`` (``prompt`` as a
list of token ids or a string, taken byte by byte; ``max_tokens``; ``stream`` for server-sent
events, one ``data: {...}`` per token, then ``data: [DONE]``). Every request is generated to
``max_tokens`` (no end-of-sequence token: random weights). One engine thread runs the
continuous-batching scheduler; HTTP threads hand it requests and read their tokens.

    python -m autotune.objectives.engine_server --port 8000 --max-num-seqs 64 \\
        --max-num-batched-tokens 2048 --block-size 16 --policy fcfs [--attention-reads paged]
        [--cuda-graphs] [--d-model 128 ...]
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import torch

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import ATTENTION_READS, InferenceModel
from autotune.objectives.serving_engine import Request, Scheduler, step_logits

_DONE = None


class Engine:
    """The scheduler and model, stepped by one thread; requests come in through ``submit``."""

    def __init__(
        self, model: InferenceModel, scheduler: Scheduler, graphs: DecodeGraphs | None = None
    ) -> None:
        self.model, self.scheduler, self.graphs = model, scheduler, graphs
        self.inbox: queue.Queue[tuple[Request, queue.Queue]] = queue.Queue()
        self.outputs: dict[int, tuple[Request, queue.Queue]] = {}
        self.next_id = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._loop, daemon=True).start()

    def submit(self, prompt: list[int], max_tokens: int) -> queue.Queue:
        """Queue a request; its tokens arrive on the returned queue, then ``None``."""
        with self.lock:
            rid, self.next_id = self.next_id, self.next_id + 1
        out: queue.Queue = queue.Queue()
        self.inbox.put((Request(rid, time.perf_counter(), prompt, max_tokens), out))
        return out

    def _loop(self) -> None:
        while True:
            block = self.scheduler.idle
            try:
                while True:
                    request, out = self.inbox.get(timeout=0.05 if block else 0)
                    self.outputs[request.id] = (request, out)
                    self.scheduler.add(request)
                    block = False
            except queue.Empty:
                pass
            step = self.scheduler.schedule()
            if not step:
                time.sleep(0.001)  # nothing can run yet (a full cache waits for arrivals)
                continue
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


def _tokens(prompt: Any, vocab: int) -> list[int]:
    if isinstance(prompt, str):
        return [b % vocab for b in prompt.encode("utf-8")] or [0]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return [t % vocab for t in prompt]
    raise ValueError("prompt must be a string or a non-empty list of token ids")


def make_handler(engine: Engine, model_name: str, vocab: int) -> type[BaseHTTPRequestHandler]:
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

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/health":
                self._json(200, {"status": "ok"})
            elif self.path == "/v1/models":
                self._json(200, {"object": "list", "data": [{"id": model_name, "object": "model"}]})
            else:
                self._json(404, {"error": f"no route {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/v1/completions":
                self._json(404, {"error": f"no route {self.path}"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                prompt = _tokens(body.get("prompt"), vocab)
                max_tokens = int(body.get("max_tokens", 16))
            except (ValueError, TypeError) as exc:
                self._json(400, {"error": str(exc)})
                return
            out = engine.submit(prompt, max_tokens)
            if not body.get("stream"):
                tokens = list(iter(out.get, _DONE))
                self._json(200, {"object": "text_completion", "model": model_name,
                                 "choices": [{"index": 0, "token_ids": tokens, "text": "",
                                              "finish_reason": "length"}]})  # fmt: skip
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for token in iter(out.get, _DONE):
                event = {"object": "text_completion", "model": model_name,
                         "choices": [{"index": 0, "text": " ", "token_ids": [token]}]}  # fmt: skip
                self._chunk(f"data: {json.dumps(event)}\n\n")
            self._chunk("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")

        def _chunk(self, text: str) -> None:
            data = text.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--num-blocks", type=int, default=512)
    parser.add_argument("--kv-cache-dtype", default="bf16")
    parser.add_argument("--weights", default="bf16")
    parser.add_argument("--policy", default="fcfs")
    parser.add_argument("--attention-reads", choices=ATTENTION_READS, default="gather",
                        help="SDPA over gathered blocks, or the Triton kernel that reads them "
                             "in place (on a CPU: Triton's interpreter, slow)")  # fmt: skip
    parser.add_argument("--cuda-graphs", action="store_true",
                        help="replay steps from CUDA graphs (a GPU only): decode steps, and "
                             "with --attention-reads paged every step")  # fmt: skip
    for name, default in (("vocab", 512), ("d-model", 128), ("n-layers", 2), ("n-heads", 4),
                          ("max-context", 512), ("seed", 0)):  # fmt: skip
        parser.add_argument(f"--{name}", type=int, default=default)
    args = parser.parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if args.cuda_graphs and device.type != "cuda":
        parser.error("--cuda-graphs needs a CUDA device")
    cfg = LlamaConfig(vocab=args.vocab, d_model=args.d_model, n_layers=args.n_layers,
                      n_heads=args.n_heads, seq_len=args.max_context)  # fmt: skip
    with torch.device(device):
        model = InferenceModel(Llama(cfg), args.weights, args.attention_reads)
    cache = model.new_cache(args.num_blocks, args.block_size, args.kv_cache_dtype)
    graphs = None
    if args.cuda_graphs:
        graphs = DecodeGraphs(model, cache, args.max_num_seqs,
                              max_tokens=args.max_num_batched_tokens)  # fmt: skip
    engine = Engine(model, Scheduler(cache, args.max_num_seqs, args.max_num_batched_tokens,
                                     args.policy), graphs)  # fmt: skip
    server = ThreadingHTTPServer((args.host, args.port), make_handler(engine, "autotune-llama",
                                                                      args.vocab))  # fmt: skip
    server.daemon_threads = True
    print(f"serving on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
