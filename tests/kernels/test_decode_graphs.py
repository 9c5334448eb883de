"""Decode graphs: the static, padded decode step gives the engine's own logits, padding rows
touch only the scratch block, and (on a GPU) the captured graphs replay the eager step."""

from __future__ import annotations

import pytest
import torch

from autotune.kernels import paged_attention_triton
from autotune.kernels.decode_graphs import SCRATCH_SEQ, TILE_ROWS, DecodeGraphs, buckets
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.kernels.paged_kv import PagedKVCache

CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if CUDA else "cpu")
PROMPTS = {0: [3, 1, 4, 1, 5], 1: [9, 2], 2: [6, 5, 3, 5, 8, 9, 7]}  # 3 sequences: bucket 4


def _model(reads: str = "gather", n_layers: int = 2) -> InferenceModel:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab=96, d_model=64, n_layers=n_layers, n_heads=4, seq_len=48)
    with torch.device(DEVICE):
        return InferenceModel(Llama(cfg), weights="bf16", attention_reads=reads)


def _decode_both(model: InferenceModel, kv_dtype: str, steps: int):
    """Prefill the prompts into two caches, then decode ``steps`` tokens of every sequence
    through the engine's forward on one and the decode graphs on the other, feeding both the
    forward's greedy tokens; returns (forward logits, graph logits, both caches, graphs)."""
    plain = model.new_cache(num_blocks=24, block_size=4, kv_dtype=kv_dtype)
    static = model.new_cache(num_blocks=25, block_size=4, kv_dtype=kv_dtype)
    graphs = DecodeGraphs(model, static, max_batch=4, capture=False)
    for cache in (plain, static):
        for seq, prompt in PROMPTS.items():
            assert cache.allocate(seq, len(prompt))
        model.forward([Chunk(s, 0, p) for s, p in PROMPTS.items()], cache)
    lengths = {seq: len(p) for seq, p in PROMPTS.items()}
    tokens = {seq: p[-1] for seq, p in PROMPTS.items()}
    got, want = [], []
    for _ in range(steps):
        chunks = [Chunk(seq, lengths[seq], [tokens[seq]]) for seq in PROMPTS]
        for cache in (plain, static):
            for c in chunks:
                assert cache.allocate(c.seq, c.start + 1)
        reference = model.forward(chunks, plain)
        want.append(reference)
        got.append(graphs(chunks))
        for c, logits in zip(chunks, reference, strict=True):
            tokens[c.seq] = int(logits.argmax())
            lengths[c.seq] += 1
    return torch.stack(want), torch.stack(got), plain, static, graphs


@pytest.mark.parametrize("kv_dtype", ["fp32", "fp8"])
def test_the_padded_static_decode_gives_the_engines_logits(kv_dtype):
    model = _model()
    # 6 steps take sequence 1 from 2 to 8 tokens: across block boundaries of 4
    want, got, _, _, _ = _decode_both(model, kv_dtype, steps=6)
    assert got.shape == want.shape == (6, 3, 96)
    torch.testing.assert_close(got, want, atol=2e-4, rtol=1e-4)


def test_padding_rows_write_only_the_scratch_block():
    model = _model()
    _, _, plain, static, graphs = _decode_both(model, "fp32", steps=3)
    for seq in PROMPTS:  # every real sequence's cached keys are the forward's
        for layer in range(model.cfg.n_layers):
            torch.testing.assert_close(static.k[layer][static.blocks_of(seq)],
                                       plain.k[layer][plain.blocks_of(seq)])  # fmt: skip
    scratch = graphs.scratch_block
    assert static.blocks_of(SCRATCH_SEQ) == [scratch]
    assert all(scratch not in static.blocks_of(seq) for seq in PROMPTS)
    assert static.k[0][scratch].abs().sum() > 0  # the bucket of 4 padded a row through it
    untouched = (
        set(range(static.num_blocks))
        - {scratch}
        - {b for seq in PROMPTS for b in static.blocks_of(seq)}
    )
    assert all(static.k[0][b].abs().sum() == 0 for b in untouched)


def test_a_gathering_model_runs_only_decode_steps_within_the_largest_bucket():
    model = _model()
    cache = model.new_cache(num_blocks=8, block_size=4, kv_dtype="fp32")
    graphs = DecodeGraphs(model, cache, max_batch=2, max_tokens=64, capture=False)
    assert graphs.buckets == [1, 2] and cache.free_blocks == 7  # no room asked for prefill
    assert not graphs.can_run([Chunk(0, 0, [1, 2])])  # a prefill chunk
    assert not graphs.can_run([Chunk(s, 1, [1]) for s in range(3)])  # past the largest bucket
    with pytest.raises(ValueError, match="one token each"):
        graphs([Chunk(0, 0, [1, 2])])
    with pytest.raises(ValueError, match="holds no cache block"):
        graphs([Chunk(5, 0, [1])])
    assert buckets(3) == [1, 2, 4]


