"""Decode steps replayed from CUDA graphs, one graph captured per batch bucket, as vLLM and
SGLang run decode: a step of ``b`` sequences is padded to the smallest bucket ``>= b`` (1, 2,
4, ... up to the largest batch), its inputs are copied into that bucket's static buffers and
its graph is replayed: one launch for the hundreds of kernel launches of a step, so a small
batch is no longer bound by the CPU issuing them.

Padding rows decode token 0 at position 0 of a scratch block that the runner takes from the
cache when it starts (held by the pseudo-sequence :data:`SCRATCH_SEQ`, never given to a
request), so they write no real sequence's keys and values. Every buffer, table width
included, has its largest shape from the start: a graph reads the same addresses at every
replay. The logits come back as a copy, since the next replay overwrites the graph's output.

Without a CUDA device (``capture=False``) the same static path, padding and scratch block
included, runs eagerly through :meth:`~autotune.kernels.llama_infer.InferenceModel.decode`:
that is what the CPU tests check against the engine's own forward.

Example:
    >>> import torch
    >>> from autotune.kernels.llama import Llama, LlamaConfig
    >>> from autotune.kernels.llama_infer import Chunk, InferenceModel
    >>> _ = torch.manual_seed(0)
    >>> model = InferenceModel(Llama(LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2,
    ...                                          seq_len=32)))
    >>> cache = model.new_cache(num_blocks=8, block_size=4, kv_dtype="fp32")
    >>> graphs = DecodeGraphs(model, cache, max_batch=3)  # eager on a CPU
    >>> graphs.buckets, cache.free_blocks  # one block went to the scratch
    ([1, 2, 4], 7)
    >>> cache.allocate(0, 3)
    True
    >>> _ = model.forward([Chunk(0, 0, [5, 6])], cache)  # the prompt
    >>> graphs([Chunk(0, 2, [7])]).shape  # one decode token, padded to the bucket of 1
    torch.Size([1, 64])
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.kernels.paged_kv import PagedKVCache

#: the pseudo-sequence holding the scratch block that padding rows write to
SCRATCH_SEQ = -1


def buckets(max_batch: int) -> list[int]:
    """Batch sizes a graph is captured for: powers of two up to the first ``>= max_batch``.

    Example:
        >>> buckets(1), buckets(5), buckets(8)
        ([1], [1, 2, 4, 8], [1, 2, 4, 8])
    """
    if max_batch < 1:
        raise ValueError(f"max_batch={max_batch} must be >= 1")
    sizes = [1]
    while sizes[-1] < max_batch:
        sizes.append(sizes[-1] * 2)
    return sizes


class TableRows:
    """Host copies of sequences' block tables, padded with the scratch block to ``width``, each
    rebuilt only when its table version changes; row 0 is all scratch (a padding row).

    Example:
        >>> cache = PagedKVCache(1, 8, 4, 1, 2, torch.float32, torch.device("cpu"))
        >>> rows = TableRows(cache, width=3, scratch_block=7, capacity=4)
        >>> _ = cache.allocate(0, 5); _ = cache.allocate(1, 2)
        >>> out = np.empty((3, 3), dtype=np.int64)
        >>> rows.gather([1, 0], pad=1, out=out); out.tolist()
        [[2, 7, 7], [0, 1, 7], [7, 7, 7]]
    """

    def __init__(self, cache: PagedKVCache, width: int, scratch_block: int, capacity: int) -> None:
        self.cache, self.scratch_block = cache, scratch_block
        self.rows = np.full((capacity + 1, width), scratch_block, dtype=np.int64)
        self.held: dict[int, tuple[int, int]] = {}  # seq -> (its table version, its row)
        self.spare = list(range(capacity, 0, -1))

    def gather(self, seqs: list[int], pad: int, out: np.ndarray) -> None:
        """Write the tables of ``seqs``, then ``pad`` all-scratch rows, into ``out``'s rows."""
        if len(seqs) > len(self.spare):  # room for every sequence of the step
            self._forget_all_but(set(seqs))
        index = [self._row(seq) for seq in seqs] + [0] * pad
        np.take(self.rows, index, axis=0, out=out, mode="clip")  # "clip": unbuffered, in range

    def _row(self, seq: int) -> int:
        version = self.cache.table_version(seq)
        held = self.held.get(seq)
        if held is not None and held[0] == version:
            return held[1]
        row = self.spare.pop() if held is None else held[1]
        own = self.cache.blocks_of(seq)
        self.rows[row, : len(own)] = own
        self.rows[row, len(own) :] = self.scratch_block
        self.held[seq] = (version, row)
        return row

    def _forget_all_but(self, seqs: set[int]) -> None:
        for seq in [s for s in self.held if s not in seqs]:
            self.spare.append(self.held.pop(seq)[1])


