"""benchmarks/gpu/serving_side_by_side.py's rounds on the CPU: a variant whose replay runs
into its deadline is a row of its own, not the end of the run."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # benchmarks.*; last: see tests/driver/test_grouped.py

from autotune.objectives.serving import ServingObjective  # noqa: E402
from benchmarks.gpu.serving_side_by_side import measure, table_row  # noqa: E402


class _Hurried(ServingObjective):
    """A replay deadline of a fraction of a second (a minute and more on the GPU)."""

    def replay_deadline_s(self) -> float:
        return 0.3


def test_a_variant_that_runs_into_the_replay_deadline_is_shown_as_timed_out(tmp_path):
    # since the replay's deadline became a trial timeout, evaluate raised it, and the script
    # died on the first variant that could not keep up, its other rounds and table lost
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 40, "output_len": 60}\n' * 30)
    obj = _Hurried({**ServingObjective.default_problem({"type": "cpu"}), "device": "cpu",
                    "trace": str(trace)})  # fmt: skip
    late = measure(obj, {"max_num_seqs": 4, "max_num_batched_tokens": 256})
    assert set(late) == {"timed_out"} and "requests unfinished" in late["timed_out"]
    row = table_row("4 sequences", [late, late], default=None)
    assert row.startswith("| 4 sequences | timed out (2 of 2 rounds) |")
    finished = {"goodput_tok_s": 100.0, "output_tok_s": 100.0, "ttft_p99_ms": 50.0,
                "tpot_p99_ms": 5.0}  # fmt: skip
    row = table_row("default", [finished, late, finished], default=50.0)
    assert row == "| default (1 of 3 rounds timed out) | 100 | 2.00 | 100 | 50 | 5.0 | 0.00 |"
