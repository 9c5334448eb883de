"""Workloads from outside the package: a user's ``.py`` file on the command line, and a module
an installed package registers under the ``autotune.workloads`` entry points. Real sweeps in
real processes: a kernel beside the objective file, timed on the CPU."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import autotune_in_process

KERNEL = '''import torch


def chunked_sum(x: torch.Tensor, chunk: int) -> torch.Tensor:
    """The sum of x, chunk elements at a time (the "kernel" a user tunes)."""
    total = torch.zeros((), dtype=x.dtype)
    for part in x.split(chunk):
        total += part.sum()
    return total
'''

OBJECTIVE = """import time

import torch

from autotune.failures import WrongResult
from autotune.measurement import Measurement
from autotune.objectives.base import Objective
from chunked_sum import chunked_sum


class ChunkedSum(Objective):
    name = "chunked-sum"
    space = "chunked_sum.yaml"
    directions = {"gb_per_s": "maximize"}

    @classmethod
    def default_problem(cls, device):
        return {"N": 1 << 15}

    def default_config(self):
        return {"CHUNK": 64}

    def evaluate(self, config, report=None):
        x = torch.rand(int(self.problem["N"]), dtype=torch.float64)
        if not torch.allclose(chunked_sum(x, config["CHUNK"]), x.sum()):
            raise WrongResult("chunked sum differs from torch.sum")
        start = time.perf_counter()
        for _ in range(3):
            chunked_sum(x, config["CHUNK"])
        seconds = (time.perf_counter() - start) / 3
        return Measurement(values={"gb_per_s": x.numel() * 8 / seconds / 1e9})


