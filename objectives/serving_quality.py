"""The serving workload's quality gate: quantized weights and fp8 caches must keep the
next-token distributions of fixed prompts within ``max_kl`` (mean KL divergence, nats) of the
bf16 model with a bf16 cache, else the trial is ``wrong_result``; top-1 agreement is reported
too.

Example:
    >>> import torch
    >>> from autotune.kernels.llama import Llama, LlamaConfig
    >>> from autotune.kernels.llama_infer import InferenceModel
    >>> config = LlamaConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=64)
    >>> _ = torch.manual_seed(0); model = InferenceModel(Llama(config))
    >>> prompts = quality_prompts(config, seed=0)
    >>> reference = next_token_logits(model, prompts, "bf16")
    >>> same = compare(reference, next_token_logits(model, prompts, "bf16"))
    >>> same["kl"] == 0.0, same["top1_agreement"]
    (True, 1.0)
    >>> check_quality(same["kl"], max_kl=0.05)
"""

from __future__ import annotations

import math

import torch

from autotune.failures import WrongResult
from autotune.kernels.llama import LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel

#: how many prompts the gate compares the next tokens of
QUALITY_PROMPTS = 8


def quality_prompts(model: LlamaConfig, seed: int) -> list[list[int]]:
    """The gate's prompts: :data:`QUALITY_PROMPTS` of up to 64 random tokens, drawn from
    ``seed`` + 7 (one of the problem's :data:`~autotune.objectives.serving_problem.SEED_OFFSETS`).
    """
    gen = torch.Generator().manual_seed(seed + 7)
    length = min(64, model.seq_len)
    return [torch.randint(0, model.vocab, (length,), generator=gen).tolist()
            for _ in range(QUALITY_PROMPTS)]  # fmt: skip


def next_token_logits(
    model: InferenceModel, prompts: list[list[int]], kv_dtype: str
) -> torch.Tensor:
    """The logits of each prompt's every position, through a cache of ``kv_dtype`` (blocks of
    16 tokens)."""
    cache = model.new_cache(len(prompts) * (-(-len(prompts[0]) // 16)), 16, kv_dtype)
    for seq, prompt in enumerate(prompts):
        cache.allocate(seq, len(prompt))
    return model.forward([Chunk(s, 0, p) for s, p in enumerate(prompts)], cache)


def compare(reference: torch.Tensor, logits: torch.Tensor) -> dict[str, float]:
    """Mean KL divergence of ``logits``' next-token distributions from ``reference``'s, and how
    often their most likely tokens agree."""
    ref = torch.log_softmax(reference, -1)
    got = torch.log_softmax(logits, -1)
    kl = float((ref.exp() * (ref - got)).sum(-1).mean())
    agree = float((ref.argmax(-1) == got.argmax(-1)).float().mean())
    return {"kl": kl, "top1_agreement": agree}


def check_quality(kl: float, max_kl: float) -> None:
    """The quality gate: a next-token KL divergence against the bf16 model above ``max_kl``
    fails, and so does one that is no number at all (NaN, where the logits broke down),
    which every comparison would let through.

    Raises:
        WrongResult: naming the KL and the limit.

    Example:
        >>> check_quality(0.01, max_kl=0.05)
        >>> check_quality(float("nan"), max_kl=0.05)
        Traceback (most recent call last):
        ...
        autotune.failures.WrongResult: next-token KL against the bf16 model is NaN (logits ...
    """
    if kl <= max_kl:
        return
    if math.isnan(kl):
        raise WrongResult("next-token KL against the bf16 model is NaN (logits holding NaN or "
                          f"infinities), not within max_kl={max_kl:g}")  # fmt: skip
    raise WrongResult(f"next-token KL {kl:.4f} against the bf16 model exceeds max_kl={max_kl:g}")
