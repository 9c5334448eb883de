"""What the ``autotune`` commands share: their common options, the console they print results
on, and the libraries' logging turned down.

Example:
    >>> DEFAULT_STORAGE
    'sqlite:///autotune.db'
"""

from __future__ import annotations

import warnings
from typing import Annotated

import typer
from rich.console import Console

from autotune.redact import STORAGE_ENV

#: results go to stdout; progress and errors to stderr (:data:`autotune.cli_errors.err`)
out = Console()


def quiet_libraries() -> None:
    """Optuna's log below warnings, and no experimental-feature warnings."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


# Options shared by several commands.
SpaceOption = Annotated[
    str | None, typer.Option("--space", help="Search space YAML (default: the workload's).")
]
ProblemOption = Annotated[
    list[str],
    typer.Option(
        "--problem", help="Problem values, e.g. M=64,N=4096,K=4096 (a comma inside a value: \\,)."
    ),
]
StorageOption = Annotated[
    str,
    typer.Option(
        "--storage",
        envvar=STORAGE_ENV,
        show_envvar=True,
        help="Optuna storage URL (or from $AUTOTUNE_STORAGE, so that a database password "
        "need not be on the command line).",
    ),
]
StudyOption = Annotated[
    str | None, typer.Option("--study", help="Study name (default: the latest).")
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        "--trial-timeout",
        min=0.001,
        help="Seconds one trial may take (default 300, or a quarter of --time-budget when "
        "that is shorter, 30 at least).",
    ),
]
DeviceOption = Annotated[str, typer.Option("--device", help="auto, cuda or cpu.")]
DEFAULT_STORAGE = "sqlite:///autotune.db"
