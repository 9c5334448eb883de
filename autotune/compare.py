"""``autotune compare``: sweeps side by side (two devices, two versions, two shapes): each one's
winner, how the winners' configs differ, and each winner's value in the other sweeps'
landscapes where they measured the same config.

Example:
    >>> import optuna
    >>> a, b = optuna.create_study(direction="maximize"), optuna.create_study(direction="maximize")
    >>> for study, scale in ((a, 1.0), (b, 2.0)):
    ...     for x in (1, 2, 3):
    ...         study.enqueue_trial({"x": x})
    ...     study.optimize(lambda t: scale * t.suggest_int("x", 1, 3) ** (2 if scale > 1 else 1),
    ...                    n_trials=3)
    >>> rows = compare_studies([a, b])
    >>> [r["winner_config"] for r in rows], rows[0]["elsewhere"]
    ([{'x': 3}, {'x': 3}], {'1': 18.0})
"""

from __future__ import annotations

import html
import json
from typing import Any

import optuna

from autotune.driver.results import measured_trials
from autotune.driver.trial_attrs import (
    is_launched,
    stored_finish,
    stored_info,
    trial_status,
)
from autotune.export_text import shown
from autotune.replay_info import study_replay
from autotune.units import named


def _winner(study: optuna.Study) -> optuna.trial.FrozenTrial | None:
    trials = measured_trials(study)
    if not trials:
        return None
    finish = stored_finish(study.user_attrs).get("rows") or []
    if finish:
        chosen = next((t for t in trials if t.number == finish[0]["trial"]), None)
        if chosen is not None:
            return chosen
    # a sweep of several objectives is compared on its first
    maximize = study.directions[0] == optuna.study.StudyDirection.MAXIMIZE
    return max(trials, key=lambda t: t.values[0] if maximize else -t.values[0])


def _finish_median(study: optuna.Study, winner: optuna.trial.FrozenTrial) -> float:
    """The winner's re-measured median where the sweep ended with the finish, else its
    sweep reading."""
    for row in stored_finish(study.user_attrs).get("rows") or []:
        if row["trial"] == winner.number:
            return float(row["median"])
    return winner.values[0]


def _value_in(study: optuna.Study, params: dict[str, Any]) -> float | None:
    """``params``' value in ``study``: its finish's median where the finish re-measured that
    config (the figure the study itself stands by), else its first sweep reading; None where
    the study never measured it."""
    match = [t for t in measured_trials(study) if t.params == params]
    if not match:
        return None
    medians = {row["trial"]: row["median"]
               for row in stored_finish(study.user_attrs).get("rows") or []}  # fmt: skip
    return next((float(medians[t.number]) for t in match if t.number in medians),
                match[0].values[0])  # fmt: skip


def _values_in(study: optuna.Study, params: dict[str, Any]) -> list[float] | None:
    """``params``' every objective's value in a ``study`` of several objectives (its first
    sweep reading: such a sweep has no finish), else None."""
    if len(study.directions) < 2:
        return None
    match = [t for t in measured_trials(study) if t.params == params]
    return list(match[0].values) if match else None


def _failed_in(study: optuna.Study, params: dict[str, Any]) -> str | None:
    """How ``params`` failed where ``study`` ran it and never measured it ("failed
    (wrong_result)"), or None where it never ran there."""
    statuses = [trial_status(t) for t in study.get_trials(deepcopy=False)
                if is_launched(t) and t.params == params and trial_status(t) != "ok"]  # fmt: skip
    if not statuses:
        return None
    return f"failed ({', '.join(dict.fromkeys(statuses))})"


