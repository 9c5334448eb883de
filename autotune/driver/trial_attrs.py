"""Every name the sweep writes on Optuna trials and studies, and the helpers that read them.

One module owns these names, so that the driver, the samplers, the finish, export, progress
and the benchmarks all read a trial the same way.

Trial user attributes:
    ``status`` (one :class:`~autotune.failures.TrialStatus` value), ``reason``, ``duration_s``,
    ``metrics``, ``telemetry``, ``repeat_of`` (a repeat answered from the study, not launched),
    ``baseline`` (the untuned default, trial 0), ``warm_start`` (queued from another sweep),
    ``driver`` (host and pid of the driver that asked for it), ``worker`` (where it ran).
Study user attributes:
    ``autotune`` (workload, problem, space, objectives, device, command; a resumed study's
    ``commands`` and ``samplers``, each of its runs'), ``warm_start``,
    ``finish`` (the noise-aware finish's rows), ``last_run`` (the last run: why it stopped, its
    overhead, and whether the finish it asked for ran).
The Optuna constraint ``failed`` is 0 for a measured trial and 1 for a failed one.

Example:
    >>> import optuna
    >>> trial = optuna.trial.create_trial(value=1.0, user_attrs={STATUS: "ok"})
    >>> trial_status(trial), is_repeat(trial), is_launched(trial)
    ('ok', False, True)
"""

from __future__ import annotations

from typing import Any

import optuna

# -- trial attributes ---------------------------------------------------------------------
STATUS = "status"
REASON = "reason"
DURATION = "duration_s"
METRICS = "metrics"
TELEMETRY = "telemetry"
REPEAT_OF = "repeat_of"  # a config measured before: answered from the study, not launched
BASELINE = "baseline"
WARM_START = "warm_start"  # on a trial: the study it came from; on the study: the source
DRIVER = "driver"  # {"host", "pid"} of the driver process that asked for the trial
WORKER = "worker"  # where the trial ran: an executor's slot, device or Ray node
IN_DRIVER = "in_driver"  # True: the trial runs in its driver's own process (--executor inline)
FAILED_CONSTRAINT = "failed"

# -- study attributes ---------------------------------------------------------------------
STUDY = "autotune"
FINISH = "finish"
LAST_RUN = "last_run"
#: why a sweep stopped (its last run's ``stopped_by``) when it ran as far as it was asked to:
#: its trials or time budget spent, or nothing left to try. Anything else (a signal, every
#: worker lost, a constraint rejecting config after config) left it unfinished.
COMPLETE_STOPS = frozenset({"trials", "time", "every config tried", "no unvisited config left"})
#: a last run's ``finish``: ``asked`` from its sweep's end until the finish it asked for has
#: run (``done``) or was skipped for the time budget (``skipped``); ``off`` where none was
#: asked. A run stopped in its finish keeps ``asked``: its sweep was not run as far as asked.
FINISH_ASKED, FINISH_DONE, FINISH_SKIPPED, FINISH_OFF = "asked", "done", "skipped", "off"

# -- statuses the driver itself gives -----------------------------------------------------
INFEASIBLE = "infeasible"  # rejected by a static constraint: never launched
INTERRUPTED = "interrupted"
REPEATED = "repeated"  # the count of repeats in progress and summaries (not a trial status)
#: the count of configs the objective itself refused (an ``infeasible`` trial told by a worker,
#: e.g. a kernel's ``checked_config`` raising ValueError) in progress and summaries, apart
#: from those the space's constraints or the memory model rejected (not a trial status)
REFUSED = "refused"

FINISHED_STATES = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)


def stored_info(user_attrs: dict[str, Any]) -> dict[str, Any]:
    """A study's autotune record (:data:`STUDY`) from its user attributes: empty where there
    is none, or where what is stored there is not a record (a plain Optuna study, a value
    another tool wrote), so that one odd study cannot stop a command that reads them all.

    A field of the wrong kind (objectives that are a list, a device that is a string) is
    left out the same way, the rest kept.

    Example:
        >>> stored_info({"autotune": {"workload": "matmul"}}), stored_info({"autotune": "x"})
        ({'workload': 'matmul'}, {})
        >>> stored_info({"autotune": {"workload": "matmul", "objectives": ["tflops"]}})
        {'workload': 'matmul'}
    """
    info = user_attrs.get(STUDY)
    if not isinstance(info, dict):
        return {}
    return {k: v for k, v in info.items() if _kind_fits(k, v)}


