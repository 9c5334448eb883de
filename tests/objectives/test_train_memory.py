"""The training step's memory model against what autograd really keeps, counted on the CPU with
saved-tensor hooks (every tensor kept for the backward, each storage once, weights excluded)."""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from autotune.kernels.llama import Llama, LlamaConfig, lm_loss, param_count
from autotune.objectives.train_memory import activation_bytes, estimate


def saved_bytes(cfg: LlamaConfig, micro_batch: int, precision: str, backend: str, ckpt: bool):
    torch.manual_seed(0)
    model = Llama(cfg, activation_checkpointing=ckpt)
    tokens = torch.randint(0, cfg.vocab, (micro_batch, cfg.seq_len + 1))
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: set = set()
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        storage = t.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes())
        if storage.data_ptr() not in weights and key not in seen:
            seen.add(key)
            total += storage.nbytes()
        return t

    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16"
                else contextlib.nullcontext())  # fmt: skip
    attention = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}[backend]
    hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with hooks, sdpa_kernel(attention), autocast:
        lm_loss(model(tokens[:, :-1]), tokens[:, 1:])
    return total


SHAPES = [  # (d, heads, layers, seq, vocab, micro-batch): widths, depths, lengths, vocabularies
    (64, 4, 2, 32, 256, 2),
    (128, 8, 3, 64, 1024, 2),
    (96, 4, 1, 128, 512, 1),
]


@pytest.mark.parametrize(
    ("shape", "precision", "backend", "ckpt"),
    list(itertools.product(SHAPES, ["fp32", "bf16"], ["math", "flash"], [False, True])),
)
def test_activations_within_ten_percent_of_what_autograd_keeps(shape, precision, backend, ckpt):
    d, h, layers, seq, vocab, mb = shape
    cfg = LlamaConfig(vocab=vocab, d_model=d, n_layers=layers, n_heads=h, seq_len=seq)
    measured = saved_bytes(cfg, mb, precision, backend, ckpt)
    predicted = activation_bytes(cfg, mb, precision, backend, ckpt)
    assert abs(predicted / measured - 1) <= 0.10, (predicted, measured)


def test_the_estimate_adds_state_and_the_recompute_of_checkpointing():
    cfg = LlamaConfig(vocab=512, d_model=128, n_layers=4, n_heads=4, seq_len=64)
    plain = estimate(cfg, micro_batch=8, precision="bf16", attention_backend="flash",
                     checkpointing=False)  # fmt: skip
    ckpt = estimate(cfg, micro_batch=8, precision="bf16", attention_backend="flash",
                    checkpointing=True)  # fmt: skip
    assert plain.parts["state"] == 16 * param_count(cfg)  # fp32 weights, grads, 2 moments
    assert "recompute" in ckpt.parts and ckpt.total < plain.total
    # activations grow with the micro-batch, the state does not
    double = estimate(cfg, micro_batch=16, precision="bf16", attention_backend="flash",
                      checkpointing=False)  # fmt: skip
    assert double.parts["state"] == plain.parts["state"]
    assert double.parts["activations"] > 1.9 * plain.parts["activations"] - 2 * 512 * 128 * 2
