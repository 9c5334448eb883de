"""The inference model's two ways of reading the paged KV cache give the same logits: SDPA
over the gathered blocks, and the Triton kernel that reads them in place (the interpreter on
CPU), through chunked prefill and decode steps of several sequences."""

import pytest
import torch

from autotune.kernels import quant_matmul_triton as qm
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel, QuantLinear

#: these tests build the model on the CPU and ask for its Triton paths, which run on CPU tensors
#: only in Triton's interpreter (a CPU machine, as CI); on a GPU machine the same kernels are
#: checked by their own tests (tests/kernels/test_*_triton.py) on the device
interpreter_only = pytest.mark.skipif(
    torch.cuda.is_available(), reason="CPU tensors through Triton need the interpreter"
)


def _steps(model: InferenceModel, kv_dtype: str) -> list[torch.Tensor]:
    cache = model.new_cache(num_blocks=16, block_size=4, kv_dtype=kv_dtype)
    a, b = [3, 1, 4, 1, 5, 9, 2], [2, 7, 1, 8, 2]
    cache.allocate(0, 7)
    cache.allocate(1, 3)
    logits = [model.forward([Chunk(0, 0, a), Chunk(1, 0, b[:3])], cache)]  # prefill, a chunk
    cache.allocate(1, 5)
    cache.allocate(0, 8)
    logits.append(model.forward([Chunk(0, 7, [6]), Chunk(1, 3, b[3:])], cache))  # decode + rest
    cache.allocate(0, 9)
    cache.allocate(1, 6)
    logits.append(model.forward([Chunk(1, 5, [4]), Chunk(0, 8, [3])], cache))  # two decodes
    return logits


@interpreter_only
@pytest.mark.parametrize("kv_dtype", ["fp32", "fp8"])
def test_paged_reads_give_the_logits_of_gathered_reads(kv_dtype: str) -> None:
    cfg = LlamaConfig(vocab=64, d_model=64, n_layers=2, n_heads=4, seq_len=32)
    torch.manual_seed(0)
    llama = Llama(cfg)
    gathered = _steps(InferenceModel(llama, "bf16", "gather"), kv_dtype)
    paged = _steps(InferenceModel(llama, "bf16", "paged"), kv_dtype)
    for g, p in zip(gathered, paged, strict=True):
        assert g.shape == p.shape == (2, 64)
        assert (g - p).abs().max() < 1e-4 * g.abs().max()


def test_an_unknown_way_of_reading_is_refused() -> None:
    cfg = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=32)
    with pytest.raises(ValueError, match="attention_reads='copy'"):
        InferenceModel(Llama(cfg), "bf16", "copy")


def test_tiles_over_gathered_blocks_are_refused() -> None:
    cfg = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=32)
    model = InferenceModel(Llama(cfg), "bf16", "gather")
    cache = model.new_cache(num_blocks=4, block_size=4, kv_dtype="fp32")
    one = torch.zeros(1, dtype=torch.long)
    with pytest.raises(ValueError, match="tiles need attention_reads='paged'"):
        model.decode(one, one, one, one[None], cache, tiles=(one, one + 1, one))


@interpreter_only
@pytest.mark.parametrize("option, reads", [("fused_norm", "gather"), ("fused_swiglu", "paged")])
def test_a_fused_launch_gives_the_logits_of_torchs_ops(option: str, reads: str) -> None:
    """A GPU default (the residual add + RMSNorm, or SwiGLU's silu(gate) * up, in one Triton
    launch; the interpreter here) against torch's ops, through prefill chunks and decode
    steps; d_model 48 is not a power of two, so the norm kernel's masked row is exercised."""
    cfg = LlamaConfig(vocab=64, d_model=48, n_layers=2, n_heads=2, seq_len=32)
    torch.manual_seed(0)
    llama = Llama(cfg)
    torch_ops = InferenceModel(llama, "bf16", reads, **{option: False})
    fused = InferenceModel(llama, "bf16", reads, **{option: True})
    assert not getattr(InferenceModel(llama), option)  # on a CPU: off unless asked for
    for t, f in zip(_steps(torch_ops, "fp32"), _steps(fused, "fp32"), strict=True):
        assert (t - f).abs().max() < 1e-4 * t.abs().max()


