"""The winner panel of ``autotune report``: the winning trial and its config, the finish's
medians and spread (runners-up within noise, the untuned default), whether the library
reference is still faster, where the figures were measured (a replayed table says so), the
device, software and the command that reproduces the sweep with secrets redacted.

Example:
    >>> import optuna
    >>> study = optuna.create_study(direction="maximize")
    >>> study.optimize(lambda t: t.suggest_int("x", 0, 9), n_trials=3)
    >>> panel, data = winner_panel(study, {}, study.trials, ["value"], True)
    >>> panel.startswith("<h2>Winner: trial") and data["winner_trial"] in (0, 1, 2)
    True
"""

from __future__ import annotations

import html
import json
from typing import Any

import optuna

from autotune.driver.results import best_trials
from autotune.driver.trial_attrs import BASELINE, TELEMETRY, finish_faulted, stored_finish
from autotune.redact import redact
from autotune.reference_verdict import describe, winner_verdict
from autotune.replay_info import study_replay
from autotune.units import named, readable


def spread_cell(row: dict[str, Any]) -> str:
    """A finish row's spread for the report's table; one reading has none.

    Example:
        >>> spread_cell({"spread": 0.0123, "samples": [1.0, 1.01, 1.0]})
        '1.2%'
        >>> spread_cell({"spread": 0.0, "samples": [1.0]})
        'one reading'
    """
    return "one reading" if len(row.get("samples", ())) == 1 else f"{100 * row['spread']:.1f}%"


def winner_panel(
    study: optuna.Study,
    info: dict[str, Any],
    trials: list[optuna.trial.FrozenTrial],
    metrics: list[str],
    maximize: bool,
) -> tuple[str, dict[str, Any]]:
    """The panel's HTML and the figures it showed (for the page's data block), given the
    study, what the sweep stored about itself (``info``), its measured trials and its metrics
    (the first one ranks, higher first where ``maximize``)."""
    metric = metrics[0]
    data: dict[str, Any] = {}
    finish = stored_finish(study.user_attrs)
    rows = finish.get("rows") or []
    best = None
    if rows:
        best = next((t for t in trials if t.number == rows[0]["trial"]), None)
    if best is None and trials:
        best = max(trials, key=lambda t: t.values[0] if maximize else -t.values[0])
    if best is None:
        return f"<p class='no-winner'>{html.escape(no_winner(study))}</p>", data
    data["winner_trial"] = best.number
    data["winner_value"] = best.values[0]
    if len(metrics) > 1:
        data["winner_values"] = dict(zip(metrics, best.values, strict=False))
    front = best_trials(study) if len(metrics) > 1 else []
    chosen = (
        (
            f" (one of {len(front)} on the Pareto front: the best by "
            f"{html.escape(metric)}, the first objective)"
        )
        if len(front) > 1
        else ""
    )
    parts = [
        f"<h2>Winner: trial {best.number}{chosen}</h2>",
        f"<p class='winner-value'>{html.escape(values_text(metrics, best.values))}</p>",
        "<pre>" + html.escape(json.dumps(best.params, indent=2)) + "</pre>",
    ]
    if rows:
        data["finish_median"] = rows[0]["median"]
        lines = ["<tr><th>trial</th><th>median</th><th>spread</th><th></th></tr>"]
        faulted = finish_faulted(finish)  # crashed in a round: no candidate, as the CLI says

        def told_apart(row: dict[str, Any]) -> bool:  # one reading has no noise to be within
            return len(row.get("samples", ())) > 1 and len(rows[0].get("samples", ())) > 1

        for r in rows:
            tag = (
                "untuned default"
                + (" (over the SLO: not a candidate)" if r.get("over_slo") else "")  # fmt: skip
                if r.get("baseline")
                else (
                    "within noise of the winner"
                    if r.get("within_noise") and r is not rows[0] and told_apart(r)
                    else ""
                )
            )
            if r["trial"] in faulted and r is not rows[0]:  # never "within noise" of it
                tag = ("untuned default; " if r.get("baseline") else "") + (
                    "median of the rounds it ran (failed in another: not a candidate)"
                )
            median = html.escape(readable(metric, r["median"]))  # unit: the name's
            lines.append(
                f"<tr><td>{html.escape(str(r['trial']))}</td><td>{median}</td>"
                f"<td>{spread_cell(r)}</td><td>{tag}</td></tr>"
            )
        parts.append(
            f"<h3>Finish: {html.escape(finish.get('protocol', ''))}</h3>"
            f"<table class='finish'>{''.join(lines)}</table>"
        )
    verdict = winner_verdict(study, best)
    if verdict is not None:
        data["reference_faster"] = verdict
        parts.append(f"<p class='reference-faster'>{html.escape(describe(verdict))}</p>")
    default = next((t for t in trials if t.user_attrs.get(BASELINE)), None)
    if default is not None:
        parts.append(
            f"<p>Untuned default (trial {default.number}): "
            f"{html.escape(values_text(metrics, default.values, reading=False))}</p>"
        )
    device = info.get("device", {})
    software = device.get("software", {})
    telemetry = best.user_attrs.get(TELEMETRY)

    replay = study_replay(study)
    if replay is not None:  # the figures are a table's: say where it was measured
        parts.append(f"<p class='replay'>Figures: {html.escape(replay['source'])} (the "
                     "device below replayed them)</p>")  # fmt: skip
    parts.append(
        "<h3>Where it ran</h3><ul>"
        f"<li>device: {html.escape(str(device.get('name', '?')))}{_device_fields(device)}"
        "</li>"
        f"<li>software: {html.escape(', '.join(f'{k} {v}' for k, v in software.items()))}"
        "</li>"
        f"<li>the winner's telemetry: {html.escape(telemetry_text(telemetry))}</li>"
        f"<li>reproduce: <code>{html.escape(redact(str(info.get('command', ''))))}</code>"
        "</li></ul>"
    )
    return "\n".join(parts), data


