"""The config a trial's ``triton.Config`` holds: its parameters and the kernel's other tunables
at the values the trial ran them at: for a replay of a kernel's recorded table, those its row
recorded; for a sweep that measured, the untuned default's knobs its space did not tune (the
study's ``untuned``). A table recorded over every tile knob and replayed with ``--params
BLOCK_M,BLOCK_N`` measured each row at some ``num_warps``, ``num_stages``, ``SPLIT_K`` ...; a
sweep of the tile sizes alone at M = 64 ran every trial at the default's 6 stages; a
``triton.Config`` without them would launch the kernel at Triton's defaults (4 warps, 3 stages),
which is not what the figure was measured at.

Example:
    >>> config = recorded_config({"BLOCK_M": 64}, {"tflops": 1.0, "num_warps": 8},
    ...                          knobs=("BLOCK_M", "BLOCK_K", "num_warps"))
    >>> config
    {'BLOCK_M': 64, 'num_warps': 8}
"""

from __future__ import annotations

import functools
from typing import Any

import optuna

from autotune.driver.results import study_info
from autotune.driver.trial_attrs import trial_metrics
from autotune.replay_info import study_replay


def recorded_config(
    params: dict[str, Any], row: dict[str, Any], knobs: tuple[str, ...]
) -> dict[str, Any]:
    """``params`` with each of ``knobs`` that they lack at the value ``row`` recorded, in the
    order of ``knobs`` (the kernel space's), then any parameter that is not a knob."""
    config = {k: params[k] if k in params else row[k] for k in knobs if k in params or k in row}
    return config | {k: v for k, v in params.items() if k not in config}


def kernel_knobs(study: optuna.Study) -> tuple[str, ...]:
    """The tunables of the kernel whose recorded table ``study`` replays (its ``workload``
    column), by that workload's own space; none for a sweep that measured, or a table that
    records no workload or one this installation does not know."""
    replay = study_replay(study)
    workload = (replay or {}).get("workload")
    return _workload_knobs(str(workload)) if workload else ()


@functools.lru_cache(maxsize=16)
def _workload_knobs(workload: str) -> tuple[str, ...]:
    """The parameters of ``workload``'s own space, in its order (read once per process: an
    export ranks and then writes the same configs).

    Example:
        >>> _workload_knobs("rmsnorm")
        ('BLOCK_N', 'ROWS', 'num_warps')
    """
    from autotune.objectives import get_objective
    from autotune.space import load_space

    try:
        space = get_objective(workload).space
    except KeyError:  # a workload of another installation: its knobs are not known here
        return ()
    return tuple(p.name for p in load_space(space).params) if space else ()


def exported_configs(
    study: optuna.Study, trials: list[optuna.trial.FrozenTrial]
) -> list[dict[str, Any]]:
    """Each trial's config as its ``triton.Config`` holds it: a replay's by its row
    (:func:`recorded_config`), a measured sweep's with what it held fixed (:func:`held_config`)."""
    if study_replay(study) is None:
        untuned = study_info(study).get("untuned") or {}
        return [held_config(dict(t.params), untuned) for t in trials]
    knobs = kernel_knobs(study)
    return [recorded_config(dict(t.params), trial_metrics(t), knobs) for t in trials]


def held_config(params: dict[str, Any], untuned: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the knobs a measured sweep did not tune at the values every trial ran
    them at (``untuned``: the untuned default's), after them.

    Example:
        >>> held_config({"BLOCK_M": 32}, {"GROUP_M": 1, "num_stages": 6, "BLOCK_M": 64})
        {'BLOCK_M': 32, 'GROUP_M': 1, 'num_stages': 6}
    """
    return params | {k: v for k, v in untuned.items() if k not in params}
