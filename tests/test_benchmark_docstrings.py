"""Every docstring example in the benchmark scripts runs and shows what it says, on the CPU:
their small helpers (step summaries, timing, kernel kinds, config lists) are what a GPU run's
tables are computed by, and a GPU run is too dear to find a broken one."""

import doctest
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # benchmarks.*; last: see tests/driver/test_grouped.py

#: the benchmark modules with examples (a script that runs at import has none to find)
MODULES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for path in (ROOT / "benchmarks").rglob("*.py")
    if "results" not in path.parts and ">>> " in path.read_text()
)


def test_the_walk_finds_the_gpu_scripts_helpers():
    assert {"benchmarks.serving", "benchmarks.gpu.decode_profile"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_benchmark_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
