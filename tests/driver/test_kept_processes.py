"""A search by group's kept processes: started before the first group's share of the time budget
is counted, and the finish's own worker kept from group to group (a workload file whose worker
starts in a fraction of a second, so the processes are real and the tests cheap)."""

import os
import time
from pathlib import Path

import pytest

from autotune.driver import Sweep, SweepSettings
from autotune.driver.finish import KEPT
from autotune.driver.finish_costs import finish_reserve_s, top_that_fits
from autotune.driver.kept_processes import KeptProcesses
from autotune.grouped_sweep import share_from_now
from autotune.space import load_space

#: v = x * n, and the worker's process id
PID = """import os
from autotune.measurement import Measurement
from autotune.objectives.base import Objective


class Pid(Objective):
    name = "pid"
    space = "pid.yaml"
    directions = {"v": "maximize"}

    @classmethod
    def default_problem(cls, device):
        return {"n": 1}

    def config_keys(self):
        return ("x",)

    def default_config(self):
        return {"x": 1}

    def evaluate(self, config, report=None):
        return Measurement(values={"v": float(config["x"] * self.problem["n"])},
                           metrics={"pid": os.getpid()})


OBJECTIVE = Pid
"""


@pytest.fixture
def pid_settings(tmp_path: Path):
    """Settings of a 2-trial local sweep of the pid workload at ``n`` (a group's problem)."""
    (tmp_path / "pid.py").write_text(PID)
    (tmp_path / "pid.yaml").write_text("parameters:\n  x: {type: int, low: 1, high: 6}\n")

    def settings(n: int) -> SweepSettings:
        return SweepSettings(
            workload=str(tmp_path / "pid.py"), problem={"n": n},
            space=load_space(tmp_path / "pid.yaml"), objectives={"v": "maximize"},
            sampler="random", n_trials=2, seed=0, storage="memory", executor="local",
            device={"type": "cpu"}, warm_start="off", finish_top=1, finish_rounds=2,
        )  # fmt: skip

    return settings


def test_the_first_groups_share_is_counted_once_its_processes_and_finish_worker_are_up(
    pid_settings,
):
    """The first group's share of the time budget held its processes' start (torch, Triton and
    the device's context: 4-5 s of a 12-s share on an H100, which left it 1 trial); they start
    first, the finish's worker beside the sweep's, and the share is planned from then."""
    settings = pid_settings(1)
    deadline = time.monotonic() + 40.0
    with KeptProcesses() as kept:
        kept.replan = lambda s: share_from_now(s, deadline, 4)
        asked_from = time.monotonic()
        counts_from = kept.warm(settings, asked_from)
        executor, finisher = kept.executor(settings), kept.finish_executor(settings)
        assert executor.workers_up and finisher.workers_up  # before any trial
        assert counts_from > asked_from
        assert settings.time_budget_s == pytest.approx((deadline - counts_from) / 4)
        assert kept.warm(settings, 7.0) == 7.0  # once a command
        executor.submit(0, {"x": 2})
        assert executor.wait_any()[0].result.ok
        assert executor.workers_started == 1 and finisher.workers_started == 1


def test_each_groups_finish_measures_in_the_kept_finish_worker_and_costs_no_start(pid_settings):
    """Each group's finish started a fresh worker inside the group's share (4-5 s on an H100),
    more than a 12-s share's reserve could hold: 1 of 12 groups got a finish at a 150-s budget.
    The finish worker is kept, taken up at each group's problem as its sweep starts, so the
    finish costs no start and fits where its rounds do."""
    with KeptProcesses() as kept:
        pids = set()
        for n in (1, 10):
            settings = pid_settings(n)
            kept.warm(settings, time.monotonic())  # as the command's first sweep (run_settings)
            sweep = Sweep(settings, kept=kept)
            summary = sweep.run()
            assert sweep.finish_warm and summary.times.costs()[1] == 0.0
            rows = sweep.finish(summary.study)
            assert sweep.finish_process == KEPT
            assert rows[0].median == rows[0].config["x"] * n  # measured at its group's problem
            pids |= {t.user_attrs["metrics"]["pid"] for t in summary.study.trials}
        assert kept.finish_executor(pid_settings(1)).workers_started == 1
        assert len(pids) == 1 and os.getpid() not in pids  # one worker served both sweeps
    # a 12-s share of a GPU sweep (4.5-s worker start, 0.3-s measurements): a finish of two
    # rounds fits its reserve once the finish's worker is up, never with a fresh one's start
    times = [0.3] * 10
    warm = finish_reserve_s(3, 3, _times(times, finish_warm=True), 12.0)
    cold = finish_reserve_s(3, 3, _times(times, finish_warm=False), 12.0)
    assert top_that_fits(3, _times(times, finish_warm=True), warm - 1.0, 2) == 3
    assert cold == 1.0  # held back for the sweep's end alone: the finish skipped


def _times(durations: list[float], *, finish_warm: bool):
    from autotune.driver.finish_costs import TrialTimes

    return TrialTimes(list(durations), list(durations), worker_start_s=4.5,
                      finish_warm=finish_warm)  # fmt: skip
