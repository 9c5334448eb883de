"""A continuous-batching inference engine: a scheduler that admits requests as KV-cache blocks
and sequence slots free up, cuts prompts into chunks under a per-step token budget (chunked
prefill), preempts the newest sequence when the cache is full (its blocks freed, its tokens
recomputed when it is admitted again, as vLLM does), and a loop that replays a request trace in
real time against :class:`~autotune.kernels.llama_infer.InferenceModel`.

Policies: ``fcfs`` (vLLM's default since v1: the running sequences' decode tokens first, then
prefill chunks of the oldest requests in the budget left) and ``prefill-first`` (a step of
prefill chunks whenever any prompt waits, decode steps otherwise: lower time to first token,
stalled decodes).

Example:
    >>> import torch
    >>> from autotune.kernels.llama import Llama, LlamaConfig
    >>> from autotune.kernels.llama_infer import InferenceModel
    >>> torch.manual_seed(0); model = InferenceModel(Llama(LlamaConfig(  # doctest: +ELLIPSIS
    ...     vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=64)))
    <...>
    >>> requests = [Request(i, arrival_s=0.0, prompt=[1, 2, 3], output_len=4) for i in range(3)]
    >>> sched = Scheduler(model.new_cache(16, 4, "fp32"), max_num_seqs=2,
    ...                   max_num_batched_tokens=8)
    >>> done = run_trace(model, sched, requests)
    >>> [len(r.generated) for r in done], sched.peak_running
    ([4, 4, 4], 2)
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.kernels.paged_kv import PagedKVCache

POLICIES = ("fcfs", "prefill-first")


@dataclass(eq=False)  # compared by identity: the scheduler's lists hold each request once
class Request:
    """One request of a trace, and what happened to it."""

    id: int
    arrival_s: float
    prompt: list[int]
    output_len: int
    generated: list[int] = field(default_factory=list)
    computed: int = 0  # tokens of context() whose keys and values are in the cache
    first_token_s: float | None = None
    finish_s: float | None = None
    preemptions: int = 0

    def context(self) -> list[int]:
        """The tokens whose keys and values the cache must hold to decode the next one."""
        return self.prompt + self.generated

    @property
    def context_len(self) -> int:
        """``len(self.context())``, without building the list."""
        return len(self.prompt) + len(self.generated)

    @property
    def last_token(self) -> int:
        """The context's last token: the one a decode step feeds."""
        return self.generated[-1] if self.generated else self.prompt[-1]

    @property
    def done(self) -> bool:
        return len(self.generated) >= self.output_len

    @property
    def prefilling(self) -> bool:
        """Whether prompt (or, after a preemption, already generated) tokens are still to be
        computed before the next token can be sampled."""
        return self.computed < self.context_len - (1 if self.generated else 0)


