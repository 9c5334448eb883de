"""Which sweeps a triton export takes (:mod:`autotune.triton_workload`), told from the
workloads' registry: a built-in workload's space and whether it compiles a kernel are read
without importing its objective (torch, Triton)."""

import subprocess
import sys

#: in a fresh interpreter: the checks of a triton export, then the heavy modules they loaded
SCRIPT = """
import sys
from autotune.triton_names import TritonExportError
from autotune.triton_workload import check_kernel_workload, workload_of_params
assert workload_of_params(["micro_batch", "precision"]) == "train-step"
assert workload_of_params(["BLOCK_M", "num_warps"]) is None
check_kernel_workload("k", {"workload": "replay", "problem": {"params": ["BLOCK_M"]}})
check_kernel_workload("m", {"workload": "matmul"})
try:
    check_kernel_workload("t", {"workload": "train-step"})
except TritonExportError as refused:
    print(refused)
print(sorted(m for m in ("torch", "triton") if m in sys.modules))
"""


def test_the_registry_holds_each_built_in_objectives_space_and_whether_it_compiles():
    from autotune.objectives import WORKLOADS, get_objective

    for name, entry in WORKLOADS.items():
        objective = get_objective(name)
        assert entry.space == (objective.space or ""), name
        assert entry.compiles == bool(objective.compiles), name


def test_a_triton_exports_check_of_the_workload_imports_no_torch(tmp_path):
    # `export --to triton` of a replay (or of a matmul study) imported every built-in
    # objective, torch and Triton with them (3 s), only to read a class attribute
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    refused, loaded = done.stdout.strip().splitlines()
    assert refused.startswith("study 't' is a train-step sweep, not a kernel's"), refused
    assert loaded == "[]", done.stdout