def _elsewhere(metrics: list[str], value: float | list[float] | str) -> str:
    """A winner's figure in another study (its metrics' units: every objective's value where
    it has several), or how it failed there (a status with a control character shown
    escaped); a metric whose name gives no unit is named beside it ('0.800 score', not a
    bare '0.800').

    Example:
        >>> _elsewhere(["score"], 0.8), _elsewhere(["tflops"], 635.0)
        ('0.800 score', '635 TFLOP/s')
        >>> _elsewhere(["score", "latency_s"], [0.8, 0.0125]), _elsewhere(["ms"], "failed (oom)")
        ('0.800 score, 0.0125 s', 'failed (oom)')
    """
    if isinstance(value, str):
        return shown(value)
    values = value if isinstance(value, list) else [value]
    return ", ".join(named(m, v) for m, v in zip(metrics, values, strict=False))


def compare_studies(studies: list[optuna.Study]) -> list[dict[str, Any]]:
    """One row per study: its winner's config and value, the keys where the winners differ,
    and ``elsewhere``: the winner's value in each other study (by index) that measured it, in
    that study's metric (its first objective), or how it failed in one that ran it and failed
    (:func:`_failed_in`); ``elsewhere_values``: the winner's every value in each other study
    of several objectives, as ``winner_values`` holds its own. A replay's ``device`` is the
    one its table records, and ``replay`` says where its figures come from
    (:func:`autotune.replay_info.replay_info`); None for a sweep that measured."""
    winners = [_winner(s) for s in studies]
    rows = []
    for i, (study, winner) in enumerate(zip(studies, winners, strict=True)):
        info = stored_info(study.user_attrs)
        metrics = list(info.get("objectives") or {"value": None})
        metric = metrics[0]
        replay = study_replay(study)
        device = info.get("device", {}) if replay is None else replay["device"]
        row: dict[str, Any] = {
            "study": study.study_name,
            "workload": info.get("workload"),
            "problem": info.get("problem", {}),
            # a replay's: where its table was measured (None where it does not say), not the
            # machine that looked it up (``replay``'s ``replayed_on``)
            "device": device.get("name"),
            "replay": replay,
            "metric": metric,
            "metrics": metrics,  # the study's objectives, ``metric`` first
            "directions": _directions(study, info, metrics),  # each metric's, in order
            "winner_trial": winner.number if winner else None,
            "winner_config": dict(winner.params) if winner else None,
            "winner_value": _finish_median(study, winner) if winner else None,
            # every objective's reading (the first: ``winner_value``, the finish's median
            # where one ran; a study of several objectives has none)
            "winner_values": (
                [_finish_median(study, winner), *winner.values[1:]] if winner else None
            ),
            "elsewhere": {},
            # a study of several objectives' every value, where ``elsewhere`` has the first's
            "elsewhere_values": {},
        }
        if winner is not None:
            for j, other in enumerate(studies):
                if j == i:
                    continue
                value = _value_in(other, winner.params)
                if value is None:
                    value = _failed_in(other, winner.params)
                if value is not None:
                    row["elsewhere"][str(j)] = value
                values = _values_in(other, winner.params)
                if values is not None:
                    row["elsewhere_values"][str(j)] = values
        rows.append(row)
    configs = [r["winner_config"] for r in rows if r["winner_config"] is not None]
    keys = sorted({k for c in configs for k in c})
    differs = [k for k in keys if len({json.dumps(c.get(k)) for c in configs}) > 1]
    for row in rows:
        row["differs"] = differs if len(configs) > 1 else None
    return rows


def _directions(study: optuna.Study, info: dict[str, Any], metrics: list[str]) -> list[str]:
    """Each of ``metrics``' directions ('maximize' or 'minimize'), as the study stored them
    with its objectives, else as optuna holds them (a study autotune did not make)."""
    stored = info.get("objectives") or {}
    held = [d.name.lower() for d in study.directions]
    return [str(stored.get(m) or (held[i] if i < len(held) else "")) for i, m in enumerate(metrics)]