#: a mixed step, a step of two prefill chunks with a decode token, then a decode step in
#: another order: sequence 1's prompt goes in two chunks, 2's crosses two block boundaries
MIXED_STEPS = [
    [Chunk(0, 0, [3, 1, 4, 1, 5]), Chunk(1, 0, [9])],
    [Chunk(0, 5, [7]), Chunk(1, 1, [2]), Chunk(2, 0, [6, 5, 3, 5, 8, 9, 7, 2, 4])],
    [Chunk(2, 9, [1]), Chunk(0, 6, [2]), Chunk(1, 2, [3])],
]


def _paged_pair(
    max_tokens: int, n_layers: int = 2
) -> tuple[InferenceModel, PagedKVCache, DecodeGraphs]:
    """A paged model of ``n_layers``, a cache for its forward, and graphs (eager on a CPU) over
    another."""
    model = _model("paged", n_layers)
    kv_dtype = "bf16" if CUDA else "fp32"
    plain = model.new_cache(num_blocks=24, block_size=4, kv_dtype=kv_dtype)
    static = model.new_cache(num_blocks=25, block_size=4, kv_dtype=kv_dtype)
    return model, plain, DecodeGraphs(model, static, max_batch=3, max_tokens=max_tokens,
                                      capture=False)  # fmt: skip


def _steps_match_the_forward(model, plain, graphs, steps) -> None:  # noqa: ANN001
    """Each step through the graphs gives the forward's logits over the other cache."""
    tolerance = {"atol": 2e-2, "rtol": 2e-2} if CUDA else {"atol": 2e-4, "rtol": 1e-4}
    for chunks in steps:
        assert graphs.can_run(chunks)
        for cache in (plain, graphs.cache):
            for c in chunks:
                assert cache.allocate(c.seq, c.start + len(c.tokens))
        want = model.forward(chunks, plain)
        torch.testing.assert_close(graphs(chunks), want, **tolerance)


def test_shares_combined_by_their_last_program_give_the_second_kernels_logits(monkeypatch):
    """``fused_combine``: the graphs' decode step (tiles of one row) passes the model's counters
    and gets the logits of the second-kernel combine; these contexts are too short to be cut in
    shares on their own, so every launch is cut in 2. The kernel runs as it is; a wrapper only
    records whether counters reached it."""
    plain_attention = paged_attention_triton.paged_attention
    passed: list[bool] = []

    def recording(*args, **kwargs):
        passed.append(kwargs.get("counters") is not None)
        return plain_attention(*args, **kwargs)

    monkeypatch.setattr(paged_attention_triton, "decode_splits", lambda *args: 2)
    monkeypatch.setattr(paged_attention_triton, "paged_attention", recording)
    logits = {}
    for fused in (False, True):
        model = _model("paged")
        model.fused_combine = fused
        passed.clear()
        # two steps: sequence 2 crosses a block boundary; each launch reuses the counters
        want, logits[fused], *_ = _decode_both(model, "fp32", steps=2)
        torch.testing.assert_close(logits[fused], want, atol=2e-4, rtol=1e-4)
        assert set(passed) == {fused}  # the forward's launches and the graphs' alike
    torch.testing.assert_close(logits[True], logits[False], atol=2e-4, rtol=1e-4)
    assert int(model._counters.count_nonzero()) == 0


def test_mixed_steps_of_a_paged_model_give_the_engines_logits_and_keys():
    model, plain, graphs = _paged_pair(max_tokens=12)
    static = graphs.cache
    assert graphs.buckets == [1, 2, 4, 8, 16] and graphs.max_chunks == 4
    _steps_match_the_forward(model, plain, graphs, MIXED_STEPS)
    for seq in range(3):  # every position's keys and values, as the forward wrote them
        for layer in range(model.cfg.n_layers):
            for got, ref in ((static.k, plain.k), (static.v, plain.v)):
                torch.testing.assert_close(got[layer][static.blocks_of(seq)].float(),
                                           ref[layer][plain.blocks_of(seq)].float())  # fmt: skip