OBJECTIVE = ChunkedSum
"""

SPACE = "parameters:\n  CHUNK: {type: pow2, low: 16, high: 16384}\n"
#: the trials of a test that is not about where they run, in the command's own process: a
#: worker process imports torch again (2-6 s on a loaded machine) for trials of milliseconds
#: (test_the_stored_command_names_the_workload_file_by_its_absolute_path and the entry
#: point's test sweep a workload file and its kernel in a worker)
INLINE = ("--executor", "inline")
BASE = "from autotune.objectives.base import Objective\nclass T(Objective):\n    name = 't'\n"


def autotune(*args: str, cwd: Path, env: dict | None = None):
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300, env=env,
    )  # fmt: skip


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "chunked_sum.py").write_text(KERNEL)
    (folder / "chunked_sum_objective.py").write_text(OBJECTIVE)
    (folder / "chunked_sum.yaml").write_text(SPACE)
    return folder


def test_a_workload_file_is_tuned_cached_and_swept_again_when_its_kernel_changes(
    workload, tmp_path
):
    url = f"sqlite:///{tmp_path / 'a.db'}"
    # run from another folder, the file named by a relative path
    args = ["tune", "mine/chunked_sum_objective.py", "--trials", "6", "--seed", "0",
            "--storage", url, "--output", "best.json", "--finish-top", "0", *INLINE]  # fmt: skip
    first = autotune(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["workload"] == str(workload / "chunked_sum_objective.py")
    assert set(best["config"]) == {"CHUNK"} and best["values"]["gb_per_s"] > 0
    assert best["study"].startswith("chunked_sum_objective-")  # the file's stem, no slashes
    assert " GB/s" in first.stderr  # gb_per_s read as a rate (its heading, on stderr)

    again = autotune(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "answering from it" in again.stderr

    # editing the kernel beside the objective changes the key: it sweeps again
    (workload / "chunked_sum.py").write_text(KERNEL + "\n# edited\n")
    edited = autotune(*args, cwd=tmp_path)
    assert edited.returncode == 0, edited.stderr
    assert "answering from it" not in edited.stderr
    assert "6 trials" in edited.stderr


def test_the_stored_command_names_the_workload_file_by_its_absolute_path(workload, tmp_path):
    # was kept as typed (mine/...), so the report's and exports' "reproduce" line failed when
    # run from another folder; an option's value is kept as typed
    args = ["tune", "--space", "mine/chunked_sum.yaml", "mine/chunked_sum_objective.py",
            "--trials", "2", "--storage", "memory", "--finish-top", "0",
            "--output", "b.json"]  # fmt: skip
    result = autotune(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    command = json.loads((tmp_path / "b.json").read_text())["command"]
    assert command == (
        f"autotune tune --space mine/chunked_sum.yaml {workload / 'chunked_sum_objective.py'}"
        " --trials 2 --storage memory --finish-top 0 --output b.json"
    )


def test_a_missing_workload_file_is_one_line(tmp_path):
    result = autotune_in_process("tune", "nowhere/objective.py", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: nowhere/objective.py: workload file not found"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("x = 1\n", "empty.py: defines no OBJECTIVE"),
        ("def broken(:\n", "empty.py: does not import: line 1: invalid syntax"),
        ("import no_such_module_here\n", "ModuleNotFoundError: No module named 'no_such_mod"),
        # a BaseException of its own (pytest.importorskip's Skipped) was a traceback, exit 1
        (
            "class Skipped(BaseException):\n    pass\nraise Skipped('needs a GPU')\n",
            "empty.py: does not import: Skipped: needs a GPU",
        ),
        ("class T:\n    pass\nOBJECTIVE = T\n", "OBJECTIVE is not a subclass of autotune."),
        (
            BASE + "    directions = {'v': 'maximize'}\nOBJECTIVE = T\n",
            "T does not define evaluate",
        ),
        (
            BASE + "    def evaluate(self, c, r=None): ...\nOBJECTIVE = T\n",
            "T.directions is not set",
        ),
        (
            BASE + "    directions = {'v': 'maximize'}\n    def evaluate(self, c, r=None): ...\n"
            "OBJECTIVE = T\n",
            "the objective names no space file; pass --space FILE.yaml",
        ),
        (
            BASE + "    directions = {'v': 'maximize'}\n    space = {'parameters': {}}\n"
            "    def evaluate(self, c, r=None): ...\nOBJECTIVE = T\n",
            "T.space is a dict; it must name a space YAML file",
        ),
    ],
)
def test_a_file_that_cannot_serve_is_one_line(tmp_path, source, message):
    (tmp_path / "empty.py").write_text(source)
    result = autotune_in_process("tune", "empty.py", cwd=tmp_path)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_a_syntax_error_in_the_kernel_file_it_imports_names_that_file(workload, tmp_path):
    # was reported against the objective file with the kernel's line number
    (workload / "chunked_sum.py").write_text(KERNEL.replace("int) -> torch.Tensor:", "int)"))
    result = autotune_in_process("tune", "mine/chunked_sum_objective.py", "--storage", "memory",
                                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2
    objective, kernel = workload / "chunked_sum_objective.py", workload / "chunked_sum.py"
    assert result.stderr.strip() == (
        f"error: {objective}: does not import: {kernel}: line 4: expected ':'"
    ), result.stderr


def test_a_space_file_of_another_workload_is_refused_for_a_workload_file(workload, tmp_path):
    # was tuned without a word: the file's objective over the rmsnorm space's names
    rmsnorm = Path(__file__).parents[2] / "search_spaces" / "rmsnorm.yaml"
    (workload / "named.yaml").write_text("workload: rmsnorm\n" + SPACE)
    for space in (str(rmsnorm), "mine/named.yaml"):
        result = autotune_in_process("tune", "mine/chunked_sum_objective.py", "--space", space,
                                     "--storage", "memory", cwd=tmp_path)  # fmt: skip
        assert result.returncode == 2
        assert result.stderr.strip() == (
            f"error: {space}: a space for workload 'rmsnorm', not for chunked-sum "
            f"({workload / 'chunked_sum_objective.py'}); pass a space of chunked-sum's parameters"
        ), result.stderr
    # a space that names the file's objective serves it
    (workload / "named.yaml").write_text("workload: chunked-sum\n" + SPACE)
    result = autotune("tune", "mine/chunked_sum_objective.py", "--space", "mine/named.yaml",
                      "--trials", "2", "--storage", "memory", "--finish-top", "0", *INLINE,
                      cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_an_installed_package_registers_a_workload_by_entry_point(workload, tmp_path):
    # an installed distribution as importlib.metadata finds one: a dist-info folder on the path
    dist = tmp_path / "site" / "chunked_sum_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: chunked-sum-plugin\nVersion: 0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[autotune.workloads]\nchunked-sum = chunked_sum_objective\n"
        # the usual module:attribute form (was 'No module named ...:OBJECTIVE'); a built-in's
        # name, which the built-in keeps (was listed as if it served)
        "chunked-attr = chunked_sum_objective:OBJECTIVE\nmatmul = chunked_sum_objective\n"
    )
    paths = [str(tmp_path / "site"), str(workload), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    listed = autotune("workloads", cwd=tmp_path, env=env)
    assert "chunked-sum  (plugin: chunked_sum_objective)\n" in listed.stdout  # no docstring
    # a plugin's line of help is its module docstring's first line (it had none at all)
    source = workload / "chunked_sum_objective.py"
    source.write_text('"""Chunked sum, a plugin.\n\nMore of it."""\n' + source.read_text())
    listed = autotune("workloads", cwd=tmp_path, env=env)
    assert "chunked-sum  Chunked sum, a plugin. (plugin: chunked_sum_objective)\n" in listed.stdout
    assert ("matmul       Chunked sum, a plugin. (plugin: chunked_sum_objective; not used: a "
            "built-in workload has its name)") in listed.stdout  # fmt: skip
    # the plugin found by its name in a worker process too (local), then inline
    for name, executor in (("chunked-sum", "local"), ("chunked-attr", "inline")):
        swept = autotune("tune", name, "--trials", "3", "--storage", "memory", "--finish-top",
                         "0", "--executor", executor, cwd=tmp_path, env=env)  # fmt: skip
        assert swept.returncode == 0, swept.stderr
        assert '"CHUNK"' in swept.stdout


def test_a_copy_of_the_rmsnorm_example_is_a_workload_of_its_own(tmp_path):
    # the README's advice, followed: copy objectives/rmsnorm.py, its kernel and its space
    # beside each other, rename, and tune the copy (Triton's interpreter on a CPU)
    root = Path(__file__).resolve().parents[2]
    folder = tmp_path / "norm"
    folder.mkdir()
    (folder / "my_norm_kernel.py").write_text((root / "kernels/rmsnorm_triton.py").read_text())
    objective = (root / "objectives/rmsnorm.py").read_text()
    for old, new in (("from autotune.kernels import rmsnorm_triton as kern",
                      "import my_norm_kernel as kern"),
                     ('name = "rmsnorm"', 'name = "my-norm"'),
                     ('space = "rmsnorm.yaml"', 'space = "my_norm.yaml"')):  # fmt: skip
        assert old in objective
        objective = objective.replace(old, new)
    (folder / "my_norm.py").write_text(objective)
    space = (root / "search_spaces/rmsnorm.yaml").read_text()
    assert "workload: rmsnorm\n" in space  # renamed with the copy: else it is refused
    (folder / "my_norm.yaml").write_text(space.replace("workload: rmsnorm", "workload: my-norm"))
    url = f"sqlite:///{tmp_path / 'n.db'}"
    swept = autotune("tune", "norm/my_norm.py", "--trials", "3", "--storage", url, *INLINE,
                     cwd=tmp_path)  # fmt: skip
    assert swept.returncode == 0, swept.stderr
    assert '"BLOCK_N"' in swept.stdout and "winner trial" in swept.stderr  # the finish ran
    exported = autotune("export", "--to", "triton", "--storage", url, cwd=tmp_path)
    assert exported.returncode == 0 and "triton.Config({'BLOCK_N'" in exported.stdout


CARELESS = (
    BASE
    + """    space = "x.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        from autotune.measurement import Measurement

        x = config["x"]
        if x == 1:
            return 1.0  # a bare number
        if x == 2:
            return Measurement(values={"v": float("nan")})
        if x == 3:
            return Measurement(values={"other": 3.0})
        if x == 4:
            raise RuntimeError("boom at x=4")
        return Measurement(values={"v": float(x)})


