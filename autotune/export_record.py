"""Reading a best-config record (``autotune.export.best_record``'s) for an export to any stack,
training or serving: which sweep it is (:func:`which_sweep`, for an error), a replay's record
as the sweep its table recorded (:func:`as_recorded`) and the note that labels it a replay
(:func:`replay_note`), whether it was measured on a CPU (:func:`measured_on_cpu`), and a
value checked as a positive number (:func:`whole`, :func:`positive`).

Example:
    >>> record = {"study": "r", "workload": "replay", "label": "REPLAY of t.csv",
    ...           "replay": {"workload": "train-step", "problem": {"global_batch": 16}}}
    >>> as_recorded(record)["workload"], replay_note(record)
    ('train-step', {'replay': 'REPLAY of t.csv'})
    >>> whole("world_size", "2", ValueError)
    2
"""

from __future__ import annotations

import contextlib
import math
from typing import Any


def whole(name: str, value: Any, error: type[ValueError]) -> int:
    """``value`` as a positive whole number, else ``error`` naming it.

    Example:
        >>> whole("micro_batch", 4.0, ValueError)
        4
        >>> whole("micro_batch", 0, ValueError)
        Traceback (most recent call last):
        ...
        ValueError: micro_batch 0: not a positive whole number
    """
    number: Any = value
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            number = int(value.strip())
    if isinstance(number, float) and number.is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise error(f"{name} {value!r}: not a positive whole number")
    return number


def positive(name: str, value: Any, error: type[ValueError]) -> float:
    """``value`` as a finite positive number, else ``error`` naming it."""
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise error(f"{name} {value!r}: not a positive number")
    return number


def which_sweep(record: dict[str, Any]) -> str:
    """Which sweep an export was asked of, for its error.

    Example:
        >>> which_sweep({"study": "mm", "workload": "matmul"})
        "study 'mm' tuned matmul (--study NAME picks another)"
        >>> which_sweep({"study": "r", "workload": "replay", "replay": {"workload": None}})
        "study 'r' tuned replay of a table that records no workload (--study NAME picks another)"
        >>> which_sweep(as_recorded({"study": "t", "workload": "replay",
        ...                          "replay": {"workload": "train-step"}}))
        "study 't' tuned replay of a train-step table (--study NAME picks another)"
    """
    what = str(record.get("workload"))
    replay = record.get("replay")
    if isinstance(replay, dict):  # a replay, :func:`as_recorded`'s (its stamp as workload) too
        stamp = replay.get("workload")
        table = f"a {stamp} table" if stamp else "a table that records no workload"
        what = f"replay of {table}"
    return f"study {record.get('study')!r} tuned {what} (--study NAME picks another)"


def as_recorded(record: dict[str, Any], knobs: tuple[str, ...] = ()) -> dict[str, Any]:
    """A replay's record (``autotune.export.best_record``'s, with ``replay``) as the sweep its
    table recorded: the table's ``workload`` stamp and its problem (the recorded one, the
    replay's ``--problem`` values over it), and in its config each of ``knobs`` (the target's,
    by the recorded workload's names) that the replay did not take as a parameter, at the value
    its row recorded: every knob of the recording ran at some value, and a table recorded at
    bf16 replayed with ``--params micro_batch`` ran bf16, not the target's default. Any other
    record, and a replay of a table that records no workload, as it is.

    Example:
        >>> record = {"workload": "replay", "problem": {"table": "t.csv", "params": ["a"]},
        ...           "config": {"micro_batch": 2}, "metrics": {"precision": "bf16", "ms": 3},
        ...           "replay": {"workload": "train-step", "problem": {"global_batch": 16}}}
        >>> recorded = as_recorded(record, knobs=("micro_batch", "precision"))
        >>> recorded["workload"], recorded["problem"], recorded["config"]
        ('train-step', {'global_batch': 16}, {'precision': 'bf16', 'micro_batch': 2})
    """
    replay = record.get("replay")
    if record.get("workload") != "replay" or not isinstance(replay, dict):
        return record
    if not replay.get("workload"):
        return record
    row = record.get("metrics") or {}
    held = {k: row[k] for k in knobs if k in row}  # a parameter is never among its row's metrics
    config = {**held, **(record.get("config") or {})}
    return {**record, "workload": replay["workload"], "problem": replay.get("problem") or {},
            "config": config}  # fmt: skip


def replay_note(record: dict[str, Any]) -> dict[str, str]:
    """For a replay's record, the note that labels an export of it as one (a target's file has
    no other place to say that nothing was measured); nothing for a sweep that measured.

    Example:
        >>> replay_note({"workload": "replay", "label": "REPLAY of t.csv",
        ...              "replay": {"source": "replay of measurements on NVIDIA H200"}})
        {'replay': 'REPLAY of t.csv (replay of measurements on NVIDIA H200)'}
        >>> replay_note({"workload": "matmul"})
        {}
    """
    if record.get("workload") != "replay":
        return {}
    replay = record.get("replay") if isinstance(record.get("replay"), dict) else {}
    label = record.get("label") or "REPLAY of a recorded table: nothing was measured"
    source = replay.get("source")
    return {"replay": f"{label} ({source})" if source else str(label)}


def measured_on_cpu(record: dict[str, Any]) -> bool | None:
    """Whether the record's config was measured on a CPU; None for a replay whose table does
    not record its device (it may have been).

    Example:
        >>> measured_on_cpu({"device": {"type": "cpu"}})
        True
        >>> measured_on_cpu({"device": {}, "replay": {}}) is None
        True
    """
    kind = (record.get("device") or {}).get("type")
    if kind is None and isinstance(record.get("replay"), dict):
        return None
    return kind == "cpu"