#: the kind of each field of a study's record (others are kept as they are)
_FIELD_KINDS: dict[str, type | tuple[type, ...]] = {
    "workload": str, "label": str, "space": str, "command": str, "created": str, "group": str,
    "sampler": str, "sampler_used": str, "problem": dict, "device": dict, "fingerprint": dict,
    "untuned": dict, "slo": dict, "objectives": dict, "seed": (int, type(None)),
    "n_trials": (int, type(None)), "time_budget_s": (int, float, type(None)),
    "commands": list, "samplers": list,  # (of text: a resumed study's runs)
}  # fmt: skip


def _kind_fits(field: str, value: Any) -> bool:
    kind = _FIELD_KINDS.get(field)
    if kind is None:
        return True
    if field == "objectives":  # metric -> direction
        return isinstance(value, dict) and all(
            isinstance(k, str) and v in ("maximize", "minimize") for k, v in value.items()
        )
    if kind is list:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    return isinstance(value, kind) and not (kind == (int, type(None)) and isinstance(value, bool))


def finish_faulted(finish: dict[str, Any]) -> set[int]:
    """The trials that failed a round of the finish themselves (crashed, ran out of memory,
    hung), from a finish record's ``failed`` (``"status: reason"`` by trial): no candidates,
    whatever their other rounds read; not those the time budget stopped (``interrupted``).
    Every reader (the CLI, the report) labels them from this.

    Example:
        >>> finish_faulted({"failed": {"4": "crashed: illegal memory access",
        ...                            "7": "interrupted: the time budget ended"}})
        {4}
        >>> finish_faulted({}), finish_faulted({"failed": "junk"})
        (set(), set())
    """
    failed = finish.get("failed")
    if not isinstance(failed, dict):
        return set()
    return {int(trial) for trial, reason in failed.items()
            if str(trial).isdigit() and not str(reason).startswith("interrupted")}  # fmt: skip


def stored_finish(user_attrs: dict[str, Any]) -> dict[str, Any]:
    """A study's noise-aware finish record (:data:`FINISH`) from its user attributes: empty
    where there is none, or where what is stored there is not one (not a record, a ``metric``
    or ``protocol`` that is no text, ``rows`` that are not a list of rows each with a whole
    ``trial``, a numeric ``median`` and ``spread``, and a list of numeric ``samples``, one at
    least): a damaged finish is passed over as if it never ran, every reader alike.

    Example:
        >>> row = {"trial": 3, "median": 1.2, "spread": 0.01, "samples": [1.2, 1.19]}
        >>> stored_finish({"finish": {"metric": "tflops", "rows": [row]}})["rows"][0]["trial"]
        3
        >>> stored_finish({"finish": "junk"}), stored_finish({"finish": {"rows": [1]}})
        ({}, {})
        >>> stored_finish({"finish": {"rows": [{**row, "median": None}]}})
        {}
    """
    finish = user_attrs.get(FINISH)
    if not isinstance(finish, dict) or any(
        not isinstance(finish.get(k, ""), str) for k in ("metric", "protocol")
    ):
        return {}
    rows = finish.get("rows", [])
    if not isinstance(rows, list) or not all(_row_fits(row) for row in rows):
        return {}
    return finish


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _row_fits(row: Any) -> bool:
    """Whether ``row`` is a finish row as its readers read it."""
    if not isinstance(row, dict):
        return False
    samples = row.get("samples")
    return (
        isinstance(row.get("trial"), int) and not isinstance(row.get("trial"), bool)
        and _number(row.get("median")) and _number(row.get("spread"))
        and isinstance(samples, list) and bool(samples) and all(map(_number, samples))
        and isinstance(row.get("config", {}), dict)
    )  # fmt: skip


