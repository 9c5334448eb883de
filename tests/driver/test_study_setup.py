"""Opening a sweep's study: named ones resume, made-up names never do."""

import optuna

from autotune.driver import SweepSettings
from autotune.driver.study_setup import open_study
from autotune.space import Param, Space
from autotune.storage import open_storage


def _settings(url: str, study: str | None, problem: dict) -> SweepSettings:
    space = Space("s", [Param("score", "categorical", choices=[0.1, 0.2])])
    return SweepSettings(workload="faults", problem=problem, space=space,
                         objectives={"score": "maximize"}, storage=url, study_name=study,
                         warm_start="off", seed=1)  # fmt: skip


def test_two_sweeps_started_in_one_second_without_a_study_name_get_a_study_each(tmp_path):
    # both took 'faults-YYYYMMDD-HHMMSS': two seeds' trials were merged into one study, and
    # at another problem the second was refused as a resume of the first
    url = f"sqlite:///{tmp_path / 's.db'}"
    storage = open_storage(url)
    first = open_study(_settings(url, None, {"n": 8}), storage, in_flight=1)
    first.enqueue_trial({"score": 0.1})
    second = open_study(_settings(url, None, {"n": 16}), storage, in_flight=1)
    assert first.study_name != second.study_name and not second.trials
    names = {s.study_name for s in optuna.get_all_study_summaries(storage)}
    assert names == {first.study_name, second.study_name}


def test_a_named_study_is_resumed(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    storage = open_storage(url)
    first = open_study(_settings(url, "mine", {"n": 8}), storage, in_flight=1)
    first.enqueue_trial({"score": 0.1})
    again = open_study(_settings(url, "mine", {"n": 8}), storage, in_flight=1)
    assert again.study_name == "mine" and len(again.trials) == 1
