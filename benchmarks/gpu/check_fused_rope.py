"""The fused rotary + KV-cache write (kernels/rotary_kv_triton.py) on the GPU: the logits of a
small Llama (head dim 96, as the 760m preset's) through prefill chunks and decode steps of two
sequences, with it and with torch's rotation and indexed copies, bf16 weights, gathered and
paged reads. Prints the largest logit difference over the largest logit, per way of reading;
the CPU tests check the same in the interpreter.

Run (GPU machine, after benchmarks/gpu/setup.sh): python benchmarks/gpu/check_fused_rope.py
"""

from __future__ import annotations

import torch

from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel


def steps(model: InferenceModel) -> list[torch.Tensor]:
    cache = model.new_cache(num_blocks=64, block_size=16, kv_dtype="bf16")
    gen = torch.Generator().manual_seed(1)
    a = torch.randint(0, 256, (40,), generator=gen).tolist()
    b = torch.randint(0, 256, (30,), generator=gen).tolist()
    cache.allocate(0, 40)
    cache.allocate(1, 20)
    logits = [model.forward([Chunk(0, 0, a), Chunk(1, 0, b[:20])], cache)]
    cache.allocate(1, 30)
    cache.allocate(0, 41)
    logits.append(model.forward([Chunk(0, 40, [7]), Chunk(1, 20, b[20:])], cache))
    for step in range(8):  # decode steps of both sequences
        cache.allocate(0, 42 + step)
        cache.allocate(1, 31 + step)
        logits.append(model.forward([Chunk(1, 30 + step, [3]), Chunk(0, 41 + step, [5])], cache))
    return logits


def main() -> None:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab=256, d_model=384, n_layers=2, n_heads=4, seq_len=128)
    llama = Llama(cfg).to("cuda" if torch.cuda.is_available() else "cpu")  # CPU: interpreter
    worst = 0.0
    for reads in ("gather", "paged"):
        plain = steps(InferenceModel(llama, "bf16", reads, fused_rope=False))
        fused = steps(InferenceModel(llama, "bf16", reads, fused_rope=True))
        pairs = zip(plain, fused, strict=True)
        rel = max(float((p - f).abs().max() / p.abs().max()) for p, f in pairs)
        worst = max(worst, rel)
        print(
            f"fused rotary vs torch, {reads} reads, head dim {cfg.head_dim}: "
            f"max |logit diff| / max |logit| = {rel:.2e} over {len(plain)} steps"
        )
    print("PASS" if worst < 2e-2 else "FAIL", "(bf16: within 2e-2)")


if __name__ == "__main__":
    main()
