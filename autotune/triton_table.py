"""A module with a per-shape table of tuned configs, for a kernel that runs at many shapes.

The module holds ``TABLE`` (shape -> configs, the noise-aware finish's winner first where
one ran, else best first by each config's one reading),
``REFERENCE_FASTER`` (the shapes where the library kernel timed against beat the winner),
``configs`` (every config of the table once, for ``@triton.autotune(configs=...)``), ``prune``
(an ``early_config_prune`` hook that keeps the configs tuned for the nearest shape, so that
``@triton.autotune`` times only those) and ``heuristics()`` (for ``@triton.heuristics``: the
winner at the nearest shape, no timing at all). A rename map serves a kernel that spells the
parameters (and the key's sizes: ``M=m``) otherwise (:mod:`autotune.triton_names`).

Example:
    >>> _shape_of("s", {"M": 64, "N": 128, "dtype": "bf16"}, ["M", "N"])
    (64, 128)
"""

from __future__ import annotations

import numbers
from collections import defaultdict
from typing import Any

import optuna

from autotune.driver.results import study_info
from autotune.driver.trial_attrs import stored_finish, stored_info
from autotune.kernel_config import KernelConfig
from autotune.reference_verdict import winner_verdict
from autotune.replay_info import is_replay, study_replay
from autotune.triton_export import ranked_trials
from autotune.triton_names import (
    TritonExportError,
    check_rename,
    key_names,
    python_name,
    renamed,
)
from autotune.triton_recorded import exported_configs
from autotune.triton_source import (
    dict_source,
    dropped_note,
    figures_origin,
    module_header,
    safe_comment,
)
from autotune.triton_workload import check_kernel_workload
from autotune.units import counted


def _shape_of(study_name: str, problem: dict[str, Any], key: list[str]) -> tuple[int, ...]:
    """The study's shape: its problem's values of ``key``, whole numbers.

    Raises:
        TritonExportError: a key value the problem lacks or that is not a whole number.

    Example:
        >>> _shape_of("s", {"M": 64, "N": 128, "dtype": "bf16"}, ["M", "N"])
        (64, 128)
        >>> _shape_of("s", {"M": 64, "N": 128, "dtype": "bf16"}, ["M", "N", "K"])
        Traceback (most recent call last):
        ...
        autotune.triton_names.TritonExportError: --key: ... no K; ...: this one has M,N
    """
    missing = [k for k in key if k not in problem]
    if missing:
        sizes = [k for k, v in problem.items() if _whole(v) is not None]
        raise TritonExportError(
            f"--key: study {study_name!r}'s problem has no {missing[0]}; a table's key (here "
            f"{','.join(key)}) names the problem's sizes (M,N,K by default)"
            + (f": this one has {','.join(sizes)}" if sizes else "")
        )
    shape = []
    for k in key:
        whole = _whole(problem[k])
        if whole is None:
            raise TritonExportError(
                f"--key: study {study_name!r} has {k}={problem[k]!r}; a shape is whole "
                "numbers (a table holds one dtype and layout already)"
            )
        shape.append(whole)
    return tuple(shape)


def _whole(value: Any) -> int | None:
    """``value`` as a whole number: an int, a float without a fraction (2.0 is 2) or the text
    of an int; None for anything else (1.5, inf, "fp16", True), never truncated.

    Example:
        >>> _whole(64), _whole(2.0), _whole("128"), _whole(1.5), _whole(float("inf"))
        (64, 2, 128, None, None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return int(value) if float(value).is_integer() else None
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return None
    return None


def _inactive_values(studies: list[optuna.Study], configs: list[dict[str, Any]]) -> dict:
    """For each parameter that some of ``configs`` leave out (a conditional one, ``when:`` in
    the space), the value ``heuristics()`` gives a winner without it: its distribution's first
    choice (or low end), as the studies' trials recorded it."""
    names = {n for c in configs for n in c}
    partial = sorted(n for n in names if any(n not in c for c in configs))
    values: dict[str, Any] = {}
    for name in partial:
        for study in studies:
            trial = next((t for t in study.get_trials(deepcopy=False)
                          if name in t.distributions), None)  # fmt: skip
            if trial is not None:
                dist = trial.distributions[name]
                values[name] = dist.choices[0] if hasattr(dist, "choices") else dist.low
                break
    return values