def _direction_notes(rows: list[dict[str, Any]]) -> list[str]:
    """A note for each metric that two studies rank in opposite directions (one maximizes
    what another minimizes: a replay's --maximize beside a --minimize, say), whose winners are
    each the best of its own study's goal, not of one goal.

    Example:
        >>> print(*_direction_notes([
        ...     {"study": "a", "metrics": ["ms"], "directions": ["maximize"]},
        ...     {"study": "b", "metrics": ["ms"], "directions": ["minimize"]}]))
        the studies rank ms in opposite directions (maximized by a; minimized by b): each ...
    """
    by_metric: dict[str, dict[str, list[str]]] = {}  # metric -> direction -> studies
    for r in rows:
        for metric, direction in zip(_metrics(r), r.get("directions") or [], strict=False):
            if direction:
                studies = by_metric.setdefault(str(metric), {}).setdefault(direction, [])
                studies.append(shown(r["study"]))
    notes = []
    for metric, directions in by_metric.items():
        if len(directions) < 2:
            continue
        whose = "; ".join(f"{d.removesuffix('e')}ed by {', '.join(studies)}"
                          for d, studies in sorted(directions.items()))  # fmt: skip
        notes.append(f"the studies rank {shown(metric)} in opposite directions ({whose}): each "
                     "winner is the best of its own study's direction, and a figure better in "
                     "one is worse in the other")  # fmt: skip
    return notes


def compare_notes(rows: list[dict[str, Any]]) -> list[str]:
    """What makes the rows less comparable than they look: sweeps of other workloads or
    metrics, a metric ranked in opposite directions, and sweeps without a winner.

    Example:
        >>> compare_notes([{"study": "a", "workload": "matmul", "metric": "tflops"},
        ...                {"study": "b", "workload": "replay", "metric": "ms"}])[0]
        'the studies tune different workloads (matmul, replay)'
        >>> compare_notes([{"study": "a", "workload": "w", "metrics": ["score", "latency_s"]},
        ...                {"study": "b", "workload": "w", "metrics": ["score"]}])[0]
        'the studies rank different metrics (score and latency_s; score)'
    """
    notes = []
    workloads = list(dict.fromkeys(str(r.get("workload")) for r in rows))
    if len(workloads) > 1:
        notes.append(f"the studies tune different workloads ({', '.join(map(shown, workloads))})")
    # every objective, in order (the first ranks the winner): 'score,latency_s' is no
    # 'score,tok_s', nor 'score' alone
    metrics = list(dict.fromkeys(tuple(str(m) for m in _metrics(r)) for r in rows))
    if len(metrics) > 1:
        apart = "; " if any(len(m) > 1 for m in metrics) else ", "
        named = apart.join(" and ".join(shown(m) for m in ms) for ms in metrics)
        notes.append(f"the studies rank different metrics ({named})")
    notes += _direction_notes(rows)
    if any(r.get("differs", []) is None for r in rows):
        notes.append("fewer than two studies have a successful trial: no winners to set apart")
    return notes


def _winner_text(r: dict[str, Any]) -> str:
    if r["winner_trial"] is None:
        return "no successful trial"
    values = r.get("winner_values") or [r["winner_value"]]
    return f"winner trial {r['winner_trial']} {_elsewhere(_metrics(r), values)}"


def _everywhere(r: dict[str, Any]) -> dict[str, float | list[float] | str]:
    """A row's winner in each other study: every objective's value where that study has
    several (``elsewhere_values``), else its one value or how it failed (``elsewhere``)."""
    return {j: r.get("elsewhere_values", {}).get(j, v) for j, v in r["elsewhere"].items()}


def _metrics(r: dict[str, Any]) -> list[str]:
    """A row's objectives, its ranking metric first (a row without ``metrics``: that one)."""
    return list(r.get("metrics") or [r["metric"]])


def _source_text(r: dict[str, Any]) -> str:
    """What a row's figures are: a workload on a device, or a replay of a recorded table.

    Example:
        >>> _source_text({"workload": "matmul", "device": "NVIDIA H100"})
        'matmul on NVIDIA H100'
        >>> _source_text({"workload": "replay", "device": None,
        ...               "replay": {"source": "replay of a recorded table, device not recorded"}})
        'replay of a recorded table, device not recorded'
    """
    if r.get("replay"):
        return _device_cell(r)
    return f"{r['workload'] or 'no workload recorded'} on {_device_cell(r)}"


