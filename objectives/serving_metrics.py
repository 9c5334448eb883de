"""What a replayed request trace measured: TTFT and TPOT percentiles, output tokens a second and
goodput (the tokens a second of the requests within both SLO limits), from each request's
timings; the engine's replay (:mod:`~autotune.objectives.serving`) and a server's
(:mod:`~autotune.objectives.server`) alike.

Example:
    >>> rows = [RequestTiming(0.0, 0.05, 0.45, 5, True), RequestTiming(0.0, 0.8, 1.0, 3, True)]
    >>> m = latency_summary(rows, wall=2.0, slo_ttft_ms=500, slo_tpot_ms=200)
    >>> m["within_slo"], m["goodput_tok_s"], m["ttft_p50_ms"]
    (1, 2.5, 425.0)
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any


def percentile(values: list[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation; None for no values.

    Example:
        >>> percentile([1.0, 2.0, 3.0, 4.0], 50), percentile([5.0], 99)
        (2.5, 5.0)
    """
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class RequestTiming:
    """When a request was sent, got its first and last token (None: it never did), how many
    tokens it got, and whether it completed (finished, or streamed without an error)."""

    start: float
    first: float | None
    last: float | None
    tokens: int
    complete: bool


#: The latencies :func:`latency_summary` reports, the figures a serving sweep's ``--slo`` may
#: cap.
LATENCY_FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "mean_tpot_ms")


def latency_summary(
    rows: list[RequestTiming], wall: float, slo_ttft_ms: float, slo_tpot_ms: float
) -> dict[str, Any]:
    """TTFT and TPOT percentiles, output tokens/s and goodput (the tokens/s of complete
    requests within both SLO limits) of a replayed trace; the engine's and a server's alike.

    Example:
        >>> rows = [RequestTiming(0.0, 0.1, 0.5, 5, True), RequestTiming(0.0, 0.9, 1.0, 3, True)]
        >>> m = latency_summary(rows, wall=1.0, slo_ttft_ms=500, slo_tpot_ms=200)
        >>> m["goodput_tok_s"], m["output_tok_s"], m["within_slo"]
        (5.0, 8.0, 1)
    """
    ttft = [(r.first - r.start) * 1e3 for r in rows if r.first is not None]
    gaps = {id(r): (r.last - r.first) * 1e3 / (r.tokens - 1) for r in rows
            if r.first is not None and r.last is not None and r.tokens > 1}  # fmt: skip
    tpot = list(gaps.values())
    good = [r for r in rows if r.complete and r.first is not None
            and (r.first - r.start) * 1e3 <= slo_ttft_ms
            and gaps.get(id(r), 0.0) <= slo_tpot_ms]  # fmt: skip
    return {
        "goodput_tok_s": sum(r.tokens for r in good) / wall,
        "output_tok_s": sum(r.tokens for r in rows) / wall,
        "ttft_p50_ms": percentile(ttft, 50), "ttft_p99_ms": percentile(ttft, 99),
        "tpot_p50_ms": percentile(tpot, 50), "tpot_p99_ms": percentile(tpot, 99),
        "mean_tpot_ms": statistics.fmean(tpot) if tpot else None,
        "within_slo": len(good), "wall_s": wall,
    }  # fmt: skip
