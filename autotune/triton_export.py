"""Best configs as Python source for Triton: a ``configs`` list of ``triton.Config`` for one
sweep, or a module with a per-shape table for a kernel that runs at many shapes.

The table module holds ``TABLE`` (shape -> configs, the noise-aware finish's winner first where
one ran, else best first by each config's one reading),
``REFERENCE_FASTER`` (the shapes where the library kernel timed against beat the winner),
``configs`` (every config of the table once, for ``@triton.autotune(configs=...)``), ``prune``
(an ``early_config_prune`` hook that keeps the configs tuned for the nearest shape, so that
``@triton.autotune`` times only those) and ``heuristics()`` (for ``@triton.heuristics``: the
winner at the nearest shape, no timing at all). A rename map (``BLOCK_M=BLOCK_SIZE_M``) serves a
kernel that spells the parameters otherwise (and, in a table, the key's sizes: ``M=m``);
``NAME=`` (empty) drops a parameter the kernel does not have, and the module's docstring says
which values it had.

Example:
    >>> text = triton_config_source([{"BLOCK_M": 64, "num_warps": 4}], ["trial 3"])
    >>> "triton.Config({'BLOCK_M': 64}, num_warps=4)" in text
    True
"""

from __future__ import annotations

import json
import keyword
import numbers
import unicodedata
from collections import defaultdict
from typing import Any

import optuna

from autotune import __version__
from autotune.driver.finish import spread_text
from autotune.driver.results import objectives_of, ok_trials, study_info
from autotune.driver.trial_attrs import stored_finish, stored_info
from autotune.kernel_config import LAUNCH_OPTIONS, KernelConfig, literal
from autotune.reference_verdict import describe, winner_verdict
from autotune.replay_info import is_replay, study_replay


class TritonExportError(ValueError):
    """Nothing to export, or studies that cannot share one table."""


