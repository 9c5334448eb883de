"""A real local Ray (2 CPUs): the executor, a sweep through it, the CLI, the missing extra."""

import contextlib
import os
import signal
import subprocess
import sys
import time

import optuna
import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.pruning import DivergencePruner
from autotune.driver.trial_attrs import WORKER, is_launched, trial_status
from autotune.executors.ray import RayExecutor
from autotune.failures import TrialStatus
from autotune.space import load_space

ray = pytest.importorskip("ray")
DATA = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "data")
PARAMS = "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages"


@pytest.fixture(scope="module")
def local_ray():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_trials_run_as_actors_and_a_crash_or_hang_costs_one_trial(local_ray):
    executor = RayExecutor(
        "faults", {}, workers=2, timeout_s=4, prune_rule=DivergencePruner.diverged
    )
    with executor:
        assert executor.capacity == 2
        executor.submit(0, {"fault": "segfault"})
        executor.submit(1, {"fault": "hang", "seconds": 60})
        finished = []
        while len(finished) < 2:
            finished += executor.wait_any()
            for _ in range(executor.free):
                executor.submit(2, {"fault": "diverge"})  # on the crashed slot's new actor
        while executor.in_flight:
            finished += executor.wait_any()
    outcome = {f.ticket: f.result for f in finished}
    assert outcome[0].status is TrialStatus.CRASHED and "Ray worker lost" in outcome[0].reason
    # how its process ended, not only that the actor died
    assert "Its worker process ended: SYSTEM_ERROR" in outcome[0].reason, outcome[0].reason
    assert "SIGSEGV" in outcome[0].reason
    assert outcome[1].status is TrialStatus.TIMEOUT and "Ray actor killed" in outcome[1].reason
    # judged inside the actor by the pruner's own rule
    assert outcome[2].status is TrialStatus.DIVERGED and "pruned at step" in outcome[2].reason


def test_a_trials_clock_starts_when_its_actor_is_built_which_has_its_own_limit(local_ray):
    # a new actor imports torch with the faults workload: seconds, where the trial takes none
    with RayExecutor("faults", {}, workers=1, timeout_s=0.5) as executor:
        executor.submit(0, {"fault": "none", "score": 3.0})
        (done,) = executor.wait_any()
    assert done.result.status is TrialStatus.OK, done.result.reason
    assert done.result.measurement.values["score"] == 3.0
    with RayExecutor("faults", {}, workers=1, start_timeout_s=0.2) as executor:
        executor.submit(0, {"fault": "none", "score": 3.0})
        (late,) = executor.wait_any()
    assert late.result.status is TrialStatus.TIMEOUT
    assert "did not start within" in late.result.reason


def test_a_trial_running_when_the_budget_ends_is_stopped_there(local_ray):
    # the Ray executor ignored the sweep's time budget: a hung trial ran to its own timeout
    import time

    with RayExecutor("faults", {}, workers=1, timeout_s=60) as executor:
        executor.end_at(time.monotonic() + 3.0)
        executor.submit(0, {"fault": "hang", "seconds": 60})
        (stopped,) = executor.wait_any()
    assert stopped.result.status is TrialStatus.INTERRUPTED
    assert "time budget ended while it ran" in stopped.result.reason


def replay_settings(executor: str, **overrides) -> SweepSettings:
    table = os.path.join(DATA, "matmul_decode_h200.csv")
    base = dict(
        workload="replay",
        problem={"table": table, "params": PARAMS.split(","), "metric": "tflops"},
        space=load_space(os.path.join(DATA, "matmul_tiled_grid.yaml")),
        objectives={"tflops": "maximize"},
        n_trials=12,
        seed=0,
        storage="memory",
        executor=executor,
        workers=1,
        device={"type": "cuda", "max_shared_memory": 232448, "name": "NVIDIA H200"},
    )
    base["problem"].update({"M": 64, "N": 4096, "K": 4096})
    return SweepSettings(**(base | overrides))


