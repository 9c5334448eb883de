"""The settings of ``autotune tune --replay TABLE``: its space (from ``--params``, or a
``--space`` file naming the same parameters), its objective (``--metric`` in the direction
``--maximize/--minimize`` says) and the checks that refuse a table or options it cannot
replay.

Example:
    >>> from pathlib import Path
    >>> table = Path(__file__).parents[1] / "benchmarks" / "data" / "matmul_4096_h200.csv"
    >>> problem, space, objectives = replay_settings(table, "BLOCK_M,num_warps", "tflops",
    ...                                              maximize=True, space_path=None)
    >>> space.names, objectives
    (['BLOCK_M', 'num_warps'], {'tflops': 'maximize'})
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from autotune.space import Space, load_space
from autotune.sweep_setup import SetupError


def replay_settings(
    replay: Path, params: str | None, metric: str | None, maximize: bool, space_path: str | None
) -> tuple[dict[str, Any], Space, dict[str, str]]:
    import pandas as pd

    from autotune.objectives.replay import load_table, space_from_table

    if not params or not metric:
        raise SetupError("--replay needs --params A,B,... and --metric NAME")
    names = [p.strip() for p in params.split(",") if p.strip()]
    if not names:
        raise SetupError(f"--params {params!r}: name the table's parameter columns, A,B,...")
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise SetupError(f"--params: {twice!r} is named twice")
    for column, what in ((metric, "--metric"), ("status", "status")):
        if column in names:
            raise SetupError(f"--params: {column!r} is the table's {what} column, not a parameter")
    table = load_table(str(replay))
    if table.empty:
        raise SetupError(f"{replay}: the table has no rows")
    space = load_space(space_path) if space_path else space_from_table(table, names, str(replay))
    if space_path and sorted(space.names) != sorted(names):
        raise SetupError(f"{space_path}: its parameters ({', '.join(space.names)}) are not "
                         f"--params ({', '.join(names)}): a replay looks configs up by all of "
                         "them")  # fmt: skip
    unknown = [n for n in space.names if n not in table.columns]
    if unknown:
        raise SetupError(f"{replay}: the space's parameter {unknown[0]!r} is not a column")
    if metric not in table.columns:
        raise SetupError(f"{replay}: --metric {metric!r} is not a column")
    numbers = pd.to_numeric(table[metric], errors="coerce")
    if numbers.isna().all():
        raise SetupError(f"{replay}: --metric {metric!r} holds no numbers")
    problem = {"table": str(replay), "params": space.names, "metric": metric}
    return problem, space, {metric: "maximize" if maximize else "minimize"}


def check_replay_objective(objective: str | None, metric: str | None, maximize: bool) -> None:
    """A replay tunes ``--metric`` in the direction ``--maximize/--minimize`` says; an
    ``--objective`` that asks for anything else is refused rather than ignored.

    Example:
        >>> check_replay_objective("tflops:max", "tflops", maximize=True)  # the same: fine
        >>> check_replay_objective("ms", "tflops", maximize=True)
        Traceback (most recent call last):
        ...
        autotune.sweep_setup.SetupError: --objective 'ms': a replay tunes --metric tflops ...
    """
    if not objective:
        return
    name, _, direction = objective.strip().partition(":")
    if name != metric or direction not in ("", "max" if maximize else "min"):
        flag = "--maximize" if maximize else "--minimize"
        raise SetupError(f"--objective {objective!r}: a replay tunes --metric {metric} ({flag}); "
                         "set those instead")  # fmt: skip


def check_replay_slo(replay: Path, slo: dict[str, float]) -> None:
    """Every ``--slo`` metric of a replay is a column of its table.

    Raises:
        SetupError: naming the first metric the table does not hold.
    """
    from autotune.objectives.replay import load_table

    columns = load_table(str(replay)).columns
    unknown = [name for name in slo if name not in columns]
    if unknown:
        raise SetupError(f"{replay}: --slo {unknown[0]!r} is not a column")


def repeats_note(replay: Path, params: list[str]) -> str:
    """The replay label's note on configs the table records more than once, or nothing.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("a,m\\n1,5\\n1,9\\n2,7\\n")
        >>> repeats_note(Path(path), ["a"])
        '; 1 config recorded more than once: the median of the ok readings replays'
    """
    from autotune.objectives.replay import load_table, repeated_configs

    repeated = repeated_configs(load_table(str(replay)), params)
    if not repeated:
        return ""
    configs = "1 config" if repeated == 1 else f"{repeated} configs"
    return f"; {configs} recorded more than once: the median of the ok readings replays"
