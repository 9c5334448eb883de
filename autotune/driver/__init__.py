"""The search driver: an ask/tell loop over an Optuna study, with budgets and callbacks.

Example:
    >>> from autotune.driver import SAMPLERS
    >>> SAMPLERS[0]
    'auto'
"""

from autotune.driver.results import best_trials, study_info, trials_frame
from autotune.driver.samplers import SAMPLERS, make_sampler
from autotune.driver.sweep import Sweep, SweepObserver, SweepSettings, SweepSummary, TrialRecord

__all__ = [
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
