"""benchmarks/kernels.py's verdicts: what judges a row against its target."""

import importlib.util
import sys
from pathlib import Path

# benchmarks/kernels.py, loaded from its file under a name of its own: with benchmarks/ on
# sys.path it would stand in for Hugging Face's `kernels` package, which transformers imports
_SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "kernels.py"
_SPEC = importlib.util.spec_from_file_location("benchmark_kernel_suite", _SCRIPT)
kernels = sys.modules[_SPEC.name] = importlib.util.module_from_spec(_SPEC)  # for its dataclasses
_SPEC.loader.exec_module(kernels)


def _verdict(capsys, row: str, result: dict) -> str:
    kernels.print_table({row: result})
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(row))
    return line.rsplit("(", 1)[-1]


def test_an_int4_winner_is_judged_by_the_finishs_median_another_level_by_its_best_int4(capsys):
    int4_won = {
        "ratio": 1.015,
        "spread": 0.007,
        "config": {"weights": "int4-g128"},
        "best_int4": {"ratio": 0.992, "weights": "int4-g128", "quant_error": 0.118},
    }
    assert _verdict(capsys, "int4-16x4096x4096", int4_won) == "ratio met)"
    int8_won = {
        "ratio": 1.2,
        "spread": 0.01,
        "config": {"weights": "int8"},
        "best_int4": {"ratio": 0.95, "weights": "int4-g64", "quant_error": 0.107},
    }
    assert _verdict(capsys, "int4-16x4096x4096", int8_won) == "ratio NOT met)"
    below = {**int4_won, "ratio": 0.99}
    assert _verdict(capsys, "int4-16x4096x4096", below) == "ratio NOT met)"


def test_the_table_lists_only_the_selected_rows_and_says_which_the_budget_left_out(capsys):
    ran = {"ratio": 1.05, "spread": 0.01, "trials": 12}
    kernels.print_table({"rmsnorm-4096": ran}, only={"rmsnorm-4096", "rmsnorm-8192"})
    lines = capsys.readouterr().out.splitlines()
    named = [line.split()[0] for line in lines[2:] if line.strip()]
    assert named == ["rmsnorm-4096", "rmsnorm-8192"]
    assert "not run (time budget)" in next(x for x in lines if x.startswith("rmsnorm-8192"))