def _comment(text: str) -> str:
    """``text`` made safe for a ``#`` comment: a line break (or any other unprintable
    character) is written as its escape, so data never ends the comment and runs as code.

    Example:
        >>> _comment('a\\nimport os')
        'a\\\\nimport os'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _docstring(text: str) -> str:
    """A triple-quoted literal whose value is ``text``: backslashes doubled, unprintable
    characters but newlines escaped, and a quote escaped where it could close the literal.

    Example:
        >>> import ast
        >>> text = 'ends it: ' + '"' * 3 + ', a unicode escape: \\\\N{x}'
        >>> ast.literal_eval(_docstring(text)) == text
        True
    """
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c == '"' and text[i + 1 : i + 2] in ('"', ""):
            out.append('\\"')
        elif c != "\n" and not c.isprintable():
            out.append(repr(c)[1:-1])
        else:
            out.append(c)
    return '"""' + "".join(out) + '"""'


def _renamed(config: dict[str, Any], rename: dict[str, str]) -> dict[str, Any]:
    """Meta-parameters renamed; a name mapped to "" is dropped."""
    out = {}
    for name, value in config.items():
        new = rename.get(name, name)
        if new:
            out[new] = value
    return out


def _normal(name: str) -> str:
    """``name`` as Python reads it in source: NFKC-normalized (full-width ``Ａ`` is ``A``).

    Example:
        >>> _normal("\uff21A")
        'AA'
    """
    return unicodedata.normalize("NFKC", name)


def _check_name(old: str, new: str) -> None:
    """A new name that a kernel's argument can have: a Python identifier, no keyword, and
    written as Python reads it (NFKC-normalized: the parser reads a full-width ``Ａ`` as ``A``,
    so a config's ``'ＡA'`` would never match the kernel's argument).

    Raises:
        TritonExportError: naming the rename's entry.

    Example:
        >>> _check_name("BLOCK_M", "class")
        Traceback (most recent call last):
        ...
        autotune.triton_export.TritonExportError: --rename BLOCK_M=class: 'class' is not a ...
    """
    if not new.isidentifier() or keyword.iskeyword(new):
        raise TritonExportError(f"--rename {old}={new}: {new!r} is not a Python name")
    if _normal(new) != new:
        raise TritonExportError(
            f"--rename {old}={new}: Python reads {new!r} as {_normal(new)!r} (NFKC); "
            "write that name"
        )


def check_rename(rename: dict[str, str], names: set[str]) -> None:
    """A rename map that a kernel can take: every name it renames is a parameter of the configs
    (``names``), every new name a Python identifier and no keyword (or "" to drop one), no two
    parameters end up with one name, and no name crosses the line between meta-parameters and
    ``triton.Config``'s launch options (``num_warps``, ...: never renamed nor dropped, and no
    meta-parameter renamed to one). Dropping a name the configs do not have is allowed (the
    parameter is absent either way), so one map serves sweeps of several spaces: the Triton
    tutorial's map drops ``SPLIT_K`` whether the space had it or not.

    Raises:
        TritonExportError: naming the first entry that breaks one of these.

    Example:
        >>> check_rename({"BLOCK_M": "BLOCK_N"}, {"BLOCK_M", "BLOCK_N"})
        Traceback (most recent call last):
        ...
        autotune.triton_export.TritonExportError: --rename ...: two parameters would be ... BLOCK_N
    """
    for old, new in rename.items():
        if old in LAUNCH_OPTIONS and new != old:
            raise TritonExportError(
                f"--rename {old}={new}: {old} is a launch option of triton.Config, not a "
                "meta-parameter; it cannot be renamed or dropped"
            )
        if new in LAUNCH_OPTIONS and old not in LAUNCH_OPTIONS:
            raise TritonExportError(
                f"--rename {old}={new}: {new} is a launch option of triton.Config; a "
                "meta-parameter cannot become one"
            )
        if new and old not in names:
            raise TritonExportError(
                f"--rename {old}={new}: the configs have no parameter {old!r}; "
                f"they have {', '.join(sorted(names))}"
            )
        if new:
            _check_name(old, new)
    final: dict[str, str] = {}  # each new name as Python reads it -> its parameter
    for name in sorted(names):
        new = rename.get(name, name)
        if not new:
            continue
        if _normal(new) in final:
            culprit = name if name in rename else final[_normal(new)]
            raise TritonExportError(
                f"--rename {culprit}={rename[culprit]}: two parameters would be called "
                f"{_normal(new)}"
            )
        final[_normal(new)] = name


def triton_config_source(
    configs: list[dict[str, Any]], comments: list[str], rename: dict[str, str] | None = None
) -> str:
    """Python source of a ``configs`` list of ``triton.Config`` for ``@triton.autotune``;
    ``rename`` maps meta-parameter names for a kernel that spells them otherwise; each comment
    is written on its config's line, made safe (:func:`_comment`)."""
    lines = []
    for config, comment in zip(configs, comments, strict=True):
        source = KernelConfig.from_flat(_renamed(config, rename or {})).triton_source()
        lines.append(f"    {source},  # {_comment(comment)}")
    return "configs = [\n" + "\n".join(lines) + "\n]\n"


def _distinct(configs: list[dict[str, Any]], rename: dict[str, str]) -> list[int]:
    """The indices of ``configs`` that export as no earlier one does: once renamed (a name
    mapped to "" dropped), two configs that differ only in a dropped parameter, or not at all,
    are one ``triton.Config``, and only the first, the better ranked, is kept.

    Example:
        >>> _distinct([{"A": 1, "B": 1}, {"A": 1, "B": 2}, {"A": 2, "B": 1}], {"B": ""})
        [0, 2]
    """
    seen: set[tuple] = set()
    kept = []
    for i, config in enumerate(configs):
        exported = tuple(sorted((k, repr(v)) for k, v in _renamed(config, rename).items()))
        if exported not in seen:
            seen.add(exported)
            kept.append(i)
    return kept