def test_chunks_longer_than_a_tile_read_as_tiles_and_give_the_engines_logits():
    # one layer: the tiles are what is checked here (each layer reads its own cache: the mixed
    # steps' test, of two layers); the Triton interpreter runs each tile's program on a CPU
    model, plain, graphs = _paged_pair(max_tokens=40, n_layers=1)
    assert paged_attention_triton.DEFAULT_CONFIG["BLOCK_M"] == TILE_ROWS  # what decode tiles by
    # before any step (what a capture runs): every row a padding row and a tile of its own
    assert graphs.tile_starts.tolist() == list(range(64))
    assert set(graphs.tile_counts.tolist()) == {1}
    assert set(graphs.tile_rows.tolist()) == {graphs.max_chunks}
    steps = [
        [Chunk(0, 0, list(range(1, 21))), Chunk(1, 0, [4, 5, 6])],  # tiles of 16 + 4, and 3
        [Chunk(1, 3, [7] * 18), Chunk(0, 20, [9]), Chunk(2, 0, list(range(33, 50)))],
    ]
    _steps_match_the_forward(model, plain, graphs, steps)
    # the last step's tiles: sequence 1's 18 rows as 16 + 2, sequence 0's decode row, sequence
    # 2's 17 rows as 16 + 1, then a tile for each of the bucket's 28 padding rows, then none
    starts, counts, rows = (t.cpu().tolist() for t in (graphs.tile_starts, graphs.tile_counts,
                                                       graphs.tile_rows))  # fmt: skip
    assert starts[:5] == [0, 16, 18, 19, 35] and counts[:5] == [16, 2, 1, 16, 1]
    assert rows[:5] == [0, 0, 1, 2, 2]
    assert starts[5:33] == list(range(36, 64)) and set(counts[5:33]) == {1}
    assert set(rows[5:33]) == {graphs.max_chunks} and set(counts[33:64]) == {0}


def test_a_paged_step_past_the_largest_bucket_or_sequence_count_is_not_a_graph_step():
    model = _model("paged")
    cache = model.new_cache(num_blocks=16, block_size=4, kv_dtype="bf16" if CUDA else "fp32")
    graphs = DecodeGraphs(model, cache, max_batch=2, max_tokens=6, capture=False)
    assert graphs.buckets == [1, 2, 4, 8]  # a step of 6 tokens pads to 8
    assert graphs.can_run([Chunk(0, 0, list(range(8)))])
    assert not graphs.can_run([Chunk(0, 0, list(range(9)))])
    assert not graphs.can_run([Chunk(s, 0, [1]) for s in range(3)])  # 3 sequences: bucket 4 > 2
    with pytest.raises(ValueError, match="8 tokens in all"):
        graphs([Chunk(0, 0, list(range(9)))])
    small = model.new_cache(num_blocks=16, block_size=4, kv_dtype="bf16" if CUDA else "fp32")
    assert DecodeGraphs(model, small, max_batch=4, max_tokens=2, capture=False).buckets == [
        1,
        2,
        4,
    ]  # a decode step of 4 still fits


