"""Does the large-shape matmul gap to cuBLAS come from the last, partial wave of tiles?

The persistent schedule runs one program per SM, each taking tiles p, p + SMs, ... so its time
follows the busiest program's tile count, ceil(tiles / SMs). At 8192x4096x4096 with 128x256
tiles that is 1024 tiles on the H200's 132 SMs: 7.76 waves, the makespan 8 tiles. Growing M to
8448 adds 3.1% of work (1056 tiles, exactly 8 waves) without adding to the makespan. If the
kernel's time is set by the makespan, both M take the same time; if by the work, 8448 takes
3.1% longer. The same at 8192x14336x4096 with the 150-trial winner's 128x128 tiles: 7168
tiles (54.3 waves, makespan 55) against 7392 at M=8448 (56 waves): 1.8% longer by the
makespan, 3.1% by the work. cuBLAS is timed beside each, and at M = 8192 the same tiles
under the ``stream_k`` schedule, which shares the last wave's K-steps out among all the SMs.

Every figure is the median of launch-by-launch alternation (``autotune.timing.alternating``:
shuffled order, L2 flushed before each launch) over all candidates of one N together, repeated
``--reps`` times; ratios are of medians in the same alternation.

    python benchmarks/gpu/wave_tail.py [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from autotune.kernels import matmul_triton as mt
from autotune.timing import alternating

#: The sweeps' winners (benchmarks/results/h200-2026-12-04-s34, s35 call 2).
WINNERS = {
    4096: {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1,
           "SCHEDULE": "persistent_flat", "EPILOGUE_SUBTILE": 1, "num_warps": 8,
           "num_stages": 3},
    14336: {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "SPLIT_K": 1,
            "SCHEDULE": "persistent_flat", "EPILOGUE_SUBTILE": 0, "num_warps": 4,
            "num_stages": 5},
}  # fmt: skip
K = 4096
MS = (8192, 8448)


def candidates(N: int) -> dict:
    """Our winner and cuBLAS at each M, each writing its own output."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    fns = {}
    for M in MS:
        a = torch.randn(M, K, device="cuda", generator=gen).to(torch.bfloat16)
        b = torch.randn(K, N, device="cuda", generator=gen).to(torch.bfloat16)
        ours, ref = (torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        fns[f"ours M={M}"] = mt.launcher(a, b, ours, **WINNERS[N])
        fns[f"cublas M={M}"] = lambda a=a, b=b, c=ref: torch.matmul(a, b, out=c)
        outs = {"ours": ours}
        if M == 8192:  # the partial last wave
            outs["stream_k"] = torch.full_like(ours, float("nan"))
            fns[f"stream_k M={M}"] = mt.launcher(
                a, b, outs["stream_k"], **{**WINNERS[N], "SCHEDULE": "stream_k"}
            )
        for fn in fns.values():
            fn()
        torch.cuda.synchronize()
        for who, out in outs.items():
            err = float((out.float() - ref.float()).norm() / ref.float().norm())
            assert err < 1e-2, f"{who} M={M} N={N}: relative error {err}"
    return fns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs")
    for N, config in WINNERS.items():
        fns = candidates(N)
        tiles = {M: -(-M // config["BLOCK_M"]) * -(-N // config["BLOCK_N"]) for M in MS}
        rows = []
        for rep in range(args.reps):
            t = alternating(fns, device_type="cuda", warmup_ms=20, rep_ms=400, seed=rep)
            ms = {name: timing.median_ms for name, timing in t.items()}
            rows.append(ms)
            print(json.dumps({"N": N, "rep": rep, **ms}))
        med = {name: statistics.median(r[name] for r in rows) for name in rows[0]}
        lo, hi = MS
        print(f"\n{lo}/{hi} x {N} x {K} bf16, {config['BLOCK_M']}x{config['BLOCK_N']} tiles: "
              f"{tiles[lo]} tiles ({tiles[lo] / sms:.2f} waves) / {tiles[hi]} "
              f"({tiles[hi] / sms:.2f} waves)")  # fmt: skip
        work = hi / lo
        makespan = (-(-tiles[hi] // sms)) / (-(-tiles[lo] // sms))
        print(f"  expected time ratio M={hi} / M={lo}: {work:.3f} by the work, "
              f"{makespan:.3f} by the makespan")  # fmt: skip
        for who in ("ours", "cublas"):
            ratio = med[f"{who} M={hi}"] / med[f"{who} M={lo}"]
            print(f"  {who:7s} {med[f'{who} M={lo}']:.4f} ms -> {med[f'{who} M={hi}']:.4f} ms: "
                  f"x{ratio:.3f}")  # fmt: skip
        for M in MS:
            print(f"  M={M}: ours / cuBLAS time {med[f'ours M={M}'] / med[f'cublas M={M}']:.3f}")
        sk = med[f"stream_k M={lo}"]
        flat = med[f"cublas M={lo}"] / med[f"ours M={lo}"]
        print(
            f"  M={lo}: stream_k {sk:.4f} ms, x cuBLAS {med[f'cublas M={lo}'] / sk:.3f} "
            f"(the same tiles persistent_flat: x{flat:.3f})"
        )
        print()


if __name__ == "__main__":
    main()