OBJECTIVE = T
"""
)


def test_a_careless_objective_fails_its_trials_never_the_sweep(tmp_path):
    (tmp_path / "careless.py").write_text(CARELESS)
    (tmp_path / "x.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")
    result = autotune("tune", "careless.py", "--trials", "6", "--storage", "memory",
                      "--finish-top", "0", "--output", "best.json", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    for reason in ("evaluate returned a float, not a Measurement", "objective measured v = nan",
                   "objective did not measure v", "RuntimeError: boom at x=4"):  # fmt: skip
        assert reason in result.stderr
    assert "failed: crashed 4" in result.stderr
    assert json.loads((tmp_path / "best.json").read_text())["config"] == {"x": 6}


GEN = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective
%s

class Gen(Objective):
    name, space, directions = "gen", "gen.yaml", %s
%s
    def evaluate(self, config, report=None):
        return Measurement(values={"score": float(config["a"])})


OBJECTIVE = Gen
"""
SCORE = '{"score": "maximize"}'
RAISES = "        raise RuntimeError('no such device here\\nsecond line')\n"


@pytest.mark.parametrize(
    ("before", "directions", "body", "message"),
    [
        ("", '{"s": "upward"}', "", "Gen.directions: 's': 'upward' is not 'maximize' or 'min"),
        ("", SCORE, "    @classmethod\n    def default_problem(cls, device):\n" + RAISES,
         "Gen.default_problem raised RuntimeError: no such device here"),
        ("", SCORE, "    def __init__(self, problem):\n" + RAISES,
         "Gen.__init__ raised RuntimeError: no such device here"),
        ("", SCORE, "    def default_config(self):\n        return {}['a']\n",
         "Gen.default_config raised KeyError: 'a'"),
        ("import sys\nsys.exit(4)", SCORE, "", "does not import: SystemExit: 4"),
        # os._exit(0) ended the command at once with 0: no line, no output, `&& deploy` went on
        ("import os\nos._exit(0)", SCORE, "", "does not import: SystemExit: os._exit(0)"),
    ],
)  # fmt: skip
def test_a_class_that_fails_while_the_sweep_is_set_up_is_one_line_naming_it(
    tmp_path, before, directions, body, message
):
    (tmp_path / "gen.py").write_text(GEN % (before, directions, body))
    (tmp_path / "gen.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 8}\n")
    # an import that ends its process (sys.exit, os._exit) in a process of its own: that the
    # command goes on to its one line is the point; the others in this one
    command = autotune if "exit" in before else autotune_in_process
    result = command("tune", "gen.py", "--trials", "3", "--storage", "sqlite:///r.db",
                      "--finish-top", "0", "--no-cache", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {(tmp_path / 'gen.py').resolve()}: {message}")
    assert not (tmp_path / "r.db").exists()  # refused before the storage is made


MODEL = (
    "    def default_config(self):\n        return {'a': 1}\n\n    @classmethod\n"
    "    def predict_memory(cls, problem, config):\n%s\n"
)


def test_a_memory_model_that_fails_is_one_line_or_its_trial_s_reason(tmp_path):
    (tmp_path / "gen.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 8}\n")
    args = ["tune", "gen.py", "--trials", "8", "--storage", "memory", "--finish-top", "0",
            "--no-cache", "--output", "best.json", *INLINE]  # fmt: skip
    # on the untuned default, while the sweep is set up: one line naming the file and method
    (tmp_path / "gen.py").write_text(GEN % ("", SCORE, MODEL % RAISES))
    result = autotune_in_process(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines == [
        f"error: {(tmp_path / 'gen.py').resolve()}: Gen.predict_memory raised RuntimeError:"
        " no such device here"
    ], result.stderr
    # on one config in the middle of the sweep: that config is not launched, the sweep ends
    body = "        return 'lots' if config['a'] == 5 else config['a'] * 1e6"
    (tmp_path / "gen.py").write_text(GEN % ("", SCORE, MODEL % body))
    result = autotune(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "1 rejected by constraints" in result.stderr
    assert json.loads((tmp_path / "best.json").read_text())["config"] == {"a": 8}


def test_an_inline_sweeps_close_that_raises_is_a_warning_and_a_resumes_init_one_line(tmp_path):
    # --executor inline builds the class in the driver: a close that raised ended the sweep
    # with a traceback after its trials were stored; an __init__ that raises on a resume
    # (set-up builds it only for a new study) was a traceback too
    (tmp_path / "gen.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 8}\n")
    close = "    def close(self):\n" + RAISES
    (tmp_path / "gen.py").write_text(GEN % ("", SCORE, close))
    args = ["tune", "gen.py", "--trials", "3", "--storage", "sqlite:///r.db", "--study", "s",
            "--finish-top", "0", "--no-cache", "--executor", "inline"]  # fmt: skip
    result = autotune(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "warning: " in result.stderr and "Gen.close raised RuntimeError: no such device" in (
        result.stderr
    )
    (tmp_path / "gen.py").write_text(
        GEN % ("", SCORE, "    def __init__(self, problem):\n" + RAISES)
    )
    args[3] = "5"
    result = autotune_in_process(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].endswith("Gen.__init__ raised RuntimeError: no such device here"), lines
    assert "Traceback" not in result.stderr


def test_a_local_workers_close_that_raises_is_a_warning_not_a_traceback(tmp_path):
    # in a worker process the close that raised printed 'Process SpawnProcess-1: Traceback'
    (tmp_path / "gen.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 8}\n")
    (tmp_path / "gen.py").write_text(GEN % ("", SCORE, "    def close(self):\n" + RAISES))
    result = autotune("tune", "gen.py", "--trials", "2", "--storage", "memory",
                      "--finish-top", "0", "--executor", "local", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert "warning: " in result.stderr and "Gen.close raised RuntimeError: no such device" in (
        result.stderr
    )


def test_a_workload_that_changes_folder_leaves_the_storage_and_output_where_the_user_meant(
    tmp_path,
):
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (tmp_path / "x.yaml").write_text("parameters:\n  X: {type: int, low: 1, high: 8}\n")
    chdir = f"os.chdir({str(folder)!r})\n"
    (tmp_path / "wanders.py").write_text(
        "import os\nfrom autotune.measurement import Measurement\n" + chdir + BASE
        + "    space = 'x.yaml'\n    directions = {'v': 'maximize'}\n"
        + "    def default_config(self):\n        " + chdir + "        return {'X': 1}\n"
        + "    def evaluate(self, config, report=None):\n        " + chdir
        + "        return Measurement(values={'v': float(config['X'])})\nOBJECTIVE = T\n"
    )  # fmt: skip
    for executor in ("local", "inline"):
        result = autotune("tune", "wanders.py", "--trials", "3", "--executor", executor,
                          "--storage", f"sqlite:///{executor}.db", "--output",
                          f"{executor}.json", "--finish-top", "0", cwd=tmp_path)  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert (tmp_path / f"{executor}.db").is_file()
        assert json.loads((tmp_path / f"{executor}.json").read_text())["config"]["X"] >= 1
    assert list(folder.iterdir()) == []


def test_what_a_workload_file_s_child_process_writes_in_the_driver_stays_off_stdout(tmp_path):
    # a subprocess at import and in default_config wrote into `> best.json`
    (tmp_path / "x.yaml").write_text("parameters:\n  X: {type: int, low: 1, high: 4}\n")
    echo = "subprocess.run(['echo', 'NOISE'], check=True)\n"
    (tmp_path / "noisy.py").write_text(
        "import subprocess\nfrom autotune.measurement import Measurement\n" + echo + BASE
        + "    space = 'x.yaml'\n    directions = {'v': 'maximize'}\n"
        + "    def default_config(self):\n        " + echo + "        return {'X': 1}\n"
        + "    def evaluate(self, config, report=None):\n"
        + "        return Measurement(values={'v': float(config['X'])})\nOBJECTIVE = T\n"
    )  # fmt: skip
    result = autotune("tune", "noisy.py", "--trials", "3", "--storage", "memory",
                      "--finish-top", "0", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["X"] >= 1, result.stdout
    assert result.stderr.count("NOISE") >= 2
    # --output naming stdout itself: the export record alone there, one JSON document
    result = autotune("tune", "noisy.py", "--trials", "3", "--storage", "memory",
                      "--finish-top", "0", "--output", "/dev/stdout", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["config"]["X"] >= 1, result.stdout


def test_output_on_the_space_file_the_workload_names_is_refused_and_nothing_stored(tmp_path):
    # it was overwritten by the export, and the study could not resume
    space = "parameters:\n  X: {type: int, low: 1, high: 4}\n"
    (tmp_path / "x.yaml").write_text(space)
    (tmp_path / "plain.py").write_text(
        "from autotune.measurement import Measurement\n" + BASE
        + "    space = 'x.yaml'\n    directions = {'v': 'maximize'}\n"
        + "    def evaluate(self, config, report=None):\n"
        + "        return Measurement(values={'v': float(config['X'])})\nOBJECTIVE = T\n"
    )  # fmt: skip
    result = autotune_in_process("tune", "plain.py", "--trials", "2", "--storage",
                                 "sqlite:///s.db", "--finish-top", "0", "--output", "x.yaml",
                                 cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "error: --output x.yaml: is the space file the sweep reads (writing it would destroy "
        "it); name another file"
    )
    assert (tmp_path / "x.yaml").read_text() == space and not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    ("before", "body", "message"),
    [("import time\ntime.sleep(600)", "", "its import was still running when the time budget"),
     ("import time", "    def default_config(self):\n        time.sleep(600)\n",
      "Gen.default_config was still running when the time budget ran out")],
)  # fmt: skip
def test_set_up_code_that_hangs_ends_with_the_time_budget(tmp_path, before, body, message):
    # the budget began with the sweep: a hang at import or in default_config ran for ever (a
    # process: the budget counts from its start, and an alarm signal ends the hang)
    (tmp_path / "gen.py").write_text(GEN % (before, SCORE, body))
    (tmp_path / "gen.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 8}\n")
    result = autotune("tune", "gen.py", "--time-budget", "6s", "--storage", "sqlite:///r.db",
                      "--finish-top", "0", "--no-cache", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.stderr


def test_a_budget_of_years_does_not_overflow_the_set_up_alarm(tmp_path):
    # the set-up alarm was set to the budget's end as it was: setitimer overflowed past ~3 years
    import time

    from autotune.objectives.external import before_budget_ends, load_external

    (tmp_path / "gen.py").write_text(GEN % ("", SCORE, ""))
    before_budget_ends(time.monotonic() + 1e12)
    try:
        assert load_external(str(tmp_path / "gen.py")).__name__ == "Gen"
    finally:
        before_budget_ends(None)


def test_output_on_a_module_or_included_space_the_sweep_reads_is_refused(tmp_path):
    # a kernel file beside the workload's (a built-in kernel too) was replaced by the record
    (tmp_path / "kern.py").write_text("FACTOR = 2\n")
    (tmp_path / "plain.py").write_text(
        "from autotune.measurement import Measurement\nimport kern\n" + BASE
        + "    directions = {'v': 'maximize'}\n"
        + "    def evaluate(self, config, report=None):\n"
        + "        return Measurement(values={'v': kern.FACTOR * float(config['X'])})\n"
        + "OBJECTIVE = T\n"
    )  # fmt: skip
    (tmp_path / "x.yaml").write_text("parameters:\n  X: {type: int, low: 1, high: 4}\n")
    result = autotune_in_process("tune", "plain.py", "--space", "x.yaml", "--trials", "2",
                                 "--storage", "sqlite:///s.db", "--finish-top", "0", "--output",
                                 "kern.py", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("error: --output kern.py: is the module kern, which the "
                                     "sweep runs (writing it would destroy it); name another "
                                     "file")  # fmt: skip
    assert (tmp_path / "kern.py").read_text() == "FACTOR = 2\n"
    assert not (tmp_path / "s.db").exists()
    # a space file the sweep's space includes: replaced too, and the study could not resume
    (tmp_path / "top.yaml").write_text("include:\n  - {space: x.yaml}\n")
    result = autotune_in_process("tune", "plain.py", "--space", "top.yaml", "--trials", "2",
                                 "--storage", "sqlite:///s.db", "--finish-top", "0", "--output",
                                 "x.yaml", cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "the sweep's space includes (writing it would destroy it)" in result.stderr
    assert (tmp_path / "x.yaml").read_text().startswith("parameters:")
