"""What the finish will cost, from what the sweep's trials took: how much of a time budget to
hold back for it (:func:`finish_reserve_s`), and how many top configs it can re-measure in
the time left (:func:`top_that_fits`).

A finish round measures the top configs and the untuned default once each, in a fresh
worker that starts first. Each measurement is costed at the median time of the sweep's
trials that ran to their end (a failure, a pruned trial or one stopped over the SLO ends
early; the finish's run to the end), the default at what its own trial took where that is
longer (a default over the SLO serves slowly), and the worker's start at what the executor
measured (:meth:`~autotune.executors.base.Executor.worker_start_s`), else at what the first
trial took beyond the median.

Example:
    >>> times = TrialTimes()
    >>> for seconds in (8.0, 2.0, 2.0, 2.0):  # the first trial also started the worker
    ...     times.add(seconds, ok=True, default=False)
    >>> times.costs()  # a measurement, the start, the default's measurement
    (2.0, 6.0, 2.0)
    >>> top_that_fits(3, times, remaining_s=20.0)
    3
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import optuna

from autotune.driver.trial_attrs import DURATION, FINISHED_STATES, is_repeat, trial_status

#: Seconds between a timed sweep's decision to stop and its finish's start, held back beside
#: the finish itself: trials in flight end and the last results are stored (about 0.6 s for a
#: CPU matmul sweep of 20 ms trials, which without it left its 1.8-s finish 1.2 s: skipped).
WIND_DOWN_S = 1.0
#: Trials run to their end after which the finish's estimate is trusted with up to half of a
#: time budget (a third before: see :func:`finish_reserve_s`).
SETTLED_TRIALS = 5


@dataclass
class TrialTimes:
    """What a run's trials took, in trial order: the finish's cost is estimated from them.

    ``durations`` are the seconds each launched trial held its slot (its compile left out:
    the finish measures compiled configs), ``complete`` those of the trials that ran to their
    end; ``reference_s`` what the untuned default's trial took, ``reference_first`` whether
    it was the run's first (whose time also holds a worker's start), ``reference_complete``
    whether it ran to its end (one stopped early over the SLO did not), and ``worker_start_s``
    the longest a worker took to start, where the executor measured it (None: not known);
    ``finish_warm``: the finish's worker is up already (a search by group's kept one), so the
    finish pays no start.

    Example:
        >>> times = TrialTimes([5.0, 1.0, 1.0, 9.0], complete=[9.0])  # 3 ended early
        >>> times.costs()  # the complete one's 9 s a measurement; the first's 2 s beyond the median
        (9.0, 2.0, 9.0)
    """

    durations: list[float] = field(default_factory=list)
    complete: list[float] = field(default_factory=list)
    reference_s: float | None = None
    reference_first: bool = False
    reference_complete: bool = True
    worker_start_s: float | None = None
    finish_warm: bool = False

    def add(self, seconds: float, *, ok: bool, default: bool) -> None:
        """Count one finished trial: ``seconds`` it held its slot, whether it ran to its end
        (``ok``) and whether it was the untuned default's."""
        self.durations.append(seconds)
        if ok:
            self.complete.append(seconds)
        if default:  # re-measured in every finish round
            self.reference_s = seconds
            self.reference_first = len(self.durations) == 1
            self.reference_complete = ok

    def costs(self) -> tuple[float, float, float]:
        """What a finish measurement of a top config takes, what starting its fresh worker
        takes, and what a measurement of the default takes.

        The start is the executor's measurement where there is one. Else it is what the first
        trial took beyond the median of all; when that first trial was the default's, its
        reading holds both its start and its measurement, so the start is not counted again.
        With the start measured, a default that was the first trial is costed without it: a
        default stopped early over the SLO took little more than the start, and the finish
        runs it to its end (an H100 serving sweep's default, stopped 1.8 s into its
        measurement in a 7.9-s first trial, left its finish 2 rounds of 3). Such a default
        (``reference_complete`` false) is costed at the longest trial that ran to its end, at
        least: a config over the SLO serves slowly, and its stopped reading says nothing of
        what its whole run takes (costed at the median, an H100 serving sweep's finish fitted
        2 rounds of 3 again).

        Example:
            >>> TrialTimes([9.0, 1.0, 1.0], reference_s=9.0, reference_first=True).costs()
            (1.0, 0.0, 9.0)
            >>> TrialTimes([7.0, 3.0, 3.0], [3.0, 3.0], 7.0, True, worker_start_s=6.0).costs()
            (3.0, 6.0, 3.0)
            >>> TrialTimes([2.0, 3.0, 5.0], [3.0, 5.0], 2.0, reference_complete=False).costs()
            (4.0, 0.0, 5.0)
            >>> TrialTimes([3.0, 3.0], [3.0, 3.0], worker_start_s=6.0, finish_warm=True).costs()
            (3.0, 0.0, 3.0)
        """
        median_all = statistics.median(self.durations)
        median = statistics.median(self.complete) if self.complete else median_all
        if self.worker_start_s is not None:
            start = self.worker_start_s
            own = self.reference_s
            if own is not None and self.reference_first:
                own -= start
        else:
            start = max(0.0, self.durations[0] - median_all)
            own = self.reference_s
            if own is not None and self.reference_first:
                start = 0.0
        default_s = median if own is None else max(median, own)
        if not self.reference_complete and self.complete:
            default_s = max(default_s, max(self.complete))
        return median, 0.0 if self.finish_warm else start, default_s

    @property
    def settled(self) -> bool:
        """Whether :data:`SETTLED_TRIALS` trials ran to their end: the estimate is trusted."""
        return len(self.complete) >= SETTLED_TRIALS


