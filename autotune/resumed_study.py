"""The checks of a sweep that resumes a stored study: what it stored, that its workload can
still be loaded, that a password left out of it is given again, that ``--objective`` asks for
the objectives it tunes, and the budget it runs with.

Example:
    >>> stored_study_info("memory", None) is None  # no --study: nothing to resume
    True
    >>> resumed_budget({"n_trials": 12, "time_budget_s": None}, None, None)
    (12, None)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from autotune.driver.trial_attrs import stored_info
from autotune.objective_option import parse_objectives
from autotune.objectives import get_objective
from autotune.redact import redacted_keys
from autotune.setup_error import SetupError
from autotune.storage import open_storage, storage_files, study_names
from autotune.sweep_defaults import DEFAULT_TRIALS


def resumed_budget(
    stored: dict[str, Any], trials: int | None, time_budget_s: float | None
) -> tuple[int | None, float | None]:
    """A resume's budget: the one given, else the stored study's (its trial count, which
    counts the study's trials, or its time budget, run again in full), else the default
    trial count. A resume of a time-budgeted sweep ran with no limit at all.

    Example:
        >>> resumed_budget({"n_trials": None, "time_budget_s": 20.0}, None, None)
        (None, 20.0)
        >>> resumed_budget({"n_trials": None, "time_budget_s": 20.0}, 5, None)
        (5, None)
        >>> resumed_budget({}, None, None)
        (30, None)
    """
    if trials is not None or time_budget_s is not None:
        return trials, time_budget_s
    trials, time_budget_s = stored.get("n_trials"), stored.get("time_budget_s")
    if trials is None and time_budget_s is None:
        trials = DEFAULT_TRIALS
    return trials, time_budget_s


def stored_study_info(storage: str, study: str | None) -> dict[str, Any] | None:
    """What ``study`` of ``storage`` stored of its settings (:func:`stored_info`), or None where
    there is no such study (or no ``study``) to resume."""
    files = storage_files(storage)
    if study is None or (files and not files[0].exists()):
        return None  # a database not made yet holds no study: made only once the sweep runs
    opened = open_storage(storage)
    if study not in study_names(opened):
        return None
    return stored_info(optuna.load_study(study_name=study, storage=opened).user_attrs)


def check_resumed_objectives(
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


def check_stored_workload(study: str | None, workload: str) -> None:
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


def check_stored_secrets(
    study: str | None, stored: dict[str, Any], problem: dict[str, Any]
) -> None:
    """A problem value stored without its password (``***``) is given again by ``problem``.

    Raises:
        SetupError: naming the first key left out.
    """
    left_out = [k for k in redacted_keys(stored.get("problem", {})) if k not in problem]
    if left_out:  # stored without its password: running '***' would fail every trial
        raise SetupError(f"--problem: study {study!r} stored {left_out[0]} without its "
                         f"password; give --problem {left_out[0]}=... to resume")  # fmt: skip