def ranked_trials(
    study: optuna.Study, top: int, rename: dict[str, str] | None = None
) -> list[tuple[optuna.trial.FrozenTrial, str]]:
    """The ``top`` best successful trials with a comment each: the noise-aware finish's rows
    first, by their re-measured medians (winner first, with spread), then the other trials by
    their single sweep reading (a replay's: the figure replayed from its table). Each config
    comes once as ``rename`` exports it (:func:`_distinct`): a trial that would repeat a
    better one's ``triton.Config`` gives its place to the next distinct one."""
    objectives = objectives_of(study)
    name, direction = next(iter(objectives.items()))
    sign = 1.0 if direction == "maximize" else -1.0
    by_number = {t.number: t for t in ok_trials(study)}
    ranked: list[tuple[optuna.trial.FrozenTrial, str]] = []
    finish = stored_finish(study.user_attrs)
    for row in finish.get("rows", []):
        trial = by_number.pop(row["trial"], None)
        if trial is not None:
            ranked.append(
                (trial, f"trial {trial.number}: finish median {row['median']:.4g} {name}, "
                        f"{spread_text(row['spread'], len(row['samples']))}")
            )  # fmt: skip
    front: set[int] = set()
    if len(objectives) > 1:  # the Pareto front's configs first: a dominated one never leads
        front = {t.number for t in study.best_trials if t.number in by_number}
    rest = sorted(by_number.values(), key=lambda t: (t.number not in front, -sign * t.values[0]))
    reading = "replayed from the table" if is_replay(study) else "one sweep reading"
    for t in rest:
        where = ", on the Pareto front" if t.number in front else ""
        ranked.append((t, f"trial {t.number}: {t.values[0]:.4g} {name} ({reading}{where})"))
    kept = _distinct([dict(t.params) for t, _ in ranked], rename or {})
    return [ranked[i] for i in kept[:top]]


def _objectives_note(study: optuna.Study) -> str:
    """For a sweep of several objectives, how its configs were ordered (else nothing)."""
    objectives = list(objectives_of(study))
    if len(objectives) < 2:
        return ""
    return (
        f"Note: a sweep of {', '.join(objectives)}: the Pareto front's configs first, each "
        f"group by {objectives[0]}; @triton.autotune keeps whichever runs fastest.\n"
    )


def _dropped_note(configs: list[dict[str, Any]], rename: dict[str, str]) -> str:
    """The docstring's line naming the parameters a rename dropped and the values they had (a
    name the configs never had is left out: nothing of it was lost)."""
    dropped = sorted(name for name, new in rename.items() if not new)
    values = {n: sorted({str(c[n]) for c in configs if n in c}) for n in dropped}
    listed = "; ".join(f"{n} (values: {', '.join(v)})" for n, v in values.items() if v)
    if not listed:
        return ""
    return f"Dropped for a kernel without them: {listed}.\n"


def _where(info: dict[str, Any], replay: dict[str, Any] | None) -> str:
    """Where the figures come from: the device a sweep ran on, or a replay's source (its
    table's workload where stamped) and the machine that replayed it.

    Example:
        >>> _where({"device": {"name": "NVIDIA H100"}}, None)
        'on NVIDIA H100'
        >>> _where({}, {"source": "replay of measurements on NVIDIA H200", "workload": "matmul",
        ...             "replayed_on": {"name": "a CPU"}})
        'replay of measurements on NVIDIA H200 (a matmul table); replayed on a CPU'
    """
    if replay is None:
        return f"on {info.get('device', {}).get('name') or 'a device it did not record'}"
    stamp = f" (a {replay['workload']} table)" if replay.get("workload") else ""
    machine = replay.get("replayed_on", {}).get("name", "an unrecorded machine")
    return f"{replay['source']}{stamp}; replayed on {machine}"


def _header(title: str, where: str, body: str) -> str:
    """The module's docstring (``title`` and ``where`` its figures come from, :func:`_where`;
    ``body``: data, written safely) and its import."""
    headline = f"{title} {where}" if title else where
    doc = _docstring(f"Tuned by autotune {__version__}: {headline}.\n\n{body}")
    return f"{doc}\n\nimport triton\n\n"