def test_a_replay_sweep_through_ray_runs_the_same_trials_as_inline(local_ray):
    def trials(executor):
        study = Sweep(replay_settings(executor)).run().study
        return [(t.params, t.values) for t in study.trials], study

    inline, _ = trials("inline")
    through_ray, study = trials("ray")
    assert through_ray == inline
    assert all(t.user_attrs[WORKER].startswith("ray actor 0 on ") for t in study.trials)


def test_a_training_step_sweep_through_ray_runs_the_same_configs_as_inline(
    local_ray, train_step_settings
):
    runs = {e: Sweep(train_step_settings(e)).run().study for e in ("inline", "ray")}
    configs = {e: [t.params for t in s.trials] for e, s in runs.items()}
    assert configs["ray"] == configs["inline"] and len(configs["ray"]) == 5
    assert all(trial_status(t) == "ok" and t.values[0] > 0 for t in runs["ray"].trials)


def test_the_cli_runs_a_sweep_through_ray(tmp_path):
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    table = os.path.join(DATA, "matmul_4096_h200.csv")
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "--replay", table, "--params", PARAMS,
         "--metric", "tflops", "--trials", "16", "--seed", "0", "--storage", url,
         "--study", "r", "--executor", "ray", "--workers", "2"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    study = optuna.load_study(study_name="r", storage=url)
    launched = [t for t in study.trials if is_launched(t)]
    assert len(launched) == 16
    assert {t.user_attrs[WORKER].split(" on ")[0] for t in launched} == {
        "ray actor 0",
        "ray actor 1",
    }
    assert study.user_attrs["last_run"]["executor"] == "ray"
    assert "| executor ray x2 |" in done.stdout + done.stderr  # the slots it ran with


KERNEL = "def work(n, step):\n    return sum(range(0, n, step))\n"
OBJECTIVE = """import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective
from stepped import work


class Stepped(Objective):
    name = "stepped"
    space = "stepped.yaml"
    directions = {"ms": "minimize"}

    @classmethod
    def default_problem(cls, device):
        return {"n": 200000}

    def evaluate(self, config, report=None):
        start = time.perf_counter()
        work(self.problem["n"], config["STEP"])
        return Measurement(values={"ms": (time.perf_counter() - start) * 1e3})


OBJECTIVE = Stepped
"""


def _run_stepped(tmp_path, *options: str, code: str | None = None):
    """``autotune tune mine/stepped_objective.py`` through Ray in ``tmp_path`` (its kernel and
    space beside it), storing study ``f``; ``code`` runs the CLI instead of its module."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "stepped.py").write_text(KERNEL)
    (folder / "stepped_objective.py").write_text(OBJECTIVE)
    (folder / "stepped.yaml").write_text("parameters:\n  STEP: {type: pow2, low: 1, high: 64}\n")
    start = ["-c", code] if code else ["-m", "autotune.cli"]
    return subprocess.run(
        [sys.executable, *start, "tune", "mine/stepped_objective.py", "--seed", "0",
         "--storage", f"sqlite:///{tmp_path / 'ray.db'}", "--study", "f", "--executor", "ray",
         *options],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip


def test_a_workload_file_runs_in_ray_actors(tmp_path):
    # each actor loads the file the sweep stored, and the kernel beside it through the file's
    # folder on its import path (a one-node cluster: the path is the same for every actor)
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    done = _run_stepped(tmp_path, "--trials", "6", "--workers", "2", "--finish-top", "0")
    assert done.returncode == 0, done.stderr[-2000:]
    study = optuna.load_study(study_name="f", storage=url)
    launched = [t for t in study.trials if is_launched(t)]
    assert len(launched) == 6 and all(trial_status(t) == "ok" for t in launched)
    assert {t.user_attrs[WORKER].split(" on ")[0] for t in launched} == {
        "ray actor 0",
        "ray actor 1",
    }


COUNT_RAY_STARTS = """
import atexit, sys
import ray
real_init, starts = ray.init, []
def counted_init(*args, **kwargs):
    starts.append(1)
    return real_init(*args, **kwargs)
