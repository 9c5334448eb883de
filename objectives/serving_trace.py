"""Request traces for the serving workload: Poisson arrivals at a set rate with prompt and
output lengths drawn uniformly around their means, or a JSONL file of
``{"arrival": seconds, "prompt_len": n, "output_len": m}`` lines, whose arrivals are replayed
from the first one on (a recorded trace's Unix timestamps do not wait for that hour to come).

Example:
    >>> trace = poisson_trace(rate=10.0, num_requests=4, prompt_len=32, output_len=8, seed=0)
    >>> len(trace), all(a.arrival_s <= b.arrival_s for a, b in zip(trace, trace[1:]))
    (4, True)
    >>> 16 <= trace[0].prompt_len <= 48
    True
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: the problem keys that shape a Poisson trace, which ``trace=FILE.jsonl`` replaces: its lines
#: give each request's arrival and lengths
POISSON_KEYS = ("rate", "num_requests", "prompt_len", "output_len")


@dataclass(frozen=True)
class TraceEntry:
    arrival_s: float
    prompt_len: int
    output_len: int
    #: the line of the trace file it was read from (0: a generated trace's), for errors
    line: int = field(default=0, compare=False)


#: the most requests a generated trace holds (hours of serving at any useful rate)
MOST_REQUESTS = 1_000_000

#: the most tokens a request's prompt, and its output, may hold (2**20: past any model's
#: context a server is tuned at; each trial builds every prompt as a list of token ids, and one
#: of 10**10 took 9 GB before a request was sent)
MOST_TOKENS = 2**20


def poisson_trace(
    rate: float, num_requests: int, prompt_len: int, output_len: int, seed: int = 0,
    spread: float = 0.5,
) -> list[TraceEntry]:  # fmt: skip
    """``num_requests`` arrivals of a Poisson process of ``rate`` requests a second; lengths
    uniform in ``mean * (1 +- spread)``, at most :data:`MOST_TOKENS` (a mean whose draws could
    pass it is refused)."""
    if rate <= 0 or num_requests < 1:
        raise ValueError("a trace needs rate > 0 and at least one request")
    if num_requests > MOST_REQUESTS:  # made in memory before any trial: 1e8 took gigabytes
        raise ValueError(f"num_requests={num_requests}: at most {MOST_REQUESTS:,} (a trace of "
                         f"{num_requests / rate:,.0f} s at rate={rate:g}; a longer one goes in "
                         "a trace file)")  # fmt: skip
    for key, mean in (("prompt_len", prompt_len), ("output_len", output_len)):
        if (longest := round(mean * (1 + spread))) > MOST_TOKENS:
            raise ValueError(f"{key}={mean}: its requests are drawn up to {longest:,} tokens; a "
                             f"request holds at most {MOST_TOKENS:,} (2**20)")  # fmt: skip
    rng = random.Random(seed)
    t, entries = 0.0, []
    for _ in range(num_requests):
        t += rng.expovariate(rate)
        prompt, output = _around(rng, prompt_len, spread), _around(rng, output_len, spread)
        entries.append(TraceEntry(t, prompt, output))
    return entries


def check_positive(problem: dict[str, Any], keys: tuple[str, ...]) -> None:
    """Refuse, before any trial, a value of ``keys`` in ``problem`` that is not above 0 (a
    timeout, an SLO limit, a length, a rate), where every trial would fail or measure nothing.

    Raises:
        ValueError: naming the first such key and its value.

    Example:
        >>> check_positive({"rate": 20.0, "slo_ttft_ms": -1}, ("rate", "slo_ttft_ms"))
        Traceback (most recent call last):
        ...
        ValueError: slo_ttft_ms=-1 must be above 0
    """
    for key in keys:
        if key not in problem:
            continue
        try:
            above = float(problem[key]) > 0  # NaN is not
        except (TypeError, ValueError):
            raise ValueError(f"{key}={problem[key]!r} must be a number above 0") from None
        if not above:
            raise ValueError(f"{key}={problem[key]!r} must be above 0")


def check_tpot_measurable(entries: list[TraceEntry], slo: dict[str, float]) -> None:
    """Refuse, before any trial, a limit on a TPOT figure over a trace where no request
    outputs two tokens: no trial has a gap between tokens to time, so every one would break
    the limit ("not measured") while goodput counted its requests as within it.

    Raises:
        ValueError: naming the limit.

    Example:
        >>> check_tpot_measurable([TraceEntry(0.0, 8, 1)], {"tpot_p99_ms": 50.0})
        Traceback (most recent call last):
        ...
        ValueError: tpot_p99_ms=50: no request of the trace outputs more than one token, ...
    """
    limits = [name for name in slo if "tpot" in name]
    if limits and all(e.output_len < 2 for e in entries):
        raise ValueError(f"{limits[0]}={slo[limits[0]]:g}: no request of the trace outputs "
                         "more than one token, so no trial has a time per output token to "
                         "measure (drop the limit, or replay longer outputs)")  # fmt: skip


def place(problem: Mapping[str, Any], entry: TraceEntry) -> str:
    """Where ``entry`` was read: ``FILE:LINE`` of the problem's ``trace`` file, or ``""`` for
    a generated trace's request.

    Example:
        >>> place({"trace": "t.jsonl"}, TraceEntry(0.5, 8, 4, line=3))
        't.jsonl:3'
        >>> place({"trace": ""}, TraceEntry(0.5, 8, 4))
        ''
    """
    trace = problem.get("trace")
    return f"{trace}:{entry.line}" if trace and entry.line else ""


def check_span(
    entries: list[TraceEntry], timeout_s: float, problem: Mapping[str, Any] | None = None
) -> None:
    """Refuse, before the sweep, a trace whose last request arrives at or past the trial
    timeout: a trial replays it in real time (the serving engine's, or a server's), so every
    one would time out.

    Raises:
        ValueError: naming the trace's span and the timeout, after the file and line of its
            last request where ``problem``'s ``trace`` names a file (:func:`place`).

    Example:
        >>> check_span([TraceEntry(0.0, 8, 4, line=2), TraceEntry(3600.0, 8, 4, line=1)],
        ...            timeout_s=300.0, problem={"trace": "t.jsonl"})
        Traceback (most recent call last):
        ...
        ValueError: t.jsonl:1: the trace's last request arrives 3,600.0 s into the replay, ...
    """
    span = entries[-1].arrival_s
    where = place(problem or {}, entries[-1])
    if span >= timeout_s:
        raise ValueError(f"{where + ': ' if where else ''}the trace's last request arrives "
                         f"{span:,.1f} s into the replay, "
                         "and a trial replays it in real time: every trial would run past "
                         f"the trial timeout of {timeout_s:g} s (give a --trial-timeout "
                         "above the span, or replay a shorter trace)")  # fmt: skip


def check_context(entries: list[TraceEntry], problem: dict[str, Any], context: int) -> None:
    """Refuse, before any trial, a request of the problem's trace whose prompt and output
    together pass the model's ``context`` (``max_context``): every trial would fail on it.

    Raises:
        ValueError: naming the trace file's first such line, or the Poisson trace's lengths
            that drew such a request.

    Example:
        >>> problem = {"trace": "t.jsonl"}
        >>> check_context([TraceEntry(0.0, 8, 4, line=1), TraceEntry(0.5, 300, 4, line=2)],
        ...               problem, context=256)
        Traceback (most recent call last):
        ...
        ValueError: t.jsonl:2: a request of 300 + 4 tokens (prompt and output) is longer than ...
    """
    over = [e for e in entries if e.prompt_len + e.output_len > context]
    if not over:
        return
    first = min(over, key=lambda e: e.line)
    tokens = f"{first.prompt_len} + {first.output_len} tokens (prompt and output)"
    more = f" ({len(over)} requests of the trace are)" if len(over) > 1 else ""
    if problem.get("trace"):
        raise ValueError(f"{problem['trace']}:{first.line}: a request of {tokens} is longer "
                         f"than max_context={context}{more}")  # fmt: skip
    raise ValueError(f"prompt_len={problem['prompt_len']} and output_len="
                     f"{problem['output_len']} drew a request of {tokens}, each length within "
                     f"+-50% of its mean: longer than max_context={context}{more}")  # fmt: skip


def _around(rng: random.Random, mean: int, spread: float) -> int:
    return max(1, round(rng.uniform(mean * (1 - spread), mean * (1 + spread))))


def problem_trace(problem: dict[str, Any]) -> list[TraceEntry]:
    """The requests a serving problem replays: ``trace``'s file where it names one, else a
    Poisson trace of the problem's :data:`POISSON_KEYS` and ``seed``.

    Example:
        >>> problem = {"trace": "", "rate": 10.0, "num_requests": 3, "prompt_len": 32,
        ...            "output_len": 8, "seed": 0}
        >>> len(problem_trace(problem))
        3
    """
    if problem.get("trace"):
        return load_trace(str(problem["trace"]))
    rate, num_requests, prompt_len, output_len = (problem[key] for key in POISSON_KEYS)
    return poisson_trace(float(rate), int(num_requests), int(prompt_len), int(output_len),
                         int(problem["seed"]))  # fmt: skip


def without_poisson_keys(problem: dict[str, Any]) -> dict[str, Any]:
    """The problem less its :data:`POISSON_KEYS` where ``trace`` names a file, whose requests
    replace them, so that a sweep stores and shows only the values it replays.

    Example:
        >>> without_poisson_keys({"trace": "requests.jsonl", "rate": 20.0, "prompt_len": 512,
        ...                       "seed": 0})
        {'trace': 'requests.jsonl', 'seed': 0}
        >>> without_poisson_keys({"trace": "", "rate": 20.0})
        {'trace': '', 'rate': 20.0}
    """
    if not problem.get("trace"):
        return problem
    return {key: value for key, value in problem.items() if key not in POISSON_KEYS}


def load_trace(path: str | Path) -> list[TraceEntry]:
    """A JSONL trace file (``~`` expanded; its errors name ``path`` as given), sorted by
    arrival, its arrivals shifted so that the first is at 0: a recorded trace's timestamps
    (``1733500000.0``: seconds since 1970) are replayed as the gaps between them, not waited
    for.

    Raises:
        ValueError: in one line naming the file and line: a line that is not UTF-8 or not a
            JSON object with the three fields, an arrival that is not a finite number of
            seconds, a length that is not a whole number (``10.9``, ``true``, ``1e400``), a
            request no server could take (a negative arrival, an empty prompt or output, one
            of more than :data:`MOST_TOKENS` tokens of prompt or of output); a file that
            cannot be read or holds no request.

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = Path(folder, "t.jsonl")
        ...     _ = path.write_text('{"arrival": 0.5, "prompt_len": 8, "output_len": 4}\\n'
        ...                         '{"arrival": 0, "prompt_len": 10.9, "output_len": 4}\\n')
        ...     load_trace(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: ...t.jsonl:2: prompt_len must be a whole number of tokens, not 10.9
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = Path(folder, "t.jsonl")
        ...     _ = path.write_text('{"arrival": 1733500000.5, "prompt_len": 8, "output_len": 4}\\n'
        ...                         '{"arrival": 1733500000, "prompt_len": 9, "output_len": 4}\\n')
        ...     [(e.arrival_s, e.prompt_len) for e in load_trace(path)]
        [(0.0, 9), (0.5, 8)]
    """
    file = Path(path).expanduser()  # ~/t.jsonl: as the file checks and the cache's key read it
    try:
        if not stat.S_ISREG(os.stat(file).st_mode):  # a FIFO blocks the command; a process
            # substitution (/dev/fd/63) is gone by the time a trial's worker reads it
            raise ValueError(f"{path}: the trace must be a regular file (each trial's worker "
                             "reads it again)")  # fmt: skip
        data = file.read_bytes()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the trace: {exc.strerror or exc}") from None
    entries = []
    for number, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{path}:{number}: not UTF-8 text (byte {raw[exc.start]:#04x} at "
                             f"column {exc.start + 1})") from None  # fmt: skip
        if not line.strip():
            continue
        try:
            row = _row(line)
            entry = TraceEntry(_seconds(row["arrival"]), _count(row, "prompt_len"),
                               _count(row, "output_len"), line=number)  # fmt: skip
        except _BadValue as exc:
            raise ValueError(f"{path}:{number}: {exc}") from None
        if not (entry.arrival_s >= 0 and entry.prompt_len >= 1 and entry.output_len >= 1):
            raise ValueError(f"{path}:{number}: a request needs arrival >= 0, prompt_len >= 1 "
                             f"and output_len >= 1: {line.strip()}")  # fmt: skip
        if (longest := max(entry.prompt_len, entry.output_len)) > MOST_TOKENS:
            key = "prompt_len" if longest == entry.prompt_len else "output_len"
            raise ValueError(f"{path}:{number}: {key}={longest:,}: a request holds at most "
                             f"{MOST_TOKENS:,} (2**20) tokens of prompt and of output")  # fmt: skip
        entries.append(entry)
    if not entries:
        raise ValueError(f"{path}: the trace holds no request")
    entries.sort(key=lambda e: e.arrival_s)
    first = entries[0].arrival_s  # each trial (and the warm-up) waited this long for a request
    return [replace(e, arrival_s=e.arrival_s - first) for e in entries]


class _Written(float):
    """A JSON number as its line writes it, so that an error shows ``1e400``, not ``inf``."""

    text: str

    def __new__(cls, text: str) -> _Written:
        number = super().__new__(cls, text)
        number.text = text
        return number


class _BadValue(Exception):
    """A field of a trace line holds a value of the wrong kind (said as it is to be shown)."""


#: what a trace line holds, as its errors show it
LINE_SHAPE = '{"arrival": seconds, "prompt_len": tokens, "output_len": tokens}'
FIELDS = ("arrival", "prompt_len", "output_len")


def _row(line: str) -> dict[str, Any]:
    """A trace line read: a JSON object holding each of :data:`FIELDS`.

    Raises:
        _BadValue: a line that is no JSON, not an object, or lacks a field (said plainly).

    Example:
        >>> _row('{"arrival": 0, "prompt_len": 4}')
        Traceback (most recent call last):
        ...
        autotune.objectives.serving_trace._BadValue: no "output_len" field: a line is a JSON ...
        >>> _row('[0, 4, 2]')
        Traceback (most recent call last):
        ...
        autotune.objectives.serving_trace._BadValue: a line must be a JSON object {...}, not a list
    """
    try:
        row = json.loads(line, parse_float=_Written)
    except json.JSONDecodeError as exc:
        raise _BadValue(f"not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise _BadValue("not JSON: nested too deeply to read") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise _BadValue(f"not JSON: {exc}") from None
    if not isinstance(row, dict):
        kinds = {list: "list", str: "string", bool: "boolean", type(None): "null"}
        kind = kinds.get(type(row), "number")
        raise _BadValue(f"a line must be a JSON object {LINE_SHAPE}, not a {kind}")
    missing = [key for key in FIELDS if key not in row]
    if missing:
        raise _BadValue(f'no "{missing[0]}" field: a line is a JSON object {LINE_SHAPE}')
    return row


def _seconds(value: object) -> float:
    """``arrival``: a finite number (JSON's ``Infinity``/``NaN`` and ``1e400`` are not)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an integer past a float's range
            if math.isfinite(seconds := float(value)):
                return seconds
    raise _BadValue(f"arrival must be a finite number of seconds, not {_shown(value)}")


def _count(row: dict, key: str) -> int:
    """A length: a whole number (``8`` or ``8.0``; not ``8.5``, ``true``, ``"8"`` or ``1e400``)."""
    value = row[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    raise _BadValue(f"{key} must be a whole number of tokens, not {_shown(value)}")


def _shown(value: object) -> str:
    """A value as its trace line writes it, cut short."""
    text = value.text if isinstance(value, _Written) else json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
