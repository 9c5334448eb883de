"""Whether a sweep's answer is faster than the library kernel it was measured against.

Kernel workloads rank ``ratio_to_<reference>``: the reference's time (cuBLAS, torch SDPA's
fastest backend, torch) over the config's, timed in the same rounds. A best value below 1
means that the best config found did not beat the library: for that problem the honest answer
is to keep the reference, and an export says so rather than hand a slower kernel over as "the
best".

The figure judged is the finish's median for its winner when the sweep ended with the finish
(re-measured beside the reference), else the sweep's own reading of the best trial.

Example:
    >>> record = {"objectives": {"ratio_to_sdpa": "maximize"}, "values": {"ratio_to_sdpa": 0.79}}
    >>> reference_faster(record)
    {'reference': 'sdpa', 'ratio': 0.79, 'measured_by': 'sweep'}
    >>> reference_faster({**record, "values": {"ratio_to_sdpa": 1.02}})
    >>> print(describe(reference_faster(record))[:59])
    sdpa is faster than the best config found: it runs at 0.790
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.driver.results import objectives_of
from autotune.driver.trial_attrs import stored_finish, trial_metrics

#: the prefix of a metric that is a reference's time over the config's (higher is better)
RATIO_PREFIX = "ratio_to_"


def reference_faster(record: dict[str, Any]) -> dict[str, Any] | None:
    """``{"reference", "ratio", "measured_by"}`` when the record's first objective is a ratio to
    a reference, maximized, and its best figure is below 1; None otherwise (the config wins,
    another kind of metric, or nothing measured).

    ``record`` is :func:`autotune.export.best_record`'s: ``objectives`` (metric -> direction),
    ``values``, ``metrics`` (a ``fastest_<reference>`` there is named as ``fastest``) and,
    after a finish, ``finish`` with its ``metric`` and winner-first ``rows``."""
    objectives = dict(record.get("objectives") or {})
    metric = next(iter(objectives), "")
    if not metric.startswith(RATIO_PREFIX) or objectives[metric] != "maximize":
        return None
    finish = record.get("finish") or {}
    rows = finish.get("rows") or []
    if rows and finish.get("metric") == metric and rows[0].get("median") is not None:
        ratio, measured_by = float(rows[0]["median"]), "finish"
    elif (record.get("values") or {}).get(metric) is not None:
        ratio, measured_by = float(record["values"][metric]), "sweep"
    else:
        return None
    if not ratio < 1.0:
        return None
    reference = metric.removeprefix(RATIO_PREFIX)
    verdict = {"reference": reference, "ratio": ratio, "measured_by": measured_by}
    # a reference of several library kernels names the one that was fastest (attention: the
    # fastest SDPA backend on the device, e.g. sdpa_cudnn)
    fastest = (record.get("metrics") or {}).get(f"fastest_{reference}")
    if fastest:
        verdict["fastest"] = str(fastest)
    return verdict


def describe(verdict: dict[str, Any]) -> str:
    """One line for a person: which reference is faster, by how much, and what to do."""
    how = "the finish's median" if verdict["measured_by"] == "finish" else "the sweep's reading"
    ref = verdict["reference"]
    keep = f"{ref} ({verdict['fastest']} the fastest here)" if verdict.get("fastest") else ref
    return (f"{ref} is faster than the best config found: it runs at {verdict['ratio']:.3f}x "
            f"{ref}'s speed ({how}); keep {keep} for this problem")  # fmt: skip


def winner_verdict(study: optuna.Study, winner: optuna.trial.FrozenTrial) -> dict[str, Any] | None:
    """:func:`reference_faster` for a stored study whose answer is ``winner`` (the finish's
    winner when there was a finish): its values and metrics, and the study's finish."""
    objectives = objectives_of(study)
    return reference_faster({
        "objectives": objectives,
        "values": dict(zip(objectives, winner.values or [], strict=False)),
        "metrics": trial_metrics(winner),
        "finish": stored_finish(study.user_attrs),
    })  # fmt: skip