def triton_export(study: optuna.Study, top: int = 5, rename: dict[str, str] | None = None) -> str:
    """The ``top`` best successful configs of a study as triton.Configs, ordered as
    :func:`ranked_trials` says (a sweep of several objectives: its Pareto front first)."""
    ranked = ranked_trials(study, top, rename)
    if not ranked:
        raise TritonExportError(f"study {study.study_name!r} has no successful trial to export")
    info = study_info(study)
    replay = study_replay(study)
    _check_kernel_workload(study.study_name, info, replay)
    configs = [dict(t.params) for t, _ in ranked]
    check_rename(rename or {}, {name for config in configs for name in config})
    verdict = winner_verdict(study, ranked[0][0])
    problem = info.get("problem", {})  # a replay's: with the problem its table records
    problem = problem if replay is None else {**replay["problem"], **problem}
    body = (
        f"Study {study.study_name!r}, problem {json.dumps(problem)}. "
        f"{info.get('label', '')}\n{_dropped_note(configs, rename or {})}\n"
        + (f"Note: {describe(verdict)}.\n" if verdict else "")
        + _objectives_note(study)
        + "Use: @triton.autotune(configs=configs, key=[...]) above the kernel.\n"
        f"Reproduce: {info.get('command', '')}\n"
    )
    title = str(info.get("workload") or "") if replay is None else ""  # none: a foreign study
    header = _header(title, _where(info, replay), body)
    return header + triton_config_source(configs, [c for _, c in ranked], rename)


def _shape_of(study_name: str, problem: dict[str, Any], key: list[str]) -> tuple[int, ...]:
    """The study's shape: its problem's values of ``key``, whole numbers.

    Raises:
        TritonExportError: a key value the problem lacks or that is not a whole number.

    Example:
        >>> _shape_of("s", {"M": 64, "N": 128, "dtype": "bf16"}, ["M", "N"])
        (64, 128)
    """
    missing = [k for k in key if k not in problem]
    if missing:
        raise TritonExportError(f"study {study_name!r}: its problem has no {missing[0]}")
    shape = []
    for k in key:
        whole = _whole(problem[k])
        if whole is None:
            raise TritonExportError(
                f"--key {k}: study {study_name!r} has {k}={problem[k]!r}; a shape is whole "
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


def _compiles(workload: str) -> bool | None:
    """Whether ``workload`` is a kernel's (its objective compiles one), or None for a workload
    this version does not know."""
    from autotune.objectives import get_objective

    try:
        return bool(get_objective(workload).compiles)
    except (KeyError, ImportError):
        return None


def workload_of_params(params: list[str]) -> str | None:
    """The workload a table of unstamped ``params`` was recorded by, as far as the names say:
    the first built-in workload whose space holds every one of them, where none whose space
    does is a kernel's; None where a kernel's space could hold them or none does (a user's own
    table: its configs as they are).

    Example:
        >>> workload_of_params(["micro_batch", "precision", "optimizer"])
        'train-step'
        >>> workload_of_params(["BLOCK_M", "num_warps"]) is None
        True
    """
    from autotune.objectives import WORKLOADS, get_objective
    from autotune.space import SpaceError, load_space

    matches: list[tuple[str, bool]] = []
    for name in WORKLOADS:
        if name == "replay":
            continue
        try:
            objective = get_objective(name)
            names = set(load_space(objective.space).names)
        except (KeyError, ImportError, OSError, SpaceError):
            continue
        if params and set(params) <= names:
            matches.append((name, bool(objective.compiles)))
    if not matches or any(kernel for _, kernel in matches):
        return None
    return matches[0][0]


def _other_targets(workload: str) -> str:
    """The ``--to`` targets that export a sweep of ``workload`` that is not a kernel's.

    Example:
        >>> _other_targets("serving")
        '--to vllm or sglang'
    """
    from autotune.serving_export import TARGETS as SERVING
    from autotune.train_export import TARGETS as TRAINING

    targets = {"train-step": TRAINING, "serving": SERVING, "server": SERVING}.get(workload)
    if not targets:
        return "see --to's other targets"
    return f"--to {', '.join(targets[:-1])} or {targets[-1]}"


def _check_kernel_workload(
    study_name: str, info: dict[str, Any], replay: dict[str, Any] | None = None
) -> None:
    """A triton.Config holds a kernel's tunables: a sweep of a training step, a serving engine
    or a server has none (its own exports are --to hf ... and --to vllm, sglang), and neither
    has a replay of a table they recorded: its ``workload`` column (:func:`replay_info`) says
    so, else, in a table without one, parameters that only such a sweep has
    (:func:`workload_of_params`).

    Raises:
        TritonExportError: the sweep, or the replayed table, is not a kernel's.

    Example:
        >>> info = {"workload": "replay", "problem": {"params": ["max_num_seqs"]}}
        >>> _check_kernel_workload("s", info, {"workload": "serving"})
        Traceback (most recent call last):
        ...
        autotune.triton_export.TritonExportError: study 's' replays a serving table ... sglang)
    """
    workload = str(info.get("workload"))
    what = f"is a {workload} sweep"
    if workload == "replay":
        replay = replay or {}
        params = [str(p) for p in info.get("problem", {}).get("params") or []]
        workload = replay.get("workload") or workload_of_params(params) or ""
        if not workload:
            return  # a table nothing says is not a kernel's: its configs as they are
        what = (f"replays a {workload} table (its workload column)" if replay.get("workload")
                else f"replays a table of {workload} parameters ({', '.join(params)})")  # fmt: skip
    if _compiles(workload) is False:
        raise TritonExportError(
            f"study {study_name!r} {what}, not a kernel's: triton.Config has nothing of it to "
            f"hold ({_other_targets(workload)})"
        )


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


def _dict_source(values: dict[Any, Any]) -> str:
    """Python source of ``values``, its keys in order, each value as a config's is written
    (:func:`~autotune.kernel_config.literal`): a value that is not finite reads back as itself,
    where its repr (``-inf``) is a name the module does not have.

    Example:
        >>> _dict_source({"X": float("-inf"), "A": 1})
        "{'A': 1, 'X': float('-inf')}"
    """
    return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in sorted(values.items())) + "}"


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
        autotune.triton_export.TritonExportError: one table holds one layout: ... layout='nk' ...
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
                f"{name!r} has {said[1]} (a table's shapes differ only in --key "
                f"{','.join(key)})"
            )