class DecodeGraphs:
    """Decode steps of up to ``max_batch`` sequences over ``cache`` (see the module)."""

    def __init__(
        self,
        model: InferenceModel,
        cache: PagedKVCache,
        max_batch: int,
        *,
        capture: bool | None = None,
    ) -> None:
        cuda = model.device.type == "cuda"
        capture = cuda if capture is None else capture
        if capture and not cuda:
            raise ValueError("CUDA graphs need a CUDA device")
        if not cache.allocate(SCRATCH_SEQ, 1):
            raise ValueError("the KV cache has no free block for the decode graphs' scratch")
        self.model, self.cache = model, cache
        self.buckets = buckets(max_batch)
        self.scratch_block = cache.blocks_of(SCRATCH_SEQ)[0]
        self.width = cache.blocks_needed(model.cfg.seq_len)  # blocks of the longest sequence
        largest = self.buckets[-1]
        # every input in one host buffer and one device buffer (the same layout, one copy a
        # step): tokens, positions and slots, then the block tables' rows. The host one is
        # pageable, not pinned: a copy from it has read it when copy_ returns, so the next
        # step may rewrite it at once
        self._host = torch.zeros(3 * largest + largest * self.width, dtype=torch.long)
        self._host[2 * largest : 3 * largest] = self.scratch_block * cache.block_size
        self._host[3 * largest :] = self.scratch_block
        self._device = self._host.to(model.device, copy=True)
        self.tokens, self.positions, self.slots = self._device[: 3 * largest].view(3, largest)
        self.tables = self._device[3 * largest :].view(largest, self.width)
        self._host_steps = self._host[: 3 * largest].numpy().reshape(3, largest)
        self._host_tables = self._host[3 * largest :].numpy().reshape(largest, self.width)
        self._rows = TableRows(cache, self.width, self.scratch_block, 2 * largest)
        self.graphs: dict[int, tuple[Any, torch.Tensor]] = {}
        self.capture_s = 0.0
        if capture:
            self._capture()

    def can_run(self, chunks: list[Chunk]) -> bool:
        """Whether a step is one these graphs take: one token per chunk, no more chunks than
        the largest bucket."""
        return 0 < len(chunks) <= self.buckets[-1] and all(len(c.tokens) == 1 for c in chunks)

    def __call__(self, chunks: list[Chunk]) -> torch.Tensor:
        """The logits (len(chunks), vocab) in fp32 of one decode step; every chunk's sequence
        must already hold cache blocks up to its position."""
        if not self.can_run(chunks):
            raise ValueError(f"a decode-graph step takes 1..{self.buckets[-1]} one-token chunks")
        b = len(chunks)
        bucket = next(size for size in self.buckets if size >= b)
        self._fill(chunks, bucket)
        if bucket in self.graphs:
            graph, logits = self.graphs[bucket]
            graph.replay()
            return logits[:b].clone()
        return self.model.decode(*self._inputs(bucket), self.cache)[:b]

    def _fill(self, chunks: list[Chunk], bucket: int) -> None:
        """Copy the step into the first ``bucket`` rows of the static buffers; rows past the
        step become padding (token 0 at position 0 of the scratch block)."""
        pad, block = bucket - len(chunks), self.cache.block_size
        slots = []
        for c in chunks:
            own = self.cache.blocks_of(c.seq)
            if len(own) * block <= c.start:
                raise ValueError(f"sequence {c.seq} holds no cache block for position {c.start}")
            slots.append(own[c.start // block] * block + c.start % block)
        self._host_steps[:, :bucket] = [
            [c.tokens[0] for c in chunks] + [0] * pad,
            [c.start for c in chunks] + [0] * pad,
            slots + [self.scratch_block * block] * pad,
        ]
        self._rows.gather([c.seq for c in chunks], pad, out=self._host_tables[:bucket])
        used = 3 * self.buckets[-1] + bucket * self.width  # all but the tables' unused rows
        self._device[:used].copy_(self._host[:used], non_blocking=True)

    def _inputs(self, bucket: int) -> tuple[torch.Tensor, ...]:
        return (self.tokens[:bucket], self.positions[:bucket], self.slots[:bucket],
                self.tables[:bucket])  # fmt: skip

    def _capture(self) -> None:
        """One graph per bucket, the largest first so that the smaller ones reuse its memory
        pool; each bucket runs twice on a side stream first (Triton compiles, cuBLAS picks its
        kernels), all of it on padding rows, which touch only the scratch block."""
        started = time.perf_counter()
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(self.model.device)
        for bucket in reversed(self.buckets):
            inputs = self._inputs(bucket)
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self.model.decode(*inputs, self.cache)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                logits = self.model.decode(*inputs, self.cache)
            self.graphs[bucket] = (graph, logits)
        torch.cuda.synchronize(self.model.device)
        self.capture_s = time.perf_counter() - started
