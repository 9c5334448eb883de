import dataclasses

from autotune.driver import Sweep, SweepSettings
from autotune.driver.finish_costs import TrialTimes, finish_reserve_s, top_that_fits
from autotune.space import Param, Space


def _faults_sweep(choices: dict, baseline: dict | None = None, executor: str = "inline",
                  n_trials: int = 2):  # fmt: skip
    space = Space("d", [Param(name, "categorical", choices=values)
                        for name, values in choices.items()])  # fmt: skip
    settings = SweepSettings(
        workload="faults", problem={}, space=space, objectives={"score": "maximize"},
        sampler="grid", n_trials=n_trials, storage="memory", executor=executor,
        warm_start="off", baseline=baseline,
    )  # fmt: skip
    return Sweep(settings).run()


def test_the_finish_is_costed_by_the_trials_that_ran_to_their_end():
    # one slow config among failures that end at once: a median over every trial would cost a
    # finish measurement at nothing, and reserve too little of a time budget for it
    summary = _faults_sweep({"fault": ["none", "exception"], "delay": [0.2]})
    times = summary.times
    assert len(times.durations) == 2 and len(times.complete) == 1
    assert times.complete[0] >= 0.2 > min(times.durations)
    reserve = finish_reserve_s(3, 3, times, 100.0)
    assert reserve >= 4 * 3 * 0.2  # (top 3 + the default) x 3 rounds at the slow trial's time


def test_the_finish_reserve_counts_the_default_at_what_its_own_trial_took():
    # a default over the SLO serves slowly: costed at the median trial, three finish rounds
    # did not fit the reserve (the H100 serving sweep of session 48 got two)
    summary = _faults_sweep({"fault": ["none"], "delay": [0.3, 0.0, 0.001, 0.002]},
                            baseline={"fault": "none", "delay": 0.3}, n_trials=4)  # fmt: skip
    times = summary.times
    assert times.reference_s is not None and times.reference_s >= 0.3
    assert times.reference_first and times.durations[0] == times.reference_s
    assert finish_reserve_s(3, 3, times, 100.0) >= 3 * 0.3 + 1  # 3 rounds of the default
    at_median = dataclasses.replace(times, reference_s=None, reference_first=False)
    assert finish_reserve_s(3, 3, at_median, 100.0) < 3 * 0.3 + 1
    assert top_that_fits(3, at_median, 0.5, 2) == 3  # 0.5 s: not 2 of the default
    assert top_that_fits(3, times, 0.5, 2) == 0


def test_a_local_worker_s_start_is_measured_and_carried_to_the_finish_s_cost():
    summary = _faults_sweep({"fault": ["none"], "delay": [0.0, 0.001]}, executor="local")
    start = summary.times.worker_start_s
    assert start is not None and 0 < start <= summary.times.durations[0]  # spawn, imports
    assert summary.study.user_attrs["last_run"]["worker_start_s"] == round(start, 3)


def test_a_default_stopped_early_as_the_first_trial_does_not_hide_the_worker_s_start():
    # the H100 serving sweep of session 51: the default, over the SLO, was stopped 1.8 s into
    # its measurement, so its first-trial 7.9 s held the worker's start and little more.
    # Counted as "start and measurement in one", the start was lost: the finish (a fresh
    # worker, 14 s to start, then rounds of 4 x ~11.3 s: 106 s for 2) got 2 rounds of 3
    ok = [15.6, 21.8, 11.3, 11.3, 11.3, 11.2, 11.3, 11.3, 14.6, 11.5]
    times = TrialTimes([7.9, *ok], ok, reference_s=7.9, reference_first=True)
    need = 14.0 + 3 * 4 * 11.3 + 11.3  # the start, 3 rounds of 3 top configs and the default
    assert times.costs()[1] == 0.0  # the start unknown: what went wrong
    times.worker_start_s = 14.0
    assert finish_reserve_s(3, 3, times, 500.0) >= need
    assert times.costs()[:2] == (11.3, 14.0)


def test_a_default_stopped_early_over_the_slo_is_costed_as_a_whole_run():
    # the H100 serving sweep of session 53 (480-s budget): the default, over the SLO, was
    # stopped 9.8 s into the first trial; the finish ran it to its end. Costed at the median
    # trial, 162 s were held back, and the finish (its start and 2 rounds of 4 measurements:
    # 113 s) fitted 2 rounds of 3
    durations = [9.8, 15.4, 24.4, 8.1, 5.5, 0.3, 0.2, 12.1, 11.4, 17.7, 11.8, 12.0, 11.6, 17.9,
                 3.1, 12.5, 8.2, 16.3, 12.0, 5.3, 7.3, 0.2, 12.1, 11.9, 11.6, 12.3, 12.0, 15.5,
                 4.2, 5.3]  # fmt: skip
    complete = [15.4, 24.4, 12.1, 11.4, 17.7, 11.8, 12.0, 11.6, 17.9, 12.5, 16.3, 12.0, 12.1,
                11.9, 11.6, 12.3, 12.0, 15.5]  # fmt: skip
    times = TrialTimes(worker_start_s=4.945)
    for index, seconds in enumerate(durations):
        times.add(seconds, ok=seconds in complete, default=index == 0)
    assert not times.reference_complete
    median, _, _ = times.costs()
    need = 113.0 / 2 * 3 + median  # 3 rounds as long as the 2 measured, and the wind-down
    assert finish_reserve_s(3, 3, times, 480.0) >= need
    assert times.costs()[2] == 24.4  # the longest complete trial


def test_no_time_is_held_back_for_a_finish_the_budget_s_share_cannot_hold():
    # 4-s trials under a 30-s budget: a third (10 s) was held back, then the finish was skipped
    # as too short for two rounds of the best and the default, and the run ended at 23 s
    times = TrialTimes([5.0, 4.0, 4.0, 4.0], [5.0, 4.0, 4.0, 4.0])
    assert top_that_fits(3, times, 10.0 - 4.0, rounds=2) == 0
    assert finish_reserve_s(3, 3, times, budget_s=30.0) == 4.0  # the last trial's wind-down
    # a budget whose share holds two rounds keeps its reserve
    assert finish_reserve_s(3, 3, times, budget_s=120.0) > 30.0
