"""Shared fixtures. GPU code paths run here on the CPU (Triton interpreter, replay)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch

# CI runs two xdist workers on the two cores, and torch's default of a thread a core put four
# spinning OpenMP threads on them: a tiny training step took 5-8 s instead of 1.2-1.5 s. One
# thread each, in this process and (through the environment) in every command the tests start;
# what the tests check does not depend on it. A thread count set for the run is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# Triton's own @jit helpers (tl.sum, tl.cdiv, ...) are decorated when triton is first imported:
# without a GPU the interpreter must be on before any test module imports triton.
if torch.cuda.device_count() == 0:
    os.environ.setdefault("TRITON_INTERPRET", "1")

# A suite started from a background job of a non-interactive shell (``nohup ... &``, as a CI
# runner may) inherits SIGINT ignored, and every command it starts inherits that too: the tests
# that stop a sweep with SIGINT, as Ctrl-C does, would see it ignored and wait forever. A
# handler here (not an ignore) is reset to the default in each command the tests start.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# and under ``nohup`` SIGHUP is ignored: the tests of a hangup (and of a sweep started under
# nohup, which ignores it itself) start from the default, as in a terminal
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)

DATA = Path(__file__).parents[1] / "benchmarks" / "data"

#: Test files that share something across processes (a Ray cluster, the PostgreSQL test
#: database, several drivers or workers on both cores, the faults table written from the whole
#: of tests/faults): under ``pytest -n 2 --dist loadgroup`` they run on one worker, one after
#: another, while the other worker takes the single-process tests.
SERIAL = (
    "tests/executors/test_ray.py",
    "tests/executors/test_ray_cluster.py",
    "tests/integrations/test_ray_tune.py",
    "tests/driver/test_scale_out.py",
    "tests/faults/",
    "tests/test_storage.py",
    "tests/test_redact.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parents[1]
    for item in items:
        path = Path(item.fspath).relative_to(root).as_posix()
        if path.startswith(SERIAL):
            item.add_marker(pytest.mark.xdist_group("serial"))


def pytest_configure(config: pytest.Config) -> None:
    """Refuse a pytest whose node ids xdist's loadgroup cannot rename: SERIAL would not hold."""
    dist = getattr(config.option, "dist", "no")
    version = tuple(int(part) for part in pytest.__version__.split(".")[:2])
    if dist == "loadgroup" and version >= (9, 2):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} breaks pytest-xdist's loadgroup (tests/conftest.py "
            "SERIAL files would run side by side); install the test extra: pytest<9.2"
        )


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


@pytest.fixture
def write_space(tmp_path: Path):
    """Write a space file from YAML text and return its path."""

    def write(text: str, name: str = "space.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


TRAIN_SPACE = """
parameters:
  micro_batch: {type: pow2, low: 1, high: 4}
  precision: {type: categorical, choices: [fp32, bf16]}
  activation_checkpointing: {type: bool}
  optimizer: {type: categorical, choices: [fused, foreach]}
constraints:
  divides_global_batch: "global_batch % micro_batch == 0"
"""
# 4 sequences x 16 tokens per optimizer step: a real training step that takes ~1 s on a CPU
TINY_TRAIN_STEP = {"vocab": 128, "d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16,
                   "global_batch": 4, "lr": 3e-3, "steps": 2, "warmup_steps": 1, "seed": 0,
                   "device": "cpu"}  # fmt: skip


@pytest.fixture
def train_step_settings(tmp_path: Path):
    """Settings of a 5-trial random-sampler sweep of a tiny CPU training step (no compile)."""
    from autotune.driver import SweepSettings
    from autotune.space import load_space

    space_file = tmp_path / "train.yaml"
    space_file.write_text(TRAIN_SPACE)

    def build(executor: str) -> SweepSettings:
        return SweepSettings(
            workload="train-step", problem=TINY_TRAIN_STEP, space=load_space(str(space_file)),
            objectives={"tokens_per_s": "maximize"}, sampler="random", n_trials=5, seed=1,
            storage="memory", executor=executor, workers=1, device={"type": "cpu"},
        )  # fmt: skip

    return build


@pytest.fixture
def one_trial_study():
    """Makes a stored study as a sweep of a workload leaves it, with one measured trial of
    the given params: what the exports read, without running the workload."""
    return _one_trial_study


def _one_trial_study(url: str, name: str, workload: str, problem: dict, params: dict,
                     objective: str, value: float):  # fmt: skip
    import optuna

    from autotune.driver.trial_attrs import STUDY

    study = optuna.create_study(study_name=name, storage=url, direction="maximize")
    study.set_user_attr(STUDY, {"workload": workload, "problem": problem,
                                "objectives": {objective: "maximize"}})  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params=params, value=value, user_attrs={"status": "ok"},
        distributions={k: optuna.distributions.CategoricalDistribution([v])
                       for k, v in params.items()},
    ))  # fmt: skip
    return study


