"""Best configs out of a study, into files that drop straight into the stack that runs them.

Formats: canonical JSON and YAML (config, metrics, device and software fingerprint, the
command that reproduces the sweep) and ``triton``: a Python file of ``triton.Config`` entries
for ``@triton.autotune(configs=...)``.

Example:
    >>> text = triton_config_source([{"BLOCK_M": 64, "num_warps": 4}], ["trial 3"])
    >>> "triton.Config({'BLOCK_M': 64}, num_warps=4)" in text
    True
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
import yaml

from autotune import __version__
from autotune.driver.results import best_trials, objectives_of, ok_trials, study_info
from autotune.driver.trial_attrs import FINISH, METRICS, TELEMETRY
from autotune.kernel_config import KernelConfig

FORMATS = ("json", "yaml", "triton")


class ExportError(ValueError):
    """Nothing to export, or a format that cannot express the study's configs."""


def trial_record(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """The canonical description of one trial's config and what it measured."""
    info = study_info(study)
    objectives = objectives_of(study)
    return {
        "autotune_version": __version__,
        "study": study.study_name,
        "workload": info.get("workload"),
        "label": info.get("label", ""),
        "problem": info.get("problem", {}),
        "trial": trial.number,
        "config": dict(trial.params),
        "objectives": objectives,
        "values": dict(zip(objectives, trial.values or [], strict=False)),
        "metrics": trial.user_attrs.get(METRICS, {}),
        "telemetry": trial.user_attrs.get(TELEMETRY, {}),
        "device": info.get("device", {}),
        "command": info.get("command", ""),
        "exported": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def best_record(study: optuna.Study) -> dict[str, Any]:
    """The best trial's record; with several objectives, the Pareto front rides along.

    When the sweep ended with the noise-aware finish, its winner is the best trial, and the
    re-measured medians and spreads ride along under ``finish``."""
    best = best_trials(study)
    if not best:
        raise ExportError(f"study {study.study_name!r} has no successful trial to export")
    finish = study.user_attrs.get(FINISH)
    chosen = best[0]
    if finish and finish.get("rows"):
        chosen = study.trials[finish["rows"][0]["trial"]]
    record = trial_record(study, chosen)
    if finish:
        record["finish"] = finish
    if len(objectives_of(study)) > 1:
        record["pareto_front"] = [
            {
                "trial": t.number,
                "config": dict(t.params),
                "values": dict(zip(objectives_of(study), t.values, strict=True)),
            }
            for t in best
        ]
    return record


def write_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename: never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def triton_config_source(
    configs: list[dict[str, Any]], comments: list[str], rename: dict[str, str] | None = None
) -> str:
    """Python source of a ``configs`` list of ``triton.Config`` for ``@triton.autotune``;
    ``rename`` maps meta-parameter names for a kernel that spells them otherwise."""
    lines = []
    for config, comment in zip(configs, comments, strict=True):
        source = KernelConfig.from_flat(config).renamed(rename or {}).triton_source()
        lines.append(f"    {source},  # {comment}")
    return "configs = [\n" + "\n".join(lines) + "\n]\n"


def ranked_trials(study: optuna.Study, top: int) -> list[tuple[optuna.trial.FrozenTrial, str]]:
    """The ``top`` best successful trials with a comment each: the noise-aware finish's rows
    first, by their re-measured medians (winner first, with spread), then the other trials by
    their single sweep reading."""
    objectives = objectives_of(study)
    name, direction = next(iter(objectives.items()))
    sign = 1.0 if direction == "maximize" else -1.0
    by_number = {t.number: t for t in ok_trials(study)}
    ranked: list[tuple[optuna.trial.FrozenTrial, str]] = []
    finish = study.user_attrs.get(FINISH) or {}
    for row in finish.get("rows", []):
        trial = by_number.pop(row["trial"], None)
        if trial is not None:
            ranked.append(
                (trial, f"trial {trial.number}: finish median {row['median']:.4g} {name}, "
                        f"spread {row['spread']:.1%} over {len(row['samples'])} rounds")
            )  # fmt: skip
    rest = sorted(by_number.values(), key=lambda t: -sign * t.values[0])
    ranked += [(t, f"trial {t.number}: {t.values[0]:.4g} {name} (one sweep reading)") for t in rest]
    return ranked[:top]


def triton_export(study: optuna.Study, top: int = 5, rename: dict[str, str] | None = None) -> str:
    """The ``top`` best successful configs of a single-objective study as triton.Configs,
    ordered as :func:`ranked_trials` says."""
    ranked = ranked_trials(study, top)
    if not ranked:
        raise ExportError(f"study {study.study_name!r} has no successful trial to export")
    info = study_info(study)
    header = (
        f'"""Tuned by autotune {__version__}: {info.get("workload")} '
        f"{json.dumps(info.get('problem', {}))}\n"
        f"on {info.get('device', {}).get('name', 'unknown device')}, study "
        f"{study.study_name!r}. {info.get('label', '')}\n\n"
        "Use: @triton.autotune(configs=configs, key=[...]) above the kernel.\n"
        f'Reproduce: {info.get("command", "")}\n"""\n\nimport triton\n\n'
    )
    configs = [dict(t.params) for t, _ in ranked]
    return header + triton_config_source(configs, [c for _, c in ranked], rename)


def export_text(
    study: optuna.Study, fmt: str, top: int = 5, rename: dict[str, str] | None = None
) -> str:
    """Render the study's best config(s) in ``fmt`` (one of :data:`FORMATS`); ``rename``
    applies to ``triton``."""
    if fmt == "json":
        return json.dumps(best_record(study), indent=2, sort_keys=False) + "\n"
    if fmt == "yaml":
        return yaml.safe_dump(best_record(study), sort_keys=False)
    if fmt == "triton":
        return triton_export(study, top, rename)
    raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")


def load_record(path: str | Path) -> dict[str, Any]:
    """Read back a JSON or YAML record written by :func:`export_text`."""
    text = Path(path).read_text()
    return json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
