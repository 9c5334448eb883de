"""The last line of a sweep whose trials all ran and none succeeded: how they failed, with a
trial's reason, rather than a bare "nothing to report" (a sweep whose configs were refused
unlaunched says so in :mod:`autotune.cli_sweep`).

Example:
    >>> from collections import Counter
    >>> none_succeeded(Counter({"slo_violated": 2, "infeasible": 1}),
    ...                (1, "over the SLO: latency_s 0.3 > 0.1"), {"latency_s": 0.1})
    'no trial succeeded: every trial of this run broke --slo latency_s=0.1 (slo_violated 2 of 2; #1: over the SLO: latency_s 0.3 > 0.1); loosen a limit to get a best config (`autotune trials` lists them)'
"""  # noqa: E501

from __future__ import annotations

from collections import Counter
from typing import Any

import optuna

from autotune.driver.trial_attrs import (
    DURATION,
    INFEASIBLE,
    REASON,
    REFUSED,
    REPEATED,
    trial_status,
)
from autotune.suggest import suggested

#: kinds of a run's failures that launched nothing (said apart, in ``done:``)
UNLAUNCHED = ("ok", INFEASIBLE, REFUSED, REPEATED)
SLO_VIOLATED = "slo_violated"


def most_common_failure(failures: Counter) -> tuple[str, int, int] | None:
    """The kind most of the launched trials failed by, its count and the launched failures'
    total; None where none was launched.

    Example:
        >>> most_common_failure(Counter({"oom": 1, "crashed": 3, "infeasible": 9}))
        ('crashed', 3, 4)
    """
    launched = Counter({k: v for k, v in failures.items() if k not in UNLAUNCHED and v > 0})
    if not launched:
        return None
    kind, times = launched.most_common(1)[0]
    return kind, times, launched.total()


def last_reason(study: optuna.Study, kind: str) -> tuple[int, str] | None:
    """The number and reason of the study's last trial that failed by ``kind`` (this run's
    trials are the last), or None: one that ran (it holds its duration) before one that never
    did, a config asked for ahead and closed unlaunched as the sweep stopped (``interrupted``
    too, but no launched trial's failure: a time budget shorter than one trial was told by
    ``#1: asked for but never launched``, not by the trial it stopped).

    Example:
        >>> study = optuna.create_study()
        >>> for attrs in ({DURATION: 0.5, REASON: "time budget ended"}, {REASON: "never ran"}):
        ...     study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL,
        ...                     user_attrs={"status": "interrupted", **attrs}))
        >>> last_reason(study, "interrupted")
        (0, 'time budget ended')
    """
    unlaunched = None
    for trial in reversed(study.get_trials(deepcopy=False)):
        if trial_status(trial) == kind:
            found = trial.number, str(trial.user_attrs.get(REASON) or kind)
            if trial.user_attrs.get(DURATION) is not None:
                return found
            unlaunched = unlaunched or found
    return unlaunched


def none_succeeded(
    failures: Counter,
    example: tuple[int, str] | None,
    slo: dict[str, Any],
    trials: str | None = "autotune trials",
) -> str:
    """The line for a run whose launched trials all failed (``failures``: this run's, by
    kind), with ``example`` (a trial's number and reason), or the bare line where none was
    launched; it points to ``trials``, the command that lists them (None: none can, the
    storage kept nothing)."""
    common = most_common_failure(failures)
    if common is None:
        return "no trial succeeded: nothing to report" + (f" (see `{trials}`)" if trials else "")
    kind, times, total = common
    seen = f"; #{example[0]}: {example[1]}" if example else ""
    lists = f" (`{trials}` lists them)" if trials else ""
    if kind == SLO_VIOLATED and times == total and slo:
        limits = ",".join(f"{k}={v:g}" for k, v in slo.items())
        return (f"no trial succeeded: every trial of this run broke --slo {limits} ({kind} "
                f"{times} of {total}{seen}); loosen a limit to get a best config"
                f"{lists}")  # fmt: skip
    return f"no trial succeeded: {kind} {times} of {total} launched{seen}{lists}"


def none_succeeded_line(summary: Any, slo: dict[str, Any], storage: str) -> str:
    """:func:`none_succeeded` of a sweep's summary (``SweepSummary``) in ``storage`` (its
    URL), pointing to the ``autotune trials`` command that lists its study."""
    common = most_common_failure(summary.failures)
    example = last_reason(summary.study, common[0]) if common else None
    trials = suggested("trials", summary.study_name, storage)
    return none_succeeded(summary.failures, example, slo, trials)
