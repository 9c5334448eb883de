"""Warm start: begin a sweep from the best configs of the most similar stored sweep.

A related sweep is one of the same workload on the same kind of device whose problem differs
only in sizes (another matmul shape, another batch). Similarity is exp(-sum |log(a / b)|) over
the numeric problem values both share, so 4096^3 vs 8192x4096x4096 scores exp(-log 2) = 0.5;
any other difference (dtype, model) rules a study out. The chosen study, its similarity and
the configs taken are recorded in the new study.

Example:
    >>> similarity({"M": 4096, "N": 4096, "dtype": "bf16"}, {"M": 8192, "N": 4096, "dtype": "bf16"})
    0.5
    >>> similarity({"M": 64, "dtype": "bf16"}, {"M": 64, "dtype": "fp16"})
    0.0
"""

from __future__ import annotations

import math
from typing import Any

import optuna

from autotune.driver.results import best_trials, ok_trials
from autotune.driver.trial_attrs import stored_finish, stored_info


def similarity(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How alike two problems are: 1.0 identical, toward 0 as sizes drift apart, 0 if unlike.

    Example:
        >>> similarity({"M": 64, "N": 4096}, {"M": 64, "N": 4096})
        1.0
        >>> similarity({"rate": float("inf")}, {"rate": 20.0})  # an older study's odd value
        0.0
    """
    if set(a) != set(b):
        return 0.0
    distance = 0.0
    for key, value in a.items():
        other = b[key]
        numeric = all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in (value, other)
        )
        if numeric and 0 < value < math.inf and 0 < other < math.inf:
            # log of each apart: value / other can underflow to 0 (1e-300 against 1e300)
            distance += abs(math.log(value) - math.log(other))
        elif value != other:
            return 0.0
    return round(math.exp(-distance), 6)


def most_similar_study(
    storage: optuna.storages.BaseStorage,
    workload: str,
    problem: dict[str, Any],
    device_name: str | None,
    exclude: str | None = None,
    objective: tuple[str, str] | None = None,
) -> tuple[optuna.Study, float] | None:
    """The stored study of ``workload`` on the same device (and, given ``objective``, with
    that first metric and direction) whose problem is most like ``problem`` and which has a
    successful trial; None when there is none."""
    best: tuple[optuna.Study, float] | None = None
    for summary in optuna.study.get_all_study_summaries(storage):
        if summary.study_name == exclude:
            continue
        info = stored_info(summary.user_attrs)
        if info.get("workload") != workload:
            continue
        if objective is not None and first_objective(info) != objective:
            continue
        device, stored_problem = info.get("device"), info.get("problem")
        if not isinstance(device, dict) or not isinstance(stored_problem, dict):
            continue  # a record another tool wrote, or damaged: not a source to trust
        if device_name and device.get("name") not in (None, device_name):
            continue
        score = similarity(problem, stored_problem)
        if score <= 0 or (best is not None and score <= best[1]):
            continue
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        if best_trials(study):
            best = (study, score)
    return best


def first_objective(info: dict[str, Any]) -> tuple[str, str] | None:
    """The first metric and direction of a study's stored description (None if it has none).

    Example:
        >>> first_objective({"objectives": {"tflops": "maximize", "peak_mem": "minimize"}})
        ('tflops', 'maximize')
    """
    objectives = info.get("objectives") or {}
    return next(iter(objectives.items()), None)


def tuned_params(study: optuna.Study) -> set[str]:
    """The parameters ``study``'s trials hold (those of every trial that was asked one).

    Example:
        >>> study = optuna.create_study()
        >>> study.enqueue_trial({"x": 1})
        >>> _ = study.ask({"x": optuna.distributions.IntDistribution(0, 4)})
        >>> tuned_params(study), tuned_params(optuna.create_study())
        ({'x'}, set())
    """
    return {name for trial in study.get_trials(deepcopy=False) for name in trial.distributions}


def top_configs(study: optuna.Study, direction: str, count: int) -> list[dict[str, Any]]:
    """The ``count`` best distinct successful configs of ``study``: those its noise-aware
    finish re-measured first, in the finish's order (its winner first, the answer the sweep
    settled on), then the others by their one sweep reading, and last those the finish found
    over the SLO (no candidate there).

    Example:
        >>> study = optuna.create_study(direction="maximize")
        >>> for x, value in ((1, 5.0), (2, 4.0)):  # x=1 read highest once, x=2 won the finish
        ...     study.add_trial(optuna.trial.create_trial(params={"x": x}, value=value,
        ...         distributions={"x": optuna.distributions.IntDistribution(1, 2)}))
        >>> row = {"trial": 1, "median": 4.5, "spread": 0.01, "samples": [4.5, 4.5]}
        >>> study.set_user_attr("finish", {"metric": "v", "rows": [row]})
        >>> top_configs(study, "maximize", 2)
        [{'x': 2}, {'x': 1}]
    """
    sign = -1.0 if direction == "maximize" else 1.0
    by_number = {t.number: t for t in ok_trials(study)}
    rows = [row for row in stored_finish(study.user_attrs).get("rows", [])
            if row["trial"] in by_number]  # fmt: skip
    over = [by_number.pop(row["trial"]) for row in rows if row.get("over_slo")]
    finished = [by_number.pop(row["trial"]) for row in rows if not row.get("over_slo")]
    trials = finished + sorted(by_number.values(), key=lambda t: sign * t.values[0]) + over
    configs: list[dict[str, Any]] = []
    seen: set[frozenset] = set()  # each config's items: one look-up, not a scan of the list
    for trial in trials:
        try:
            key = frozenset(trial.params.items())
        except TypeError:  # a value that is no hashable scalar: compared with each, as before
            if trial.params not in configs:
                configs.append(dict(trial.params))
        else:
            if key not in seen:
                seen.add(key)
                configs.append(dict(trial.params))
        if len(configs) == count:
            break
    return configs