def values_text(metrics: list[str], values: list[float], reading: bool = True) -> str:
    """A trial's values as the panel says them: one objective's with its unit and its name
    (``reading``: and that it is the sweep's reading), several objectives' each with its unit
    (:func:`autotune.units.named`, as the sweep's lines say them), then their names.

    Example:
        >>> values_text(["tflops"], [707.4]), values_text(["tflops"], [707.4], reading=False)
        ('707 TFLOP/s (tflops, its sweep reading)', '707 TFLOP/s')
        >>> values_text(["score", "latency_s"], [0.715, 1.24e-4])
        '0.715 score, 0.000124 s (score, latency_s: its sweep readings)'
    """
    if len(metrics) == 1:
        text = readable(metrics[0], values[0])
        return f"{text} ({metrics[0]}, its sweep reading)" if reading else text
    text = ", ".join(named(m, v) for m, v in zip(metrics, values, strict=False))
    return f"{text} ({', '.join(metrics)}: its sweep readings)" if reading else text


def telemetry_text(telemetry: Any) -> str:
    """The winner's telemetry (NVML's readings as its trial ended) as the report says it:
    each reading with its unit, those NVML could not take (unset, NaN) left out; 'none
    recorded' where there is none (a CPU has no NVML), never '{}'.

    Example:
        >>> telemetry_text({"sm_clock_mhz": 1980, "power_w": 350.25, "temperature_c": None,
        ...                 "mem_clock_mhz": "nan", "throttle_reasons": "0x0"})
        'sm_clock_mhz 1980 MHz, power_w 350 W, throttle_reasons 0x0'
        >>> telemetry_text({}), telemetry_text(None)
        ('none recorded', 'none recorded')
    """
    if not isinstance(telemetry, dict):
        return "none recorded"
    readings = []
    for key, value in telemetry.items():
        if value is None or str(value).strip().lower() in ("", "nan", "inf", "-inf"):
            continue
        if isinstance(value, float) and value != value:
            continue
        readings.append(f"{key} {readable(str(key), value)}")
    return ", ".join(readings) or "none recorded"


def no_winner(study: optuna.Study) -> str:
    """What the report says in place of a winner: that no trial ran yet, or how the trials
    failed, with the last such trial's reason (as the sweep's own last line says it).

    Example:
        >>> study = optuna.create_study()
        >>> no_winner(study)
        'No trial has run yet.'
        >>> study.add_trial(optuna.trial.create_trial(value=1e9,  # a failure's penalty
        ...     user_attrs={"status": "oom", "reason": "out of memory"}))
        >>> no_winner(study)
        'No trial succeeded: oom 1 of 1 launched; #0: out of memory.'
    """
    from autotune.driver.run_summary import study_counts
    from autotune.no_success import last_reason, most_common_failure

    if not study.get_trials(deepcopy=False):
        return "No trial has run yet."
    common = most_common_failure(study_counts(study))
    if common is None:  # none finished (running), or every config refused unlaunched
        return "No trial succeeded."
    kind, times, total = common
    example = last_reason(study, kind)
    seen = f"; #{example[0]}: {example[1]}" if example else ""
    return f"No trial succeeded: {kind} {times} of {total} launched{seen}."


def _device_fields(device: dict) -> str:
    """The device's compute capability and driver in parentheses, escaped, leaving out a
    field that is empty or absent (a CPU has neither: no parentheses at all).

    Example:
        >>> _device_fields({"compute_capability": "9.0", "driver": "580.1"})
        ' (compute capability 9.0, driver 580.1)'
        >>> _device_fields({"compute_capability": "", "driver": None}), _device_fields({})
        ('', '')
    """
    fields = [f"{label} {html.escape(str(device[key]))}"
              for key, label in (("compute_capability", "compute capability"),
                                 ("driver", "driver"))
              if device.get(key) not in (None, "")]  # fmt: skip
    return f" ({', '.join(fields)})" if fields else ""
