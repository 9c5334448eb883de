"""A two-node Ray cluster simulated on this machine; one node is killed mid-sweep."""

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter

import optuna
import pytest

from autotune.driver import Sweep, SweepObserver, SweepSettings
from autotune.driver.trial_attrs import is_launched, trial_status
from autotune.space import Param, Space

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402


class KillNodeAfter(SweepObserver):
    """Removes the cluster's second node once ``after`` trials have finished."""

    def __init__(self, cluster: Cluster, node, after: int) -> None:
        self.cluster, self.node, self.after, self.done = cluster, node, after, 0
        self.capacity_after_kill = None

    def on_trial(self, record, study, counts) -> None:
        self.done += record.launched
        if self.done == self.after and self.node is not None:
            self.cluster.remove_node(self.node)
            self.node = None


def test_a_node_lost_mid_sweep_costs_its_trial_and_the_sweep_completes(tmp_path):
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": 80 * 2**20},
    )
    worker = cluster.add_node(num_cpus=1, object_store_memory=80 * 2**20)
    cluster.wait_for_nodes()
    url = f"sqlite:///{tmp_path / 'cluster.db'}"
    space = Space("d", [Param("delay", "categorical", choices=[1.5]),
                        Param("score", "float", low=0.0, high=1.0)])  # fmt: skip
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="random", n_trials=10, seed=0, storage=url, study_name="c",
        executor="ray", ray_address=cluster.address, trial_timeout_s=60,
    )  # fmt: skip
    killer = KillNodeAfter(cluster, worker, after=3)
    try:
        summary = Sweep(settings, killer).run()
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert summary.in_flight == 2  # both nodes' slots at the start
    study = optuna.load_study(study_name="c", storage=url)
    states = Counter(t.state.name for t in study.trials)
    assert states["RUNNING"] == 0 and states["WAITING"] == 0
    launched = [t for t in study.trials if is_launched(t)]
    assert len(launched) == 10  # the budget was reached on the remaining node
    statuses = Counter(trial_status(t) for t in launched)
    assert statuses["crashed"] >= 1  # the trial on the lost node, with Ray's reason
    lost = [t for t in launched if trial_status(t) == "crashed"]
    assert all("Ray worker lost" in t.user_attrs["reason"] for t in lost)
    assert statuses["ok"] == 10 - statuses["crashed"]
    # after the loss, trials ran on the head node only
    nodes = {t.user_attrs["worker"].split(" on ")[-1] for t in launched[-4:]}
    assert len(nodes) == 1


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_cluster_stopped_mid_sweep_stops_the_sweep_in_one_line_with_its_trials_told(
    tmp_path,
):
    # a `ray start` cluster of its own (a process group: killed whole, as a lost head node or
    # `ray stop` does), and the sweep in a process of its own: once its GCS is gone Ray ends
    # the process it runs in after a minute
    port = _free_port()
    ray_bin = os.path.join(os.path.dirname(sys.executable), "ray")
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    ray_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", "--port", str(port), "--num-cpus", "2",
         "--node-ip-address", "127.0.0.1", "--include-dashboard=false",
         "--disable-usage-stats", "--temp-dir", ray_dir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
    )  # fmt: skip
    space = tmp_path / "slow.yaml"
    space.write_text(
        "name: slow\nworkload: faults\nparameters:\n"
        "  fault: {type: categorical, choices: [none]}\n"
        "  delay: {type: categorical, choices: [1.5]}\n"
        "  score: {type: float, low: 0.0, high: 1.0}\n"
    )
    url = f"sqlite:///{tmp_path / 'lost.db'}"
    log = tmp_path / "sweep.log"
    try:
        deadline = time.monotonic() + 120
        while True:  # the head takes connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Ray head did not start"
                time.sleep(0.5)
        with open(log, "w") as out:
            sweep = subprocess.Popen(
                [sys.executable, "-m", "autotune.cli", "tune", "faults", "--space", str(space),
                 "--executor", "ray", "--address", f"127.0.0.1:{port}", "--trials", "40",
                 "--storage", url, "--study", "lost", "--no-cache"],
                stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
            )  # fmt: skip
            while "[2/40]" not in log.read_text():  # two trials told: the cluster works
                assert sweep.poll() is None, log.read_text()
                assert time.monotonic() < deadline + 120, log.read_text()
                time.sleep(0.2)
            os.killpg(head.pid, signal.SIGKILL)
            stopped = time.monotonic()
            rc = sweep.wait(timeout=50)  # well before Ray's own end of the process (60 s)
            took = time.monotonic() - stopped
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait()
        shutil.rmtree(ray_dir, ignore_errors=True)
    text = log.read_text()
    assert rc == 1, text
    assert "Traceback" not in text
    last = text.strip().splitlines()[-1]
    assert re.match(rf"error: the Ray cluster \(GCS [^)]+:{port}\) stopped answering", last), last
    assert took < 30
    study = optuna.load_study(study_name="lost", storage=url)
    states = Counter(t.state.name for t in study.trials)
    assert states["RUNNING"] == 0 and states["WAITING"] == 0  # every trial told
    statuses = Counter(trial_status(t) for t in study.trials)
    assert statuses["ok"] >= 2
    assert statuses["interrupted"] >= 1  # the ones in flight: measured again on resume
    assert statuses["crashed"] == 0  # not blamed on their configs
