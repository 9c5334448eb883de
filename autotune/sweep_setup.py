"""Turn what the user asked for into :class:`~autotune.driver.SweepSettings`.

Resolves the workload (default: the training step, sized to the device), its problem and
search space, the objectives, a replay table, and the settings of a stored study to resume.

Example:
    >>> cls, space, problem = resolve_workload("faults", None, {}, {"type": "cpu"})
    >>> space.names
    ['fault', 'score']
"""

from __future__ import annotations

import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import optuna

from autotune.driver import EXECUTORS, SweepSettings
from autotune.driver.trial_attrs import stored_info
from autotune.objectives import Objective, get_objective
from autotune.objectives.external import WorkloadError, setup_call
from autotune.redact import redacted_keys
from autotune.setup_error import SetupError
from autotune.slo_setup import check_slo_metrics, resumed_slo, with_slo_limits
from autotune.space import Space, SpaceError, load_space
from autotune.space.feasibility import check_satisfiable
from autotune.storage import open_storage, storage_files, study_name_fault, study_names
from autotune.tuning_cache import fingerprint, module_files, source_hash, source_modules
from autotune.typed_values import as_typed

DEFAULT_WORKLOAD = "train-step"
DEFAULT_TRIALS = 30
# The default job on a CPU machine must finish in minutes on 2 cores.
DEFAULT_CPU_JOB_TRIALS = 12


def parse_objectives(text: str | None, defaults: dict[str, str]) -> dict[str, str]:
    """``"tokens_per_s,peak_memory_gb:min"`` -> directions; a bare name takes its default."""
    if text is None:
        name, direction = next(iter(defaults.items()))
        return {name: direction}
    chosen: dict[str, str] = {}
    parts = [p.strip() for p in text.split(",")]
    if any(not part for part in parts) and any(parts):
        raise SetupError(f"--objective {text!r}: an empty metric between commas")
    for part in filter(None, parts):
        name, colon, direction = (piece.strip() for piece in part.partition(":"))
        if colon and not direction:
            raise SetupError(f"--objective: {part!r}: no direction after ':' (max or min)")
        direction = {"max": "maximize", "min": "minimize", "": defaults.get(name, "")}.get(
            direction, direction
        )
        if name not in defaults:
            raise SetupError(f"--objective: unknown metric {name!r}; known: {', '.join(defaults)}")
        if direction not in ("maximize", "minimize"):
            raise SetupError(f"--objective: {part!r}: direction must be max or min")
        if name in chosen:
            raise SetupError(f"--objective: {name!r} is named twice")
        chosen[name] = direction
    if not chosen:
        raise SetupError(f"--objective {text!r}: name a metric; known: {', '.join(defaults)}")
    return chosen


def _resumed_budget(
    stored: dict[str, Any], trials: int | None, time_budget_s: float | None
) -> tuple[int | None, float | None]:
    """A resume's budget: the one given, else the stored study's (its trial count, which
    counts the study's trials, or its time budget, run again in full), else the default
    trial count. A resume of a time-budgeted sweep ran with no limit at all.

    Example:
        >>> _resumed_budget({"n_trials": None, "time_budget_s": 20.0}, None, None)
        (None, 20.0)
        >>> _resumed_budget({"n_trials": None, "time_budget_s": 20.0}, 5, None)
        (5, None)
        >>> _resumed_budget({}, None, None)
        (30, None)
    """
    if trials is not None or time_budget_s is not None:
        return trials, time_budget_s
    trials, time_budget_s = stored.get("n_trials"), stored.get("time_budget_s")
    if trials is None and time_budget_s is None:
        trials = DEFAULT_TRIALS
    return trials, time_budget_s


