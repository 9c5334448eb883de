"""A two-node Ray cluster simulated on this machine; one node is killed mid-sweep."""

import os
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