def top_that_fits(top: int, times: TrialTimes, remaining_s: float, rounds: int = 1) -> int:
    """How many of the ``top`` configs ``rounds`` finish rounds can re-measure, beside the
    untuned default, in the ``remaining_s`` seconds of a time budget (costed as
    :meth:`TrialTimes.costs` says). 0: not even the best and the default fit, so there is no
    finish.

    Example:
        >>> times = TrialTimes([8.0, 2.0, 2.0, 2.0])  # 6 s to start, 2 s a measurement
        >>> top_that_fits(3, times, 20.0), top_that_fits(3, times, 20.0, rounds=2)
        (3, 2)
        >>> times.reference_s = 4.0  # a slow default: 4 s + 2 a round
        >>> top_that_fits(3, times, 20.0, rounds=2)
        1
        >>> top_that_fits(3, TrialTimes([40.0, 33.0, 33.0]), 80.0)
        1
        >>> top_that_fits(3, TrialTimes(), 0.0)  # nothing to go by, and no time left
        0
    """
    if remaining_s <= 0:
        return 0
    if not times.durations:
        return top
    median, start, default_s = times.costs()
    if median <= 0:
        return top
    fit = int((remaining_s - start - default_s * rounds) // (median * rounds))
    return max(0, min(top, fit))


def finish_reserve_s(top: int, rounds: int, times: TrialTimes, budget_s: float | None) -> float:
    """Seconds to hold back of a time budget for the finish: a fresh worker's start, then
    ``rounds`` rounds of the ``top`` configs and the default (:meth:`TrialTimes.costs`), plus
    :data:`WIND_DOWN_S` (or a trial, if longer) for the sweep's own end (the trial in flight,
    the last results stored). At most a third of the budget until the estimate is
    :attr:`~TrialTimes.settled`, so that a slow first trial or two (a cold worker, compiles
    while the pool starts) cannot end the search before it has begun; at most half after.

    Example:
        >>> times = TrialTimes([3.4, 0.4, 0.4])
        >>> round(finish_reserve_s(3, 3, times, budget_s=60.0), 6)  # 3 + 4x3x0.4 + 1
        8.8
        >>> finish_reserve_s(3, 3, times, budget_s=24.0)  # a third of the budget
        8.0
        >>> finish_reserve_s(3, 3, times, budget_s=15.0)  # a third cannot hold two rounds
        1.0
        >>> times.reference_s = 2.0
        >>> round(finish_reserve_s(3, 3, times, 60.0), 6)  # the default's 3x2 s
        13.6
        >>> settled = TrialTimes([3.4] + [0.4] * 5, [3.4] + [0.4] * 5, reference_s=2.0)
        >>> finish_reserve_s(3, 3, settled, 24.0)  # half of it
        12.0
    """
    if not top or not times.durations:
        return 0.0
    median, start, default_s = times.costs()
    wind_down = max(WIND_DOWN_S, median)
    share = (budget_s or 0.0) / (2 if times.settled else 3)
    reserve = min(start + (top * median + default_s) * rounds + wind_down, share)
    if top_that_fits(top, times, reserve - wind_down, min(2, rounds)) == 0:
        # a finish its share cannot hold would be skipped (``autotune tune`` needs two rounds
        # of the best and the default): the time goes to trials (a 30-s budget ended at 23 s)
        return min(wind_down, share)
    return reserve


def stored_times(study: optuna.Study) -> TrialTimes:
    """What the study's stored trials took (each one's ``duration_s``), all of them and the
    ``ok`` ones, in trial order: the finish's estimate when this run measured nothing (a
    resume whose trials were all done).

    Example:
        >>> study = optuna.create_study()
        >>> for seconds, status in ((3.0, "ok"), (0.5, "oom")):
        ...     trial = study.ask()
        ...     trial.set_user_attr("duration_s", seconds)
        ...     trial.set_user_attr("status", status)
        ...     _ = study.tell(trial, 1.0)
        >>> times = stored_times(study)
        >>> times.durations, times.complete
        ([3.0, 0.5], [3.0])
    """
    times = TrialTimes()
    for t in study.get_trials(deepcopy=False, states=FINISHED_STATES):
        seconds = t.user_attrs.get(DURATION)
        if isinstance(seconds, int | float) and not is_repeat(t) and seconds > 0:
            times.add(float(seconds), ok=trial_status(t) == "ok", default=False)
    return times
