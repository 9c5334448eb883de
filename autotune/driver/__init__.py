"""The search driver: an ask/tell loop over an Optuna study, trials in flight up to an
executor's capacity, with budgets and callbacks.

The names below are imported on first use (:func:`__getattr__`): every CLI command imports
:mod:`autotune.driver.signals`, and a package that imported its sweep eagerly would make
each of them pay for Optuna's samplers and pandas (about 0.6 s) before parsing its options.

Example:
    >>> from autotune.driver import SAMPLERS
    >>> SAMPLERS[0]
    'auto'
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autotune.driver.results import best_trials, study_info, trials_frame
    from autotune.driver.samplers import SAMPLERS, make_sampler
    from autotune.driver.settings import (
        EXECUTORS,
        SweepObserver,
        SweepSettings,
        SweepSummary,
        TrialRecord,
    )
    from autotune.driver.sweep import Sweep

#: each public name -> the submodule that defines it
_HOMES = {
    "EXECUTORS": "settings",
    "SAMPLERS": "samplers",
    "Sweep": "sweep",
    "SweepObserver": "settings",
    "SweepSettings": "settings",
    "SweepSummary": "settings",
    "TrialRecord": "settings",
    "best_trials": "results",
    "make_sampler": "samplers",
    "study_info": "results",
    "trials_frame": "results",
}

__all__ = [
    "EXECUTORS",
    "SAMPLERS",
    "Sweep",
    "SweepObserver",
    "SweepSettings",
    "SweepSummary",
    "TrialRecord",
    "best_trials",
    "make_sampler",
    "study_info",
    "trials_frame",
]


def __getattr__(name: str) -> Any:
    """A public name of the package, imported from its submodule on first use (PEP 562).

    Raises:
        AttributeError: ``name`` is none of them (nor a submodule already imported).
    """
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # found here from now on, as an eager import would have left it
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
