"""The Llama-style decoder: shapes, causality, rotary, checkpointing and the size arithmetic."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.kernels.llama import (
    Llama,
    LlamaConfig,
    apply_rotary,
    default_ffn_hidden,
    flops_per_token,
    lm_loss,
    matmul_param_count,
    param_count,
    rotary_tables,
)

TINY = LlamaConfig(vocab=50, d_model=32, n_layers=2, n_heads=4, seq_len=12)


def _model(cfg: LlamaConfig = TINY, seed: int = 0, **kwargs: bool) -> Llama:
    torch.manual_seed(seed)
    return Llama(cfg, **kwargs)


def _tokens(batch: int = 2, seq: int = 12, vocab: int = 50, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def test_forward_shape_and_finite() -> None:
    logits = _model()(_tokens(3, 10))
    assert logits.shape == (3, 10, TINY.vocab)
    assert torch.isfinite(logits).all()


def test_initial_loss_is_near_uniform_guess() -> None:
    # small random init -> nearly uniform predictions -> loss close to ln(vocab)
    tokens = _tokens(4, 13)
    with torch.no_grad():
        loss = lm_loss(_model()(tokens[:, :-1]), tokens[:, 1:])
    assert abs(loss.item() - torch.log(torch.tensor(50.0)).item()) < 0.1


@pytest.mark.parametrize("backend", [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION])
def test_changing_a_future_token_leaves_earlier_logits_alone(backend: SDPBackend) -> None:
    model = _model()
    tokens = _tokens(2, 12)
    changed = tokens.clone()
    changed[:, 7] = (changed[:, 7] + 1) % TINY.vocab
    with torch.no_grad(), sdpa_kernel(backend):
        before, after = model(tokens), model(changed)
    torch.testing.assert_close(before[:, :7], after[:, :7], rtol=0, atol=1e-6)
    assert not torch.allclose(before[:, 7:], after[:, 7:])  # the change is seen from 7 on


def test_rotary_keeps_norms_and_depends_on_relative_position_only() -> None:
    cos, sin = rotary_tables(head_dim=8, seq_len=20, base=10000.0)
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(8, generator=gen), torch.randn(8, generator=gen)

    def at(x: torch.Tensor, pos: int) -> torch.Tensor:
        return apply_rotary(x.view(1, 1, 1, 8), cos[pos : pos + 1], sin[pos : pos + 1]).flatten()

    torch.testing.assert_close(at(q, 5).norm(), q.norm())
    # <R(m) q, R(n) k> depends on m - n alone
    torch.testing.assert_close(at(q, 7) @ at(k, 3), at(q, 15) @ at(k, 11), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(at(q, 7) @ at(k, 3), at(q, 7) @ at(k, 6))


def test_checkpointing_gives_the_same_loss_and_gradients() -> None:
    tokens = _tokens(2, 13)
    results = []
    for checkpointing in (False, True):
        model = _model(activation_checkpointing=checkpointing)
        loss = lm_loss(model(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
        results.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (loss_plain, grads_plain), (loss_ckpt, grads_ckpt) = results
    torch.testing.assert_close(loss_plain, loss_ckpt, rtol=0, atol=0)
    assert grads_plain.keys() == grads_ckpt.keys()
    for name, grad in grads_plain.items():
        torch.testing.assert_close(grad, grads_ckpt[name], rtol=1e-5, atol=1e-7, msg=name)


def test_checkpointing_under_bf16_autocast_runs() -> None:
    tokens = _tokens(2, 13)
    model = _model(activation_checkpointing=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(tokens[:, :-1])
        loss = lm_loss(logits, tokens[:, 1:])
    loss.backward()
    assert logits.dtype == torch.bfloat16 and torch.isfinite(loss)
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize(
    "cfg",
    [
        TINY,
        LlamaConfig(vocab=512, d_model=128, n_layers=2, n_heads=4, seq_len=64),
        LlamaConfig(vocab=7, d_model=24, n_layers=3, n_heads=3, ffn_hidden=40, seq_len=5),
    ],
)
def test_param_count_matches_the_module(cfg: LlamaConfig) -> None:
    model = Llama(cfg)
    assert param_count(cfg) == sum(p.numel() for p in model.parameters())
    norm_gains = sum(p.numel() for n, p in model.named_parameters() if "norm" in n)
    embedding = model.embed.weight.numel()
    assert matmul_param_count(cfg) == param_count(cfg) - norm_gains - embedding


def test_flops_per_token_arithmetic() -> None:
    cfg = LlamaConfig(vocab=1000, d_model=64, n_layers=3, n_heads=4, seq_len=128)
    f = default_ffn_hidden(64)  # 8/3 * 64 = 170.7 -> 192
    assert f == 192
    matmul_params = 3 * (4 * 64 * 64 + 3 * 64 * f) + 64 * 1000  # blocks + LM head
    # the attention term counts the causal half of the square: 6 * L * seq * d
    assert flops_per_token(cfg) == 6 * matmul_params + 6 * 3 * 128 * 64
    assert flops_per_token(cfg, seq_len=256) == 6 * matmul_params + 6 * 3 * 256 * 64
    assert flops_per_token(cfg, causal=False) == 6 * matmul_params + 12 * 3 * 128 * 64


def test_default_size_is_about_134m_parameters() -> None:
    cfg = LlamaConfig(vocab=32000, d_model=768, n_layers=12, n_heads=12, seq_len=1024)
    assert cfg.ffn_hidden == 2048
    assert 100e6 < param_count(cfg) < 150e6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"d_model": 12, "n_heads": 4}, "even"),  # head_dim 3
        ({"n_layers": 0}, "positive"),
    ],
)
def test_bad_shapes_are_refused(kwargs: dict[str, int], match: str) -> None:
    base = {"vocab": 10, "d_model": 32, "n_layers": 1, "n_heads": 4, "seq_len": 8}
    with pytest.raises(ValueError, match=match):
        LlamaConfig(**{**base, **kwargs})


def test_sequence_longer_than_rotary_tables_is_refused() -> None:
    with pytest.raises(ValueError, match="seq_len"):
        _model()(_tokens(1, 13))