def trial_metrics(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """A trial's :data:`METRICS`: empty where there are none, or where what is stored there
    is not a record of named metrics (a value another program wrote): treated as absent.

    Example:
        >>> trial = optuna.trial.create_trial(value=1.0, user_attrs={METRICS: {"ms": 0.5}})
        >>> trial_metrics(trial)
        {'ms': 0.5}
        >>> trial_metrics(optuna.trial.create_trial(value=1.0, user_attrs={METRICS: "x"}))
        {}
    """
    metrics = trial.user_attrs.get(METRICS)
    if not isinstance(metrics, dict) or not all(isinstance(k, str) for k in metrics):
        return {}
    return metrics


def last_run(user_attrs: dict[str, Any]) -> dict[str, Any]:
    """A study's :data:`LAST_RUN` record, empty where there is none or it is not a record."""
    run = user_attrs.get(LAST_RUN)
    return dict(run) if isinstance(run, dict) else {}


def finish_pending(user_attrs: dict[str, Any]) -> bool:
    """Whether a study's last run asked for the finish and it never ended (the run was
    stopped in it); a run stored before runs recorded their finish counts as not pending.

    Example:
        >>> finish_pending({LAST_RUN: {"stopped_by": "trials", "finish": FINISH_ASKED}})
        True
        >>> finish_pending({LAST_RUN: {"finish": FINISH_DONE}}), finish_pending({})
        (False, False)
    """
    return last_run(user_attrs).get("finish") == FINISH_ASKED


def mark_finish(study: optuna.Study, state: str) -> None:
    """Record on the study's last run what became of the finish it asked for (``state``:
    :data:`FINISH_DONE` or :data:`FINISH_SKIPPED`); a study with no run recorded is left as
    it is."""
    run = last_run(study.user_attrs)
    if run:
        study.set_user_attr(LAST_RUN, {**run, "finish": state})


def trial_status(trial: optuna.trial.FrozenTrial) -> str:
    """The trial's status; a trial without one is running, waiting, measured (a complete
    trial that another Optuna program told, e.g. a plain ``study.optimize``), or was
    interrupted."""
    if STATUS in trial.user_attrs:
        return str(trial.user_attrs[STATUS])
    states = {"RUNNING": "running", "WAITING": "waiting", "COMPLETE": "ok"}
    return states.get(trial.state.name, INTERRUPTED)


def is_repeat(trial: optuna.trial.FrozenTrial) -> bool:
    """True for a repeat answered from the study (it ran nothing)."""
    return REPEAT_OF in trial.user_attrs


def is_launched(trial: optuna.trial.FrozenTrial) -> bool:
    """True for a finished trial that ran (not a constraint rejection, not a repeat)."""
    return (
        trial.state in FINISHED_STATES
        and not is_repeat(trial)
        and trial_status(trial) != INFEASIBLE
    )


def is_ok(trial: optuna.trial.FrozenTrial) -> bool:
    """True for a trial that measured (a repeat of one included)."""
    return trial.state == optuna.trial.TrialState.COMPLETE and trial_status(trial) == "ok"


def failure_penalty(study: optuna.Study) -> list[float]:
    """The values told for a failed trial: each objective's worst successful value so far (0
    where none succeeded), so that samplers rank it below every measured config."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    values = [t.values for t in complete if t.user_attrs.get(STATUS) == "ok" and t.values]
    penalties = []
    for i, direction in enumerate(study.directions):
        column = [v[i] for v in values]
        if not column:
            penalties.append(0.0)
        else:
            maximize = direction == optuna.study.StudyDirection.MAXIMIZE
            penalties.append(min(column) if maximize else max(column))
    return penalties


def mark_feasibility(trial: optuna.Trial, ok: bool) -> None:
    """Record the outcome as an Optuna constraint: 0 when it measured, 1 when it failed.

    Constraint-aware samplers (TPE, GP, NSGA-II) rank failed trials below every feasible one.
    """
    trial.set_constraint(FAILED_CONSTRAINT, 0.0 if ok else 1.0)


def trial_origin(user_attrs: dict) -> str:
    """Why a trial ran before the sampler proposed it: ``untuned default``, ``warm start from
    STUDY``, or "" for a proposed one.

    Example:
        >>> trial_origin({"baseline": True}), trial_origin({"warm_start": "a"}), trial_origin({})
        ('untuned default', 'warm start from a', '')
    """
    if user_attrs.get(BASELINE):
        return "untuned default"
    if user_attrs.get(WARM_START):
        return f"warm start from {user_attrs[WARM_START]}"
    return ""
