"""The workload of a resume by ``--study`` that does not repeat it: ``autotune tune --space
COMPOSED.yaml --study NAME`` resumes a search by group (:mod:`autotune.grouped_sweep`), whose
studies are ``NAME.<prefix>``, none of them ``NAME`` itself; each stored its workload, as a
plain sweep's study does, and the resume takes it from there (it fell back to the default,
train-step, and refused the composed space as no space of train-step's).

A workload given that is not the stored one is refused, naming both; ``--study NAME`` alone,
where only a search by group's studies ``NAME.*`` are stored, is refused naming them (it
started a new train-step sweep of that name).

Example (a shell):
    $ autotune tune matmul --space decoder_gemms.yaml --study gemms --trials 20   # Ctrl-C
    $ autotune tune --space decoder_gemms.yaml --study gemms                      # resumes
"""

from __future__ import annotations

import shlex
from typing import Any

from autotune.in_memory import in_memory
from autotune.setup_error import SetupError


def stored_names(url: str) -> list[str]:
    """The studies of the storage ``url``; none where it holds nothing yet (memory, a file
    not written), which is not created here."""
    from autotune.storage import open_storage, storage_files, study_names

    files = storage_files(url)
    if in_memory(url) or (files and not files[0].exists()):
        return []
    return study_names(open_storage(url))


def group_study_names(asked: dict[str, Any], names: list[str]) -> list[str]:
    """The studies of ``names`` that ``asked`` (``build_settings``'s arguments) would resume
    as its groups: ``<study>.<label>`` for each distinct part of its composed ``--space``."""
    from autotune.grouped_sweep import group_labels
    from autotune.space import load_space
    from autotune.space.parts import composed_parts

    space = load_space(asked["space"])
    if not any(param.prefix for param in space.params):
        return []
    labels = group_labels(composed_parts(space.source), asked["problem"])
    return [f"{asked['study']}.{label}" for label in labels if f"{asked['study']}.{label}" in names]


def resumed_workload(asked: dict[str, Any]) -> str | None:
    """``asked["workload"]``, or where a resume by ``--study`` of a search by group leaves it
    out, the workload its groups' studies stored.

    Raises:
        SetupError: a workload given that is not the stored one (naming both); ``--study``
            alone naming no study but a search by group's (naming them).
    """
    from autotune.driver.trial_attrs import stored_info
    from autotune.storage import open_storage

    workload, study = asked["workload"], asked["study"]
    if study is None or asked["replay"] is not None:
        return workload
    names = stored_names(asked["storage"])
    if study in names:  # a plain resume: its set-up takes (and checks) the stored workload
        return workload
    groups = group_study_names(asked, names) if asked["space"] is not None else []
    if not groups:
        others = [name for name in names if name.startswith(f"{study}.")]
        if workload is None and asked["space"] is None and others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            one = shlex.quote(others[0])  # as the shell reads it
            raise SetupError(f"--study {study}: no study of that name in this storage, but a "
                             f"search by group's ({shown}): give its composed --space to "
                             f"resume them, or --study {one} to resume one")  # fmt: skip
        return workload
    storage = open_storage(asked["storage"])
    for name in groups:
        attrs = storage.get_study_user_attrs(storage.get_study_id_from_name(name))
        stored = stored_info(attrs).get("workload")
        if stored is None:  # not a sweep's study: its own set-up says what it is
            continue
        if workload is not None and workload != stored:
            raise SetupError(f"--study {study}: its group's study {name} holds a {stored} "
                             f"sweep; it cannot resume as {workload} (leave the workload out "
                             "to resume it, or start another --study)")  # fmt: skip
        return stored
    return workload


def declared_workload(asked: dict[str, Any]) -> str | None:
    """``asked["workload"]``, or where it is left out, the workload the ``--space`` file says
    it is for (its ``workload:`` key: a workload, or a workload file beside it): ``autotune
    tune --space decoder_gemms.yaml`` tunes matmul, as the file says, where it fell back to
    the default (train-step) and refused the file. None where neither names one (a replay
    takes a space of any workload; a space that does not load, or names no workload that can
    run, is left for the set-up to refuse, naming the problem).

    Example:
        >>> declared_workload({"workload": None, "space": "matmul", "replay": None})
        'matmul'
    """
    from pathlib import Path

    from autotune.objectives import get_objective
    from autotune.space import SpaceError, load_space

    if asked["workload"] is not None or asked["space"] is None or asked["replay"] is not None:
        return asked["workload"]
    try:
        space = load_space(asked["space"])
    except (SpaceError, OSError):
        return None
    named = space.workload
    if named is not None and named.endswith(".py"):  # a workload file, beside the space
        return str((Path(space.source).resolve().parent / named).resolve())
    try:  # a workload's name (not an objective's name alone: no workload to run by it)
        get_objective(named) if named is not None else None
    except Exception:  # noqa: BLE001 (an unknown name: the set-up's default and refusal)
        return None
    return named
