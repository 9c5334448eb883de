"""The tuning cache: the same sweep answers at once; any change of its key sweeps again."""

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from autotune.tuning_cache import _sha, fingerprint, source_hash, source_modules
from tests.cli_in_process import Ran, autotune_in_process

DEVICE = {"type": "cuda", "name": "NVIDIA H200", "compute_capability": "9.0",
          "driver": "580.159.04", "software": {"torch": "2.11.0", "triton": "3.6.0"}}  # fmt: skip
PROBLEM = {"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}


def key(**changes):
    args = {"workload": "matmul", "problem": PROBLEM, "device": DEVICE, "source": "abc",
            "objectives": {"ratio_to_cublas": "maximize"}} | changes  # fmt: skip
    return fingerprint(**args)["key"]


def test_the_key_changes_with_anything_the_answer_depends_on():
    assert key() == key()
    assert key(problem={**PROBLEM, "M": 64}) != key()
    assert key(device={**DEVICE, "name": "NVIDIA H100 80GB HBM3"}) != key()
    assert key(device={**DEVICE, "software": {"torch": "2.11.0", "triton": "3.7.1"}}) != key()
    assert key(source="abd") != key()  # the kernel or the objective was edited
    assert key(objectives={"tflops": "maximize"}) != key()
    # the first objective picks the best config: a,b and b,a answered each other's sweeps
    two = {"tokens_per_s": "maximize", "peak_memory_gb": "minimize"}
    assert key(objectives=two) != key(objectives=dict(reversed(two.items())))
    # telemetry and the optuna version do not change what is fastest
    assert key(device={**DEVICE, "telemetry": {"power_w": 80}}) == key()


def test_the_key_changes_with_the_slo_and_the_contents_of_a_file_the_problem_names(tmp_path):
    """A stricter --slo, or the same trace path holding other requests, is another sweep."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"arrival": 0, "prompt_len": 20, "output_len": 8}\n')
    with_trace = {**PROBLEM, "trace": str(trace)}
    first = key(problem=with_trace)
    assert key(problem=with_trace) == first
    assert key(problem=with_trace, slo={"ttft_p99_ms": 500.0}) != first
    trace.write_text('{"arrival": 0, "prompt_len": 200, "output_len": 40}\n')
    assert key(problem=with_trace) != first
    assert key(slo={}) == key()  # no --slo: the key of a sweep stored before it counted


def test_a_large_named_file_is_keyed_without_reading_it_whole(tmp_path, monkeypatch):
    """A checkpoint past the whole-file limit: keyed by its size, time and ends; a change at
    either end or in its size changes the key."""
    import autotune.tuning_cache as cache

    monkeypatch.setattr(cache, "WHOLE_FILE_BYTES", 4 * cache._EDGE_BYTES)
    checkpoint = tmp_path / "model.bin"
    checkpoint.write_bytes(bytes(6 * cache._EDGE_BYTES))
    named = {**PROBLEM, "checkpoint": str(checkpoint)}
    first = key(problem=named)
    assert key(problem=named) == first
    with checkpoint.open("r+b") as f:
        f.seek(-1, 2)
        f.write(b"x")  # the last byte
    assert key(problem=named) != first


def test_the_source_covers_the_objective_its_kernels_and_the_space(tmp_path):
    names = [m.__name__ for m in source_modules("matmul")]
    assert "autotune.objectives.matmul" in names and "autotune.kernels.matmul_triton" in names
    assert "autotune.kernels.rmsnorm_triton" in [m.__name__ for m in source_modules("rmsnorm")]
    space = tmp_path / "narrow.yaml"
    space.write_text("parameters:\n  BLOCK_M: {type: pow2, low: 16, high: 64}\n")
    assert source_hash("matmul") != source_hash("matmul", str(space))
    assert source_hash("matmul") != source_hash("rmsnorm")


def test_the_source_covers_the_files_a_space_includes_at_any_depth(tmp_path, write_space):
    """An edit to an included space file (its ranges, here) is another sweep: only the top
    file's text was hashed, and the cache answered a config outside the space it now reads."""
    top = write_space("name: top\ninclude:\n  - {space: mid.yaml}\n", "top.yaml")
    write_space("name: mid\ninclude:\n  - {space: sub.yaml}\n", "mid.yaml")
    sub = write_space("name: sub\nparameters:\n  score: {type: int, low: 1, high: 4}\n",
                      "sub.yaml")  # fmt: skip
    first = source_hash("faults", str(top))
    assert source_hash("faults", str(top)) == first
    sub.write_text("name: sub\nparameters:\n  score: {type: int, low: 100, high: 104}\n")
    assert source_hash("faults", str(top)) != first
    # a space of no includes keeps its hash: the keys of sweeps stored before stay valid
    plain = write_space("parameters:\n  score: {type: int, low: 1, high: 4}\n", "plain.yaml")
    modules = "\n".join(Path(m.__file__).read_text() for m in source_modules("faults"))
    assert source_hash("faults", str(plain)) == _sha(modules + "\n" + plain.read_text())


def test_the_source_follows_imports_through_modules_and_into_functions():
    # matmul_triton's own imports: its kernels call tma's and split_k_workspace's helpers
    matmul = {m.__name__ for m in source_modules("matmul")}
    assert {"autotune.kernels.tma", "autotune.kernels.split_k_workspace"} <= matmul
    # the serving model imports its Triton kernels inside its methods, and the objective its
    # scheduler from a module of its own: a change to any of them changes what is fastest
    serving = {m.__name__ for m in source_modules("serving")}
    assert {
        "autotune.kernels.paged_attention_triton",
        "autotune.kernels.quant_matmul_triton",
        "autotune.kernels.rmsnorm_triton",
        "autotune.kernels.paged_kv",
        "autotune.objectives.serving_engine",
    } <= serving
    # the workload registry (the packages' __init__) is left out: a new workload changes no
    # answer, and the replay workload (it reads a table) depends on no kernel
    assert "autotune.objectives" not in serving and "autotune.kernels" not in serving
    assert {m.__name__ for m in source_modules("replay")} == {
        "autotune.objectives.replay",
        "autotune.objectives.replay_rows",
        "autotune.objectives.replay_space",
        "autotune.objectives.replay_table",
        "autotune.objectives.base",
    }


RELATIVE_OBJECTIVE = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective
from relkernels.kern import compute


class T(Objective):
    name = "t"
    space = "s.yaml"
    directions = {"score": "maximize"}

    @classmethod
    def default_problem(cls, device):
        return {"n": 4}

    def evaluate(self, config, report=None):
        return Measurement(values={"score": compute(config["a"])})


OBJECTIVE = T
"""


def test_the_source_follows_relative_imports_inside_a_workload_package(tmp_path, monkeypatch):
    """A kernel package the workload file imports, whose modules import each other relatively
    (``from .helpers import f``, ``from . import x``, ``from ..y import z``): an edit to any
    of them is another sweep (relative imports were skipped, and the old answer came back)."""
    package = tmp_path / "relkernels"
    (package / "ops").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "kern.py").write_text(
        "from . import consts\nfrom .helpers import factor\n"
        "def compute(a):\n    return float(a * factor * consts.K)\n"
    )
    (package / "helpers.py").write_text("from .ops.scale import scale\nfactor = scale(1)\n")
    (package / "consts.py").write_text("K = 1\n")
    (package / "ops" / "__init__.py").write_text("")
    (package / "ops" / "scale.py").write_text("from ..consts import K\ndef scale(x):\n"
                                              "    return x * K\n")  # fmt: skip
    (tmp_path / "s.yaml").write_text("parameters:\n  a: {type: int, low: 1, high: 4}\n")
    workload = tmp_path / "obj.py"
    workload.write_text(RELATIVE_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n.split(".")[0] == "relkernels"]:
        monkeypatch.delitem(sys.modules, name)
    try:
        names = {m.__name__ for m in source_modules(str(workload))}
        assert {"relkernels.kern", "relkernels.helpers", "relkernels.consts",
                "relkernels.ops.scale"} <= names  # fmt: skip
        first = source_hash(str(workload))
        (package / "helpers.py").write_text("from .ops.scale import scale\nfactor = scale(-1)\n")
        assert source_hash(str(workload)) != first
    finally:  # the package's modules stay this test's own
        for name in [n for n in sys.modules if n.split(".")[0] == "relkernels"]:
            del sys.modules[name]


SIBLING_OBJECTIVE = """import math

import numpy

from autotune.measurement import Measurement
from autotune.objectives.base import Objective
from sibkernels.kern import compute


class T(Objective):
    name = "t"
    space = "s.yaml"
    directions = {"score": "maximize"}

    def evaluate(self, config, report=None):
        return Measurement(values={"score": compute(config["a"]) + math.pi * numpy.e})


OBJECTIVE = T
"""


def test_the_source_follows_imports_into_the_user_s_code_outside_the_workload_s_folder(
    tmp_path, monkeypatch
):
    """A project of workloads/obj.py and kernels in a package beside that folder (on the path
    by PYTHONPATH, an editable install or sys.path): an edit to the kernel is another sweep
    (the cache answered the stale config, 'tuned this workload's source ... already'); an
    installed library (numpy, torch), the standard library and autotune's own modules but its
    kernels and objectives are no part of the source."""
    package = tmp_path / "sibkernels"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kern.py").write_text(
        "import torch\nfrom .helpers import factor\ndef compute(a):\n    return float(a * factor)\n"
    )
    (package / "helpers.py").write_text("factor = 1\n")
    (tmp_path / "workloads").mkdir()
    (tmp_path / "workloads" / "s.yaml").write_text(
        "parameters:\n  a: {type: int, low: 1, high: 4}\n"
    )
    workload = tmp_path / "workloads" / "obj.py"
    workload.write_text(SIBLING_OBJECTIVE)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n.split(".")[0] == "sibkernels"]:
        monkeypatch.delitem(sys.modules, name)
    try:
        names = {m.__name__ for m in source_modules(str(workload))}
        assert {"sibkernels.kern", "sibkernels.helpers"} <= names, names
        others = {n for n in names if not n.startswith(("sibkernels", "autotune_workload_"))}
        assert others <= {"autotune.objectives.base"}, others  # no library, no stdlib
        first = source_hash(str(workload))
        (package / "helpers.py").write_text("factor = -1\n")
        assert source_hash(str(workload)) != first
    finally:  # the package's modules stay this test's own
        for name in [n for n in sys.modules if n.split(".")[0] == "sibkernels"]:
            del sys.modules[name]


def tune(url: str, space, *extra: str, finish_top: int = 0):
    """``autotune tune faults`` of 3 trials (``extra`` may ask for others), without a finish
    unless ``finish_top`` asks for one."""
    return subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "faults", "--trials", "3", "--seed", "0",
         "--finish-top", str(finish_top), "--executor", "inline", "--storage", url, "--space",
         str(space), *extra],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip


def tune_answered(url: str, space, *extra: str, finish_top: int = 0) -> Ran:
    """``tune`` run in this process: for a command the cache answers or refuses, which ends
    before any trial (no process start, no torch import of its own)."""
    return autotune_in_process("tune", "faults", "--trials", "3", "--seed", "0", "--finish-top",
                               str(finish_top), "--executor", "inline", "--storage", url,
                               "--space", str(space), *extra)  # fmt: skip


#: the space of the sweep ``swept_once`` stores
SCORE = "parameters:\n  score: {type: float, low: 0, high: 1}\n"


@pytest.fixture(scope="module")
def swept_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``tune`` over SCORE (3 trials, the default sampler), swept once for the tests that
    start from it: its storage (each test takes a copy) and its stdout."""
    folder = tmp_path_factory.mktemp("swept")
    (folder / "space.yaml").write_text(SCORE)
    first = tune(f"sqlite:///{folder / 'cache.db'}", folder / "space.yaml")
    assert first.returncode == 0, first.stderr
    return folder / "cache.db", first.stdout


def copy_of(swept: tuple[Path, str], tmp_path: Path) -> str:
    """A copy of ``swept_once``'s storage in ``tmp_path``: its URL."""
    shutil.copyfile(swept[0], tmp_path / "cache.db")
    return f"sqlite:///{tmp_path / 'cache.db'}"


def test_a_repeated_sweep_answers_from_the_cache_at_once(tmp_path, write_space, swept_once):
    url = copy_of(swept_once, tmp_path)  # the first sweep, stored
    space = write_space(SCORE)  # the same space in another file: the same key
    again = tune_answered(url, space)
    assert again.returncode == 0, again.stderr
    assert "cached: study faults-" in again.stderr and "best config" in again.stderr
    assert json.loads(again.stdout) == json.loads(swept_once[1])  # the config, alone
    assert len(optuna.get_all_study_names(url)) == 1  # nothing ran
    assert tune(url, space, "--no-cache").returncode == 0
    other = write_space("parameters:\n  score: {type: float, low: 0, high: 2}\n", "other.yaml")
    assert "cached" not in tune(url, other).stderr  # another space: another key
    assert len(optuna.get_all_study_names(url)) == 3


def test_another_sampler_or_more_trials_than_the_stored_sweep_ran_is_another_sweep(
    tmp_path, write_space, swept_once
):
    url = copy_of(swept_once, tmp_path)  # 3 trials, the default sampler
    space = write_space(SCORE)
    tpe = tune(url, space, "--sampler", "tpe")
    assert tpe.returncode == 0 and "cached" not in tpe.stderr, tpe.stderr
    assert "cached: study faults-" in tune_answered(url, space, "--sampler", "tpe").stderr
    more = tune(url, space, "--trials", "5")
    assert more.returncode == 0 and "cached" not in more.stderr, more.stderr
    fewer = tune_answered(url, space, "--trials", "4")  # the 5-trial sweep answers for 4
    assert "cached: study faults-" in fewer.stderr
    assert len(optuna.get_all_study_names(url)) == 3
    # a sweep that measured its whole (2-config) space answers any number of trials
    small = write_space("parameters:\n  score: {type: categorical, choices: [0.5, 1.0]}\n",
                        "small.yaml")  # fmt: skip
    assert tune(url, small, "--trials", "5").returncode == 0
    assert "cached: study faults-" in tune_answered(url, small, "--trials", "50").stderr


BOUNDED_OBJECTIVE = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Bounded(Objective):
    name = "bounded"
    space = "bounded.yaml"
    directions = {"score": "maximize"}

    @classmethod
    def default_problem(cls, device):
        return {"n": 8}

    def default_config(self):
        return {"a": 1}

    def evaluate(self, config, report=None):
        return Measurement(values={"score": float(config["a"])})


OBJECTIVE = Bounded
"""


def test_a_sweep_answers_only_as_many_trials_as_it_launched(tmp_path):
    """A sweep of 3 trials whose warm start's config (a=8, from the n=8 sweep) broke the
    constraint launched 3 and stored 4: it answered an ask for 4 trials. The stored sweep's
    launched trials count, as --trials counts them."""
    (tmp_path / "bounded.py").write_text(BOUNDED_OBJECTIVE)
    (tmp_path / "bounded.yaml").write_text(
        "parameters:\n  a: {type: int, low: 1, high: 8}\nconstraints:\n  fits: a <= n\n"
    )
    url = f"sqlite:///{tmp_path / 'cache.db'}"

    def tune_bounded(n: int, trials: int, answered: bool = False) -> str:
        args = ["tune", str(tmp_path / "bounded.py"), "--problem", f"n={n}", "--trials",
                str(trials), "--seed", "0", "--finish-top", "0", "--executor", "inline",
                "--storage", url]  # fmt: skip
        if answered:  # the cache answers: it ends before a trial, run in this process
            done = autotune_in_process(*args)
        else:
            done = subprocess.run([sys.executable, "-m", "autotune.cli", *args],
                                  capture_output=True, text=True, timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stderr

    assert "cached" not in tune_bounded(8, 3)
    rejected = tune_bounded(4, 3)
    assert "3 launched" in rejected and "1 rejected by constraints" in rejected, rejected
    more = tune_bounded(4, 4)
    assert "cached" not in more and "4 launched" in more, more
    assert "cached: study bounded-" in tune_bounded(4, 4, answered=True)
    assert len(optuna.get_all_study_names(url)) == 3


def test_a_repeat_answered_from_the_study_is_no_launched_trial_for_the_cache():
    from autotune.driver.trial_attrs import LAST_RUN, REPEAT_OF, STATUS, STUDY
    from autotune.tuning_cache import cached_study

    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, direction="maximize")
    study.set_user_attr(STUDY, {"fingerprint": {"key": "k"}, "objectives": {"s": "maximize"}})
    study.set_user_attr(LAST_RUN, {"stopped_by": "trials"})
    for attrs in ({STATUS: "ok"}, {STATUS: "ok", REPEAT_OF: 0}, {STATUS: "ok"}):
        study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs=attrs))
    assert cached_study(storage, "k", trials=2).study_name == study.study_name
    assert cached_study(storage, "k", trials=3) is None  # 3 trials stored, 2 launched


SLOW = """name: slow
workload: faults
parameters:
  fault: {type: categorical, choices: [none]}
  score: {type: float, low: 0.0, high: 1.0}
  delay: {type: categorical, choices: [0.4]}
"""


def test_a_sweep_stopped_part_way_is_not_an_answer(tmp_path, write_space):
    """SIGTERM after 2 of 12 trials: the same command sweeps again instead of answering from
    the stopped sweep; once a sweep ran to its budget, the next one answers from it."""
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    space = write_space(SLOW)
    command = [sys.executable, "-m", "autotune.cli", "tune", "faults", "--trials", "12",
               "--seed", "0", "--finish-top", "0", "--executor", "inline", "--storage", url,
               "--space", str(space)]  # fmt: skip
    stopped = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # its progress lines, not the database, say how far it is: opening the database while the
    # sweep creates its tables races the sweep's own schema set-up
    for line in stopped.stderr:
        if line.startswith("[2/"):
            break
    stopped.send_signal(signal.SIGTERM)
    stopped.communicate(timeout=120)
    assert stopped.returncode == 130
    finished = optuna.load_study(study_name=optuna.get_all_study_names(url)[0], storage=url)
    assert 2 <= sum(t.value is not None for t in finished.trials) < 12
    again = subprocess.run(command[:6] + ["3"] + command[7:], capture_output=True, text=True,
                           timeout=180)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "cached" not in again.stderr  # swept: the stopped sweep answers nothing
    assert len(optuna.get_all_study_names(url)) == 2
    third = autotune_in_process(*command[3:6], "3", *command[7:])  # answered: no trial
    assert third.returncode == 0, third.stderr
    assert "cached: study faults-" in third.stderr  # the sweep that ran to its budget
    assert len(optuna.get_all_study_names(url)) == 2


def test_a_workload_folder_holding_an_environment_keys_its_own_modules_only(tmp_path, monkeypatch):
    # a project folder with its virtual environment inside: torch lies under the folder, but
    # is a library, not the user's kernel; a module of the project's own is keyed
    from autotune.tuning_cache import _lies_in

    environment_parent = Path(sys.prefix).resolve().parent
    assert not _lies_in("torch", environment_parent)
    (tmp_path / "my_kernel_module_xyz.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _lies_in("my_kernel_module_xyz", tmp_path)


@pytest.mark.parametrize("value", ["garbage", [1, 2], None, {"fingerprint": "x"}, 7])
def test_a_study_whose_records_are_not_records_is_passed_over_by_the_cache_and_warm_start(
    value,
):
    from autotune.driver.trial_attrs import LAST_RUN, STUDY
    from autotune.driver.warm_start import most_similar_study
    from autotune.tuning_cache import cached_study

    storage = optuna.storages.InMemoryStorage()
    odd = optuna.create_study(storage=storage, study_name="odd")
    odd.set_user_attr(STUDY, value)  # written by another tool, or damaged
    odd.set_user_attr(LAST_RUN, value)
    odd.add_trial(optuna.trial.create_trial(value=1.0))
    assert cached_study(storage, "some key") is None
    assert most_similar_study(storage, "matmul", {"M": 1}, None) is None


def test_a_sweep_its_time_budget_stopped_answers_no_longer_budget(tmp_path, write_space):
    # a 6-s smoke test of 2 trials answered every later --time-budget 30s (or 1h) at once
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    space = write_space(SLOW)  # 0.4-s trials
    command = [sys.executable, "-m", "autotune.cli", "tune", "faults", "--seed", "0",
               "--finish-top", "0", "--executor", "inline", "--storage", url,
               "--space", str(space), "--time-budget"]  # fmt: skip

    def tune_for(budget: str, *extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run([*command, budget, *extra], capture_output=True, text=True,
                              timeout=180)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    # budgets that leave trials to run on a loaded machine, whose set-up alone can take 5 s
    short = tune_for("12s")
    assert "cached" not in short.stderr and "stopped by time" in short.stderr
    # longer: swept again (its one trial ends it early; the stored sweep launched at least
    # one, so only the longer budget keeps the cache from answering)
    longer = tune_for("16s", "--trials", "1")
    assert "cached" not in longer.stderr and "stopped by trials" in longer.stderr, longer.stderr
    assert "cached: study faults-" in tune_for("12s").stderr  # covered by either
    assert len(optuna.get_all_study_names(url)) == 2


def test_a_sweep_stopped_in_its_finish_is_not_an_answer(tmp_path, write_space):
    """SIGTERM while the finish re-measures the top configs (after the sweep's 2 trials): the
    same command answered from the stored sweep as if finished, its winner a single reading;
    it sweeps again, saying which study matched and how to run only its finish, and that
    resume (no trial, the finish alone) makes the study an answer."""
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    space = write_space(SLOW)
    command = [sys.executable, "-m", "autotune.cli", "tune", "faults", "--trials", "2",
               "--seed", "0", "--finish-top", "1", "--executor", "inline", "--storage", url,
               "--space", str(space)]  # fmt: skip
    stopped = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in stopped.stderr:  # the sweep's end: its finish (6 readings of 0.4 s) comes next
        if line.startswith("done:"):
            break
    stopped.send_signal(signal.SIGTERM)
    stopped.communicate(timeout=120)
    assert stopped.returncode == 130
    name = optuna.get_all_study_names(url)[0]
    assert "finish" not in optuna.load_study(study_name=name, storage=url).user_attrs
    again = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stderr
    assert "cached" not in again.stderr and "finish: the top configs" in again.stderr
    assert f"note: study {name} swept this already but was stopped in its finish" in again.stderr
    assert len(optuna.get_all_study_names(url)) == 2
    resume = [*command[:7], "--study", name, *command[7:]]  # what the note suggests
    resumed = subprocess.run(resume, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert "done: 0 trials" in resumed.stderr and "finish: the top configs" in resumed.stderr
    from autotune.driver.trial_attrs import stored_finish
    from autotune.tuning_cache import cached_study

    study = optuna.load_study(study_name=name, storage=url)
    assert stored_finish(study.user_attrs)["rows"]  # the finish ran, and is stored
    key = study.user_attrs["autotune"]["fingerprint"]["key"]
    assert cached_study(optuna.storages.RDBStorage(url), key, trials=2) is not None


def test_a_finish_asked_for_and_not_run_keeps_its_study_from_answering():
    from autotune.driver.trial_attrs import (
        FINISH_ASKED,
        FINISH_SKIPPED,
        LAST_RUN,
        STATUS,
        STUDY,
        mark_finish,
    )
    from autotune.tuning_cache import cached_study

    storage = optuna.storages.InMemoryStorage()
    study = optuna.create_study(storage=storage, direction="maximize")
    study.set_user_attr(STUDY, {"fingerprint": {"key": "k"}, "objectives": {"s": "maximize"}})
    study.set_user_attr(LAST_RUN, {"stopped_by": "trials", "finish": FINISH_ASKED})
    study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={STATUS: "ok"}))
    unfinished = []
    assert cached_study(storage, "k", unfinished=unfinished) is None
    assert [s.study_name for s in unfinished] == [study.study_name]
    mark_finish(study, FINISH_SKIPPED)  # the time budget left no room for it: as far as asked
    assert cached_study(storage, "k").study_name == study.study_name
    assert study.user_attrs[LAST_RUN]["stopped_by"] == "trials"  # the rest kept


def test_a_study_resumed_by_another_sampler_answers_for_neither(tmp_path, write_space):
    """A 3-trial sweep by the default sampler, resumed to 5 by random search, kept "sampler":
    "auto" in its record: a later --sampler auto of 5 trials answered from the partly random
    study. Its record names both samplers, and neither ask is answered from it; the export
    and the report reproduce it by both runs' commands, the password of neither kept."""
    from autotune.export import export_text
    from autotune.report import report_html

    url = f"sqlite:///{tmp_path / 'cache.db'}"
    space = write_space("parameters:\n  score: {type: float, low: 0, high: 1}\n")
    assert tune(url, space, "--study", "mixed").returncode == 0
    resumed = tune_answered(url, space, "--study", "mixed", "--trials", "5", "--sampler",
                            "random", "--problem", "command=srv --password hunter2")  # fmt: skip
    assert resumed.returncode != 0  # a problem the study did not store: refused, not recorded
    resumed = tune(url, space, "--study", "mixed", "--trials", "5", "--sampler", "random")
    assert resumed.returncode == 0, resumed.stderr
    for sampler in ("auto", "random"):
        again = tune(url, space, "--trials", "5", "--sampler", sampler)
        assert again.returncode == 0 and "cached" not in again.stderr, again.stderr
    study = optuna.load_study(study_name="mixed", storage=url)
    assert study.user_attrs["autotune"]["samplers"] == ["auto", "random"]
    runs = study.user_attrs["autotune"]["commands"]
    assert len(runs) == 2 and "--trials 5 --sampler random" in runs[1]
    assert "--study mixed" in runs[0] and "--sampler" not in runs[0]
    assert json.loads(export_text(study, "json"))["command"] == "; ".join(runs)
    assert "; ".join(runs) in export_text(study, "triton")
    assert f"reproduce: <code>{'; '.join(runs)}</code>" in report_html(study)


def test_a_resume_by_the_same_command_adds_no_run_and_keeps_passwords_out(tmp_path):
    from autotune.driver.study_setup import open_study
    from autotune.space import load_space
    from autotune.storage import open_storage

    storage = open_storage(f"sqlite:///{tmp_path / 'r.db'}")

    def resume(command: str):
        from autotune.driver import SweepSettings

        settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
                                 objectives={"score": "maximize"}, study_name="s",
                                 warm_start="off", command=command)  # fmt: skip
        return stored_record(open_study(settings, storage, in_flight=1))

    def stored_record(study):
        return study.user_attrs["autotune"]

    first = resume("autotune tune faults --study s --trials 3")
    assert "commands" not in first  # one run: its command, as before
    again = resume("autotune tune faults --study s --trials 3")  # after a stop, say
    assert again["command"] == first["command"] and "commands" not in again
    url = "autotune tune --study s --storage postgresql://bob:hunter2@db/x --trials 9"
    later = resume(url)
    assert later["command"] == (
        "autotune tune faults --study s --trials 3; autotune tune "
        "--study s --storage postgresql://bob:***@db/x --trials 9"
    )
    assert "hunter2" not in json.dumps(later)


def test_a_sweep_run_without_a_finish_does_not_answer_one_that_asks_for_it(tmp_path, write_space):
    # a --finish-top 0 smoke test answered the real run, its best a single noisy reading
    url = f"sqlite:///{tmp_path / 'cache.db'}"
    space = write_space("parameters:\n  score: {type: categorical, choices: [0.2, 0.4]}\n")

    def tune_finishing(top: int, answered: bool = False) -> subprocess.CompletedProcess | Ran:
        run = tune_answered if answered else tune  # answered from the cache: in this process
        done = run(url, space, "--trials", "2", "--finish-rounds", "2", finish_top=top)
        assert done.returncode == 0, done.stderr
        return done

    assert "cached" not in tune_finishing(0).stderr
    asked = tune_finishing(2)
    assert "cached" not in asked.stderr and "finish:" in asked.stderr, asked.stderr
    # the finished one answers, and an ask for none
    assert "cached: study faults-" in tune_finishing(2, answered=True).stderr
    assert "cached: study faults-" in tune_finishing(0, answered=True).stderr
    assert len(optuna.get_all_study_names(url)) == 2


def test_tune_walks_the_workloads_modules_once_at_start(tmp_path, write_space):
    # the walk (each module's source parsed for its imports) ran for the cache's key and again
    # for the files --output must not overwrite
    space = write_space("parameters:\n  score: {type: float, low: 0, high: 1}\n")
    counted = (
        "import sys, autotune.tuning_cache as cache\n"
        "walk = cache.source_modules\n"
        "def counted(workload):\n"
        "    print('walked', file=sys.stderr)\n"
        "    return walk(workload)\n"
        "cache.source_modules = counted\n"
        "from autotune.cli import main\n"
        "sys.argv[0] = 'autotune'\n"
        "main()\n"
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", counted, "tune", "faults", "--trials", "1", "--finish-top", "0",
         "--executor", "inline", "--storage", "memory", "--space", str(space)],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("walked\n") == 1, done.stderr
