"""What a replay study's figures are: a recorded table's measurements, looked up, not taken.

A replay carries every column of its table's row that is neither a parameter nor the metric
into the trial's metrics: ``autotune record`` stamps each row with its ``workload``,
``problem.NAME`` and ``device.NAME``, so an export, a comparison or a report of a replay can
say where its figures were measured, not name the machine that replayed them.

Example:
    >>> replay_source({"name": "NVIDIA H200"})
    'replay of measurements on NVIDIA H200'
"""

from __future__ import annotations

from typing import Any

import optuna

from autotune.driver.results import ok_trials, study_info
from autotune.driver.trial_attrs import trial_metrics

#: a replay's label: its table as shown, where its figures were measured, then this
LABEL_HEAD, LABEL_TAIL = "REPLAY of ", ": recorded measurements are looked up, nothing is measured"
#: how the label says where its figures were measured (:func:`measured_on_text`)
MEASURED_ON = " (measured on "


def measured_on_text(names: list[str]) -> str:
    """The replay label's note on the devices a table's figures were measured on, or nothing
    without one.

    Example:
        >>> measured_on_text(["NVIDIA H100"]), measured_on_text([])
        (' (measured on NVIDIA H100)', '')
        >>> measured_on_text(["a", "b", "c", "d", "e"])
        ' (measured on a, b, c and 2 more)'
    """
    if not names:
        return ""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return f"{MEASURED_ON}{shown})"


def lacks_device(label: str) -> bool:
    """Whether ``label`` is a replay's stored before labels named the device its table was
    measured on.

    Example:
        >>> lacks_device("REPLAY of t.csv: recorded measurements are looked up, nothing is "
        ...              "measured"), lacks_device("")
        (True, False)
    """
    if not label.startswith(LABEL_HEAD) or LABEL_TAIL not in label:
        return False
    return MEASURED_ON not in label[: label.rindex(LABEL_TAIL)]


def completed_label(label: str, devices: list[str]) -> str:
    """``label``, where it lacks the device (:func:`lacks_device`), with ``devices`` (the
    names the table recorded) where the label names it now; else as it is.

    Example:
        >>> completed_label("REPLAY of t.csv: recorded measurements are looked up, nothing is "
        ...                 "measured", ["NVIDIA H100"])
        'REPLAY of t.csv (measured on NVIDIA H100): recorded measurements are looked up, ...'
    """
    if not lacks_device(label):
        return label
    cut = label.rindex(LABEL_TAIL)
    return label[:cut] + measured_on_text(devices) + label[cut:]


def replay_stamps(metrics: dict[str, Any]) -> dict[str, Any]:
    """What a recorded table says of its recording, read from a replayed trial's metrics (a
    replay carries every column of its row that is not a parameter or the metric): the
    ``workload`` column and the ``problem.NAME`` columns (``autotune record`` writes them), and
    the device it was measured on (``device.NAME`` columns, or a ``device`` column holding its
    name); None or empty where the table does not record it.

    Example:
        >>> replay_stamps({"replay": True, "workload": "serving", "problem.rate": 40,
        ...                "device.name": "NVIDIA H200", "ms": 1.5})
        {'workload': 'serving', 'problem': {'rate': 40}, 'device': {'name': 'NVIDIA H200'}}
        >>> replay_stamps({"replay": True, "ms": 1.5, "device": "NVIDIA H100"})
        {'workload': None, 'problem': {}, 'device': {'name': 'NVIDIA H100'}}
    """
    workload = metrics.get("workload")
    problem = {k[8:]: v for k, v in metrics.items() if k.startswith("problem.")}
    device = {k[7:]: v for k, v in metrics.items() if k.startswith("device.")}
    if isinstance(metrics.get("device"), str) and "name" not in device:
        device["name"] = metrics["device"]
    return {
        "workload": workload if isinstance(workload, str) and workload else None,
        "problem": problem,
        "device": device,
    }


def replay_source(device: dict[str, Any]) -> str:
    """Where a replay's figures were measured, from the device its table records (``{}``:
    none), for every place that shows a replay's device.

    Example:
        >>> replay_source({"name": "NVIDIA H200"})
        'replay of measurements on NVIDIA H200'
        >>> replay_source({})
        'replay of a recorded table, device not recorded'
    """
    name = device.get("name")
    if isinstance(name, str) and name:
        return f"replay of measurements on {name}"
    return "replay of a recorded table, device not recorded"


def replay_info(info: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any] | None:
    """For a replay (``info``: its study's record; ``metrics``: a replayed trial's), what its
    table recorded: ``source`` (:func:`replay_source`), ``table``, ``workload`` (its stamp, or
    None), ``problem`` (the recorded one, the replay's own ``--problem`` values over it),
    ``device`` (where it was measured, ``{}`` where not recorded) and ``replayed_on`` (the
    device record of the machine that looked the figures up). None for a sweep that measured.

    Example:
        >>> info = {"workload": "replay", "device": {"name": "a CPU"},
        ...         "problem": {"table": "t.csv", "params": ["BM"], "metric": "ms", "M": 8}}
        >>> replay = replay_info(info, {"workload": "matmul", "problem.M": 64, "problem.N": 4})
        >>> replay["source"], replay["workload"], replay["problem"]
        ('replay of a recorded table, device not recorded', 'matmul', {'M': 8, 'N': 4})
        >>> replay["device"], replay["replayed_on"]
        ({}, {'name': 'a CPU'})
        >>> replay_info({"workload": "matmul"}, {}) is None
        True
    """
    from autotune.replay_setup import REPLAY_KEYS

    if info.get("workload") != "replay":
        return None
    stamps = replay_stamps(metrics)
    problem = info.get("problem", {})
    given = {k: v for k, v in problem.items() if k not in REPLAY_KEYS}
    return {
        "source": replay_source(stamps["device"]),
        "table": problem.get("table"),
        "workload": stamps["workload"],
        "problem": {**stamps["problem"], **given},
        "device": stamps["device"],
        "replayed_on": info.get("device", {}),
    }


def is_replay(study: optuna.Study) -> bool:
    """Whether the study replayed a recorded table (measured nothing)."""
    return study_info(study).get("workload") == "replay"


def study_label(study: optuna.Study) -> str:
    """The label ``study`` stored (a replay's says so, ``REPLAY of ...``; '' for most
    sweeps), the one every result and report shows. A replay's stored before labels named the
    device its table was measured on is completed with it, from its trials' stamps
    (:func:`replay_stamps`), as a replay of that table is labelled now."""
    info = study_info(study)
    label = info.get("label") or ""
    if not isinstance(label, str) or info.get("workload") != "replay" or not lacks_device(label):
        return label if isinstance(label, str) else ""
    names: dict[str, None] = {}
    for trial in study.get_trials(deepcopy=False):
        name = replay_stamps(trial_metrics(trial))["device"].get("name")
        if isinstance(name, str) and name.strip():
            names.setdefault(name)
    return completed_label(label, list(names))


def study_replay(study: optuna.Study) -> dict[str, Any] | None:
    """:func:`replay_info` of a replay study, read from its first successful trial (one
    recording stamps every row alike); None for a sweep that measured."""
    if not is_replay(study):
        return None
    first = next(iter(ok_trials(study)), None)
    metrics = trial_metrics(first) if first is not None else {}
    return replay_info(study_info(study), metrics)
