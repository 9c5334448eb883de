"""Objectives: what a trial measures (kernel throughput, training step, replay).

Installed as ``autotune.objectives``. Look objectives up by name:

    >>> from autotune.objectives import objective_names
    >>> "replay" in objective_names()
    True
"""

from __future__ import annotations

import importlib

from autotune.objectives.base import Objective, Reporter, no_reporting

# name -> module that defines it; modules are imported lazily so that `autotune --help`
# does not pay for importing torch and triton.
_MODULES = {
    "matmul": "autotune.objectives.matmul",
    "train-step": "autotune.objectives.train_step",
    "replay": "autotune.objectives.replay",
    "faults": "autotune.objectives.faults",
}


def objective_names() -> list[str]:
    return sorted(_MODULES)


def get_objective(name: str) -> type[Objective]:
    """Return the objective class registered under ``name``.

    Raises:
        KeyError: with the known names, when ``name`` is not one of them.
    """
    if name not in _MODULES:
        raise KeyError(f"unknown workload {name!r}; known: {', '.join(objective_names())}")
    module = importlib.import_module(_MODULES[name])
    return module.OBJECTIVE


__all__ = ["Objective", "Reporter", "get_objective", "no_reporting", "objective_names"]