_TABLE_HELPERS = '''

def _shape(named_args, kwargs):
    return tuple(named_args[k] if k in named_args else kwargs[k] for k in KEY)


def nearest(shape):
    """The tuned shape closest to ``shape`` (summed |log ratio| over the key)."""
    import math

    def distance(tuned):
        return sum(abs(math.log(max(a, 1) / max(b, 1))) for a, b in zip(shape, tuned))

    return min(TABLE, key=distance)


def prune(configs, named_args, **kwargs):
    """``early_config_prune`` for ``@triton.autotune``: keep the configs tuned for the nearest
    shape (the autotuner then times only those)."""
    wanted = TABLE[nearest(_shape(named_args, kwargs))]
    keep = [c for c in configs if any(c is w for w in wanted)]
    return keep or list(wanted)


def heuristics():
    """For ``@triton.heuristics``: every meta-parameter and launch option of the winner at the
    nearest shape (the table's first config), read from the launch's arguments."""

    def pick(name):
        def value(args):
            winner = TABLE[nearest(tuple(args[k] for k in KEY))][0]
            return {**INACTIVE, **winner.kwargs, "num_warps": winner.num_warps,
                    "num_stages": winner.num_stages}[name]

        return value

    names = {n for c in configs for n in c.kwargs} | {"num_warps", "num_stages"}
    return {name: pick(name) for name in sorted(names)}
'''


def _workload_seen(info: dict[str, Any], replay: dict[str, Any] | None) -> str:
    """The workload one table must not mix: a sweep's, or a replay's with its table's stamp
    (a replay and a sweep that measured never share a table).

    Example:
        >>> _workload_seen({"workload": "replay"}, {"workload": "matmul"})
        'replay of a matmul table'
    """
    if replay is None:
        return str(info.get("workload"))
    return f"replay of a {replay['workload']} table" if replay.get("workload") else "replay"


def _table_ordering(studies: list[optuna.Study]) -> str:
    """How the table orders each shape's configs: the noise-aware finish's winner first where
    one ran, else best first by each config's one reading (a replay's: recorded).

    Example:
        >>> _table_ordering([optuna.create_study()])
        "best first by each config's one sweep reading (no noise-aware finish ran)"
    """
    finished = [bool(stored_finish(s.user_attrs).get("rows")) for s in studies]
    if all(finished):
        return "the noise-aware finish's winner first"
    replays = all(is_replay(s) for s in studies)
    reading = "the figure each config replays from its table" if replays else (
        "each config's one sweep reading")  # fmt: skip
    if not any(finished):
        return f"best first by {reading} (no noise-aware finish ran)"
    return f"the noise-aware finish's winner first where one ran, else best first by {reading}"


def _replay_note(studies: list[optuna.Study]) -> str:
    """The table's REPLAY label: which studies replayed a recorded table (nothing of theirs
    was measured), or nothing.

    Example:
        >>> _replay_note([optuna.create_study()])
        ''
    """
    tables = {s.study_name: (study_replay(s) or {}).get("table") for s in studies if is_replay(s)}
    if not tables:
        return ""
    listed = ", ".join(f"{name} ({table})" for name, table in tables.items())
    return (f"REPLAY: every figure of {listed} is a recorded measurement looked up in its table; "
            "nothing was measured.\n")  # fmt: skip


def table_studies(
    storage: optuna.storages.BaseStorage,
    names: list[str] | None = None,
    anchor: str | None = None,
) -> list[optuna.Study]:
    """The studies a table is made of: ``names``, or every stored study of the workload of the
    newest study or of ``anchor`` (a replay's: of its table's, :func:`_workload_seen`).

    Raises:
        TritonExportError: an unknown study name or one named twice, ``anchor`` with
            ``names``, or an empty storage.
    """

    summaries = optuna.study.get_all_study_summaries(storage)
    known = {s.study_name for s in summaries}
    if names and anchor is not None:
        raise TritonExportError(f"--study {anchor}: --studies names the studies to tabulate; "
                                "give one of the two")  # fmt: skip
    if names:
        twice = next((n for n in names if names.count(n) > 1), None)
        if twice is not None:
            raise TritonExportError(f"--studies: study {twice!r} is named twice")
        unknown = [n for n in names if n not in known]
        if unknown:
            raise TritonExportError(f"--studies: no study named {unknown[0]!r} in the storage")
        return [optuna.load_study(study_name=n, storage=storage) for n in names]
    if not summaries:
        raise TritonExportError("the storage holds no study to export")
    chosen_one = summaries[-1]
    if anchor is not None:
        chosen_one = next((s for s in summaries if s.study_name == anchor), None)
        if chosen_one is None:
            raise TritonExportError(f"--study: no study named {anchor!r} in the storage")
    workload = _summary_workload(storage, chosen_one)
    chosen = [s.study_name for s in summaries if _summary_workload(storage, s) == workload]
    return [optuna.load_study(study_name=n, storage=storage) for n in chosen]


