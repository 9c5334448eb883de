"""Host time of the serving engine's scheduler: one ``schedule`` + ``complete`` of a step in
which every running sequence decodes a token (no model: the logits are zeros), at 32, 128 and
256 running sequences of 512-token prompts, median of ``--rounds`` rounds of ``--steps`` steps.
The scheduler runs before every engine step, so this adds to each step's time.
``--against FILE`` times another copy of objectives/serving_engine.py side by side (e.g.
``git show REV:objectives/serving_engine.py > /tmp/old.py``).

    python benchmarks/scheduler_step.py [--steps 50] [--rounds 5] [--against FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autotune.kernels.paged_kv import PagedKVCache  # noqa: E402
from autotune.objectives import serving_engine  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402

RUNNING = (32, 128, 256)


def step_ms(module: ModuleType, running: int, steps: int) -> float:
    """Mean milliseconds of a decode step's scheduling, every prompt already prefilled."""
    cache = PagedKVCache(1, 40_000, 16, 1, 2, torch.float32, torch.device("cpu"))
    sched = module.Scheduler(cache, running, 4096)
    requests = [module.Request(i, 0.0, list(range(512)), 10**6) for i in range(running)]
    for request in requests:
        sched.add(request)
    while sched.waiting or any(r.prefilling for r in requests):  # the prompts, in chunks
        step = sched.schedule()
        sched.complete(step, torch.zeros(len(step), 4), 0.0)
    start = time.perf_counter()
    for _ in range(steps):
        step = sched.schedule()
        sched.complete(step, torch.zeros(len(step), 4), 0.0)
    return (time.perf_counter() - start) / steps * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", type=Path, help="another copy of serving_engine.py")
    args = parser.parse_args()
    modules = {"this": serving_engine}
    if args.against:
        modules["against"] = load_module(args.against, "serving_engine_against")
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.rounds):  # rounds interleave the copies
        for name, module in modules.items():
            for running in RUNNING:
                times.setdefault((name, running), []).append(step_ms(module, running, args.steps))
    print(f"{'code':8} {'running':>7} {'ms a step':>10}")
    for (name, running), values in times.items():
        print(f"{name:8} {running:7d} {statistics.median(values):10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
