"""Turn what the user asked for into :class:`~autotune.driver.SweepSettings`.

Resolves the workload (default: the training step, sized to the device), its problem and
search space, the objectives, a replay table, and the settings of a stored study to resume;
the parts are checked by their owners (:mod:`autotune.workload_setup`,
:mod:`autotune.workload_checks`, :mod:`autotune.resumed_study`,
:mod:`autotune.sweep_option_checks`).

Example:
    >>> settings = build_settings(workload="faults", space=None, problem={}, objective=None,
    ...     sampler="auto", trials=4, time_budget_s=None, seed=0, storage="memory", study=None,
    ...     trial_timeout_s=None, device={"type": "cpu"}, replay=None, params=None, metric=None,
    ...     maximize=True, command="autotune tune --workload faults")
    >>> settings.workload, settings.objectives, settings.n_trials
    ('faults', {'score': 'maximize'}, 4)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.driver import SweepSettings
from autotune.objective_option import parse_objectives
from autotune.objectives import get_objective
from autotune.objectives.external import WorkloadError, setup_call
from autotune.resumed_study import (
    check_resumed_objectives,
    check_stored_secrets,
    check_stored_workload,
    resumed_budget,
    stored_study_info,
)
from autotune.setup_error import SetupError
from autotune.slo_setup import check_slo_metrics, resumed_slo, with_slo_limits
from autotune.space import SpaceError, load_space
from autotune.space.feasibility import check_satisfiable
from autotune.storage import study_name_fault
from autotune.sweep_defaults import (
    DEFAULT_CPU_JOB_TRIALS,
    DEFAULT_TRIALS,
    DEFAULT_WORKLOAD,
    trial_timeout,
)
from autotune.sweep_option_checks import (
    check_ray_address,
    check_run_options,
    check_sampler,
    check_warm_start,
)
from autotune.tuning_cache import fingerprint, module_files, source_hash, source_modules
from autotune.workload_checks import (
    baseline_in_space,
    check_config_keys,
    check_objective_hooks,
    check_space_workload,
    unpoisoned_note,
)
from autotune.workload_setup import built_objective, resolve_workload


def build_settings(
    *,
    workload: str | None,
    space: str | None,
    problem: dict[str, Any],
    objective: str | None,
    sampler: str,
    trials: int | None,
    time_budget_s: float | None,
    seed: int | None,
    storage: str,
    study: str | None,
    trial_timeout_s: float | None,
    device: dict[str, Any],
    replay: Path | None,
    params: str | None,
    metric: str | None,
    maximize: bool,
    command: str,
    warm_start: str = "auto",
    executor: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    gpus_per_trial: float | None = None,
    compile_ahead: int | None = None,
    slo: dict[str, float] | None = None,
) -> SweepSettings:
    """Settings for ``autotune tune``; a stored ``study`` supplies whatever is not given.
    ``slo`` (``--slo``'s limits) also sets the per-request limits of a workload's problem that
    ``--problem`` leaves (:func:`with_slo_limits`)."""
    fault = None if study is None else study_name_fault(study)  # '' was taken for none
    if fault is not None:
        raise SetupError(fault)
    run_options = {"executor": executor, "workers": workers, "compile_ahead": compile_ahead,
                   "ray_address": ray_address, "gpus_per_trial": gpus_per_trial}  # fmt: skip
    # the options as given need no workload: refused before one is imported (torch, 3 s)
    check_run_options(trials=trials, **run_options)
    check_ray_address(executor, ray_address)  # a socket's check: no Ray, no workload yet
    stored = stored_study_info(storage, study)
    label = ""
    baseline = None
    untuned: dict[str, Any] = {}  # the default's knobs the space does not tune
    key = None
    source_files: dict[str, str] | None = None  # the files of the modules the key hashed
    notes: list[str] = []
    if replay is None and (params or metric or not maximize):
        given = "--params" if params else "--metric" if metric else "--minimize"
        raise SetupError(f"{given} applies to --replay")
    replay_study = stored is not None and stored.get("workload") == "replay"
    if replay is not None or (replay_study and workload in (None, "replay")):
        workload = "replay"
        from autotune.replay_setup import (
            check_replay_objective,
            check_replay_slo,
            merged_note,
            replay_arguments,
            replay_label,
            replay_settings,
            table_shown,
        )

        # a resumed replay study fills in what it stored (its table, ... with --study alone)
        typed = replay  # the table as the user typed it, if this run names it
        given = {"params": params, "metric": metric, "maximize": maximize, "space_path": space}
        args = replay_arguments(stored, study, replay=replay, problem_values=problem, **given)
        replay, metric, maximize = args["replay"], args["metric"], args["maximize"]
        problem, space_obj, objectives = replay_settings(**args)
        space_obj.validate_names(problem)  # as a workload's space is checked
        check_satisfiable(space_obj, problem, device)
        if args["space_path"]:  # its proposals must find the table's rows, or none runs
            from autotune.replay_overlap import check_table_overlap

            check_table_overlap(replay, space_obj, args["space_path"], problem, device)
        check_replay_slo(replay, slo or {}, metric, maximize, problem["params"])
        check_replay_objective(objective, metric, maximize)
        if replay_study:  # as a resumed sweep of a workload keeps them
            sampler = stored.get("sampler", sampler) if sampler == "auto" else sampler
            seed = stored.get("seed") if seed is None else seed
            trials, time_budget_s = resumed_budget(stored, trials, time_budget_s)
            slo = resumed_slo(study, stored, slo)
        # the table as typed, or as the study's first run showed it: not its stored path
        shown = str(typed) if typed is not None else table_shown(stored, replay)
        label = replay_label(shown, replay, problem["params"])
        merged = merged_note(replay, problem["params"], metric)  # medians of several configs
        notes += [merged] if merged else []
    elif stored is not None and workload in (None, stored.get("workload")):
        workload = stored["workload"]
        check_stored_workload(study, workload)
        check_stored_secrets(study, stored, problem)
        problem = {**stored.get("problem", {}), **problem}
        space_obj = load_space(space or stored["space"])
        check_space_workload(space_obj, workload, get_objective(workload))
        objectives = dict(stored["objectives"])
        check_resumed_objectives(study, workload, objective, objectives)
        sampler = stored.get("sampler", sampler) if sampler == "auto" else sampler
        seed = stored.get("seed") if seed is None else seed
        trials, time_budget_s = resumed_budget(stored, trials, time_budget_s)
        label = stored.get("label", "")
        check_slo_metrics(workload, slo or {})
        slo = resumed_slo(study, stored, slo)
    else:
        default_job = workload is None
        workload = workload or DEFAULT_WORKLOAD
        typed = dict(problem)  # the values given: a refusal names them as written (as_typed)
        problem = with_slo_limits(workload, problem, slo or {})
        objective_cls, space_obj, problem = resolve_workload(
            workload, space, problem, device, satisfiable=False
        )
        objectives = parse_objectives(objective, objective_cls.directions)
        check_slo_metrics(workload, slo or {})
        objective_obj, baseline = built_objective(workload, objective_cls, problem, typed)
        # after the objective took the problem: a size it refuses is its own message, not a
        # constraint of the space failing on it (N=0 in log2(problem.N))
        check_satisfiable(space_obj, problem, device)
        if baseline is not None and not isinstance(baseline, dict):
            raise WorkloadError(f"{workload}: {objective_cls.__name__}.default_config returned "
                                f"{type(baseline).__name__}, not a dict or None")  # fmt: skip
        with setup_call(workload, objective_cls, "config_keys"):
            keys = objective_obj.config_keys()
        check_config_keys(space_obj, workload, keys)
        notes += unpoisoned_note(workload, objective_cls)
        timeout_s = trial_timeout(trial_timeout_s, time_budget_s)
        check_objective_hooks(
            objective_obj, objective_cls, workload, space_obj, slo, timeout_s, typed
        )
        untuned = {k: v for k, v in (baseline or {}).items() if k not in space_obj.names}
        baseline, outside = baseline_in_space(baseline, space_obj, problem, device)
        notes += outside
        if objective_cls.measures:
            modules = source_modules(workload)  # walked once: the key and --output's check
            source_files = module_files(modules)
            source = source_hash(workload, space_obj.source if space else None, modules)
            external = getattr(objective_obj, "cache_parts", None)  # a program outside ours
            with setup_call(workload, objective_cls, "cache_parts"):
                outside_parts = external() if external is not None else None
            key = fingerprint(workload, problem, device, source, objectives, slo, outside_parts)
        if trials is None and time_budget_s is None:
            cpu_job = default_job and device.get("type") == "cpu"
            trials = DEFAULT_CPU_JOB_TRIALS if cpu_job else DEFAULT_TRIALS
    if stored is None and trials is None and time_budget_s is None:
        trials = DEFAULT_TRIALS
    check_run_options(trials=trials, **run_options)  # the budget a stored study filled in
    sampler_note = check_sampler(sampler, space_obj, objectives, problem, device)
    if sampler_note is not None:
        notes.append(sampler_note)
    objective_name = get_objective(workload).__name__  # loaded by now (a resume's checked)
    settings = SweepSettings(
        workload=workload,
        problem=problem,
        space=space_obj,
        objectives=objectives,
        sampler=sampler,
        seed=seed,
        n_trials=trials,
        time_budget_s=time_budget_s,
        storage=storage,
        study_name=study,
        trial_timeout_s=trial_timeout(trial_timeout_s, time_budget_s),
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        gpus_per_trial=gpus_per_trial,
        compile_ahead=compile_ahead,
        device=device,
        command=command,
        label=label,
        baseline=baseline,
        untuned=untuned,
        warm_start=warm_start,
        fingerprint=key,
        notes=notes,
        slo=dict(slo or {}),  # a resumed sweep's: the stored one (resumed_slo)
        objective_name=objective_name,
        source_files=source_files,
    )
    check_warm_start(settings)
    return settings


__all__ = ["SetupError", "SpaceError", "build_settings"]
