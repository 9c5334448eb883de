"""Stop a serving trial as soon as its p99 is certain to break the sweep's SLO.

A config that cannot keep up with a trace (a long prompt through the math attention, a step
budget far too small) would otherwise serve the whole trace, or run into the trial timeout,
to be told "over the SLO" at the end. TTFT and TPOT only grow while a request waits: a request
that has waited longer than the TTFT limit for its first token misses it, and one whose gaps so
far already average more than the TPOT limit over its whole output misses that. Once enough
requests miss a limit that the p99 over the trace (linear interpolation, as reported) must
exceed it, the trial is over the SLO whatever comes next.

The watcher then reports an infinite value: in a sweep every prune rule stops the trial there,
and the objective records it as ``slo_violated``; outside a sweep (the finish, a benchmark)
nothing stops and the trace is served to its end.

Example:
    >>> from autotune.objectives.serving_engine import Request
    >>> rows = [Request(i, 0.1 * i, [1], 4) for i in range(40)]
    >>> watch = SloWatch(rows, {"ttft_p99_ms": 500.0})
    >>> watch.certain(now=0.5)  # nobody has waited 500 ms yet
    []
    >>> watch.certain(now=0.65)  # requests 0 and 1 have: 2 of 40 make p99 > 500 ms
    ['ttft_p99_ms > 500 for certain (2 of 40 requests over it)']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from autotune.failures import SloViolated, TrialFailure
from autotune.objectives.serving_engine import Request

#: the --slo limits a trial can be stopped on (the p99 the engine reports)
WATCHED = ("ttft_p99_ms", "tpot_p99_ms")


def misses_for_certain(n: int, q: float = 99.0) -> int:
    """How many of ``n`` values over a limit make their ``q``-th percentile (linear
    interpolation) exceed it: those above the interpolation's lower rank.

    Example:
        >>> misses_for_certain(40), misses_for_certain(200), misses_for_certain(1)
        (2, 3, 1)
    """
    return n - math.floor((n - 1) * q / 100)


class SloWatch:
    """Counts the requests of a trace that already miss each watched limit (``limits``:
    ``ttft_p99_ms`` and / or ``tpot_p99_ms`` -> ms)."""

    def __init__(self, requests: Sequence[Request], limits: dict[str, float]) -> None:
        unknown = sorted(set(limits) - set(WATCHED))
        if unknown:
            raise ValueError(f"cannot watch {unknown[0]!r}: only {', '.join(WATCHED)}")
        self.requests = list(requests)
        self.limits = dict(limits)
        self.needed = misses_for_certain(len(self.requests))
        self.asked = False

    def certain(self, now: float) -> list[str]:
        """The watched limits whose p99 is certain to be exceeded at ``now`` (seconds since
        the trace's start), each with the count that makes it so."""
        over = []
        for metric, limit_ms in self.limits.items():
            limit = limit_ms / 1e3
            miss = self._ttft_misses if metric == "ttft_p99_ms" else self._tpot_misses
            count = sum(miss(r, now, limit) for r in self.requests)
            if count >= self.needed:
                over.append(f"{metric} > {limit_ms:g} for certain ({count} of "
                            f"{len(self.requests)} requests over it)")  # fmt: skip
        return over

    @staticmethod
    def _ttft_misses(r: Request, now: float, limit: float) -> bool:
        first = r.first_token_s if r.first_token_s is not None else now
        return r.arrival_s <= now and first - r.arrival_s > limit

    @staticmethod
    def _tpot_misses(r: Request, now: float, limit: float) -> bool:
        if r.first_token_s is None or r.output_len < 2:
            return False
        last = r.finish_s if r.finish_s is not None else now  # its last token comes no sooner
        return (last - r.first_token_s) / (r.output_len - 1) > limit

    def after_step(self, now: float, report: Callable[[int, float], None], step: int) -> None:
        """Ask the sweep to stop the trial once a limit is certain to be broken (once);
        raises :class:`SloViolated` when it does."""
        if self.asked:
            return
        over = self.certain(now)
        if not over:
            return
        self.asked = True
        try:
            report(step, math.inf)
        except TrialFailure:  # the runner's prune: stopped at this step
            raise SloViolated(f"stopped early: {'; '.join(over)} at {now:.1f} s") from None