ray.init = counted_init
def tell():
    print(f"RAY_STARTS {len(starts)} UP {ray.is_initialized()}", file=sys.stderr)
atexit.register(tell)
sys.argv = ["autotune"] + sys.argv[1:]
from autotune.cli import main
main()
"""


def test_one_local_ray_serves_the_sweep_and_its_finish_and_is_shut_down(tmp_path):
    # each executor started its own: the finish paid a second Ray start and shutdown (2.4 and
    # 1.3 s on 2 cores) inside the time budget, and the last shutdown ran past the budget
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    done = _run_stepped(tmp_path, "--trials", "4", "--workers", "1", "--finish-rounds", "2",
                        code=COUNT_RAY_STARTS)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    study = optuna.load_study(study_name="f", storage=url)
    assert study.user_attrs["finish"]["rounds"] == 2  # the finish measured, through Ray
    assert "RAY_STARTS 1 UP False" in done.stderr


INTERRUPTED_START = """
import atexit, sys
import ray
def interrupted_init(*args, **kwargs):
    raise KeyboardInterrupt  # Ctrl-C while Ray starts
ray.init = interrupted_init
atexit.register(lambda: print("FINALIZED", file=sys.stderr))
sys.argv = ["autotune"] + sys.argv[1:]
from autotune.cli import main
main()
"""


def test_ctrl_c_while_ray_starts_ends_the_command_at_once_with_130(tmp_path):
    # Ray 2.60's half-started core worker crashed the interpreter's finalization (exit 139 in
    # about 1 of 12 real interrupts): the process now ends before it, its line printed
    done = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_START, "tune", "faults", "--trials", "2",
         "--storage", f"sqlite:///{tmp_path / 'x.db'}", "--executor", "ray"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 130, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == "interrupted; finished trials are stored"
    assert "FINALIZED" not in done.stderr  # the exit handlers registered before were skipped


def test_a_missing_ray_extra_is_one_line_naming_the_install(tmp_path):
    """Also where the tuning cache holds the answer: the option is refused, not passed over."""
    code = (
        "import sys; sys.modules['ray'] = None; sys.argv = ['autotune'] + sys.argv[1:];"
        "from autotune.cli import main; main()"
    )
    space = "parameters:\n  fault: {type: categorical, choices: [none]}\n"
    (tmp_path / "ok.yaml").write_text(space + "  score: {type: float, low: 0, high: 1}\n")
    sweep = ["tune", "faults", "--trials", "1", "--storage", f"sqlite:///{tmp_path / 'x.db'}",
             "--space", str(tmp_path / "ok.yaml")]  # fmt: skip
    cached = subprocess.run([sys.executable, "-m", "autotune.cli", *sweep, "--executor",
                             "inline"], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert cached.returncode == 0, cached.stderr
    done = subprocess.run([sys.executable, "-c", code, *sweep, "--executor", "ray"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: --executor ray needs Ray: pip install 'autotune[ray]'"
    ]


TALKY = """
import sys
import time

from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Talky(Objective):
    name, space, directions = "talky", "talky.yaml", {"v": "maximize"}

    def evaluate(self, config, report=None):
        time.sleep(1.0)
        print("TALK on stdout")
        print("TALK on stderr", file=sys.stderr)
        return Measurement(values={"v": float(config["x"])})