def _summary_workload(
    storage: optuna.storages.BaseStorage, summary: optuna.study.StudySummary
) -> str:
    """A stored study's :func:`_workload_seen`; only a replay's study is loaded (its table's
    workload is stamped in its trials)."""
    info = stored_info(summary.user_attrs)
    if info.get("workload") != "replay":
        return _workload_seen(info, None)
    study = optuna.load_study(study_name=summary.study_name, storage=storage)
    return _workload_seen(info, study_replay(study))


def _check_one_problem(problems: list[tuple[str, dict[str, Any]]], key: list[str]) -> None:
    """Studies that may share a table: their problems (study name, problem) differ in the
    values of ``key`` alone. A matmul of ``layout=nk`` and one of ``kn``, a causal attention
    and one that is not, are different kernels' tunings at one shape: a table of both would
    serve the one's winner to the other.

    Raises:
        TritonExportError: naming the first value two studies differ in, and the two.

    Example:
        >>> _check_one_problem([("kn32", {"M": 32, "layout": "kn"}),
        ...                     ("nk64", {"M": 64, "layout": "nk"})], ["M"])
        Traceback (most recent call last):
        ...
        autotune.triton_names.TritonExportError: one table holds one layout: ... layout='nk' ...
    """
    if not problems:
        return
    first_name, first = problems[0]
    for name, problem in problems[1:]:
        for value in sorted({*first, *problem} - set(key)):
            if value in first and value in problem and first[value] == problem[value]:
                continue
            said = [f"{value}={p[value]!r}" if value in p else f"no {value}"
                    for p in (first, problem)]  # fmt: skip
            raise TritonExportError(
                f"one table holds one {value}: study {first_name!r} has {said[0]}, study "
                f"{name!r} has {said[1]} (a table's shapes differ only in its key, "
                f"{','.join(key)})"
            )