def _key_names(key: list[str], rename: dict[str, str]) -> list[str]:
    """The kernel's names of the table's ``key``: ``rename`` maps a key value as it maps a
    parameter (``M=m``), for a kernel whose size arguments are spelled otherwise; the module's
    ``prune`` and ``heuristics()`` read the launch's arguments by these names.

    Raises:
        TritonExportError: a key value dropped (``M=``: the module needs its argument), renamed
            to no Python name or to a launch option, or two renamed to one name.

    Example:
        >>> _key_names(["M", "N", "K"], {"M": "m", "K": "k_", "BLOCK_M": "BLOCK_SIZE_M"})
        ['m', 'N', 'k_']
        >>> _key_names(["M", "N"], {"M": ""})
        Traceback (most recent call last):
        ...
        autotune.triton_export.TritonExportError: --rename M=: M is of the table's --key; ...
    """
    names: list[str] = []
    for k in key:
        new = rename.get(k, k)
        if not new:
            raise TritonExportError(
                f"--rename {k}=: {k} is of the table's --key; the module reads the kernel's "
                f"argument for it (name that argument: {k}=NAME)"
            )
        if k in rename:
            _check_name(k, new)
            if new in LAUNCH_OPTIONS:
                raise TritonExportError(
                    f"--rename {k}={new}: {new} is a launch option of triton.Config, not a "
                    "kernel's size argument"
                )
        if _normal(new) in map(_normal, names):
            raise TritonExportError(f"--rename {k}={new}: two key values would be called {new}")
        names.append(new)
    return names


