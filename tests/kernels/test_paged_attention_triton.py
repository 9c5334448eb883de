"""The paged-attention kernel (compiled on a GPU, Triton's interpreter on CPU): the same result as
gathering the blocks and attending with a causal mask, for decode rows, chunked-prefill rows,
padding, grouped-query heads, every block size, a head dim that is not a power of two and an fp8
cache."""

import pytest
import torch

from autotune.kernels import paged_attention_triton as kernel
from autotune.kernels.paged_attention_triton import check_config, reference_paged_attention
from autotune.kernels.paged_kv import PagedKVCache

#: where the kernel runs: the operands are built on the CPU (seeded) and moved there
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def paged_attention(*operands: object, **options: object) -> torch.Tensor:
    """The kernel on DEVICE (tiles too), its result back on the CPU."""
    moved = [t.to(DEVICE) if isinstance(t, torch.Tensor) else t for t in operands]
    if "tiles" in options:
        options["tiles"] = tuple(t.to(DEVICE) for t in options["tiles"])
    return kernel.paged_attention(*moved, **options).cpu()


def _cache(page: int, heads: int, D: int, dtype: torch.dtype, blocks: int = 12, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(blocks, page, heads, D, generator=g).to(dtype)
    v = torch.randn(blocks, page, heads, D, generator=g).to(dtype)
    return k, v


def _tables(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.int32)


@pytest.mark.parametrize("page", [4, 16, 32])
@pytest.mark.parametrize("H, H_KV", [(2, 2), (4, 2)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_decode_and_chunked_prefill_rows_match_the_gathered_reference(page, H, H_KV, dtype):
    k, v = _cache(page, H_KV, 16, dtype)
    # sequence 0 decodes its token at position 2*page+1 (3 blocks, scattered); sequence 1
    # prefills a chunk of 3 tokens at positions 5..7 (rows past it are padding)
    tables = _tables([[7, 2, 9], [4, 11]])
    positions = torch.tensor([[2 * page + 1, -1, -1], [5, 6, 7]], dtype=torch.int32)
    q = torch.randn(2, 3, H, 16, generator=torch.Generator().manual_seed(1)).to(dtype)
    out = paged_attention(q, k, v, tables, positions, BLOCK_M=16, BLOCK_N=16)
    ref = reference_paged_attention(q, k, v, tables, positions)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert out.dtype == dtype and out.shape == q.shape
    assert (out.float() - ref).abs().max() < tolerance
    assert out[0, 1:].abs().max() == 0  # padding rows are not written


def test_a_row_sees_its_own_position_and_nothing_after_it():
    k, v = _cache(4, 1, 16, torch.float32)
    tables = _tables([[3, 5]])
    q = torch.randn(1, 1, 1, 16)
    early = paged_attention(q, k, v, tables, torch.tensor([[2]], dtype=torch.int32))
    v_later = v.clone()
    v_later[3, 3:] += 100.0  # keys 3.. of block 3 and all of block 5: past position 2
    v_later[5] += 100.0
    same = paged_attention(q, k, v_later, tables, torch.tensor([[2]], dtype=torch.int32))
    assert torch.equal(early, same)
    moved = paged_attention(q, k, v_later, tables, torch.tensor([[3]], dtype=torch.int32))
    assert (moved - early).abs().max() > 1.0  # position 3 sees the changed key


def test_an_fp8_cache_is_read_back_at_its_scale():
    k, v = _cache(16, 2, 32, torch.float32)
    scale = 16.0
    k8, v8 = (k / scale).to(torch.float8_e4m3fn), (v / scale).to(torch.float8_e4m3fn)
    tables = _tables([[1, 0]])
    positions = torch.tensor([[20]], dtype=torch.int32)
    q = torch.randn(1, 1, 2, 32)
    out = paged_attention(q, k8, v8, tables, positions, kv_scale=scale, BLOCK_N=32)
    ref = reference_paged_attention(q, k8, v8, tables, positions, kv_scale=scale)
    assert (out - ref).abs().max() < 1e-4
    exact = reference_paged_attention(q, k, v, tables, positions)
    assert (out - exact).abs().max() < 0.2  # e4m3 keeps about two significant digits


def test_the_engines_cache_layout_is_what_the_kernel_reads():
    cache = PagedKVCache(n_layers=1, num_blocks=6, block_size=4, heads=2, head_dim=16,
                         dtype=torch.float32, device=torch.device("cpu"))  # fmt: skip
    cache.allocate(seq=0, tokens=4)
    cache.allocate(seq=1, tokens=2)
    cache.allocate(seq=0, tokens=10)  # sequence 0's blocks are not contiguous
    k, v = torch.randn(10, 2, 16), torch.randn(10, 2, 16)
    cache.write(0, cache.slots(0, 0, 10, torch.device("cpu")), k, v)
    tables = _tables([cache.blocks_of(0)])
    q = torch.randn(1, 1, 2, 16)
    out = paged_attention(q, cache.k[0], cache.v[0], tables, torch.tensor([[9]], dtype=torch.int32))
    keys, values = cache.gather(0, tables, torch.float32)  # (1, heads, slots, D)
    expected = torch.softmax(q[0, 0, :, None] @ keys[0, :, :10].transpose(-1, -2) / 4.0, -1)
    expected = (expected @ values[0, :, :10])[:, 0]
    assert (out[0, 0] - expected).abs().max() < 1e-5


def test_inexpressible_configs_and_operands_are_refused():
    k, v = _cache(4, 2, 16, torch.float32)
    q = torch.randn(1, 1, 2, 16)
    tables, positions = _tables([[0]]), torch.tensor([[0]], dtype=torch.int32)
    with pytest.raises(ValueError, match="BLOCK_M=24"):
        check_config(BLOCK_M=24, BLOCK_N=16, num_warps=4, num_stages=1)
    with pytest.raises(ValueError, match="int32"):
        paged_attention(q, k, v, tables.long(), positions)
    with pytest.raises(ValueError, match="H % H_KV"):
        paged_attention(torch.randn(1, 1, 3, 16), k, v, tables, positions)
    with pytest.raises(ValueError, match="head dim D=12"):
        paged_attention(torch.randn(1, 1, 2, 12), *_cache(4, 2, 12, torch.float32), tables,
                        positions)  # fmt: skip
    with pytest.raises(ValueError, match="head dim D=20"):
        paged_attention(torch.randn(1, 1, 2, 20), *_cache(4, 2, 20, torch.float32), tables,
                        positions)  # fmt: skip


@pytest.mark.parametrize("D", [24, 48])
def test_a_head_dim_that_is_not_a_power_of_two_is_padded_and_masked(D):
    """96 (the 760m preset's head dim) in small: padded to 32 / 64 in registers."""
    k, v = _cache(4, 2, D, torch.float32)
    tables = _tables([[5, 1, 3], [2, 0]])
    positions = torch.tensor([[10, -1], [6, 7]], dtype=torch.int32)
    q = torch.randn(2, 2, 2, D, generator=torch.Generator().manual_seed(2))
    out = paged_attention(q, k, v, tables, positions, BLOCK_M=16, BLOCK_N=16)
    assert out.shape == q.shape
    assert (out - reference_paged_attention(q, k, v, tables, positions)).abs().max() < 1e-5


def test_a_scale_applies_to_a_cache_in_the_compute_dtype_too():
    k, v = _cache(4, 2, 16, torch.float32)
    tables, positions = _tables([[2, 0]]), torch.tensor([[6]], dtype=torch.int32)
    q = torch.randn(1, 1, 2, 16)
    out = paged_attention(q, k, v, tables, positions, kv_scale=2.0)
    ref = reference_paged_attention(q, k, v, tables, positions, kv_scale=2.0)
    assert (out - ref).abs().max() < 1e-5
    assert (out - paged_attention(q, k, v, tables, positions)).abs().max() > 1e-2


@pytest.mark.parametrize("splits", [2, 4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn])
@pytest.mark.parametrize("fused", [False, True])
def test_keys_cut_in_shares_give_the_unsplit_result(splits, dtype, fused):
    """Flash-decoding: each share's max, sum and output combined by a second kernel, or (with
    counters) by the last program of the row's shares. The rows are a long decode row (some
    shares of 16 keys see nothing past it), a prefill chunk whose rows see different numbers of
    keys, and padding; grouped-query heads, D not a power of 2."""
    cache_dtype = dtype
    compute = torch.float32 if dtype == torch.float8_e4m3fn else dtype
    k, v = _cache(4, 2, 24, torch.float32, blocks=20)
    k, v = k.to(cache_dtype), v.to(cache_dtype)
    tables = _tables([[7, 2, 9, 3, 11, 0, 13, 5], [4, 11, 5, 19]])
    positions = torch.tensor([[29, -1, -1], [9, 10, 11]], dtype=torch.int32)
    q = torch.randn(2, 3, 4, 24, generator=torch.Generator().manual_seed(3)).to(compute)
    scale = 2.0 if dtype == torch.float8_e4m3fn else 1.0
    whole = paged_attention(q, k, v, tables, positions, BLOCK_N=16, splits=1, kv_scale=scale)
    counters = torch.zeros(2 * 4, dtype=torch.int32, device=DEVICE) if fused else None
    for _ in range(2):  # with counters, the first call leaves them ready for the second
        shared = paged_attention(q, k, v, tables, positions, BLOCK_N=16, splits=splits,
                                 kv_scale=scale, counters=counters)  # fmt: skip
        ref = reference_paged_attention(q, k, v, tables, positions, kv_scale=scale)
        tolerance = 2e-2 if dtype == torch.bfloat16 else 1e-5
        assert (shared.float() - ref).abs().max() < tolerance
        assert (shared.float() - whole.float()).abs().max() < tolerance
        assert shared[0, 1:].abs().max() == 0  # padding rows: zeros, however many shares
    if fused:
        assert int(counters.count_nonzero()) == 0


def test_counters_too_few_for_the_rows_and_heads_are_refused():
    k, v = _cache(4, 2, 16, torch.float32)
    q = torch.randn(3, 1, 2, 16)  # 3 sequences x 2 heads: 6 counters
    tables, positions = _tables([[0], [1], [2]]), torch.zeros(3, 1, dtype=torch.int32)
    few = torch.zeros(5, dtype=torch.int32, device=DEVICE)
    with pytest.raises(ValueError, match="counters must be 6 or more int32"):
        paged_attention(q, k, v, tables, positions, splits=2, counters=few)


def test_decode_rows_of_few_sequences_are_split_to_fill_the_sms():
    assert kernel.decode_splits(programs=16, max_keys=2048, block_n=64, sms=132) == 32
    assert kernel.decode_splits(programs=16, max_keys=1040, block_n=64, sms=132) == 16
    assert kernel.decode_splits(programs=64, max_keys=2048, block_n=64, sms=132) == 8
    assert kernel.decode_splits(programs=512, max_keys=2048, block_n=64, sms=132) == 1
    assert kernel.decode_splits(programs=1, max_keys=1 << 20, block_n=64, sms=132) == 32
    with pytest.raises(ValueError, match="splits=3"):
        k, v = _cache(4, 2, 16, torch.float32)
        paged_attention(torch.randn(1, 1, 2, 16), k, v, _tables([[0]]),
                        torch.tensor([[0]], dtype=torch.int32), splits=3)  # fmt: skip


@pytest.mark.parametrize("splits, fused", [(1, False), (4, False), (4, True)])
@pytest.mark.parametrize("H, H_KV, D", [(2, 2, 16), (4, 2, 24)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tiles_of_one_sequences_rows_give_what_rows_of_their_own_do(
    splits, fused, H, H_KV, D, dtype
):
    page = 4
    k, v = _cache(page, H_KV, D, dtype, blocks=16)
    # one row per token: a chunk of 19 tokens of sequence 0 at positions 3..21 (tiles of 16 and
    # 3), a decode token of sequence 1 at 6, a chunk of 2 of sequence 2 at 0..1, then a row that
    # no tile holds (left as it is)
    tables = _tables([[7, 2, 9, 12, 3, 14], [4, 11], [5]])
    positions = torch.tensor([[p] for p in [*range(3, 22), 6, 0, 1, 0]], dtype=torch.int32)
    owner = [0] * 19 + [1, 2, 2]
    starts = torch.tensor([0, 16, 19, 20], dtype=torch.int32)
    counts = torch.tensor([16, 3, 1, 2], dtype=torch.int32)
    q = torch.randn(23, 1, H, D, generator=torch.Generator().manual_seed(2)).to(dtype)
    counters = torch.zeros(4 * H, dtype=torch.int32, device=DEVICE) if fused else None
    out = paged_attention(q, k, v, tables[[0, 0, 1, 2]], positions, tiles=(starts, counts),
                          BLOCK_M=16, BLOCK_N=16, splits=splits, counters=counters)  # fmt: skip
    ref = reference_paged_attention(q[:22], k, v, tables[owner], positions[:22])
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert out.shape == q.shape and (out[:22].float() - ref).abs().max() < tolerance
    # a tile read through another sequence's table is another result: the tables are used
    wrong = paged_attention(q, k, v, tables[[1, 0, 1, 2]], positions, tiles=(starts, counts),
                            BLOCK_M=16, BLOCK_N=16, splits=splits, counters=counters)  # fmt: skip
    assert (wrong[:16].float() - ref[:16]).abs().max() > 0.1


def test_tiles_are_refused_over_operands_of_the_wrong_shape():
    k, v = _cache(4, 2, 16, torch.float32)
    tables = _tables([[1, 2]])
    one, at = torch.tensor([0], dtype=torch.int32), torch.zeros(2, 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="tiles need q"):
        paged_attention(torch.randn(2, 2, 2, 16), k, v, tables, at.expand(2, 2), tiles=(one, one))
    with pytest.raises(ValueError, match="int32 vectors"):
        paged_attention(torch.randn(2, 1, 2, 16), k, v, tables, at, tiles=(one.long(), one))
    with pytest.raises(ValueError, match="tables must be"):
        paged_attention(torch.randn(2, 1, 2, 16), k, v, _tables([[1], [2]]),
                        torch.zeros(2, 1, dtype=torch.int32), tiles=(one, one))  # fmt: skip


def test_tiles_take_the_grids_first_axis_past_the_limit_of_the_second(monkeypatch):
    # CUDA's second grid axis takes 65535 programs: 4096 tiles of 16 heads (a 4096-token step
    # of the 760m model from the decode graphs) would not fit there; cut to 4 here
    monkeypatch.setattr(kernel, "_MAX_GRID_Y", 4)
    k, v = _cache(4, 2, 16, torch.float32)
    tables = _tables([[3, 5], [7]])
    positions = torch.tensor([[4], [5], [2], [3]], dtype=torch.int32)  # 2 rows of each
    q = torch.randn(4, 1, 2, 16, generator=torch.Generator().manual_seed(3))
    with pytest.raises(ValueError, match="B \\* H = 8 exceeds the grid limit 4"):
        paged_attention(q, k, v, tables[[0, 0, 1, 1]], positions)  # rows of their own
    tiles = (torch.tensor([0, 1, 2, 3], dtype=torch.int32), torch.ones(4, dtype=torch.int32))
    out = paged_attention(q, k, v, tables[[0, 0, 1, 1]], positions, tiles=tiles)  # 8 programs
    ref = reference_paged_attention(q, k, v, tables[[0, 0, 1, 1]], positions)
    assert (out - ref).abs().max() < 1e-5