def _filled(graphs: DecodeGraphs, chunks: list[Chunk]) -> tuple[torch.Tensor, torch.Tensor]:
    """Fill a step; (what the device buffers hold, what they should hold: built row by row
    from the cache's tables now), each (bucket, 3 + width): token, position, slot, table."""
    bucket = next(size for size in graphs.buckets if size >= len(chunks))
    graphs._fill(chunks, bucket)
    steps = torch.stack([graphs.tokens, graphs.positions, graphs.slots], dim=1)[:bucket]
    got = torch.cat([steps, graphs.tables[graphs.rows[:bucket]]], 1)
    cache, scratch, block = graphs.cache, graphs.scratch_block, graphs.cache.block_size
    rows = []
    for c in chunks:
        own = cache.blocks_of(c.seq)
        slot = own[c.start // block] * block + c.start % block
        rows.append([c.tokens[0], c.start, slot] + own + [scratch] * (graphs.width - len(own)))
    rows += [[0, 0, scratch * block] + [scratch] * graphs.width] * (bucket - len(chunks))
    return got.cpu(), torch.tensor(rows)


def _fill_cache(blocks: int, max_batch: int) -> tuple[PagedKVCache, DecodeGraphs]:
    model = _model()
    cache = model.new_cache(num_blocks=blocks, block_size=4, kv_dtype="fp32")
    return cache, DecodeGraphs(model, cache, max_batch=max_batch, capture=False)


def test_a_sequence_re_allocated_after_a_free_is_filled_with_its_new_blocks():
    cache, graphs = _fill_cache(blocks=24, max_batch=4)
    for seq in range(3):
        assert cache.allocate(seq, 9)  # 3 blocks each
    chunks = [Chunk(seq, 8, [seq + 1]) for seq in range(3)]
    torch.testing.assert_close(*_filled(graphs, chunks))
    old = cache.blocks_of(1)
    cache.free(1)  # preempted: another sequence takes its blocks, it comes back with others
    assert cache.allocate(7, 9) and cache.allocate(1, 9)
    assert len(cache.blocks_of(1)) == len(old) and set(cache.blocks_of(1)).isdisjoint(old)
    torch.testing.assert_close(*_filled(graphs, chunks))
    assert cache.allocate(0, 13)  # a sequence grows a block
    torch.testing.assert_close(*_filled(graphs, [Chunk(0, 12, [5])] + chunks[1:]))


def test_rows_left_by_a_sequence_become_scratch_padding_and_reordered_rows_follow():
    cache, graphs = _fill_cache(blocks=24, max_batch=4)
    for seq in range(4):
        assert cache.allocate(seq, 5 + seq)
    steps = [[0, 1, 2, 3], [0, 1, 3], [3, 1, 0, 2], [2], [1, 0, 3]]  # buckets 4, 4, 4, 1, 4
    for seqs in steps:
        got, want = _filled(graphs, [Chunk(s, 4 + s, [s + 1]) for s in seqs])
        torch.testing.assert_close(got, want)
    assert (got[3, 3:] == graphs.scratch_block).all()  # the last row, padding again


def test_more_sequences_over_time_than_the_rows_kept_for_them():
    cache, graphs = _fill_cache(blocks=40, max_batch=2)  # tables of 4 sequences kept
    for step in range(12):  # new sequences every step (done after it), sequence 0 every other
        seqs = [2 * step + 1, 2 * step + 2] if step % 2 else [0, 2 * step + 1]
        for seq in seqs:
            assert cache.allocate(seq, 4 * (1 + step % 3) + 1)
        torch.testing.assert_close(*_filled(graphs, [Chunk(s, 4, [1]) for s in seqs]))
        for seq in seqs:
            if seq != 0:
                cache.free(seq)


def test_a_tables_version_changes_with_its_blocks_and_never_repeats():
    cache = PagedKVCache(1, 8, 4, 1, 2, torch.float32, torch.device("cpu"))
    assert cache.table_version(0) == 0  # no table yet
    assert cache.allocate(0, 4)
    first = cache.table_version(0)
    assert cache.allocate(0, 3) and cache.table_version(0) == first  # no block added
    assert cache.allocate(1, 8) and cache.table_version(0) == first  # another sequence's
    assert cache.allocate(0, 5) and cache.table_version(0) not in (0, first)  # grew a block
    grown = cache.table_version(0)
    cache.free(0)
    assert cache.table_version(0) == 0
    assert cache.allocate(0, 5) and cache.table_version(0) not in (0, first, grown)
    again = cache.table_version(0)
    assert not cache.allocate(0, 40) and cache.table_version(0) == again  # no room: no change


@pytest.mark.skipif(CUDA, reason="on a GPU the graphs are captured (the test below)")
def test_capturing_needs_a_cuda_device():
    model = _model()
    cache = model.new_cache(num_blocks=8, block_size=4, kv_dtype="fp32")
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        DecodeGraphs(model, cache, max_batch=2, capture=True)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a CUDA device")
@pytest.mark.parametrize("reads", ["gather", "paged"])
def test_captured_graphs_replay_the_eager_decode(reads):
    model = _model(reads)
    eager_cache = model.new_cache(num_blocks=25, block_size=4, kv_dtype="bf16")
    graph_cache = model.new_cache(num_blocks=25, block_size=4, kv_dtype="bf16")
    eager = DecodeGraphs(model, eager_cache, max_batch=4, capture=False)
    graphs = DecodeGraphs(model, graph_cache, max_batch=4, capture=True)
    assert sorted(graphs.graphs) == [1, 2, 4] and graphs.capture_s > 0
    for cache in (eager_cache, graph_cache):
        for seq, prompt in PROMPTS.items():
            assert cache.allocate(seq, len(prompt) + 4)
        model.forward([Chunk(s, 0, p) for s, p in PROMPTS.items()], cache)
    for step in range(4):
        for batch in (1, 3):  # buckets of 1 and 4
            chunks = [Chunk(seq, len(PROMPTS[seq]) + step, [step + 1]) for seq in range(batch)]
            torch.testing.assert_close(graphs(chunks), eager(chunks), atol=2e-2, rtol=2e-2)


@pytest.mark.skipif(not CUDA, reason="CUDA graphs need a CUDA device")
def test_captured_graphs_replay_the_eager_mixed_steps():
    model = _model("paged")
    caches = [model.new_cache(num_blocks=25, block_size=4, kv_dtype="bf16") for _ in range(2)]
    eager = DecodeGraphs(model, caches[0], max_batch=3, max_tokens=12, capture=False)
    graphs = DecodeGraphs(model, caches[1], max_batch=3, max_tokens=12, capture=True)
    assert sorted(graphs.graphs) == [1, 2, 4, 8, 16]
    for chunks in MIXED_STEPS:
        for cache in caches:
            for c in chunks:
                assert cache.allocate(c.seq, c.start + len(c.tokens))
        torch.testing.assert_close(graphs(chunks), eager(chunks), atol=2e-2, rtol=2e-2)
