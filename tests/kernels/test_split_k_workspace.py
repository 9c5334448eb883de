"""The K-split workspace shared by launchers: real kernels (the interpreter on a CPU machine)
interleaving launches over one workspace, of different sizes, both kernels that use it."""

from __future__ import annotations

import torch

from autotune.kernels import matmul_triton as mt
from autotune.kernels import quant_matmul_triton as qm
from autotune.kernels import split_k_workspace

DEVICE = "cpu" if mt.INTERPRETED else "cuda"
SPLIT = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 1,
         "num_stages": 1, "SPLIT_K": 3}  # fmt: skip


def _rand(*shape: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(torch.bfloat16).to(DEVICE)


def _rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.float() - ref).norm() / ref.norm())


def test_a_larger_request_allocates_anew_and_a_smaller_one_reuses_it() -> None:
    device = torch.device(DEVICE)
    small_ws, small_counters = split_k_workspace.buffers(device, partials=10, tiles=3)
    big_ws, big_counters = split_k_workspace.buffers(device, partials=10**6 + 7, tiles=5000)
    again_ws, again_counters = split_k_workspace.buffers(device, partials=10, tiles=3)
    assert (big_ws.numel(), big_counters.numel()) == (10**6 + 7, 5000)
    assert again_ws.data_ptr() == big_ws.data_ptr()  # the largest held serves every size
    assert again_counters.data_ptr() == big_counters.data_ptr()
    assert int(big_counters.sum()) == 0
    assert small_ws.numel() == 10  # still the earlier launcher's to use


def test_launchers_of_several_sizes_share_the_workspace_and_stay_right() -> None:
    # Two products of different shapes on the same workspace and counters, launched in turn:
    # each launch must leave the counters at zero for the next one, whoever it is.
    shapes = [(1, 40, 200), (20, 33, 130)]
    cases = []
    for i, (M, N, K) in enumerate(shapes):
        a, b = _rand(M, K, seed=2 * i), _rand(K, N, seed=2 * i + 1)
        out = torch.empty(M, N, dtype=torch.bfloat16, device=DEVICE)
        cases.append((mt.launcher(a, b, out, **SPLIT), out, mt.reference_matmul(a, b)))
    x = _rand(3, 128, seed=9)
    q, s = qm.quantize_int8(_rand(128, 48, seed=10).float())
    y = torch.empty(3, 48, dtype=torch.bfloat16, device=DEVICE)
    quant = qm.launcher(x, q, s, y, BLOCK_M=16, BLOCK_N=16, BLOCK_K=32, SPLIT_K=2, num_warps=1,
                        num_stages=1)  # fmt: skip
    cases.append((quant, y, x.float() @ qm.dequantize(q, s).float()))
    # the launchers took the device's shared pair: it holds the largest one's 3 x 20 x 33 partials
    held, _ = split_k_workspace._BUFFERS[split_k_workspace._key(torch.device(DEVICE))]
    assert held.numel() >= 3 * 20 * 33
    for _ in range(2):
        for run, out, ref in cases:
            out.fill_(float("nan"))
            run()
            assert torch.isfinite(out).all()
            assert _rel_error(out, ref) < 1e-2


def test_own_workspace_is_not_the_shared_one() -> None:
    device = torch.device(DEVICE)
    shared, _ = split_k_workspace.buffers(device, partials=64, tiles=4)
    own, counters = split_k_workspace.own(device, partials=64, tiles=4)
    assert own.data_ptr() != shared.data_ptr()
    assert int(counters.sum()) == 0
    # and a launcher that asks for its own is right on it
    a, b = _rand(16, 64, seed=3), _rand(64, 16, seed=4)
    out = torch.empty(16, 16, dtype=torch.bfloat16, device=DEVICE)
    mt.launcher(a, b, out, shared_workspace=False, **SPLIT)()
    assert _rel_error(out, mt.reference_matmul(a, b)) < 1e-2