def triton_table_export(
    studies: list[optuna.Study],
    key: list[str],
    top: int = 3,
    rename: dict[str, str] | None = None,
) -> str:
    """A module with a per-shape table of the studies' best configs (see the module
    docstring); ``key`` names the problem values a shape is (``["M", "N", "K"]``); ``rename``
    maps parameters and key values to the kernel's names (:func:`_key_names`).

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
    kernel_key = _key_names(key, rename)
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
        _check_kernel_workload(study.study_name, info, replay)
        problem = info.get("problem", {}) if replay is None else replay["problem"]
        problems.append((study.study_name, problem))
        for what, value in (("workload", _workload_seen(info, replay)),
                            ("device", (info if replay is None else replay).get("device", {})
                             .get("name"))):  # fmt: skip
            seen[what].add(str(value))
        shape = _shape_of(study.study_name, problem, key)
        swept[shape].append(study.study_name)
        comments = [f"{study.study_name}, {comment}" for _, comment in ranked]
        rows[shape] = list(zip([dict(t.params) for t, _ in ranked], comments, strict=True))
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
    params = {_normal(name) for config in every for name in _renamed(config, rename)}
    clash = next((k for k, new in zip(key, kernel_key, strict=True)
                  if new != k and _normal(new) in params), None)  # fmt: skip
    if clash is not None:
        new = kernel_key[key.index(clash)]
        raise TritonExportError(f"--rename {clash}={new}: {new} is a parameter of the configs")
    inactive = _renamed(_inactive_values(studies, every), rename)
    twice = {shape: names for shape, names in swept.items() if len(names) > 1}
    dtype = str(problems[0][1].get("dtype"))
    ordering = _table_ordering(tabled)
    body = (
        _replay_note(tabled)
        + f"A per-shape table over {', '.join(key)}"
        + (f" (the kernel's {', '.join(kernel_key)})" if kernel_key != key else "")
        + f" ({len(rows)} shapes"
        + (f", dtype {dtype}" if dtype != "None" else "")
        + f"), {ordering}.\n"
        f"{_dropped_note(every, rename)}\n"
        + "".join(
            f"Shape {shape} was swept by {', '.join(names)}: the last, {names[-1]}, is kept.\n"
            for shape, names in sorted(twice.items())
        )
        + f"Use: @triton.autotune(configs=configs, key={kernel_key!r},\n"
        '                       prune_configs_by={"early_config_prune": prune})\n'
        "  or @triton.heuristics(heuristics()) for the nearest shape's winner, untimed.\n"
        + (
            f"Note: at {len(slower)} shape(s) the library kernel the sweep timed against was "
            "faster than the winner (REFERENCE_FASTER: shape -> the winner's ratio to it); "
            "call the library there.\n"
            if slower
            else ""
        )
    )
    sources: list[str] = []  # every config of the table once: one tuned at two shapes too
    table = [f"# shape -> configs, {ordering}", "TABLE = {"]
    for shape, entries in sorted(rows.items()):
        table.append(f"    {shape!r}: [")
        for config, comment in entries:
            source = KernelConfig.from_flat(_renamed(config, rename)).triton_source()
            if source not in sources:
                sources.append(source)
            table.append(f"        configs[{sources.index(source)}],  # {_comment(comment)}")
        table.append("    ],")
    table.append("}")
    lines = [f"KEY = {tuple(kernel_key)!r}",
             "# every config of the table once (for @triton.autotune(configs=...))",
             "configs = [", *(f"    {source}," for source in sources), "]", *table]  # fmt: skip
    lines.append("# shapes where the library kernel beat the winner: shape -> the winner's ratio")
    lines.append(f"REFERENCE_FASTER = {_dict_source(slower)}")
    lines.append(
        "# a parameter some winners leave unset (their schedule does not use it): the value"
    )
    lines.append("# heuristics() passes for it then, its space's first")
    lines.append(f"INACTIVE = {_dict_source(inactive)}")
    return (
        _header(
            f"{info.get('workload') or 'a'} per-shape table"
            if replay is None
            else "per-shape table,",
            _where(info, replay),
            body,
        )
        + "\n".join(lines)
        + ("\n" + _TABLE_HELPERS)
    )
