"""The search driver: an ask/tell loop over an Optuna study, trials in flight up to an
executor's capacity, with budgets and callbacks.

Example:
    >>> from autotune.driver import SAMPLERS
    >>> SAMPLERS[0]
    'auto'
"""

from autotune.driver.results import best_trials, study_info, trials_frame
from autotune.driver.samplers import SAMPLERS, make_sampler
from autotune.driver.settings import (
    EXECUTORS,
    SweepObserver,
    SweepSettings,
    SweepSummary,
    TrialRecord,
)
from autotune.driver.sweep import Sweep

__all__ = [
    "EXECUTORS",
    "SAMPLERS",
    "Sweep",
    "SweepObserver",
    "SweepSettings",
    "SweepSummary",
    "TrialRecord",
    "best_trials",
    "make_sampler",
    "study_info",
    "trials_frame",
]