def resolve_workload(
    workload: str,
    space_path: str | None,
    overrides: dict[str, Any],
    device: dict[str, Any],
    satisfiable: bool = True,
) -> tuple[type[Objective], Space, dict[str, Any]]:
    """The objective class, its search space and its problem (defaults + ``overrides``);
    with ``satisfiable``, the space checked to admit a config for that problem (a caller that
    builds the objective first, whose own check of the problem says more, checks it after)."""
    try:
        objective_cls = get_objective(workload)
    except KeyError as exc:
        raise SetupError(str(exc.args[0])) from None
    with setup_call(workload, objective_cls, "default_problem"):
        problem = objective_cls.default_problem(device)
    if not isinstance(problem, dict):
        raise WorkloadError(f"{workload}: {objective_cls.__name__}.default_problem returned "
                            f"{type(problem).__name__}, not a dict")  # fmt: skip
    closed = bool(problem) or not objective_cls.takes_problem  # else a plugin's: any key
    unknown = sorted(set(overrides) - set(problem)) if closed else []
    if unknown:
        known = f"known: {', '.join(problem)}" if problem else "it takes no problem values"
        raise SetupError(f"--problem: unknown key {unknown[0]!r} for {workload}; {known}")
    _check_value_kinds(workload, problem, overrides)
    problem.update(_as_defaults_kind(problem, overrides))
    try:
        with setup_call(workload, objective_cls, "resolve_problem", passing=(ValueError,)):
            problem = objective_cls.resolve_problem(problem)
    except WorkloadError:
        raise
    except ValueError as exc:
        raise SetupError(f"--problem: {as_typed(str(exc), overrides)}") from None
    unused = [key for key in overrides if key not in problem]
    if unused:  # e.g. rate=5 beside trace=FILE.jsonl, whose requests replace the Poisson keys
        raise SetupError(f"--problem: {unused[0]}={overrides[unused[0]]!r} does not apply to "
                         f"{workload} with the other values given; leave it out")  # fmt: skip
    space_name = space_path or getattr(objective_cls, "space", "")
    if not space_name:
        raise SetupError(f"{workload}: the objective names no space file; pass --space FILE.yaml")
    space = load_space(space_name)
    check_space_workload(space, workload, objective_cls)
    space.validate_names(problem)
    if satisfiable:
        check_satisfiable(space, problem, device)
    return objective_cls, space, problem


