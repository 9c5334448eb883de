"""A finished trial is read once; a running one at every read; another study starts afresh."""

import optuna

from autotune.driver.trial_memo import FinishedTrialMemo


def test_finished_trials_are_read_once_and_running_ones_every_time():
    reads = []
    memo = FinishedTrialMemo(lambda t: reads.append(t.number) or t.state.name)
    study = optuna.create_study()
    study.tell(study.ask(), 1.0)
    running = study.ask()
    assert list(memo.summaries(study, study.get_trials())) == ["COMPLETE", "RUNNING"]
    assert list(memo.summaries(study, study.get_trials())) == ["COMPLETE", "RUNNING"]
    assert reads == [0, 1, 1]
    study.tell(running, 2.0)  # it finished since: read once more, then held
    assert list(memo.summaries(study, study.get_trials())) == ["COMPLETE", "COMPLETE"]
    assert list(memo.summaries(study, study.get_trials())) == ["COMPLETE", "COMPLETE"]
    assert reads == [0, 1, 1, 1] and memo.cached == 2


def test_another_study_is_read_afresh():
    memo = FinishedTrialMemo(lambda t: t.values[0])
    first, second = optuna.create_study(), optuna.create_study()
    first.tell(first.ask(), 1.0)
    second.tell(second.ask(), 2.0)
    assert list(memo.summaries(first, first.get_trials())) == [1.0]
    assert list(memo.summaries(second, second.get_trials())) == [2.0]
