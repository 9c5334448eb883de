"""The portfolio shifts trials to the member that improves."""

import optuna

from autotune.driver.portfolio import MEMBER, PortfolioSampler
from autotune.space import Param, Space


class Fixed(optuna.samplers.RandomSampler):
    """Always proposes one value of x (the member under test's behaviour, not a mock of the
    portfolio)."""

    def __init__(self, value):
        super().__init__(seed=0)
        self.value = value

    def sample_independent(self, study, trial, name, distribution):
        return self.value


def test_trials_go_to_the_member_that_improves_and_every_member_keeps_a_share():
    space = Space("s", [Param("x", "int", low=0, high=100)])
    climbing = iter(range(1, 1000))

    class Climber(Fixed):
        def sample_independent(self, study, trial, name, distribution):
            return next(climbing) % 101

    portfolio = PortfolioSampler({"stuck": Fixed(0), "climber": Climber(0)}, explore_every=4)
    study = optuna.create_study(direction="maximize", sampler=portfolio)
    for _ in range(40):
        trial = study.ask()
        trial.set_user_attr("status", "ok")
        study.tell(trial, float(space.sample(trial)["x"]))
    members = [t.system_attrs[MEMBER] for t in study.trials]
    assert members.count("climber") >= 28  # it improved: it gets most trials
    assert members.count("stuck") >= 40 // 4 - 1  # the other still gets one in four
