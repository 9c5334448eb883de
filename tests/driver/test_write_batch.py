import optuna
import pytest
from optuna.distributions import IntDistribution

from autotune.driver.read_snapshot import snapshot_reads
from autotune.driver.write_batch import QueuedWrite, WriteConflict, send
from autotune.storage import open_storage

X = IntDistribution(0, 8)


def _study(tmp_path):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    storage = snapshot_reads(open_storage(url))
    return url, storage, optuna.create_study(storage=storage, study_name="s")


def test_a_batch_lands_whole_in_one_transaction_or_not_at_all(tmp_path):
    url, storage, study = _study(tmp_path)
    trial_id = study.ask()._trial_id
    other = open_storage(url)  # another driver, same trial
    other.set_trial_param(trial_id, "x", 2.0, X)
    with pytest.raises(WriteConflict, match="written by another driver first"):
        send(other, [QueuedWrite("user", trial_id, "driver", "me"),
                     QueuedWrite("param", trial_id, "x", 3.0, X)])  # fmt: skip
    (stored,) = optuna.load_study(study_name="s", storage=url).trials
    assert stored.params == {"x": 2} and stored.user_attrs == {}  # the attribute rolled back


def test_batched_writes_reach_the_database_at_the_end_and_reads_see_them_at_once(tmp_path):
    url, storage, study = _study(tmp_path)
    trial = study.ask()
    with storage.batched():
        trial.set_user_attr("driver", "me")
        trial.suggest_int("x", 0, 8)
        assert study.get_trials()[0].user_attrs == {"driver": "me"}  # this driver's view
        assert optuna.load_study(study_name="s", storage=url).trials[0].params == {}
    (stored,) = optuna.load_study(study_name="s", storage=url).trials
    assert stored.params == {"x": trial.params["x"]} and stored.user_attrs == {"driver": "me"}


def test_a_batch_that_fails_to_land_leaves_later_writes_unbatched(tmp_path):
    url, storage, study = _study(tmp_path)
    trial = study.ask()
    other = open_storage(url)
    other.set_trial_param(trial._trial_id, "x", 2.0, X)
    with pytest.raises(WriteConflict), storage.batched():
        storage.set_trial_param(trial._trial_id, "x", 3.0, X)
    trial.set_user_attr("after", 1)  # straight to the database
    (stored,) = optuna.load_study(study_name="s", storage=url).trials
    assert stored.user_attrs == {"after": 1}
    assert "x" in study.get_trials()[0].params  # the failed batch's snapshot was dropped


def test_a_parameter_keeps_a_compatible_distribution_within_a_study(tmp_path):
    url, storage, study = _study(tmp_path)
    first, second = study.ask()._trial_id, study.ask()._trial_id
    known: dict = {}
    send(storage._inner, [QueuedWrite("param", first, "x", 3.0, X)], known)
    as_float = optuna.distributions.FloatDistribution(0.0, 1.0)
    for memo in (known, {}):  # remembered from the first batch, or read from the database
        with pytest.raises(ValueError, match="Cannot set different distribution kind"):
            send(storage._inner, [QueuedWrite("param", second, "x", 0.5, as_float)], memo)
    assert optuna.load_study(study_name="s", storage=url).trials[1].params == {}