@pytest.fixture
def until():
    """``until(check, timeout_s)``: wait for ``check()`` to hold, polling every 50 ms; whether
    it did within ``timeout_s``."""
    import time

    def wait(check, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not check():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    return wait


#: a workload whose fastest config (x=9) crashes on its third run: in the finish's second round
CRASHES_ON_ITS_THIRD_RUN = """
from pathlib import Path

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Third(Objective):
    name = "third"
    space = "third.yaml"
    directions = {"v": "maximize"}

    def evaluate(self, config, report=None):
        runs = Path(__file__).parent / f"runs-{config['x']}"
        done = int(runs.read_text()) if runs.exists() else 0
        runs.write_text(str(done + 1))
        if config["x"] == 9 and done == 2:  # the sweep, the finish's first round, then this
            raise RuntimeError("illegal memory access")
        return Measurement(values={"v": 10.0 * config["x"]})


OBJECTIVE = Third
"""


@pytest.fixture
def crashing_finish(tmp_path: Path):
    """``finish(top, rounds) -> (study, rows)``: a grid sweep of x in 1, 5, 9 (x=1 the untuned
    default) with a workload whose x=9 crashes on its third run, then its finish."""
    from autotune.driver import Sweep, SweepSettings
    from autotune.space import load_space

    def finish(top: int, rounds: int):
        (tmp_path / "third.py").write_text(CRASHES_ON_ITS_THIRD_RUN)
        space = "parameters:\n  x: {type: categorical, choices: [1, 5, 9]}\n"
        (tmp_path / "third.yaml").write_text(space)
        settings = SweepSettings(
            workload=str(tmp_path / "third.py"), problem={},
            space=load_space(tmp_path / "third.yaml"), objectives={"v": "maximize"},
            sampler="grid", n_trials=3, seed=0, storage="memory", executor="inline",
            warm_start="off", baseline={"x": 1},
        )  # fmt: skip
        sweep = Sweep(settings)
        study = sweep.run().study
        return study, sweep.finish(study, top=top, rounds=rounds)

    return finish


LOGS_EACH_MEASUREMENT = """import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Logged(Objective):
    '''Each evaluate takes 0.3 s and, once it measured, appends its x to problem's log file.'''

    name, space, directions = "logged", "logged.yaml", {"v": "maximize"}

    def __init__(self, problem):
        self.log = problem["log"]

    def evaluate(self, config, report=None):
        time.sleep(0.3)
        with open(self.log, "a") as log:
            log.write(f"{config['x']}\\n")
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Logged
"""


@pytest.fixture
def logged_workload(tmp_path: Path) -> tuple[Path, Path]:
    """``(workload file, log)``: an objective over int x whose evaluate takes 0.3 s and then
    appends x to the log file its problem names (``log=PATH``): what was measured, whatever
    the study holds."""
    (tmp_path / "logged.py").write_text(LOGS_EACH_MEASUREMENT)
    (tmp_path / "logged.yaml").write_text("parameters:\n  x: {type: int, low: 0, high: 1000000}\n")
    return tmp_path / "logged.py", tmp_path / "log.txt"


STEADY = """from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Steady(Objective):
    name = "steady"
    space = "steady.yaml"
    directions = {"v": "maximize"}

    def default_config(self):
        return {"x": 1}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Steady
"""


@pytest.fixture
def steady_workload(tmp_path: Path) -> Path:
    """``steady.py`` in ``tmp_path``, a workload file whose figure ``v`` is its config's x
    (1..6, ``steady.yaml`` beside it; x=1 the untuned default), noiseless."""
    (tmp_path / "steady.py").write_text(STEADY)
    (tmp_path / "steady.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")
    return tmp_path / "steady.py"


DROPPED_CTRL_C = '''"""Ctrl-C as CPython drops it: a real SIGINT whose handler runs inside a
weakref's callback, where the KeyboardInterrupt it raises is printed ("Exception ignored in:
...") and lost."""

import contextlib
import os
import signal
import sys
import weakref


class _Referent:
    pass


def press_ctrl_c_in_a_gc_callback() -> None:
    """Send this process a real SIGINT from inside a ``weakref.finalize`` callback, as when a
    Ctrl-C lands while the garbage collector runs one (a WeakSet's): the handler runs there and
    nothing reaches the caller."""
    referent = _Referent()
    weakref.finalize(referent, _press)
    del referent  # its last reference: the callback runs now


def _press() -> None:
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # the handler runs here at the latest (os.kill may not look)
        pass


@contextlib.contextmanager
def dropped():
    """The types of the exceptions CPython drops in the block, instead of printing them."""
    types = []
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: types.append(unraisable.exc_type)
    try:
        yield types
    finally:
        sys.unraisablehook = hook
'''


@pytest.fixture
def dropped_ctrl_c(tmp_path: Path):
    """The module ``dropped_ctrl_c`` (its ``press_ctrl_c_in_a_gc_callback()`` and
    ``dropped()``), also written to ``tmp_path`` for a workload file or a command run there to
    import."""
    import importlib.util

    path = tmp_path / "dropped_ctrl_c.py"
    path.write_text(DROPPED_CTRL_C)
    spec = importlib.util.spec_from_file_location("dropped_ctrl_c", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
