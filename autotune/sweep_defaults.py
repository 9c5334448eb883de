"""What a sweep takes where the user gives none: its workload, its trial count (a smaller one
for the default job on a CPU machine) and how long one trial may take.

Example:
    >>> DEFAULT_WORKLOAD, DEFAULT_TRIALS, trial_timeout(None, 60.0)
    ('train-step', 30, 30.0)
"""

from __future__ import annotations

DEFAULT_WORKLOAD = "train-step"
DEFAULT_TRIALS = 30
# The default job on a CPU machine must finish in minutes on 2 cores.
DEFAULT_CPU_JOB_TRIALS = 12


#: Seconds a trial may take when neither ``--trial-timeout`` nor a time budget says otherwise.
DEFAULT_TRIAL_TIMEOUT_S = 300.0
#: Under ``--time-budget``, the share of it one trial may take by default (and its floor, so a
#: first trial still has time to start a worker and compile).
TRIAL_BUDGET_SHARE = 0.25
MIN_TRIAL_TIMEOUT_S = 30.0


def trial_timeout(explicit_s: float | None, time_budget_s: float | None) -> float:
    """Seconds one trial may take: ``--trial-timeout`` when given; else 300 s, or a quarter of
    the time budget when that is shorter (30 s at least), so that no one config (a compile
    mode whose autotuning runs for minutes, say) can take most of a short sweep.

    Example:
        >>> trial_timeout(None, None), trial_timeout(None, 300.0), trial_timeout(None, 60.0)
        (300.0, 75.0, 30.0)
        >>> trial_timeout(180.0, 300.0)  # what the user asked for
        180.0
    """
    if explicit_s is not None:
        return explicit_s
    if time_budget_s is None:
        return DEFAULT_TRIAL_TIMEOUT_S
    share = max(MIN_TRIAL_TIMEOUT_S, TRIAL_BUDGET_SHARE * time_budget_s)
    return min(DEFAULT_TRIAL_TIMEOUT_S, share)
