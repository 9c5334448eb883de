"""The attention kernel before and after a change, side by side with torch SDPA: the previous
version is loaded from a file (``OLD``, e.g. from ``git show REV:kernels/attention_triton.py``);
old and new run at the same configs, the new one also with its loads through tensor
descriptors (``TMA=1``), all interleaved in one process with each SDPA backend that takes
the input and SDPA's default dispatch (`autotune.timing.interleaved`, L2 flushed before each
launch as the objective times attention), 5 rounds, the order rotated. Every candidate's
output is checked against a float32 reference first.

``--variants 'EXP=1;EXP=2,QREG=1'`` runs OLD instead at ``--configs`` once per set of extra
compile-time flags (each set a kernel variant OLD's launcher passes through), beside the
current kernel at the same configs.

Problems: a Llama-3-8B layer's attention (32 query heads over 8 K/V heads, D = 128, bf16) at
4k causal, 4k non-causal and 16k causal: the suite's rows.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/attention_side_by_side.py OLD [--rounds 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.kernels import attention_triton as new  # noqa: E402
from autotune.objectives.attention import AttentionObjective  # noqa: E402
from autotune.timing import interleaved  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

ARGS = argparse.ArgumentParser()
ARGS.add_argument("old")
ARGS.add_argument("--rounds", type=int, default=5)
ARGS.add_argument("--problems", default="", help="e.g. 'causal 16k' (default: all three)")
ARGS.add_argument(
    "--configs",
    default="",
    help="BMxBNxWARPSxSTAGES,... run with TMA only (default: CONFIGS, old too)",
)
ARGS.add_argument("--variants", default="", help="NAME=INT,...;... flag sets for OLD (TMA=1)")
#: (BLOCK_M, BLOCK_N, num_warps, num_stages): the suite's winners (256x64 w8 st4), the default,
#: and the tiles a Hopper flash forward commonly takes; all pass the space's constraints
CONFIGS = [(256, 64, 8, 4), (128, 64, 4, 2), (128, 64, 8, 3), (128, 128, 8, 2), (128, 128, 8, 3),
           (256, 64, 8, 3), (256, 64, 8, 5), (128, 64, 4, 3)]  # fmt: skip
OLD_CONFIGS = CONFIGS[:2]
PROBLEMS = [("causal 4k", 4096, True), ("full 4k", 4096, False), ("causal 16k", 16384, True)]


def main() -> None:
    args = ARGS.parse_args()
    old = load_module(args.old, "attention_old")
    print(f"{torch.cuda.get_device_name()}; {args.rounds} interleaved rounds, L2 flushed")
    configs = ([tuple(int(x) for x in c.split("x")) for c in args.configs.split(",")]
               if args.configs else CONFIGS)  # fmt: skip
    for label, S, causal in PROBLEMS:
        if args.problems and label not in args.problems.split(","):
            continue
        gen = torch.Generator(device="cuda").manual_seed(S)
        q = torch.randn(1, 32, S, 128, generator=gen, device="cuda").bfloat16()
        k, v = (torch.randn(1, 8, S, 128, generator=gen, device="cuda").bfloat16()
                for _ in range(2))  # fmt: skip
        ref = new.reference_attention(q, k, v, causal, dtype=torch.float32)
        fns, errors = {}, {}
        candidates = [] if args.configs else [("old", old, c, 0) for c in OLD_CONFIGS]
        candidates += [] if args.configs else [("new", new, c, 0) for c in OLD_CONFIGS]
        candidates += [("tma", new, c, 1) for c in configs]
        for flags in filter(None, args.variants.split(";")):
            candidates += [(flags, old, c, 1) for c in configs]
        for tag, mod, (bm, bn, w, st), tma in candidates:
            name = f"{tag} {bm}x{bn} w{w} st{st}"
            out = torch.full_like(q, float("nan"))
            extra = {"TMA": tma} if tma else {}
            if mod is old and tag != "old":
                extra.update({k: int(v) for k, v in (f.split("=") for f in tag.split(","))})
            try:
                run = mod.launcher(q, k, v, out, causal=causal, BLOCK_M=bm, BLOCK_N=bn,
                                   num_warps=w, num_stages=st, **extra)  # fmt: skip
                run()
                torch.cuda.synchronize()
            except Exception as exc:  # noqa: BLE001 - a config that fails is a row too
                print(f"  {name}: {type(exc).__name__}: {str(exc)[:100]}")
                continue
            errors[name] = float((out.float() - ref).norm() / ref.norm())
            fns[name] = run
        # SDPA's backends as the objective times them (each probed, GQA natively where it can)
        obj = AttentionObjective({"B": 1, "H": 32, "H_KV": 8, "S": S, "D": 128,
                                  "causal": causal, "dtype": "bf16"})  # fmt: skip
        refs = obj.references({"q": q, "k": k, "v": v})
        fns.update({name.replace("_", " "): fn for name, fn in refs.items()})
        times = interleaved(fns, device_type="cuda", rounds=args.rounds)
        flops = 4 * 32 * S * S * 128 // (2 if causal else 1)
        best_ref = min(t.median_ms for name, t in times.items() if name.startswith("sdpa"))
        print(f"\n{label} (B=1, H=32, H_KV=8, S={S}, D=128, bf16)")
        print(f"  {'candidate':34} {'ms':>8} {'spread':>7} {'TFLOP/s':>8} {'x SDPA best':>11} "
              f"{'rel err':>8}")  # fmt: skip
        for name, t in sorted(times.items(), key=lambda kv: kv[1].median_ms):
            err = f"{errors[name]:8.1e}" if name in errors else ""
            tflops, ratio = flops / t.median_ms / 1e9, best_ref / t.median_ms
            print(f"  {name:34} {t.median_ms:8.3f} {t.spread:7.1%} {tflops:8.1f} {ratio:11.3f} "
                  f"{err}")  # fmt: skip


if __name__ == "__main__":
    main()
