"""The serving engine's scheduler and loop, run for real on a tiny model: every schedule must
generate exactly the tokens plain greedy decoding with the training model gives."""

from __future__ import annotations

import pytest
import torch

from autotune.kernels.decode_graphs import DecodeGraphs
from autotune.kernels.llama import Llama, LlamaConfig
from autotune.kernels.llama_infer import Chunk, InferenceModel
from autotune.objectives.serving_engine import Request, Scheduler, run_trace

CFG = LlamaConfig(vocab=64, d_model=32, n_layers=2, n_heads=2, seq_len=64)


@pytest.fixture(scope="module")
def llama() -> Llama:
    torch.manual_seed(0)
    return Llama(CFG).eval()


def greedy(model: Llama, prompt: list[int], n: int) -> list[int]:
    tokens = list(prompt)
    with torch.no_grad():
        for _ in range(n):
            tokens.append(int(model(torch.tensor([tokens]))[0, -1].argmax()))
    return tokens[len(prompt) :]


def _requests(n: int, prompt_len: int, output_len: int) -> list[Request]:
    gen = torch.Generator().manual_seed(1)
    return [Request(i, arrival_s=0.0, output_len=output_len,
                    prompt=torch.randint(0, 64, (prompt_len + i,), generator=gen).tolist())
            for i in range(n)]  # fmt: skip


@pytest.mark.parametrize("graphs", [False, True], ids=["forward", "decode-graphs"])
@pytest.mark.parametrize("policy", ["fcfs", "prefill-first"])
@pytest.mark.parametrize(
    ("blocks", "block_size", "seqs", "budget"),
    [(64, 4, 8, 64), (64, 4, 2, 5), (12, 4, 4, 16), (40, 1, 3, 7)],
    ids=["roomy", "chunked-prefill", "preempting", "block-of-one"],
)
def test_every_schedule_generates_what_greedy_decoding_does(
    llama, policy, blocks, block_size, seqs, budget, graphs
) -> None:
    model = InferenceModel(llama)
    cache = model.new_cache(blocks, block_size, "fp32")
    # decode steps through the decode graphs' static, padded path (eager on a CPU)
    runner = DecodeGraphs(model, cache, seqs, capture=False) if graphs else None
    decoded = []
    if graphs:
        plain_decode = model.decode
        model.decode = lambda *a, **k: decoded.append(a[0].shape[0]) or plain_decode(*a, **k)
    sched = Scheduler(cache, max_num_seqs=seqs, max_num_batched_tokens=budget,
                      policy=policy)  # fmt: skip
    requests = run_trace(model, sched, _requests(5, prompt_len=9, output_len=6), graphs=runner)
    for r in requests:
        assert r.generated == greedy(llama, r.prompt, 6), (r.id, r.preemptions)
        assert r.first_token_s is not None and r.finish_s >= r.first_token_s
    assert sched.peak_running <= seqs
    assert sched.cache.free_blocks == blocks - graphs  # every block given back but the scratch
    assert (len(decoded) > 0) is graphs
    if blocks == 12:  # 5 requests of 15-19 tokens in 12 blocks of 4: someone must give way
        assert sched.preemptions > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU tensors through Triton need the "
                    "interpreter")  # fmt: skip
def test_a_paged_model_runs_every_step_prefill_included_from_the_graphs(llama) -> None:
    # the "preempting" case above (each step of the Triton interpreter takes a while)
    model = InferenceModel(llama, attention_reads="paged")
    cache = model.new_cache(12, 4, "fp32")
    runner = DecodeGraphs(model, cache, 4, max_tokens=16, capture=False)
    tokens, plain_decode = [], model.decode
    model.decode = lambda *a, **k: tokens.append(a[0].shape[0]) or plain_decode(*a, **k)
    model.forward = None  # not one step goes through the forward
    sched = Scheduler(cache, max_num_seqs=4, max_num_batched_tokens=16)
    requests = run_trace(model, sched, _requests(5, prompt_len=9, output_len=6), graphs=runner)
    for r in requests:
        assert r.generated == greedy(llama, r.prompt, 6), (r.id, r.preemptions)
    assert max(tokens) > runner.max_chunks  # steps of prefill chunks, padded to a bucket
    assert sched.preemptions > 0


def test_chunked_prefill_keeps_each_step_within_the_token_budget(llama) -> None:
    model = InferenceModel(llama)
    sched = Scheduler(model.new_cache(64, 4, "fp32"), max_num_seqs=4, max_num_batched_tokens=6)
    for r in _requests(3, prompt_len=10, output_len=2):
        sched.add(r)
    sizes = []
    while not sched.idle:
        step = sched.schedule()
        sizes.append(sum(len(c.tokens) for _, c in step))
        sched.complete(step, model.forward([c for _, c in step], sched.cache), 0.0)
    assert max(sizes) <= 6 and sizes[0] == 6  # a 10-token prompt went in chunks


def test_prefill_first_runs_prompts_before_decodes_and_fcfs_mixes_them(llama) -> None:
    model = InferenceModel(llama)
    for policy, mixed in (("prefill-first", False), ("fcfs", True)):
        sched = Scheduler(model.new_cache(64, 4, "fp32"), 4, 64, policy)
        first, second = _requests(2, prompt_len=5, output_len=3)
        sched.add(first)
        step = sched.schedule()
        sched.complete(step, model.forward([c for _, c in step], sched.cache), 0.0)
        sched.add(second)  # arrives while the first decodes
        kinds = {len(c.tokens) > 1 for _, c in sched.schedule()}
        assert (kinds == {True, False}) is mixed


def test_a_cache_too_small_for_one_request_is_an_error(llama) -> None:
    model = InferenceModel(llama)
    sched = Scheduler(model.new_cache(2, 4, "fp32"), 2, 64)
    with pytest.raises(RuntimeError, match="smaller than one request"):
        run_trace(model, sched, _requests(1, prompt_len=20, output_len=2))


def test_fp8_and_quantized_caches_and_weights_stay_close_to_the_reference(llama) -> None:
    torch.manual_seed(0)
    wide = Llama(LlamaConfig(vocab=64, d_model=128, n_layers=1, n_heads=2, seq_len=32)).eval()
    tokens = torch.randint(0, 64, (1, 16))
    with torch.no_grad():
        ref = torch.softmax(wide(tokens)[0, -1], -1)
    for weights, kv in (("bf16", "fp8"), ("int8", "fp32"), ("int4", "fp8")):
        model = InferenceModel(wide, weights)
        cache = model.new_cache(8, 4, kv)
        cache.allocate(0, 16)
        logp = torch.log_softmax(model.forward([Chunk(0, 0, tokens[0].tolist())], cache)[0], -1)
        kl = float((ref * (ref.log() - logp)).sum())
        assert kl < 0.05, (weights, kv, kl)
