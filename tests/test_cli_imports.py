"""Every ``autotune`` command starts a fresh interpreter: the CLI imports a heavy library
(pandas, Optuna, SQLAlchemy, torch, Triton, plotly) only in the commands that use it, not
where it parses its options, prints its help or refuses bad input."""

import subprocess
import sys
from pathlib import Path

import pytest

from autotune.device import _no_gpu_runtime

#: what no command pays for before it runs: the table library, the tuner and its storage,
#: the GPU stack, the report's plots, the sweep itself
HEAVY = ("pandas", "optuna", "sqlalchemy", "torch", "triton", "plotly", "autotune.driver.sweep")

#: what a command that reads a storage needs, and may import, before it refuses bad input
STORAGE = ("optuna", "sqlalchemy")

#: a recorded table, replayed: a sweep that measures nothing (and, on a machine with no GPU
#: runtime, neither needs torch to describe the device nor, within the sampler's start-up draws,
#: its model)
TABLE = Path(__file__).parents[1] / "benchmarks" / "data" / "matmul_decode_h200.csv"
REPLAY = ("tune", "--replay", str(TABLE),
          "--params", "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages", "--metric", "tflops",
          "--trials", "3", "--executor", "inline", "--storage", "memory")  # fmt: skip

#: in a fresh interpreter: import the CLI and, with arguments, run it; the modules loaded
#: (also where the command ends the process: :func:`autotune.process_end.end_process` runs the
#: exit handlers) are written to the file named first
SCRIPT = """
import atexit, sys
listed, args = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(listed, "w").write("\\n".join(sorted(sys.modules))))
import autotune.cli
if args:
    sys.argv = ["autotune", *args]
    autotune.cli.main()
"""


def loaded_modules(tmp_path: Path, *args: str) -> set[str]:
    """The modules a fresh ``autotune ARGS`` (with none: ``import autotune.cli``) loaded."""
    listed = tmp_path / "modules.txt"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(listed), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert listed.exists(), done.stderr
    return set(listed.read_text().split("\n"))


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        ((), ()),  # import autotune.cli
        (("--help",), ()),
        (("export", "--to", "nowhere", "--storage", "sqlite:///runs.db"), STORAGE),  # refused
        (REPLAY, (*STORAGE, "pandas", "autotune.driver.sweep")),
    ],
)
def test_the_cli_imports_no_heavy_library_a_command_does_not_use(tmp_path, args, allowed):
    if args == REPLAY and not _no_gpu_runtime():
        pytest.skip("a GPU runtime is here: torch describes the device")
    loaded = loaded_modules(tmp_path, *args)
    assert "autotune.cli" in loaded
    assert sorted(m for m in HEAVY if m in loaded and m not in allowed) == []


def test_a_sweep_of_a_workload_file_that_imports_no_torch_loads_none(tmp_path, steady_workload):
    # the note on a kernel objective that names no outputs imported the kernel objective's
    # module, and with it torch and Triton, to ask whether any workload's class derives from it
    sweep = ("tune", "steady.py", "--trials", "2", "--finish-top", "0", "--executor", "inline",
             "--storage", "memory")  # fmt: skip
    loaded = loaded_modules(tmp_path, *sweep)
    assert "autotune.sweep_setup" in loaded  # it swept: the note's check ran
    assert sorted(m for m in ("torch", "triton") if m in loaded) == []


@pytest.mark.parametrize(
    "option",
    [("--trials", "0"), ("--compile-ahead", "-1"), ("--executor", "ray", "--gpus-per-trial=-1")],
)
def test_a_run_option_a_sweep_refuses_is_refused_before_the_workload_is_imported(tmp_path, option):
    # `tune matmul --compile-ahead -1` imported the matmul objective, torch and Triton with it
    # (3 s), before it refused an option whose check needs no workload
    loaded = loaded_modules(tmp_path, "tune", "matmul", "--storage", "memory", *option)
    assert "autotune.sweep_setup" in loaded  # (the refusal's own module)
    assert sorted(m for m in ("torch", "triton", "autotune.objectives.matmul") if m in loaded) == []


def test_an_unreachable_ray_address_is_refused_before_torch_ray_or_the_workload_load(tmp_path):
    # `tune matmul --executor ray --address 127.0.0.1:1` (no one listens there) imported the
    # matmul objective, torch and Ray (5 s on an idle machine) before it refused the address
    args = ("tune", "matmul", "--storage", "memory", "--device", "cpu", "--executor", "ray",
            "--address", "127.0.0.1:1")  # fmt: skip
    listed = tmp_path / "modules.txt"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(listed), *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: --address 127.0.0.1:1: cannot reach a Ray cluster: Connection refused"
    ]
    loaded = set(listed.read_text().split("\n"))
    assert "autotune.sweep_setup" in loaded  # (the refusal's own module)
    heavy = ("torch", "triton", "ray", "autotune.objectives.matmul")
    assert sorted(m for m in heavy if m in loaded) == []
