"""Request traces for the serving workload: Poisson arrivals at a set rate with prompt and
output lengths drawn uniformly around their means, or a JSONL file of
``{"arrival": seconds, "prompt_len": n, "output_len": m}`` lines.

Example:
    >>> trace = poisson_trace(rate=10.0, num_requests=4, prompt_len=32, output_len=8, seed=0)
    >>> len(trace), all(a.arrival_s <= b.arrival_s for a, b in zip(trace, trace[1:]))
    (4, True)
    >>> 16 <= trace[0].prompt_len <= 48
    True
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TraceEntry:
    arrival_s: float
    prompt_len: int
    output_len: int


def poisson_trace(
    rate: float, num_requests: int, prompt_len: int, output_len: int, seed: int = 0,
    spread: float = 0.5,
) -> list[TraceEntry]:  # fmt: skip
    """``num_requests`` arrivals of a Poisson process of ``rate`` requests a second; lengths
    uniform in ``mean * (1 +- spread)``."""
    if rate <= 0 or num_requests < 1:
        raise ValueError("a trace needs rate > 0 and at least one request")
    rng = random.Random(seed)
    t, entries = 0.0, []
    for _ in range(num_requests):
        t += rng.expovariate(rate)
        prompt, output = _around(rng, prompt_len, spread), _around(rng, output_len, spread)
        entries.append(TraceEntry(t, prompt, output))
    return entries


def _around(rng: random.Random, mean: int, spread: float) -> int:
    return max(1, round(rng.uniform(mean * (1 - spread), mean * (1 + spread))))


def load_trace(path: str | Path) -> list[TraceEntry]:
    """A JSONL trace file, sorted by arrival.

    Raises:
        ValueError: a line that is not a JSON object with the three fields, or whose request
            no server could take (a negative arrival, an empty prompt or output), naming the
            line; a file with no request.
    """
    entries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            entry = TraceEntry(float(row["arrival"]), int(row["prompt_len"]),
                               int(row["output_len"]))  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: not a trace line ({exc})") from None
        if not (entry.arrival_s >= 0 and entry.prompt_len >= 1 and entry.output_len >= 1):
            raise ValueError(f"{path}:{number}: a request needs arrival >= 0, prompt_len >= 1 "
                             f"and output_len >= 1: {line.strip()}")  # fmt: skip
        entries.append(entry)
    if not entries:
        raise ValueError(f"{path}: the trace holds no request")
    return sorted(entries, key=lambda e: e.arrival_s)