def test_combine_counters_grow_without_freeing_the_ones_a_graph_may_hold() -> None:
    cfg = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=16)
    model = InferenceModel(Llama(cfg), attention_reads="paged", fused_combine=True)
    small = model.combine_counters(2)
    assert small.shape == (4,) and model.combine_counters(1).data_ptr() == small.data_ptr()
    large = model.combine_counters(8)  # more rows than held: new zeros, the old kept alive
    assert large.shape == (16,) and int(large.count_nonzero()) == 0
    assert any(held.data_ptr() == small.data_ptr() for held in model._retired_counters)


@interpreter_only
def test_shares_combined_by_their_last_program_give_the_logits_of_a_second_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``fused_combine`` (off unless asked for): the paged kernel's last program of a row's
    shares combines them. Contexts this small are not split on their own, so every launch here is
    cut in 2 shares (some of them empty), both ways."""
    from autotune.kernels import paged_attention_triton

    monkeypatch.setattr(paged_attention_triton, "decode_splits", lambda *args: 2)
    cfg = LlamaConfig(vocab=64, d_model=48, n_layers=2, n_heads=2, seq_len=32)
    torch.manual_seed(0)
    llama = Llama(cfg)
    second_kernel = InferenceModel(llama, "bf16", "paged", fused_combine=False)
    fused = InferenceModel(llama, "bf16", "paged", fused_combine=True)
    assert not InferenceModel(llama).fused_combine  # off unless asked for
    assert second_kernel.combine_counters(4) is None
    for t, f in zip(_steps(second_kernel, "fp32"), _steps(fused, "fp32"), strict=True):
        assert (t - f).abs().max() < 1e-4 * t.abs().max()
    assert fused._counters is not None and int(fused._counters.count_nonzero()) == 0


@interpreter_only
@pytest.mark.parametrize("reads", ["gather", "paged"])
def test_rotary_and_the_cache_write_in_one_launch_give_the_logits_of_torchs_ops(reads) -> None:
    """The fused rotary + KV write (the interpreter here) against torch's rotation and indexed
    copies, through prefill chunks and decode steps; head dim 24 has a non-power-of-two half."""
    cfg = LlamaConfig(vocab=64, d_model=48, n_layers=2, n_heads=2, seq_len=32)
    torch.manual_seed(0)
    llama = Llama(cfg)
    torch_ops = InferenceModel(llama, "bf16", reads, fused_rope=False)
    fused = InferenceModel(llama, "bf16", reads, fused_rope=True)
    assert not InferenceModel(llama).fused_rope  # on a CPU: off unless asked for
    for t, f in zip(_steps(torch_ops, "fp32"), _steps(fused, "fp32"), strict=True):
        assert (t - f).abs().max() < 1e-4 * t.abs().max()
    # an fp8 cache keeps torch's path (its scale), with the same logits as without the option
    for t, f in zip(_steps(torch_ops, "fp8"), _steps(fused, "fp8"), strict=True):
        assert torch.equal(t, f)


def test_int4_takes_groups_of_64_where_128_does_not_divide_the_inputs() -> None:
    # the 7b preset's MLP is 10944 wide: 85.5 groups of 128, 171 of 64
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    x = torch.randn(1, 192, device=device).to(torch.bfloat16 if device == "cuda" else torch.float32)
    for in_features, level in ((256, "int4-g128"), (192, "int4-g64")):
        weight = torch.randn(32, in_features, device=device)
        linear = QuantLinear(weight, "int4")
        assert qm.level_of(linear.q, linear.s) == level
    y = linear(x).float()
    ref = x.float() @ qm.dequantize(linear.q, linear.s).float()
    assert ((y - ref).norm() / ref.norm()).item() < 1e-2
