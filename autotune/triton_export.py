"""A sweep's best configs as a ``configs`` list of ``triton.Config`` for ``@triton.autotune``,
ordered by the noise-aware finish's medians (winner first, with spread) where one ran; a kernel
that runs at many shapes takes a per-shape table instead (:mod:`autotune.triton_table`). A rename
map (``BLOCK_M=BLOCK_SIZE_M``, :mod:`autotune.triton_names`) serves a kernel that spells the
parameters otherwise; ``NAME=`` (empty) drops a parameter the kernel does not have, and the
module's docstring says which values it had.

Example:
    >>> import optuna
    >>> study = optuna.create_study(direction="maximize")
    >>> study.add_trial(optuna.trial.create_trial(
    ...     params={"BLOCK_M": 64, "num_warps": 4}, value=1.0,
    ...     distributions={"BLOCK_M": optuna.distributions.CategoricalDistribution([64]),
    ...                    "num_warps": optuna.distributions.CategoricalDistribution([4])}))
    >>> "triton.Config({'BLOCK_M': 64}, num_warps=4)" in triton_export(study)
    True
"""

from __future__ import annotations

import json

import optuna

from autotune.driver.finish import spread_text
from autotune.driver.results import objectives_of, ok_trials, study_info
from autotune.driver.trial_attrs import stored_finish
from autotune.reference_verdict import describe, winner_verdict
from autotune.replay_info import is_replay, study_replay
from autotune.triton_names import TritonExportError, check_rename, distinct_configs
from autotune.triton_recorded import exported_configs
from autotune.triton_source import (
    dropped_note,
    figures_origin,
    module_header,
    triton_config_source,
)
from autotune.triton_workload import check_kernel_workload


def ranked_trials(
    study: optuna.Study, top: int, rename: dict[str, str] | None = None
) -> list[tuple[optuna.trial.FrozenTrial, str]]:
    """The ``top`` best successful trials with a comment each: the noise-aware finish's rows
    first, by their re-measured medians (winner first, with spread), then the other trials by
    their single sweep reading (a replay's: the figure replayed from its table). Each config
    comes once as ``rename`` exports it (:func:`distinct_configs`): a trial that would repeat a
    better one's ``triton.Config`` gives its place to the next distinct one."""
    objectives = objectives_of(study)
    name, direction = next(iter(objectives.items()))
    sign = 1.0 if direction == "maximize" else -1.0
    by_number = {t.number: t for t in ok_trials(study)}
    ranked: list[tuple[optuna.trial.FrozenTrial, str]] = []
    finish = stored_finish(study.user_attrs)
    for row in finish.get("rows", []):
        trial = by_number.pop(row["trial"], None)
        if trial is not None:
            ranked.append(
                (trial, f"trial {trial.number}: finish median {row['median']:.4g} {name}, "
                        f"{spread_text(row['spread'], len(row['samples']))}")
            )  # fmt: skip
    front: set[int] = set()
    if len(objectives) > 1:  # the Pareto front's configs first: a dominated one never leads
        front = {t.number for t in study.best_trials if t.number in by_number}
    rest = sorted(by_number.values(), key=lambda t: (t.number not in front, -sign * t.values[0]))
    reading = "replayed from the table" if is_replay(study) else "one sweep reading"
    for t in rest:
        where = ", on the Pareto front" if t.number in front else ""
        ranked.append((t, f"trial {t.number}: {t.values[0]:.4g} {name} ({reading}{where})"))
    kept = distinct_configs(exported_configs(study, [t for t, _ in ranked]), rename or {})
    return [ranked[i] for i in kept[:top]]


def _objectives_note(study: optuna.Study) -> str:
    """For a sweep of several objectives, how its configs were ordered (else nothing)."""
    objectives = list(objectives_of(study))
    if len(objectives) < 2:
        return ""
    return (
        f"Note: a sweep of {', '.join(objectives)}: the Pareto front's configs first, each "
        f"group by {objectives[0]}; @triton.autotune keeps whichever runs fastest.\n"
    )


def triton_export(study: optuna.Study, top: int = 5, rename: dict[str, str] | None = None) -> str:
    """The ``top`` best successful configs of a study as triton.Configs, ordered as
    :func:`ranked_trials` says (a sweep of several objectives: its Pareto front first)."""
    ranked = ranked_trials(study, top, rename)
    if not ranked:
        raise TritonExportError(f"study {study.study_name!r} has no successful trial to export")
    info = study_info(study)
    replay = study_replay(study)
    check_kernel_workload(study.study_name, info, replay)
    configs = exported_configs(study, [t for t, _ in ranked])
    check_rename(rename or {}, {name for config in configs for name in config})
    verdict = winner_verdict(study, ranked[0][0])
    problem = info.get("problem", {})  # a replay's: with the problem its table records
    problem = problem if replay is None else {**replay["problem"], **problem}
    # a sweep's study has no label (a replay's names its table), a foreign one no command:
    # neither leaves a space at a line's end
    study_line = f"Study {study.study_name!r}, problem {json.dumps(problem)}."
    command = info.get("command")
    body = (
        " ".join(filter(None, [study_line, info.get("label")]))
        + f"\n{dropped_note(configs, rename or {})}\n"
        + (f"Note: {describe(verdict)}.\n" if verdict else "")
        + _objectives_note(study)
        + "Use: @triton.autotune(configs=configs, key=[...]) above the kernel.\n"
        + (f"Reproduce: {command}\n" if command else "")
    )
    title = str(info.get("workload") or "") if replay is None else ""  # none: a foreign study
    header = module_header(title, figures_origin(info, replay), body)
    return header + triton_config_source(configs, [c for _, c in ranked], rename)