def triton_table_export(
    studies: list[optuna.Study],
    key: list[str],
    top: int = 3,
    rename: dict[str, str] | None = None,
) -> str:
    """A module with a per-shape table of the studies' best configs (see the module
    docstring); ``key`` names the problem values a shape is (``["M", "N", "K"]``); ``rename``
    maps parameters and key values to the kernel's names (:func:`key_names`).

    Raises:
        TritonExportError: no study with a successful trial, studies of different workloads
            or devices or whose problems differ in a value not of ``key`` (a dtype, a layout),
            a key value named twice, or a problem without a key value.
    """
    rename = rename or {}
    if not key:
        raise TritonExportError("--key: name the problem values a shape is made of, e.g. M,N,K")
    twice = next((k for k in key if key.count(k) > 1), None)
    if twice is not None:
        raise TritonExportError(f"--key: {twice!r} is named twice")
    kernel_key = key_names(key, rename)
    rename = {old: new for old, new in rename.items() if old not in key}  # the parameters'
    rows: dict[tuple, list[tuple[dict[str, Any], str]]] = {}
    swept: defaultdict[tuple, list[str]] = defaultdict(list)  # shape -> its studies, in order
    slower: dict[tuple, float] = {}  # shapes where the library kernel beat the winner
    seen: defaultdict[str, set[str]] = defaultdict(set)
    tabled: list[optuna.Study] = []  # the studies with a successful trial
    problems: list[tuple[str, dict[str, Any]]] = []  # each tabled study's name and problem
    for study in studies:
        ranked = ranked_trials(study, top, rename)
        if not ranked:
            continue
        tabled.append(study)
        info, replay = study_info(study), study_replay(study)
        check_kernel_workload(study.study_name, info, replay)
        problem = info.get("problem", {}) if replay is None else replay["problem"]
        problems.append((study.study_name, problem))
        for what, value in (("workload", _workload_seen(info, replay)),
                            ("device", (info if replay is None else replay).get("device", {})
                             .get("name"))):  # fmt: skip
            seen[what].add(str(value))
        shape = _shape_of(study.study_name, problem, key)
        swept[shape].append(study.study_name)
        comments = [f"{study.study_name}, {comment}" for _, comment in ranked]
        configs = exported_configs(study, [t for t, _ in ranked])
        rows[shape] = list(zip(configs, comments, strict=True))
        slower.pop(shape, None)  # the kept (last) sweep's verdict alone
        verdict = winner_verdict(study, ranked[0][0])
        if verdict is not None:
            slower[shape] = round(verdict["ratio"], 4)
    if not rows:
        raise TritonExportError("no study with a successful trial to export")
    mixed = [what for what, values in seen.items() if len(values) > 1]
    if mixed:
        raise TritonExportError(
            f"one table holds one {mixed[0]}; the studies have {sorted(seen[mixed[0]])}"
        )
    _check_one_problem(problems, key)
    info, replay = study_info(tabled[0]), study_replay(tabled[0])
    every = [config for entries in rows.values() for config, _ in entries]
    check_rename(rename, {name for config in every for name in config})
    params = {python_name(name) for config in every for name in renamed(config, rename)}
    clash = next((k for k, new in zip(key, kernel_key, strict=True)
                  if new != k and python_name(new) in params), None)  # fmt: skip
    if clash is not None:
        new = kernel_key[key.index(clash)]
        raise TritonExportError(f"--rename {clash}={new}: {new} is a parameter of the configs")
    inactive = renamed(_inactive_values(studies, every), rename)
    twice = {shape: names for shape, names in swept.items() if len(names) > 1}
    dtype = str(problems[0][1].get("dtype"))
    ordering = _table_ordering(tabled)
    body = (
        _replay_note(tabled)
        + f"A per-shape table over {', '.join(key)}"
        + (f" (the kernel's {', '.join(kernel_key)})" if kernel_key != key else "")
        + f" ({counted(len(rows), 'shape')}"
        + (f", dtype {dtype}" if dtype != "None" else "")
        + f"), {ordering}.\n"
        f"{dropped_note(every, rename)}\n"
        + "".join(
            f"Shape {shape} was swept by {', '.join(names)}: the last, {names[-1]}, is kept.\n"
            for shape, names in sorted(twice.items())
        )
        + f"Use: @triton.autotune(configs=configs, key={kernel_key!r},\n"
        '                       prune_configs_by={"early_config_prune": prune})\n'
        "  or @triton.heuristics(heuristics()) for the nearest shape's winner, untimed.\n"
        + (
            f"Note: at {counted(len(slower), 'shape')} the library kernel the sweep timed "
            "against was faster than the winner (REFERENCE_FASTER: shape -> the winner's ratio "
            "to it); call the library there.\n"
            if slower
            else ""
        )
    )
    sources: list[str] = []  # every config of the table once: one tuned at two shapes too
    table = [f"# shape -> configs, {ordering}", "TABLE = {"]
    for shape, entries in sorted(rows.items()):
        table.append(f"    {shape!r}: [")
        for config, comment in entries:
            source = KernelConfig.from_flat(renamed(config, rename)).triton_source()
            if source not in sources:
                sources.append(source)
            table.append(f"        configs[{sources.index(source)}],  # {safe_comment(comment)}")
        table.append("    ],")
    table.append("}")
    lines = [f"KEY = {tuple(kernel_key)!r}",
             "# every config of the table once (for @triton.autotune(configs=...))",
             "configs = [", *(f"    {source}," for source in sources), "]", *table]  # fmt: skip
    lines.append("# shapes where the library kernel beat the winner: shape -> the winner's ratio")
    lines.append(f"REFERENCE_FASTER = {dict_source(slower)}")
    lines.append(
        "# a parameter some winners leave unset (their schedule does not use it): the value"
    )
    lines.append("# heuristics() passes for it then, its space's first")
    lines.append(f"INACTIVE = {dict_source(inactive)}")
    return (
        module_header(
            f"{info.get('workload') or 'a'} per-shape table"
            if replay is None
            else "per-shape table,",
            figures_origin(info, replay),
            body,
        )
        + "\n".join(lines)
        + ("\n" + _TABLE_HELPERS)
    )