class Scheduler:
    """Which tokens of which requests each step computes (see the module docstring)."""

    def __init__(
        self,
        cache: PagedKVCache,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        policy: str = "fcfs",
    ) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy={policy!r} is not one of {', '.join(POLICIES)}")
        if max_num_seqs < 1 or max_num_batched_tokens < 1:
            raise ValueError("max_num_seqs and max_num_batched_tokens must be at least 1")
        self.cache = cache
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.policy = policy
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.preemptions = 0
        self.peak_running = 0
        self.steps = 0  # steps completed

    def add(self, request: Request) -> None:
        self.waiting.append(request)

    @property
    def idle(self) -> bool:
        return not self.waiting and not self.running

    # -- one step -------------------------------------------------------------------------
    def schedule(self) -> list[tuple[Request, Chunk]]:
        """The chunks of the next step (empty when nothing can run). When the cache is too full
        for any running sequence to go on (prompts half computed), the newest gives way."""
        step = self._schedule()
        while not step and len(self.running) > 1:
            self._preempt(self.running[-1])
            step = self._schedule()
        return step

    def _schedule(self) -> list[tuple[Request, Chunk]]:
        prefill_first = self.policy == "prefill-first"
        if prefill_first:
            step = self._prefills(self.budget)
            if step:
                return step
        step = self._decodes()
        if not prefill_first:
            step += self._prefills(self.budget - len(step))
        return step

    def _decodes(self) -> list[tuple[Request, Chunk]]:
        step: list[tuple[Request, Chunk]] = []
        preempted: set[int] = set()  # ids of the sequences this step made give way
        for request in list(self.running):
            if id(request) in preempted or request.prefilling or len(step) >= self.budget:
                continue
            need = request.context_len
            while not self.cache.allocate(request.id, need):
                victim = self.running[-1]  # the newest sequence gives its blocks back
                self._preempt(victim)
                preempted.add(id(victim))
                if victim is request:
                    break
            if id(request) in preempted:
                continue
            step.append((request, Chunk(request.id, need - 1, [request.last_token])))
        return step

    def _prefills(self, budget: int) -> list[tuple[Request, Chunk]]:
        step: list[tuple[Request, Chunk]] = []
        candidates = [r for r in self.running if r.prefilling]
        while self.waiting and len(self.running) < self.max_num_seqs:
            candidates.append(self.waiting[0])
            self.running.append(self.waiting.popleft())
        for request in candidates:
            if budget <= 0:
                break
            upto = request.context_len - (1 if request.generated else 0)  # a resumed request's
            count = min(upto - request.computed, budget)  # last token goes in its decode step
            if count <= 0:
                continue
            if not self.cache.allocate(request.id, request.computed + count):
                continue  # no room yet
            start = request.computed
            tokens = request.context()[start : start + count]
            step.append((request, Chunk(request.id, start, tokens)))
            budget -= count
        # admitted but given no block: back to the head of the queue, in their order
        for request in reversed([r for r in self.running if not self.cache.blocks_of(r.id)]):
            self._unadmit(request)
        self.peak_running = max(self.peak_running, len(self.running))
        return step

    def _unadmit(self, request: Request) -> None:
        if request in self.running:
            self.running.remove(request)
            self.waiting.appendleft(request)

    def _preempt(self, request: Request) -> None:
        """Free ``request``'s blocks; it waits again and recomputes its tokens when readmitted."""
        self.cache.free(request.id)
        request.computed = 0
        request.preemptions += 1
        self.preemptions += 1
        self._unadmit(request)

    def complete(
        self, step: list[tuple[Request, Chunk]], logits: torch.Tensor, now_s: float
    ) -> list[Request]:
        """Record a step's results: the next token of every request whose context is now all
        computed (greedy), and the requests that finished (their blocks freed)."""
        finished = []
        self.steps += 1
        next_tokens = logits.argmax(dim=-1).tolist()
        for (request, chunk), token in zip(step, next_tokens, strict=True):
            request.computed = chunk.start + len(chunk.tokens)
            if request.computed < request.context_len:
                continue  # more of the context to compute first: these logits sample nothing
            request.generated.append(int(token))
            if request.first_token_s is None:
                request.first_token_s = now_s
            if request.done:
                request.finish_s = now_s
                self.cache.free(request.id)
                self.running.remove(request)
                finished.append(request)
        return finished


def step_logits(
    model: InferenceModel,
    chunks: list[Chunk],
    cache: PagedKVCache,
    graphs: DecodeGraphs | None = None,
) -> torch.Tensor:
    """One step's logits: replayed from ``graphs`` when it is a decode step they take, else
    through the model's forward."""
    if graphs is not None and graphs.can_run(chunks):
        return graphs(chunks)
    return model.forward(chunks, cache)


def run_trace(
    model: InferenceModel,
    scheduler: Scheduler,
    requests: list[Request],
    *,
    deadline_s: float | None = None,
    sync: Callable[[], None] = lambda: None,
    graphs: DecodeGraphs | None = None,
    after_step: Callable[[float], None] | None = None,
) -> list[Request]:
    """Replay ``requests`` in real time (each enters the queue at its ``arrival_s`` after the
    start) until all finish or ``deadline_s`` passes; the requests, with their times. Steps of
    one-token chunks go through ``graphs`` (decode graphs over the scheduler's cache) when
    given, the others through the model's forward. ``after_step(now)`` is called after each
    step with the seconds since the start (it may raise to stop the replay)."""
    if graphs is not None and graphs.cache is not scheduler.cache:
        raise ValueError("the decode graphs were captured over another KV cache")
    pending = deque(sorted(requests, key=lambda r: r.arrival_s))
    start = time.perf_counter()
    while pending or not scheduler.idle:
        now = time.perf_counter() - start
        if deadline_s is not None and now > deadline_s:
            break
        while pending and pending[0].arrival_s <= now:
            scheduler.add(pending.popleft())
        step = scheduler.schedule()
        if not step:
            if pending:
                time.sleep(max(0.0, min(pending[0].arrival_s - now, 0.01)))
                continue
            raise RuntimeError("requests wait but none can be scheduled: the KV cache is "
                               "smaller than one request's context")  # fmt: skip
        logits = step_logits(model, [chunk for _, chunk in step], scheduler.cache, graphs)
        sync()
        scheduler.complete(step, logits, time.perf_counter() - start)
        if after_step is not None:
            after_step(time.perf_counter() - start)
    return requests
