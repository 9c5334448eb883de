"""Where a search-by-group sweep's start-up goes on a GPU machine: for one matmul group
(M=1, N=4096, K=4096 bf16 unless --problem says otherwise), the seconds until a trial worker is
ready, until a compile-ahead pool of --jobs processes is warm (alone, then with the worker
starting beside it, as a sweep starts them), the first and later trials' evaluations, and what
the next group pays where the worker is kept: its ``take_up`` of another problem (--next) and
that problem's first trials.

    python benchmarks/gpu/group_startup.py --jobs 14 --trials 4
"""

from __future__ import annotations

import argparse
import json
import time

from autotune.driver.compile_ahead import CompileAhead
from autotune.runners.worker import IsolatedRunner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=14)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--problem", default='{"M": 1, "N": 4096, "K": 4096, "dtype": "bf16"}')
    parser.add_argument("--next", default='{"M": 16, "N": 6144, "K": 4096, "dtype": "bf16"}')
    args = parser.parse_args()
    problem = json.loads(args.problem)
    from autotune.objectives import get_objective

    default = get_objective("matmul")(problem).default_config()  # the sweep's trial 0
    out: dict[str, float | list[float]] = {}
    started = time.perf_counter()
    with CompileAhead("matmul", problem, jobs=args.jobs) as pool:
        while not pool.warm:
            time.sleep(0.05)
        out["pool_warm_alone_s"] = time.perf_counter() - started
    for round_ in ("alone", "beside_pool"):
        started = time.perf_counter()
        pool = CompileAhead("matmul", problem, jobs=args.jobs) if round_ == "beside_pool" else None
        with IsolatedRunner("matmul", problem, timeout_s=120) as runner:
            failure = runner._start()
            out[f"worker_ready_{round_}_s"] = time.perf_counter() - started
            assert failure is None, failure
            times = []
            for _ in range(args.trials):
                t0 = time.perf_counter()
                result = runner.evaluate(default)
                times.append(round(time.perf_counter() - t0, 3))
            out[f"trials_{round_}_s"] = times
            out[f"trial_status_{round_}"] = result.status.value
            if round_ == "alone":
                following = json.loads(args.next)
                t0 = time.perf_counter()
                runner.take_up(following)
                out["take_up_next_problem_s"] = time.perf_counter() - t0
                default_next = get_objective("matmul")(following).default_config()
                times = []
                for _ in range(args.trials):
                    t0 = time.perf_counter()
                    result = runner.evaluate(default_next)
                    times.append(round(time.perf_counter() - t0, 3))
                out["trials_next_problem_s"] = times
                out["workers_started_over_both"] = runner.workers_started
        if pool is not None:
            while not pool.warm:
                time.sleep(0.05)
            out["pool_warm_beside_worker_s"] = time.perf_counter() - started
            pool.__exit__(None, None, None)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
