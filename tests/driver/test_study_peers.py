import optuna

from autotune.driver.novelty import config_key
from autotune.driver.read_snapshot import snapshot_reads
from autotune.driver.study_peers import StudyPeers
from autotune.driver.trial_attrs import DRIVER
from autotune.storage import open_storage

ME, THEM = {"host": "a", "pid": 1}, {"host": "b", "pid": 2}


def _driver(url: str, identity: dict) -> tuple[optuna.Study, StudyPeers]:
    study = optuna.load_study(study_name="s", storage=snapshot_reads(open_storage(url)))
    return study, StudyPeers(study, identity)


def _start(study: optuna.Study, identity: dict, x: int) -> optuna.Trial:
    """A trial of ``identity``'s that runs config {x: x}."""
    study.enqueue_trial({"x": x})
    trial = study.ask()
    trial.set_user_attr(DRIVER, identity)
    assert trial.suggest_int("x", 0, 8) == x
    return trial


def test_another_drivers_running_twin_is_found_and_counted_a_lone_driver_sees_none(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    optuna.create_study(study_name="s", storage=open_storage(url))
    mine_study, mine = _driver(url, ME)
    their_study, _ = _driver(url, THEM)
    asked = _start(mine_study, ME, 3)
    key = config_key({"x": 3})
    mine_study.get_trials()  # this driver's snapshot
    assert mine.twin(key, {asked.number}) is None  # alone: the query says so
    assert mine.launched(not_launched=set()) == 1 and not mine.others_active
    theirs = _start(their_study, THEM, 3)  # the other driver picks the same config
    assert mine.twin(key, {asked.number}) == theirs.number
    assert mine.twin(config_key({"x": 4}), {asked.number}) is None  # another config: no twin
    assert mine.launched(not_launched=set()) == 2 and mine.others_active  # read afresh now
    their_study.tell(theirs, 1.0)  # finished: no longer a running twin
    assert mine.twin(key, {asked.number}) is None
