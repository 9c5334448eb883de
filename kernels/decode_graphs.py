"""Engine steps replayed from CUDA graphs, one graph captured per bucket of tokens, as vLLM and
SGLang run decode: a step of ``n`` tokens is padded to the smallest bucket ``>= n`` (1, 2, 4,
... up to the largest step), its inputs are copied into that bucket's static buffers and its
graph is replayed: one launch for the hundreds of kernel launches of a step, so a small batch
is no longer bound by the CPU issuing them.

Every token is a row of its own: its id, position, cache slot and the row of its sequence's
block table. A decode step has one token per sequence. Over a model that reads the cache in
place (``attention_reads="paged"``), a mixed step of prefill chunks and decode tokens (what
chunked prefill makes of most steps under load) runs from the graphs too: a chunk's tokens are
rows of one sequence at consecutive positions, whose keys are written before any row attends,
so each row's causal read of its table is the chunk's attention. Attention reads a chunk's keys
once for each tile of up to :data:`TILE_ROWS` of its rows, as the forward's kernel does (a decode
token is a tile of its own): rows reading alone would read a chunk's context about ``n / 2``
times over for ``n`` rows. The logits of each sequence's last token are picked inside the graph.

Padding rows decode token 0 at position 0 of a scratch block that the runner takes from the
cache when it starts (held by the pseudo-sequence :data:`SCRATCH_SEQ`, never given to a
request), through an all-scratch table, so they write no real sequence's keys and values.
Every buffer, table width included, has its largest shape from the start: a graph reads the
same addresses at every replay. The logits come back as a copy, since the next replay
overwrites the graph's output.

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
#: rows a tile of attention holds at most: the paged attention's default ``BLOCK_M``, which
#: :meth:`~autotune.kernels.llama_infer.InferenceModel.decode` runs it with (as the forward does)
TILE_ROWS = 16


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
    """Steps of up to ``max_batch`` sequences over ``cache`` (see the module): decode steps,
    and, over a model that reads the cache in place (``attention_reads="paged"``), mixed steps
    of prefill chunks and decode tokens of up to ``max_tokens`` tokens in all."""

    def __init__(
        self,
        model: InferenceModel,
        cache: PagedKVCache,
        max_batch: int,
        *,
        max_tokens: int | None = None,
        capture: bool | None = None,
    ) -> None:
        cuda = model.device.type == "cuda"
        capture = cuda if capture is None else capture
        if capture and not cuda:
            raise ValueError("CUDA graphs need a CUDA device")
        # a prefill token is a row of its own that reads its sequence's blocks in place; over
        # gathered blocks every row would copy its sequence's whole context, so decode only
        self.mixed = model.attention_reads == "paged"
        # a step holds a decode token of each of max_batch sequences at least
        max_tokens = max_batch if max_tokens is None or not self.mixed else max_tokens
        max_tokens = max(max_tokens, max_batch)
        if not cache.allocate(SCRATCH_SEQ, 1):
            raise ValueError("the KV cache has no free block for the decode graphs' scratch")
        self.model, self.cache = model, cache
        self.buckets = buckets(max_tokens)  # tokens a step's graph runs
        self.max_chunks = buckets(max_batch)[-1]  # sequences a step holds
        self.scratch_block = cache.blocks_of(SCRATCH_SEQ)[0]
        self.width = cache.blocks_needed(model.cfg.seq_len)  # blocks of the longest sequence
        tokens, chunks = self.buckets[-1], self.max_chunks
        # every input in one host buffer and one device buffer (the same layout, one copy a
        # step): per token its id, position, cache slot and table row; per tile of attention
        # rows (no more tiles than tokens) its first row, row count and table row; per sequence
        # the token whose logits it gets; then the sequences' block tables, and an all-scratch
        # one for padding tokens. The host one is pageable, not pinned: a copy from it has
        # read it when copy_ returns, so the next step may rewrite it at once
        self._head = 7 * tokens + chunks
        self._host = torch.zeros(self._head + (chunks + 1) * self.width, dtype=torch.long)
        self._host[2 * tokens : 3 * tokens] = self.scratch_block * cache.block_size
        self._host[3 * tokens : 4 * tokens] = chunks  # the padding table's row
        # until a step is filled (the capture's runs), each padding row is a tile of its own
        self._host[4 * tokens : 5 * tokens] = torch.arange(tokens)
        self._host[5 * tokens : 6 * tokens] = 1
        self._host[6 * tokens : 7 * tokens] = chunks
        self._host[self._head :] = self.scratch_block
        self._device = self._host.to(model.device, copy=True)
        per_token = self._device[: 7 * tokens].view(7, tokens)
        self.tokens, self.positions, self.slots, self.rows = per_token[:4]
        self.tile_starts, self.tile_counts, self.tile_rows = per_token[4:]
        self.picks = self._device[7 * tokens : self._head]
        self.tables = self._device[self._head :].view(chunks + 1, self.width)
        self._host_steps = self._host[: 7 * tokens].numpy().reshape(7, tokens)
        self._host_picks = self._host[7 * tokens : self._head].numpy()
        self._host_tables = self._host[self._head :].numpy().reshape(chunks + 1, self.width)
        self._table_rows = TableRows(cache, self.width, self.scratch_block, 2 * chunks)
        self._order = np.arange(chunks)
        # a padding token's id, position, slot and table row
        self._padding = np.array([[0], [0], [self.scratch_block * cache.block_size], [chunks]])
        self._arange = np.arange(tokens)
        self.graphs: dict[int, tuple[Any, torch.Tensor]] = {}
        self.capture_s = 0.0
        self.steps = 0  # steps run
        if capture:
            self._capture()

    def can_run(self, chunks: list[Chunk]) -> bool:
        """Whether a step is one these graphs take: at most ``max_batch`` (rounded up to a
        bucket) chunks of at most the largest bucket's tokens in all; one token each unless
        the model reads the cache in place."""
        if not 0 < len(chunks) <= self.max_chunks:
            return False
        if not self.mixed:
            return all(len(c.tokens) == 1 for c in chunks)
        return sum(len(c.tokens) for c in chunks) <= self.buckets[-1]

    def __call__(self, chunks: list[Chunk]) -> torch.Tensor:
        """The logits (len(chunks), vocab) in fp32 of each chunk's last token; every chunk's
        sequence must already hold cache blocks up to its last position."""
        if not self.can_run(chunks):
            tokens = f"{self.buckets[-1]} tokens in all" if self.mixed else "one token each"
            raise ValueError(f"a graph step takes 1..{self.max_chunks} chunks of {tokens}")
        count = sum(len(c.tokens) for c in chunks)
        bucket = next(size for size in self.buckets if size >= count)
        self._fill(chunks, bucket)
        self.steps += 1
        if bucket in self.graphs:
            graph, logits = self.graphs[bucket]
            graph.replay()
            return logits[: len(chunks)].clone()
        return self._decode(bucket)[: len(chunks)]

    def _fill(self, chunks: list[Chunk], bucket: int) -> None:
        """Copy the step into the static buffers: its tokens into the first ``bucket`` rows
        (those past the step become padding: token 0 at position 0 of the scratch block, read
        through the all-scratch table), its sequences' tables and picks into theirs."""
        block, steps = self.cache.block_size, self._host_steps
        if all(len(c.tokens) == 1 for c in chunks):  # decode: a row per sequence, in order
            count, slots = len(chunks), []
            for c in chunks:
                own = self.cache.blocks_of(c.seq)
                if len(own) * block <= c.start:
                    raise ValueError(f"sequence {c.seq} holds no cache block for position "
                                     f"{c.start}")  # fmt: skip
                slots.append(own[c.start // block] * block + c.start % block)
            steps[:3, :count] = [[c.tokens[0] for c in chunks], [c.start for c in chunks], slots]
            steps[3, :count] = self._host_picks[:count] = self._order[:count]
            tiles = count  # a tile of its own for each token (read over paged blocks only)
            if self.mixed:
                steps[4, :count], steps[5, :count] = self._arange[:count], 1
                steps[6, :count] = steps[3, :count]
        else:
            count, tiles = self._fill_mixed(chunks)
        steps[:4, count:bucket] = self._padding
        if self.mixed:  # then a tile for each padding token, and tiles of no rows
            pad_tiles = tiles + bucket - count
            steps[4, tiles:pad_tiles] = self._arange[count:bucket]
            steps[5, tiles:pad_tiles], steps[6, tiles:pad_tiles] = 1, self._padding[3, 0]
            steps[5, pad_tiles:bucket] = 0
        self._table_rows.gather([c.seq for c in chunks], 0,
                                out=self._host_tables[: len(chunks)])  # fmt: skip
        self._host_picks[len(chunks) : min(bucket, self.max_chunks)] = 0  # in range: row 0
        used = self._head + len(chunks) * self.width  # all but the tables' unused rows
        self._device[:used].copy_(self._host[:used], non_blocking=True)

    def _fill_mixed(self, chunks: list[Chunk]) -> tuple[int, int]:
        """The per-token rows of a step with prefill chunks, and each chunk's tiles of up to
        :data:`TILE_ROWS` rows; how many tokens and tiles it has."""
        block, steps, at, tiles = self.cache.block_size, self._host_steps, 0, 0
        for index, c in enumerate(chunks):
            n = len(c.tokens)
            own = np.asarray(self.cache.blocks_of(c.seq), dtype=np.int64)
            end = c.start + n
            if len(own) * block < end:
                raise ValueError(f"sequence {c.seq} holds no cache block for position "
                                 f"{end - 1}")  # fmt: skip
            positions = np.arange(c.start, end)
            steps[0, at : at + n] = c.tokens
            steps[1, at : at + n] = positions
            steps[2, at : at + n] = own[positions // block] * block + positions % block
            steps[3, at : at + n] = index
            first = np.arange(at, at + n, TILE_ROWS)
            steps[4, tiles : tiles + len(first)] = first
            steps[5, tiles : tiles + len(first)] = np.minimum(at + n - first, TILE_ROWS)
            steps[6, tiles : tiles + len(first)] = index
            tiles += len(first)
            at += n
            self._host_picks[index] = at - 1
        return at, tiles

    def _decode(self, bucket: int) -> torch.Tensor:
        """The model's static step over the buffers' first ``bucket`` tokens: every table, and
        as many picks as a bucket of that many tokens can have sequences."""
        tiles = (self.tile_starts[:bucket], self.tile_counts[:bucket], self.tile_rows[:bucket])
        return self.model.decode(
            self.tokens[:bucket], self.positions[:bucket], self.slots[:bucket], self.tables,
            self.cache, rows=self.rows[:bucket], picks=self.picks[: min(bucket, self.max_chunks)],
            tiles=tiles if self.mixed else None,
        )  # fmt: skip

    def _capture(self) -> None:
        """One graph per bucket, the largest first so that the smaller ones reuse its memory
        pool; each bucket runs twice on a side stream first (Triton compiles, cuBLAS picks its
        kernels), all of it on padding rows, which touch only the scratch block."""
        started = time.perf_counter()
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(self.model.device)
        for bucket in reversed(self.buckets):
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._decode(bucket)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                logits = self._decode(bucket)
            self.graphs[bucket] = (graph, logits)
        torch.cuda.synchronize(self.model.device)
        self.capture_s = time.perf_counter() - started