def _check_value_kinds(workload: str, defaults: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Refuse a ``--problem`` value of another kind than the workload's default: a word where
    a number belongs (``M=abc``), anything but true/false for a switch.

    Example:
        >>> _check_value_kinds("matmul", {"M": 64}, {"M": "abc"})
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: --problem: M='abc' is not a number (matmul's default: 64)
    """
    for key, value in overrides.items():
        default = defaults.get(key)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise SetupError(f"--problem: {key}={value!r} is not true or false")
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if isinstance(default, int | float) and not isinstance(default, bool) and not numeric:
            raise SetupError(
                f"--problem: {key}={value!r} is not a number ({workload}'s default: {default})"
            )
        whole = isinstance(default, int) and not isinstance(default, bool)
        if whole and isinstance(value, float) and not value.is_integer():
            raise SetupError(f"--problem: {key}={value!r} is not a whole number ({workload}'s "
                             f"default: {default})")  # fmt: skip


def _as_defaults_kind(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with a whole float where the default is an int made an int (``N=1e3``
    is N=1000, as the workload's shapes and the stored problem take it, not 1000.0).

    Example:
        >>> _as_defaults_kind({"N": 4, "eps": 1e-6}, {"N": 1000.0, "eps": 1.0})
        {'N': 1000, 'eps': 1.0}
    """
    whole = {k for k, v in defaults.items() if isinstance(v, int) and not isinstance(v, bool)}
    return {k: int(v) if k in whole and isinstance(v, float) else v for k, v in overrides.items()}


def _stored_info(storage: str, study: str | None) -> dict[str, Any] | None:
    files = storage_files(storage)
    if study is None or (files and not files[0].exists()):
        return None  # a database not made yet holds no study: made only once the sweep runs
    opened = open_storage(storage)
    if study not in study_names(opened):
        return None
    return stored_info(optuna.load_study(study_name=study, storage=opened).user_attrs)


def _check_resumed_objectives(
    study: str | None, workload: str, objective: str | None, stored: dict[str, str]
) -> None:
    """A resumed sweep keeps its objectives: an ``--objective`` that asks for others is
    refused rather than ignored.

    Raises:
        SetupError: naming the stored objectives.
    """
    if not objective:
        return
    try:
        known = {**get_objective(workload).directions, **stored}
    except KeyError:  # a workload this version does not know: its stored objectives
        known = dict(stored)
    if list(parse_objectives(objective, known).items()) != list(stored.items()):
        tuned = ", ".join(f"{name}:{direction[:3]}" for name, direction in stored.items())
        raise SetupError(f"--objective {objective!r}: study {study!r} tunes {tuned}; a resumed "
                         "sweep keeps them (start another --study)")  # fmt: skip


#: Seconds a trial may take when neither ``--trial-timeout`` nor a time budget says otherwise.
DEFAULT_TRIAL_TIMEOUT_S = 300.0
#: Under ``--time-budget``, the share of it one trial may take by default (and its floor, so a
#: first trial still has time to start a worker and compile).
TRIAL_BUDGET_SHARE = 0.25
MIN_TRIAL_TIMEOUT_S = 30.0


def trial_timeout(explicit_s: float | None, time_budget_s: float | None) -> float:
    """Seconds one trial may take: ``--trial-timeout`` when given; else 300 s, or a quarter of
    the time budget when that is shorter (30 s at least), so that no one config (a compile
    mode whose autotuning runs for minutes, say) can take most of a short sweep.

    Example:
        >>> trial_timeout(None, None), trial_timeout(None, 300.0), trial_timeout(None, 60.0)
        (300.0, 75.0, 30.0)
        >>> trial_timeout(180.0, 300.0)  # what the user asked for
        180.0
    """
    if explicit_s is not None:
        return explicit_s
    if time_budget_s is None:
        return DEFAULT_TRIAL_TIMEOUT_S
    share = max(MIN_TRIAL_TIMEOUT_S, TRIAL_BUDGET_SHARE * time_budget_s)
    return min(DEFAULT_TRIAL_TIMEOUT_S, share)


def _check_config_keys(space: Space, workload: str, known: tuple[str, ...] | None) -> None:
    """Every parameter of ``space`` is a knob of ``workload`` (``known``; None: any name).

    Raises:
        SetupError: naming the space file and the first parameter the workload does not have.
    """
    if known is None:
        return
    unknown = [name for name in space.names if name not in known]
    if unknown:
        raise SetupError(
            f"{space.source}: parameters.{unknown[0]}: {workload} has no such config key; "
            f"its keys: {', '.join(known)}"
        )


def _unpoisoned_note(workload: str, objective_cls: type[Any]) -> list[str]:
    """A note for a kernel objective that names no ``outputs``: nothing is poisoned before its
    run, so a kernel that leaves its output unwritten passes the correctness check on the
    buffer's old contents (``outputs`` is optional, as ``footprint_bytes`` is).

    Example:
        >>> from autotune.objectives.kernel import KernelObjective
        >>> class Mine(KernelObjective):
        ...     pass
        >>> print(*_unpoisoned_note("mine.py", Mine))  # doctest: +NORMALIZE_WHITESPACE
        mine.py: Mine.outputs is not set: no output is poisoned (NaN) before the kernel runs,
        so one it leaves unwritten can pass the correctness check; name the tensors it writes
    """
    from autotune.objectives.kernel import KernelObjective

    if not issubclass(objective_cls, KernelObjective) or objective_cls.outputs:
        return []
    return [
        f"{workload}: {objective_cls.__name__}.outputs is not set: no output is poisoned (NaN) "
        "before the kernel runs, so one it leaves unwritten can pass the correctness check; "
        "name the tensors it writes"
    ]


def check_space_workload(space: Space, workload: str, objective_cls: type[Any]) -> None:
    """A space file that names a workload (its ``workload:`` key) is one for the workload
    tuned: ``workload`` as given, its objective's ``name``, or (a workload file) that file,
    named relative to the space file's folder. A space that names none (a user's own space
    for a workload file, say) serves any; a replay reads no workload's space this way (it
    takes a space of any workload: :mod:`autotune.replay_setup`).

    Example:
        >>> from autotune.space import Param
        >>> from autotune.objectives.rmsnorm import OBJECTIVE as RMSNorm
        >>> rms = Space("r", [Param("x", "int", low=1, high=4)], source="rmsnorm.yaml",
        ...             workload="rmsnorm")
        >>> check_space_workload(rms, "rmsnorm", RMSNorm)
        >>> try:
        ...     check_space_workload(rms, "./sm.py", type("S", (), {"name": "softmax"}))
        ... except SetupError as exc:
        ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
        rmsnorm.yaml: a space for workload 'rmsnorm', not for softmax (./sm.py); pass a space
        of softmax's parameters
    """
    named = space.workload
    if named is None or named in (workload, getattr(objective_cls, "name", None)):
        return
    if workload.endswith(".py") and named.endswith(".py"):
        folder = Path(space.source).resolve().parent
        if (folder / named).resolve() == Path(workload).resolve():
            return
    tuned = getattr(objective_cls, "name", None) or workload
    also = f" ({workload})" if tuned != workload else ""
    raise SetupError(f"{space.source}: a space for workload {named!r}, not for {tuned}{also}; "
                     f"pass a space of {tuned}'s parameters")  # fmt: skip


def _baseline_in_space(
    baseline: dict[str, Any] | None,
    space: Space,
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> tuple[dict[str, Any] | None, list[str]]:
    """The untuned default, to measure first, if ``space`` can hold it, and a note if not: a
    space narrowed past the default's value (micro_batch 1 or 2 where the default is 8), or one
    with a parameter the default leaves out (that trial 0 would sample, so it would be no
    default), has no trial 0, rather than fail its first trial or mislabel it. A parameter
    whose condition the default leaves off (``when``, read with ``problem`` and ``device``)
    needs no value; the default's keys that are not parameters run untuned.

    Example:
        >>> from autotune.space import Param
        >>> narrow = Space("n", [Param("mb", "categorical", choices=[1, 2])], source="n.yaml")
        >>> _baseline_in_space({"mb": 8}, narrow)[1]
        ['the untuned default (mb=8) lies outside n.yaml: no default is measured first']
        >>> two = Space("t", [Param("x", "int", low=1, high=4), Param("y", "int", low=1, high=4)],
        ...             source="t.yaml")
        >>> _baseline_in_space({"x": 1}, two)[1]
        ['the untuned default sets no y (a parameter of t.yaml): no default is measured first']
        >>> _baseline_in_space({"x": 1, "y": 2, "lr": 0.1}, two)
        ({'x': 1, 'y': 2, 'lr': 0.1}, [])
        >>> from autotune.space import Constraint, Expression
        >>> above = Space("a", two.params, [Constraint("above", Expression("x >= 2"))],
        ...               source="a.yaml")
        >>> _baseline_in_space({"x": 1, "y": 2}, above)[1]
        ["the untuned default breaks a.yaml's constraint above: no default is measured first"]
    """
    if not baseline:
        return baseline, []
    outside = [p for p in space.params if p.name in baseline and not p.contains(baseline[p.name])]
    if outside:
        name = outside[0].name
        return None, [
            f"the untuned default ({name}={baseline[name]!r}) lies outside {space.source}: no "
            "default is measured first"
        ]
    values: dict[str, Any] = {}  # the default's values of the parameters active so far
    for param in space.params:
        if not space.is_active(param, values, problem, device):
            continue
        if param.name not in baseline:
            return None, [
                f"the untuned default sets no {param.name} (a parameter of {space.source}): no "
                "default is measured first"
            ]
        values[param.name] = baseline[param.name]
    broken = space.violations(values, problem or {}, device or {})
    if broken:  # the sweep would reject it unlaunched: no trial 0, no baseline of the finish
        return None, [
            f"the untuned default breaks {space.source}'s constraint {broken[0]}: no default is "
            "measured first"
        ]
    return baseline, []


def _check_stored_workload(study: str | None, workload: str) -> None:
    """A resumed study's workload can still be loaded: its file is where the study found it,
    its plugin is installed.

    Raises:
        SetupError: naming the study and what became of its workload.
    """
    if workload.endswith(".py") and not Path(workload).is_file():
        raise SetupError(f"--study {study}: its workload file {workload} is gone (moved or "
                         "deleted); put it back there to resume, or start another "
                         "--study")  # fmt: skip
    try:
        get_objective(workload)
    except KeyError as exc:  # a plugin uninstalled since
        raise SetupError(f"--study {study}: its workload cannot be loaded: {exc.args[0]}"
                         ) from None  # fmt: skip


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
    stored = _stored_info(storage, study)
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
            trials, time_budget_s = _resumed_budget(stored, trials, time_budget_s)
            slo = resumed_slo(study, stored, slo)
        # the table as typed, or as the study's first run showed it: not its stored path
        shown = str(typed) if typed is not None else table_shown(stored, replay)
        label = replay_label(shown, replay, problem["params"])
        merged = merged_note(replay, problem["params"], metric)  # medians of several configs
        notes += [merged] if merged else []
    elif stored is not None and workload in (None, stored.get("workload")):
        workload = stored["workload"]
        _check_stored_workload(study, workload)
        left_out = [k for k in redacted_keys(stored.get("problem", {})) if k not in problem]
        if left_out:  # stored without its password: running '***' would fail every trial
            raise SetupError(f"--problem: study {study!r} stored {left_out[0]} without its "
                             f"password; give --problem {left_out[0]}=... to resume")  # fmt: skip
        problem = {**stored.get("problem", {}), **problem}
        space_obj = load_space(space or stored["space"])
        check_space_workload(space_obj, workload, get_objective(workload))
        objectives = dict(stored["objectives"])
        _check_resumed_objectives(study, workload, objective, objectives)
        sampler = stored.get("sampler", sampler) if sampler == "auto" else sampler
        seed = stored.get("seed") if seed is None else seed
        trials, time_budget_s = _resumed_budget(stored, trials, time_budget_s)
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
        refusals = (ValueError, TypeError)  # a problem value the objective cannot take
        try:
            with setup_call(workload, objective_cls, "__init__", passing=refusals):
                objective_obj = objective_cls(problem)
            with setup_call(workload, objective_cls, "default_config", passing=refusals):
                baseline = objective_obj.default_config()
        except WorkloadError:
            raise
        except refusals as exc:
            raise SetupError(f"--problem: {as_typed(str(exc), typed)}") from None
        # after the objective took the problem: a size it refuses is its own message, not a
        # constraint of the space failing on it (N=0 in log2(problem.N))
        check_satisfiable(space_obj, problem, device)
        if baseline is not None and not isinstance(baseline, dict):
            raise WorkloadError(f"{workload}: {objective_cls.__name__}.default_config returned "
                                f"{type(baseline).__name__}, not a dict or None")  # fmt: skip
        with setup_call(workload, objective_cls, "config_keys"):
            keys = objective_obj.config_keys()
        _check_config_keys(space_obj, workload, keys)
        notes += _unpoisoned_note(workload, objective_cls)
        # optional checks against the space (a server's template; check_space_values: the
        # values the space gives each knob), the SLO (a trace) and the trial timeout (a trace
        # replayed in real time) (check_space: each parameter by its name, whose values a
        # server's template is test-formatted with)
        params = {param.name: param for param in space_obj.params}
        timeout_s = trial_timeout(trial_timeout_s, time_budget_s)
        for hook, given, option in (("check_space_values", params, space_obj.source),
                                    ("check_space", params, "--problem"),
                                    ("check_slo", dict(slo or {}), "--slo"),
                                    ("check_trial_timeout", timeout_s, "--problem")):  # fmt: skip
            check = getattr(objective_obj, hook, None)
            if check is None:
                continue
            try:
                with setup_call(workload, objective_cls, hook, passing=(ValueError,)):
                    check(given)
            except WorkloadError:
                raise
            except ValueError as exc:
                raise SetupError(f"{option}: {as_typed(str(exc), typed)}") from None
        untuned = {k: v for k, v in (baseline or {}).items() if k not in space_obj.names}
        baseline, outside = _baseline_in_space(baseline, space_obj, problem, device)
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
    if trials is not None and trials <= 0:
        raise SetupError(f"--trials: {trials} must be positive")
    if executor not in EXECUTORS:
        raise SetupError(f"--executor: {executor!r} is not one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise SetupError(f"--workers: {workers} must be at least 1")
    if compile_ahead is not None and compile_ahead < 0:
        raise SetupError(f"--compile-ahead: {compile_ahead} must be 0 (off) or more processes")
    cores = os.cpu_count() or 1
    if executor == "local" and workers is not None and workers > cores:
        # a slot is a worker process, started as a trial needs it: 100,000 slots were taken
        # without a word, and a sweep of as many trials would start as many processes
        raise SetupError(f"--workers: {workers} worker processes on {cores} CPU cores; at most "
                         f"{cores} with --executor local (each slot is a process that runs a "
                         "trial; --executor ray spreads trials over a cluster)")  # fmt: skip
    if compile_ahead is not None and compile_ahead > cores:
        raise SetupError(f"--compile-ahead: {compile_ahead} processes on {cores} CPU cores; at "
                         f"most {cores} (each imports torch and compiles on a core)")  # fmt: skip
    if executor != "ray" and (ray_address is not None or gpus_per_trial is not None):
        raise SetupError("--address and --gpus-per-trial apply to --executor ray only")
    if gpus_per_trial is not None and not (math.isfinite(gpus_per_trial) and gpus_per_trial >= 0):
        raise SetupError(f"--gpus-per-trial: {gpus_per_trial:g} must be a finite number, 0 or more")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        from autotune.executors.ray import INSTALL_HINT  # (it imports no Ray)

        raise SetupError(f"--executor ray needs Ray: {INSTALL_HINT}")
    sampler_note = _check_sampler(sampler, space_obj, objectives, problem, device)
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
    _check_warm_start(settings)
    return settings


def _check_sampler(
    sampler: str,
    space: Space,
    objectives: dict[str, str],
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> str | None:
    """``--sampler`` names ``auto`` or a registered sampler that serves this space and these
    objectives, as the driver will build it: refused while the sweep is set up, so also when
    the tuning cache would answer. Returns what the sweep should say of how it serves the
    space (its ``note``), or None.

    Raises:
        SetupError: an unknown sampler, or one that cannot serve (naming why).

    Example:
        >>> from autotune.space import Param
        >>> floats = Space("f", [Param("x", "float", low=0.0, high=1.0)], source="f.yaml")
        >>> _check_sampler("tpe", floats, {"v": "maximize"})
        >>> for name in ("annealing", "bo"):
        ...     try:
        ...         _check_sampler(name, floats, {"v": "maximize"})
        ...     except SetupError as exc:
        ...         print(exc)
        --sampler: unknown sampler 'annealing'; choose one of auto, ...
        --sampler: bo: it needs a discrete space of at most ... configs; use tpe
    """
    from autotune.driver.samplers import SamplerContext, SamplerError, resolve_sampler, spec_for

    try:
        spec = spec_for(resolve_sampler(sampler, space, len(objectives)))
    except SamplerError as exc:
        raise SetupError(f"--sampler: {exc}") from None
    ctx = SamplerContext(space=space, n_objectives=len(objectives), problem=dict(problem or {}),
                         device=dict(device or {}))  # fmt: skip
    why_not = spec.serves(ctx)
    if why_not is not None:
        raise SetupError(f"--sampler: {spec.name}: {why_not}")
    return spec.note(ctx)


def _check_warm_start(settings: SweepSettings) -> None:
    """``--warm-start STUDY`` names a stored sweep of this workload and first objective,
    checked as the driver checks it, while the sweep is set up (so also when the tuning cache
    would answer); a storage that holds nothing yet (memory, a file not written) is refused
    without being created.

    Raises:
        StudyMismatch: no such study, or one of another workload or objective.

    Example:
        >>> from autotune.space import load_space
        >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
        ...     objectives={"score": "maximize"}, storage="memory", warm_start="nosuch")
        >>> try:
        ...     _check_warm_start(settings)
        ... except ValueError as exc:
        ...     print(exc)
        --warm-start: no study named 'nosuch' in this storage; give auto, off (lower case) ...
    """
    if settings.warm_start in ("off", "auto"):
        return
    from autotune.driver.study_setup import StudyMismatch, named_source, no_such_source

    files = storage_files(settings.storage)
    if settings.storage in ("memory", ":memory:") or (files and not files[0].exists()):
        raise StudyMismatch(no_such_source(settings.warm_start))
    named_source(settings, open_storage(settings.storage))


__all__ = ["SetupError", "SpaceError", "build_settings", "parse_objectives", "resolve_workload"]