def _differs_line(rows: list[dict[str, Any]]) -> str | None:
    """``winners differ in: ...``, the parameters the winners' configs set apart; None where
    fewer than two studies have a winner (a note says so: there is nothing to set apart).

    Example:
        >>> _differs_line([{"differs": ["BLOCK_M"]}]), _differs_line([{"differs": None}])
        ('winners differ in: BLOCK_M', None)
    """
    differs = rows[0]["differs"] if rows else None
    if differs is None:
        return None
    return f"winners differ in: {', '.join(differs) or 'nothing'}"


def compare_text(rows: list[dict[str, Any]]) -> str:
    """A plain table of :func:`compare_studies`; a name or source with a control character is
    shown escaped (:func:`autotune.export_text.shown`, as ``autotune studies`` lists it), so
    the text never drives the terminal it is printed on.

    Example:
        >>> row = {"study": "a\\x1b[31m", "workload": "matmul", "device": None, "metric": "ms",
        ...        "winner_trial": None, "winner_config": None, "elsewhere": {}, "differs": None}
        >>> print(compare_text([row]).splitlines()[0])
        [0] 'a\\x1b[31m' (matmul on an unrecorded device): no successful trial; not ...
    """
    lines = []
    for i, r in enumerate(rows):
        where = (
            ", ".join(
                f"in {shown(rows[int(j)]['study'])}: {_elsewhere(_metrics(rows[int(j)]), v)}"
                for j, v in _everywhere(r).items()
            )
            or "not measured elsewhere"
        )
        source = shown(_source_text(r))
        lines.append(f"[{i}] {shown(r['study'])} ({source}): {_winner_text(r)}; {where}")
        if r["winner_config"] is not None:
            lines.append(f"    config: {json.dumps(r['winner_config'])}")
    differs = _differs_line(rows)
    if differs is not None:
        lines.append(differs)
    lines += [f"note: {note}" for note in compare_notes(rows)]
    return "\n".join(lines) + "\n"


def _device_cell(r: dict[str, Any]) -> str:
    """A row's device column: the device, or a replay's source (never the machine that
    replayed it).

    Example:
        >>> _device_cell({"device": None, "replay": {"source": "replay of measurements on X"}})
        'replay of measurements on X'
    """
    if r.get("replay"):
        return str(r["replay"]["source"])
    return str(r["device"] or "an unrecorded device")


def compare_html(rows: list[dict[str, Any]]) -> str:
    """The same as a self-contained HTML table: a column each for the study, its source (as
    the text says it), its winner and value, the winner's config, and its value elsewhere."""
    head = ("<tr><th>study</th><th>source</th><th>winner</th><th>config</th>"
            "<th>elsewhere</th></tr>")  # fmt: skip
    body = []
    for r in rows:
        where = (
            "; ".join(
                f"{html.escape(rows[int(j)]['study'])}: "
                f"{html.escape(_elsewhere(_metrics(rows[int(j)]), v))}"
                for j, v in _everywhere(r).items()
            )
            or "-"
        )
        config = r["winner_config"]
        shown_config = "-" if config is None else f"<code>{html.escape(json.dumps(config))}</code>"
        body.append(
            f"<tr><td>{html.escape(r['study'])}</td><td>{html.escape(_source_text(r))}"
            f"</td><td>{html.escape(_winner_text(r))}</td><td>{shown_config}</td>"
            f"<td>{where}</td></tr>"
        )
    differs = _differs_line(rows)
    differs_p = "" if differs is None else f"<p>{html.escape(differs)}</p>"
    notes = "".join(f"<p>note: {html.escape(n)}</p>" for n in compare_notes(rows))
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>autotune compare</title>"
        f"</head><body><h1>autotune compare</h1><table border=1>{head}{''.join(body)}"
        f"</table>{differs_p}{notes}</body></html>"
        "\n"
    )
