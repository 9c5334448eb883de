"""Serving configs side by side on one GPU: the same request trace (the objective's GPU
default: the 760m preset, Poisson arrivals at ``--rate``, 512-token prompts, 128-token outputs)
replayed through :class:`ServingObjective` with each config, rounds interleaved and their order
rotated; the median of each figure over the rounds, and goodput over the default config's.

``--old-graphs FILE`` (a copy of an earlier kernels/decode_graphs.py) adds a row of every step
from that file's graphs (e.g. 49099d6's, whose attention read a prefill chunk's keys once per
row rather than per tile of rows).
``decode graphs`` rows run the decode graphs as they were before mixed steps ran from them:
buckets up to ``max_num_seqs``, one-token (decode) steps only; every step with a prefill chunk
through the engine's eager forward. ``--old-engine FILE`` (a copy of an earlier
objectives/serving_engine.py) adds a row with that file's scheduler, requests and loop as well.

Run (GPU machine, after benchmarks/gpu/setup.sh):
    python benchmarks/gpu/serving_side_by_side.py OUT [--rate 20] [--rounds 3] [--old-engine F]
        [--problem prompt_len=4096,max_context=8192,...] (long prompts) [--old-graphs F]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[2]))  # benchmarks.*, after autotune

from autotune.failures import TrialTimeout  # noqa: E402
from autotune.kernels.decode_graphs import DecodeGraphs  # noqa: E402
from autotune.kernels.llama_infer import Chunk  # noqa: E402
from autotune.objectives import serving_replay as replay_module  # noqa: E402
from autotune.objectives.serving import ServingObjective  # noqa: E402
from autotune.timing import rotated  # noqa: E402
from benchmarks.module_file import load_module  # noqa: E402


class DecodeOnlyGraphs(DecodeGraphs):
    """The decode graphs before mixed steps: batch buckets, one-token steps only."""

    def __init__(self, model, cache, max_batch, *, max_tokens=None, capture=None) -> None:  # noqa: ANN001
        super().__init__(model, cache, max_batch, capture=capture)

    def can_run(self, chunks: list[Chunk]) -> bool:
        return all(len(c.tokens) == 1 for c in chunks) and super().can_run(chunks)


PAGED = {"attention_backend": "paged", "cuda_graphs": True}
#: name: (config over the default, graphs class, engine module)
VARIANTS = {
    "default": ({}, DecodeGraphs, None),
    "paged, decode graphs": (PAGED, DecodeOnlyGraphs, None),
    "paged, every step graphed": (PAGED, DecodeGraphs, None),
    "paged, every step graphed, budget 512": (
        {**PAGED, "max_num_batched_tokens": 512}, DecodeGraphs, None),
}  # fmt: skip
ENGINE_NAMES = ("Request", "Scheduler", "run_trace")
FIGURES = ("goodput_tok_s", "output_tok_s", "ttft_p99_ms", "tpot_p99_ms", "tpot_p50_ms",
           "graph_step_share", "steps", "within_slo", "graph_capture_s")  # fmt: skip


def old_engine(module):  # noqa: ANN001, ANN201
    """``module``'s engine, its scheduler counting steps (which the objective reports)."""

    class CountingScheduler(module.Scheduler):
        def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
            super().__init__(*args, **kwargs)
            self.steps = 0

        def complete(self, *args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            self.steps += 1
            return super().complete(*args, **kwargs)

    return SimpleNamespace(Request=module.Request, Scheduler=CountingScheduler,
                           run_trace=module.run_trace)  # fmt: skip


def measure(obj: ServingObjective, config: dict[str, Any]) -> dict[str, Any]:
    """One replay of ``config``: its :data:`FIGURES`, or ``{"timed_out": why}`` where the
    replay ran into its deadline (a config that cannot keep up with the rate), which the
    objective raises as :class:`TrialTimeout` instead of figures over the requests it served.

    Example:
        >>> class Late:
        ...     def evaluate(self, config):
        ...         raise TrialTimeout("the replay's deadline (60 s ...) passed with 3 of 9 ...")
        >>> measure(Late(), {})
        {'timed_out': "the replay's deadline (60 s ...) passed with 3 of 9 ..."}
    """
    try:
        m = obj.evaluate(config)
    except TrialTimeout as exc:
        return {"timed_out": str(exc)}
    row = {**m.values, **m.metrics}
    return {k: row.get(k) for k in FIGURES}


def table_row(name: str, rounds: list[dict[str, Any]], default: float | None) -> str:
    """The table's row of variant ``name``: the median of each figure over the rounds it
    finished (how many timed out said beside its name), or "timed out" where none did; its
    goodput over ``default`` (the default config's, None where it has none).

    Example:
        >>> done = {"goodput_tok_s": 900.0, "output_tok_s": 1000.0, "ttft_p99_ms": 120.0,
        ...         "tpot_p99_ms": 20.0, "graph_step_share": 0.5}
        >>> print(table_row("paged", [done, {"timed_out": "..."}], default=450.0))
        | paged (1 of 2 rounds timed out) | 900 | 2.00 | 1000 | 120 | 20.0 | 0.50 |
        >>> print(table_row("budget 512", [{"timed_out": "..."}] * 2, default=None))
        | budget 512 | timed out (2 of 2 rounds) | - | - | - | - | - |
    """
    finished = [r for r in rounds if "timed_out" not in r]
    late = len(rounds) - len(finished)
    if not finished:
        return f"| {name} | timed out ({late} of {len(rounds)} rounds) | - | - | - | - | - |"
    med = {k: statistics.median(r[k] for r in finished if r.get(k) is not None)
           for k in FIGURES if any(r.get(k) is not None for r in finished)}  # fmt: skip
    ratio = "-" if default is None else (
        f"{med['goodput_tok_s'] / default:.2f}" if default > 0 else "inf")  # fmt: skip
    label = f"{name} ({late} of {len(rounds)} rounds timed out)" if late else name

    def shown(key: str, spec: str) -> str:
        return "-" if med.get(key) is None else format(med[key], spec)

    share = med.get("graph_step_share", 0)
    return (f"| {label} | {shown('goodput_tok_s', '.0f')} | {ratio} "
            f"| {shown('output_tok_s', '.0f')} | {shown('ttft_p99_ms', '.0f')} "
            f"| {shown('tpot_p99_ms', '.1f')} | {share:.2f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--problem", default="", help="KEY=VALUE,... over the default problem")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old-engine", type=Path)
    parser.add_argument("--old-graphs", type=Path)
    parser.add_argument("--skip", default="", help="variant names to leave out, separated by ;")
    args = parser.parse_args()
    variants = {k: v for k, v in VARIANTS.items() if k not in args.skip.split(";")}
    if args.old_engine is not None:
        old = load_module(args.old_engine, "serving_engine_old")
        variants["paged, decode graphs, old engine"] = (PAGED, DecodeOnlyGraphs, old_engine(old))
    if args.old_graphs is not None:
        old_graphs = load_module(args.old_graphs, "decode_graphs_old").DecodeGraphs
        variants["paged, every step graphed, old graphs"] = (PAGED, old_graphs, None)
    current = {name: getattr(replay_module, name) for name in ENGINE_NAMES}
    args.out.mkdir(parents=True, exist_ok=True)
    problem = {**ServingObjective.default_problem({"type": "cuda"}), "rate": args.rate}
    for item in filter(None, args.problem.split(",")):
        key, value = item.split("=", 1)
        problem[key] = type(problem[key])(value) if key in problem else value
    obj = ServingObjective(problem)
    names = list(variants)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in rotated(names, round_):
            config, graphs_class, engine = variants[name]
            replay_module.DecodeGraphs = graphs_class
            for attr in ENGINE_NAMES:
                setattr(replay_module, attr, getattr(engine, attr) if engine else current[attr])
            runs[name].append(measure(obj, config))  # a variant that timed out: on to the next
            print(f"round {round_} {name}: {json.dumps(runs[name][-1])}", flush=True)
    replay_module.DecodeGraphs = DecodeGraphs
    for attr in ENGINE_NAMES:
        setattr(replay_module, attr, current[attr])
    obj.close()
    default = None  # the default config's goodput, when it ran and finished a round
    finished = [r["goodput_tok_s"] for r in runs.get("default", []) if "timed_out" not in r]
    if finished:
        default = statistics.median(finished)
    print(f"\nrate {args.rate:g}/s, {problem['num_requests']} requests of "
          f"{problem['prompt_len']} + {problem['output_len']} tokens, median of "
          f"{args.rounds} interleaved rounds; SLO: TTFT p99 <= {problem['slo_ttft_ms']:g} ms, "
          f"TPOT p99 <= {problem['slo_tpot_ms']:g} ms")  # fmt: skip
    print("| config | goodput tok/s | x default | output tok/s | TTFT p99 ms | TPOT p99 ms "
          "| steps from graphs |\n|---|---|---|---|---|---|---|")  # fmt: skip
    summary = {}
    for name in names:
        finished = [r for r in runs[name] if "timed_out" not in r]
        summary[name] = {k: statistics.median(r[k] for r in finished if r[k] is not None)
                         for k in FIGURES if any(r[k] is not None for r in finished)}  # fmt: skip
        summary[name]["timed_out_rounds"] = len(runs[name]) - len(finished)
        print(table_row(name, runs[name], default))
    (args.out / "serving_side_by_side.json").write_text(
        json.dumps({"rate": args.rate, "runs": runs, "median": summary}, indent=1)
    )


if __name__ == "__main__":
    main()
