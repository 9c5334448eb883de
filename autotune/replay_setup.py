"""The settings of ``autotune tune --replay TABLE``: its space (from ``--params``, or a
``--space`` file naming the same parameters, whose constraints may read ``--problem`` values),
its objective (``--metric`` in the direction ``--maximize/--minimize`` says), the checks that
refuse a table or options it cannot replay, and what a stored replay study resumes with.

Example:
    >>> from pathlib import Path
    >>> table = Path(__file__).parents[1] / "benchmarks" / "data" / "matmul_4096_h200.csv"
    >>> problem, space, objectives = replay_settings(table, "BLOCK_M,num_warps", "tflops",
    ...                                              maximize=True, space_path=None)
    >>> space.names, objectives
    (['BLOCK_M', 'num_warps'], {'tflops': 'maximize'})
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from autotune.replay_info import LABEL_HEAD, LABEL_TAIL, MEASURED_ON, measured_on_text
from autotune.space import Space, load_space
from autotune.sweep_setup import SetupError

#: the keys of a replay's problem that ``--replay``, ``--params`` and ``--metric`` set
REPLAY_KEYS = ("table", "params", "metric", "absent_costs_a_trial")


def replay_settings(
    replay: Path,
    params: str | None,
    metric: str | None,
    maximize: bool,
    space_path: str | None,
    problem_values: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], Space, dict[str, str]]:
    """The replay's problem (``problem_values``, from ``--problem``, plus the table, its
    parameters and metric), its space and its objective.

    Raises:
        SetupError: naming the option or the table and what it cannot serve.

    Example:
        >>> table = Path(__file__).parents[1] / "benchmarks" / "data" / "matmul_4096_h200.csv"
        >>> problem, _, _ = replay_settings(table, "BLOCK_M", "tflops", True, None, {"M": 4096})
        >>> problem["M"], problem["params"]
        (4096, ['BLOCK_M'])
    """
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
    # a space of any workload: its `workload:` key names what recorded the table, not replay
    space = load_space(space_path) if space_path else space_from_table(table, names, str(replay))
    if space_path and sorted(space.names) != sorted(names):
        raise SetupError(f"{space_path}: its parameters ({', '.join(space.names)}) are not "
                         f"--params ({', '.join(names)}): a replay looks configs up by all of "
                         "them")  # fmt: skip
    unknown = [n for n in space.names if n not in table.columns]
    if unknown:
        raise SetupError(f"{replay}: the space's parameter {unknown[0]!r} is not a column")
    check_one_recording(table, replay, names)
    if space_path:
        check_codes_kept_apart(table, space, replay, space_path)
    if metric not in table.columns:
        raise SetupError(f"{replay}: --metric {metric!r} is not a column")
    numbers = pd.to_numeric(table[metric], errors="coerce")
    if numbers.isna().all():
        raise SetupError(f"{replay}: --metric {metric!r} holds no numbers")
    taken = next((k for k in problem_values or {} if k in REPLAY_KEYS), None)
    if taken is not None:
        raise SetupError(f"--problem: {taken!r} is the replay's own key (set by --replay, "
                         "--params and --metric)")  # fmt: skip
    # the table's whole path: a resume from another folder finds it
    problem = {**(problem_values or {}), "table": str(Path(replay).resolve()),
               "params": space.names, "metric": metric}  # fmt: skip
    return problem, space, {metric: "maximize" if maximize else "minimize"}


#: the columns ``autotune record`` stamps each row with: what was measured, and where
STAMP_PREFIXES = ("problem.", "device.")


def check_one_recording(table: Any, replay: Path, params: list[str]) -> None:
    """A table that holds a config under two recordings' stamps (its ``workload``, ``device``,
    ``problem.NAME`` or ``device.NAME`` column reads two values for it: two problems' or two
    devices' tables joined) is refused: the config would replay as the median of figures
    measured at different problems or on different devices, and the export would name one.
    Configs of different stamps, each under one, replay as before.

    Raises:
        SetupError: naming the table, the config, the column, its two values and their lines.

    Example:
        >>> import os, tempfile
        >>> table = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(table, "w").write("a,problem.N,ms\\n1,512,1.0\\n1,1024,3.0\\n")
        >>> replay_settings(Path(table), "a", "ms", False, None)
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: ...: config a=1 is recorded twice, its 'problem.N' ...
    """
    for column in table.columns:
        stamp = column in ("workload", "device") or str(column).startswith(STAMP_PREFIXES)
        if not stamp or column in params or table[column].dropna().astype(str).nunique() < 2:
            continue
        seen: dict[tuple, tuple[str, int]] = {}
        rows = table[[*params, column]].itertuples(index=True, name=None)
        for index, *values, cell in rows:
            if cell is None or (isinstance(cell, float) and math.isnan(cell)):
                continue
            key = tuple(str(v) for v in values)
            first, line = seen.setdefault(key, (str(cell), index + 2))
            if first == str(cell):
                continue
            config = ", ".join(f"{p}={v}" for p, v in zip(params, values, strict=True))
            raise SetupError(f"{replay}: config {config} is recorded twice, its {column!r} "
                             f"reading {first} (line {line}) and {cell} (line {index + 2}): "
                             "two recordings joined, whose median would mix their figures; "
                             "replay each recording's rows on their own")  # fmt: skip


def check_codes_kept_apart(table: Any, space: Space, replay: Path, space_path: str) -> None:
    """A ``--space`` that offers a number where the table spells it two ways, one a code with
    a leading zero (``01`` and ``1``), is refused: the table holds two configs there (as its
    own space offers them), and the number would replay their rows as one, their median.

    Raises:
        SetupError: naming the table, the column, its spellings of the number and the space.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> table, space = os.path.join(folder, "t.csv"), os.path.join(folder, "s.yaml")
        >>> _ = open(table, "w").write("tag,ms\\n01,1.0\\n1,3.0\\n2,5.0\\n")
        >>> _ = open(space, "w").write("parameters:\\n  tag: {type: int, low: 1, high: 2}\\n")
        >>> replay_settings(Path(table), "tag", "ms", False, space)
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: ...: column 'tag' holds '01' and '1', 2 configs that ...
    """
    from autotune.objectives.replay import code_collisions

    for param in space.params:
        for value, spellings in code_collisions(table, param.name).items():
            if not _offers_number(param, value):
                continue
            texts = " and ".join(repr(t) for t in spellings)
            words = ", ".join(repr(t) for t in spellings)
            raise SetupError(f"{replay}: column {param.name!r} holds {texts}, {len(spellings)} "
                             f"configs that {space_path}'s number {value} would replay as one "
                             f"(their median): make its choices the words {words}, or leave "
                             "--space out")  # fmt: skip


def _offers_number(param: Any, value: float) -> bool:
    """Whether the space's ``param`` can propose the number ``value`` (a bool is no number).

    Example:
        >>> from autotune.space import Param
        >>> _offers_number(Param("t", "categorical", choices=["01", "1"]), 1)
        False
        >>> _offers_number(Param("t", "int", low=0, high=10, step=2), 8)
        True
    """
    if param.kind in ("int", "float"):
        if not param.low <= value <= param.high:
            return False
        step = param.step if param.kind == "int" else None
        return not step or (value - param.low) % step == 0
    return any(isinstance(c, int | float) and not isinstance(c, bool) and c == value
               for c in param.values())  # fmt: skip


def check_replay_objective(objective: str | None, metric: str | None, maximize: bool) -> None:
    """A replay tunes ``--metric`` in the direction ``--maximize/--minimize`` says; an
    ``--objective`` that asks for anything else is refused rather than ignored.

    Example:
        >>> check_replay_objective("tflops:max", "tflops", maximize=True)  # the same: fine
        >>> check_replay_objective("ms", "tflops", maximize=True)
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: --objective 'ms': a replay tunes --metric tflops ...
    """
    if objective is None:
        return
    name, _, direction = objective.strip().partition(":")
    if name != metric or direction not in ("", "max" if maximize else "min"):
        flag = "--maximize" if maximize else "--minimize"
        raise SetupError(f"--objective {objective!r}: a replay tunes --metric {metric} ({flag}); "
                         "set those instead")  # fmt: skip


def check_replay_slo(
    replay: Path, slo: dict[str, float], metric: str, maximize: bool, params: list[str]
) -> None:
    """Every ``--slo`` metric of a replay is a figure its table records: a column other than a
    parameter, holding a number in every row that replays a measurement (a limit on a word
    cannot be checked), and not the ``metric`` the replay maximizes (a limit is an upper bound).

    Raises:
        SetupError: naming the table and the first metric it cannot cap.

    Example:
        >>> table = Path(__file__).parents[1] / "benchmarks" / "data" / "matmul_4096_h200.csv"
        >>> check_replay_slo(table, {"ms": 1.0}, "tflops", True, ["BLOCK_M"])  # a figure: fine
        >>> check_replay_slo(table, {"baseline": 1.0}, "tflops", True, ["BLOCK_M"])
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: ...: --slo 'baseline': the column holds no numbers ...
    """
    import pandas as pd

    from autotune.objectives.replay import load_table

    table = load_table(str(replay))
    figures = pd.to_numeric(table[metric], errors="coerce") if metric in table.columns else None
    replayed = table
    if figures is not None:  # the rows that replay a measurement (ok, with a figure)
        replayed = table[(table["status"].astype(str) == "ok") & figures.abs().lt(float("inf"))]
    for name in slo:
        if name not in table.columns:
            raise SetupError(f"{replay}: --slo {name!r} is not a column")
        if name in params:
            raise SetupError(f"{replay}: --slo {name!r} is a parameter (--params), not a "
                             "recorded figure")  # fmt: skip
        if name == metric and maximize:
            raise SetupError(f"--slo: the replay maximizes {name!r} (--metric), and a limit is "
                             "an upper bound")  # fmt: skip
        cells = replayed[name][replayed[name].notna()]
        words = cells[pd.to_numeric(cells, errors="coerce").isna()]
        if words.empty:
            continue
        if len(words) == len(cells):
            raise SetupError(f"{replay}: --slo {name!r}: the column holds no numbers (it reads "
                             f"{words.iloc[0]!r}); a limit caps a figure")  # fmt: skip
        raise SetupError(f"{replay}: --slo {name!r}: the column holds {words.iloc[0]!r} where a "
                         f"number belongs (line {words.index[0] + 2})")  # fmt: skip


def replay_arguments(
    stored: dict[str, Any] | None,
    study: str | None,
    *,
    replay: Path | None,
    params: str | None,
    metric: str | None,
    maximize: bool,
    space_path: str | None,
    problem_values: dict[str, Any],
) -> dict[str, Any]:
    """The keyword arguments of :func:`replay_settings`: those given, except for a stored
    replay study (``stored``, resumed): without ``--replay`` its table, parameters, metric,
    direction and ``--space`` file come from what it stored, and its ``--problem`` values stand
    where ``problem_values`` does not set them.

    Raises:
        SetupError: without ``--replay``, where the study did not store them, saying what to
            pass instead.

    Example:
        >>> stored = {"workload": "replay", "space": "t.csv", "objectives": {"ms": "minimize"},
        ...           "problem": {"table": "t.csv", "params": ["a", "b"], "metric": "ms", "M": 8}}
        >>> args = replay_arguments(stored, "s1", replay=None, params=None, metric=None,
        ...                         maximize=True, space_path=None, problem_values={})
        >>> str(args["replay"]), args["params"], args["maximize"], args["problem_values"]
        ('t.csv', 'a,b', False, {'M': 8})
        >>> replay_arguments({"workload": "replay"}, "s1", replay=None, params=None, metric=None,
        ...                  maximize=True, space_path=None, problem_values={})
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: study 's1' is a replay that did not store ...
    """
    given = {"replay": replay, "params": params, "metric": metric, "maximize": maximize,
             "space_path": space_path, "problem_values": problem_values}  # fmt: skip
    if not stored or stored.get("workload") != "replay":
        return given
    problem = stored.get("problem")
    problem = problem if isinstance(problem, dict) else {}
    values = {k: v for k, v in problem.items() if k not in REPLAY_KEYS}
    given["problem_values"] = {**values, **problem_values}
    if replay is not None:
        return given
    table, names, name = problem.get("table"), problem.get("params"), problem.get("metric")
    objectives = stored.get("objectives")
    direction = objectives.get(name) if isinstance(objectives, dict) else None
    names_ok = isinstance(names, list) and names and all(isinstance(n, str) for n in names)
    if not (isinstance(table, str) and names_ok and isinstance(name, str) and direction
            in ("maximize", "minimize")):  # fmt: skip
        raise SetupError(f"study {study!r} is a replay that did not store its table, parameters "
                         "and metric: pass --replay TABLE --params A,B,... --metric NAME to "
                         "resume it")  # fmt: skip
    space = stored.get("space")
    stored_space = space if isinstance(space, str) and space != table else None
    return {
        **given,
        "replay": Path(table),
        "params": ",".join(names),
        "metric": name,
        "maximize": direction == "maximize",
        "space_path": space_path or stored_space,
    }


def measured_on(replay: Path) -> str:
    """The replay label's note on the device the table's figures were measured on (its
    ``device.name`` column, which ``autotune record`` writes, or a ``device`` column), or
    nothing where the table does not record one: the sweep's header names the machine that
    replays, not the one that measured.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("a,device.name,m\\n1,NVIDIA H100,5\\n")
        >>> measured_on(Path(path))
        ' (measured on NVIDIA H100)'
    """
    from autotune.objectives.replay import load_table

    table = load_table(str(replay))
    column = next((c for c in ("device.name", "device") if c in table.columns), None)
    if column is None:
        return ""
    return measured_on_text(
        list(dict.fromkeys(str(v) for v in table[column].dropna() if str(v).strip()))
    )


def replay_label(shown: str, replay: Path, params: list[str]) -> str:
    """The label a replay's header, results and report carry: the table ``replay`` as
    ``shown`` (as typed with ``--replay``), the device it was measured on, and its repeats.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("a,device.name,m\\n1,NVIDIA H100,5\\n")
        >>> replay_label("t.csv", Path(path), ["a"])
        'REPLAY of t.csv (measured on NVIDIA H100): recorded measurements are looked up, ...'
    """
    return f"{LABEL_HEAD}{shown}{measured_on(replay)}{LABEL_TAIL}" + repeats_note(replay, params)


def table_shown(stored: dict[str, Any] | None, replay: Path) -> str:
    """The table ``replay`` of a stored replay study as its first run showed it (as typed
    with ``--replay``), read from the label it stored; its stored (absolute) path where the
    label does not say.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("a,device.name,m\\n1,NVIDIA H100,5\\n")
        >>> table_shown({"label": replay_label("data/t.csv", Path(path), ["a"])}, Path(path))
        'data/t.csv'
        >>> old = "REPLAY of t.csv: recorded measurements are looked up, nothing is measured"
        >>> table_shown({"label": old}, Path(path)), table_shown({}, Path("/d/t.csv"))
        ('t.csv', '/d/t.csv')
    """
    label = (stored or {}).get("label")
    if not isinstance(label, str) or not label.startswith(LABEL_HEAD) or LABEL_TAIL not in label:
        return str(replay)
    shown = label[len(LABEL_HEAD) : label.rindex(LABEL_TAIL)]
    if MEASURED_ON in shown:  # (a label stored before it named the device has none)
        shown = shown[: shown.rindex(MEASURED_ON)]
    return shown or str(replay)


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


def merged_note(replay: Path, params: list[str], metric: str) -> str | None:
    """The sweep's note where one config's median merges rows that differ in a config column
    left out of ``params`` (:func:`~autotune.objectives.replay_rows.merged_columns`): its
    figure is the median over different configs, which a replay of a sub-space may want, so
    it is said, not refused (as rows of two problems or devices are: two recordings joined).

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
        >>> _ = open(path, "w").write("lr,optimizer,ms\\n1,fused,5\\n1,foreach,9\\n2,fused,7\\n")
        >>> print(merged_note(Path(path), ["lr"], "ms"))
        replay: rows of one config differ in optimizer (fused, foreach): each config's value is the median over them; add it to --params to search it
    """  # noqa: E501
    from autotune.objectives.replay_rows import merged_columns
    from autotune.objectives.replay_table import load_table

    merged = merged_columns(load_table(str(replay)), params, metric)
    if not merged:
        return None
    shown = [
        f"{column} ({', '.join('blank' if v is None else str(v) for v in values[:4])}"
        f"{', ...' if len(values) > 4 else ''})"
        for column, values in merged.items()
    ]
    it = "it" if len(merged) == 1 else "them"
    return (f"replay: rows of one config differ in {' and '.join(shown)}: each config's value "
            f"is the median over them; add {it} to --params to search {it}")  # fmt: skip