OBJECTIVE = Talky
"""


def test_what_a_trial_in_a_ray_actor_prints_reaches_the_driver_s_stderr(tmp_path):
    # it reached nothing but Ray's worker logs (log_to_driver off), where the README says a
    # trial's output goes to stderr; streamed, each line once, without colour codes
    (tmp_path / "talky.py").write_text(TALKY)
    (tmp_path / "talky.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 8}\n")
    done = subprocess.run(
        [sys.executable, "-m", "autotune.cli", "tune", "talky.py", "--trials", "6",
         "--storage", "memory", "--executor", "ray", "--workers", "2", "--finish-top", "0"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "TALK" not in done.stdout
    talk = [line for line in done.stderr.splitlines() if "TALK" in line]
    assert any(line.startswith("(_TrialActor pid=") and line.endswith(") TALK on stdout")
               for line in talk), done.stderr[-2000:]  # fmt: skip
    assert any(line.endswith(" TALK on stderr") for line in talk)
    assert "\x1b[" not in done.stderr and "repeated" not in done.stderr


def test_a_command_leaves_a_ray_it_did_not_start_running_and_holds_no_time_for_it(local_ray):
    from autotune.executors.ray import command_session

    with command_session(None) as shutdown_s:
        assert shutdown_s == 0.0
        executor = RayExecutor("faults", {}, workers=1)
        executor.close()  # the executor found Ray running: it leaves it so
        assert ray.is_initialized()
    assert ray.is_initialized()


def test_an_address_that_answers_but_is_no_ray_gcs_is_refused_in_one_line_at_once(tmp_path):
    """The dashboard's port (8265, which ``ray start`` prints) or any other service given as
    --address took the TCP check, then Ray retried it for minutes, printing a warning every
    few seconds: the GCS speaks gRPC (HTTP/2) and answers a client's preface at once."""
    import http.server
    import threading
    import time

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "autotune.cli", "tune", "faults", "--executor", "ray",
             "--address", address, "--trials", "1", "--storage",
             f"sqlite:///{tmp_path / 'x.db'}"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env={**os.environ, "RAY_AUTH_MODE": "disabled"},
        )  # fmt: skip
    finally:
        server.shutdown()
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == [
        f"error: --address {address}: cannot reach a Ray cluster: it answers, but not as a "
        "Ray GCS (gRPC); give the GCS's port (6379 unless `ray start --port` set another), "
        "not the dashboard's"
    ]
    assert time.monotonic() - started < 20


HANGING = """import pathlib
import time

from autotune.objectives.base import Objective


class Hanging(Objective):
    name = "hanging"
    space = "hanging.yaml"
    directions = {"ms": "minimize"}

    def evaluate(self, config, report=None):
        pathlib.Path(MARKER).touch()  # the driver waits on its trial now
        time.sleep(600)


OBJECTIVE = Hanging
"""


def test_sigterm_to_the_process_group_ends_a_ray_sweep_as_interrupted_with_130(tmp_path):
    # `timeout 300 autotune tune faults --executor ray` while a trial hung: timeout's SIGTERM
    # reaches the process group, the local Ray's GCS with the driver, and the sweep ended
    # 'error: the Ray cluster (GCS ...) stopped answering', exit 1: its summary asked the
    # cluster for its capacity after the stop
    (tmp_path / "hanging.py").write_text(HANGING.replace("MARKER", repr(str(tmp_path / "running"))))
    (tmp_path / "hanging.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 8}\n")
    sweep = subprocess.Popen(
        [sys.executable, "-m", "autotune.cli", "tune", "hanging.py", "--trials", "2",
         "--storage", "memory", "--executor", "ray", "--workers", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
        start_new_session=True, env={**os.environ, "RAY_AUTH_MODE": "disabled"},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "running").exists() and sweep.poll() is None:
            assert time.monotonic() < deadline, "the trial never started"
            time.sleep(0.2)
        time.sleep(3)  # past the executor's 2 s of trust in the cluster's last answer
        os.killpg(sweep.pid, signal.SIGTERM)
        said, _ = sweep.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sweep.pid, signal.SIGKILL)
    assert sweep.returncode == 130, said[-2000:]
    assert "stopped answering" not in said
    last = said.strip().splitlines()[-1]  # Ctrl-C's line
    assert last.startswith("interrupted") and last.endswith("; finished trials are stored")
