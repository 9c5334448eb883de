"""``autotune tune WORKLOAD --space COMPOSED.yaml``: a space composed of prefixed includes of
the workload's own space (every GEMM of a decoder, each a ``matmul.yaml`` at its own problem)
is searched by group: each distinct (part's space file, problem) is an ordinary sweep of its
own, through :func:`autotune.cli_sweep.run_settings` (the same driver, executors, failure
handling, finish and storage as any ``autotune tune``), in a study of its own named
``<study>.<prefix>`` (``--study``, else the workload and the time). Prefixes whose includes
give the same space file and problem are one measurement: one sweep answers them all.

``--trials`` counts each group's study; ``--time-budget`` bounds the whole command: each group,
as it starts, gets an equal share of the time left (its finish inside it), so a group that ends
early leaves its time to those after it. The processes the groups share (the trial workers, the
compile-ahead pool and the finish's worker: :mod:`autotune.driver.kept_processes`) start before
the first sweep's share is counted, so that the start is paid by every group. At the end: a
line per group, the prefixes' winners as JSON on stdout (``{prefix: config}``), and ``--output``
maps each prefix to the record ``--output`` writes for one sweep (its study, problem, config
and values). Ctrl-C ends the command at the group it is in, which answers with its best so far
where it has one.

Example (a shell; ``decoder_gemms.yaml`` ships with autotune):
    $ autotune tune matmul --space decoder_gemms.yaml --trials 20 --output gemms.json
    searched by group: 12 sweeps for 12 prefixes
    group 1/12: decode1.qkv. (M=1, N=6144, K=4096, dtype=bf16, layout=kn)
    ... its sweep and finish, as one `autotune tune` prints them; then the 11 others ...
    searched by group: the winners
      decode1.qkv. (M=1, N=6144, K=4096, dtype=bf16, layout=kn): study
      matmul-20261206-101500.decode1.qkv, trial 12: ... in the sweep, ... the finish's median
    wrote gemms.json

Example (Python):
    >>> from pathlib import Path
    >>> parts = [Part("a.", Path("mm.yaml"), {"M": 16}), Part("b.", Path("mm.yaml"), {"M": 16}),
    ...          Part("c.", Path("mm.yaml"), {"M": 64})]
    >>> [[p.prefix for p in same] for same in same_measurements(parts, {"K": 32})]
    [['a.', 'b.'], ['c.']]
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from autotune.cli_errors import err
from autotune.group_warm_start import group_sources
from autotune.in_memory import in_memory
from autotune.problem_text import problem_text
from autotune.setup_error import SetupError
from autotune.space import Space, load_space
from autotune.space.parts import Part, composed_parts
from autotune.units import counted

if TYPE_CHECKING:
    import optuna

    from autotune.driver import SweepSettings
    from autotune.driver.kept_processes import KeptProcesses

#: A group whose share of the time budget is shorter than this is not started.
SHORTEST_SHARE_S = 1.0


@dataclass
class Group:
    """One sweep of a search by group: the ``parts`` it answers (same space file and
    problem), its ``settings``, and once run its ``study`` (None: no winner, ``reason``)."""

    parts: list[Part]
    settings: SweepSettings
    study: optuna.Study | None = None
    reason: str = "not run"
    labels: list[str] = field(default_factory=list)
    base: str = ""  # the name its study adds a label to (``--study``, else one made)


def searched_by_group(asked: dict[str, Any]) -> list[Part] | None:
    """The parts of ``asked["space"]`` (``build_settings``'s arguments) to sweep one by one;
    None where the space is searched whole, as before: no ``--space``, a replay, a space with
    no prefixed parameter, or a workload that takes its names as they are (any config key, or
    prefixed keys of its own)."""
    from autotune.objectives import get_objective
    from autotune.sweep_defaults import DEFAULT_WORKLOAD

    if asked["space"] is None or asked["replay"] is not None:
        return None
    if asked["workload"] is None and asked["study"] is not None:
        return None  # a resume: its stored study names the workload (a replay's, say)
    space = load_space(asked["space"])
    if not any(p.prefix for p in space.params):
        return None
    try:
        objective_cls = get_objective(asked["workload"] or DEFAULT_WORKLOAD)
        keys = objective_cls(objective_cls.default_problem(asked["device"])).config_keys()
    except Exception:  # noqa: BLE001 - the ordinary set-up, which runs next, says what is wrong
        return None
    if keys is None or all(p.name in keys for p in space.params):
        return None
    return composed_parts(space.source)


def check_parts(space: Space, parts: list[Part], workload: str, asked: dict[str, Any]) -> None:
    """Refuse what a search by group cannot honour: an include of a composed space (its
    parts' prefixes are no config keys), a joint knob (a parameter of no prefixed
    include; no workload tunes one beside its parts), a constraint of the composed file
    itself (no group's sweep would check it), a problem key the workload does not have, or
    one that both ``--problem`` and an include set.

    Raises:
        SetupError: one line naming the file and the include or key at fault.
    """
    from autotune.objectives import get_objective

    unprefixed = next((part for part in parts if not part.prefix), None)
    if unprefixed is not None:
        raise SetupError(f"{unprefixed.where}: no prefix: searched by group, every include "
                         f"needs one (its parameters would be joint knobs, which {workload} "
                         "has none of)")  # fmt: skip
    for part in {part.space: part for part in reversed(parts)}.values():  # each file's first
        inner = sorted({p.prefix for p in load_space(part.space).params if p.prefix})
        if inner:
            raise SetupError(f"{part.where}: {part.space.name} is itself composed of prefixed "
                             f"includes ({', '.join(inner)}): searched by group, an include is "
                             f"one space of {workload}'s own parameters; include "
                             f"{part.space.name}'s parts here")  # fmt: skip
    joint = next((p for p in space.params if not p.prefix), None)
    if joint is not None:
        raise SetupError(f"{space.source}: parameters.{joint.name}: a joint knob (outside every "
                         f"include); {workload} has none: searched by group, a composed space "
                         "holds prefixed includes only")  # fmt: skip
    own = next((c for c in space.constraints if not c.prefix), None)
    if own is not None:
        raise SetupError(f"{own.where}: a constraint of the composed space itself, which no "
                         "group's sweep checks; put it in the part's space file")  # fmt: skip
    objective_cls = get_objective(workload)
    known = objective_cls.default_problem(asked["device"])
    for part in parts:
        unknown = sorted(set(part.problem) - set(known)) if known else []
        if unknown:
            raise SetupError(f"{part.where}.problem: unknown key {unknown[0]!r} for {workload}; "
                             f"known: {', '.join(known)}")  # fmt: skip
        both = sorted(set(part.problem) & set(asked["problem"]))
        if both:
            raise SetupError(f"--problem: {both[0]} is set by {part.where}.problem too; leave "
                             "it out of one")  # fmt: skip


def same_measurements(parts: list[Part], given: dict[str, Any]) -> list[list[Part]]:
    """``parts`` gathered by what they measure: the same space file at the same problem
    (``given``, ``--problem``'s values, under each part's own), in the order first met."""
    gathered: dict[tuple[str, str], list[Part]] = {}
    for part in parts:
        problem = json.dumps({**given, **part.problem}, sort_keys=True, default=str)
        gathered.setdefault((str(part.space.resolve()), problem), []).append(part)
    return list(gathered.values())


def label(prefix: str) -> str:
    """What a group's study name adds for ``prefix``: the prefix less its trailing separators.

    Example:
        >>> label("layer0.qkv."), label("up_")
        ('layer0.qkv', 'up')
    """
    return re.sub(r"[^0-9A-Za-z]+$", "", prefix) or prefix


def study_labels(prefixes: list[str]) -> list[str]:
    """What each group's study name adds for its first prefix: its :func:`label`, or the
    prefix whole where another prefix has the same label (two studies of one name would be
    one study, swept at two problems).

    Example:
        >>> study_labels(["up.", "up_", "o."])
        ['up.', 'up_', 'o']
    """
    labels = [label(prefix) for prefix in prefixes]
    shared = {own for own in labels if labels.count(own) > 1}
    return [prefix if own in shared else own for prefix, own in zip(prefixes, labels, strict=True)]


def group_labels(parts: list[Part], given: dict[str, Any]) -> list[str]:
    """What each group's study name adds after ``<study>.``: the :func:`study_labels` of
    the first prefix of each of :func:`same_measurements`."""
    return study_labels([same[0].prefix for same in same_measurements(parts, given)])


def base_study_name(asked: dict[str, Any], labels: list[str]) -> str:
    """The name the groups' studies start with: ``--study``, else the workload (a file's by
    its stem) and the time, ``-2``, ``-3``... where a study of the storage has a group's name."""
    from autotune.objectives.external import is_file_workload
    from autotune.storage import open_storage, storage_files, study_names
    from autotune.sweep_defaults import DEFAULT_WORKLOAD

    if asked["study"]:
        return str(asked["study"])
    workload = asked["workload"] or DEFAULT_WORKLOAD
    stem = Path(workload).stem if is_file_workload(workload) else workload
    base = f"{stem}-{datetime.now():%Y%m%d-%H%M%S}"
    url = asked["storage"]
    files = storage_files(url)
    fresh = in_memory(url) or (files and not files[0].exists())
    taken = set() if fresh else set(study_names(open_storage(url)))
    for attempt in range(1, 10_000):
        candidate = base if attempt == 1 else f"{base}-{attempt}"
        if not any(f"{candidate}.{name}" in taken for name in labels):
            return candidate
    raise SetupError(f"--study: every name {base}-N is taken; name a study")  # pragma: no cover


def plan_groups(parts: list[Part], asked: dict[str, Any]) -> list[Group]:
    """A sweep's settings for each distinct measurement of ``parts``, set up (and so checked)
    before any of them runs; parts whose settings come out the same (a problem value given
    that is the workload's default anyway) share one."""
    from autotune.sweep_setup import build_settings

    measured = same_measurements(parts, asked["problem"])
    budget = asked["time_budget_s"]
    share = None if budget is None else budget / len(measured)  # a first guess: trial timeout
    groups: dict[tuple[str, str], Group] = {}
    names = group_labels(parts, asked["problem"])
    base = base_study_name(asked, names)
    sources = group_sources(asked["warm_start"], _stored_set(asked), measured, names)
    for same, own, (source, note) in zip(measured, names, sources, strict=True):
        first = same[0]
        name = f"{base}.{own}"
        try:
            problem = {**asked["problem"], **first.problem}
            settings = build_settings(**{**asked, "space": str(first.space), "problem": problem,
                                         "study": name if asked["study"] else None,
                                         "time_budget_s": share, "warm_start": source})  # fmt: skip
        except SetupError as exc:
            raise _at_include(exc, first) from None
        settings.notes += [note] if note else []
        settings.group = base  # its study says it is one group of this search's
        key = (settings.space.source, json.dumps(settings.problem, sort_keys=True, default=str))
        if key in groups:
            groups[key].parts += same
            continue
        groups[key] = Group(list(same), settings, labels=[name], base=base)
    _check_stored(list(groups.values()), asked["storage"])
    return list(groups.values())


def _check_stored(groups: list[Group], url: str) -> None:
    """Refuse, before any group runs, a group's stored study (``--study``'s) that its sweep
    could not resume (another problem, workload, objective or space: the include changed
    since), as the sweep's set-up would refuse it once the groups before it had run.

    Raises:
        StudyMismatch: naming the study and what differs.
    """
    from autotune.driver.study_setup import check_resumable
    from autotune.group_resume import stored_names
    from autotune.storage import open_storage

    names = {group.settings.study_name for group in groups} & set(stored_names(url))
    if not names:
        return
    storage = open_storage(url)
    for group in groups:
        if group.settings.study_name in names:
            check_resumable(group.settings, storage)


def _stored_set(asked: dict[str, Any]) -> set[str]:
    """The storage's study names where ``--warm-start`` names a study (a search by group's
    name is looked up among them); none read for ``auto`` and ``off``."""
    from autotune.group_resume import stored_names

    if asked["warm_start"] in ("auto", "off"):
        return set()
    return set(stored_names(asked["storage"]))


def _at_include(exc: SetupError, part: Part) -> SetupError:
    """``exc`` (a ``--problem`` refusal of a part's set-up) said of the include whose problem
    value it names, or that gives the part's problem; another refusal as it is.

    Example:
        >>> part = Part("a.", Path("mm.yaml"), {"M": "abc"}, "top.yaml: include[0]")
        >>> print(_at_include(SetupError("--problem: M='abc' is not a number"), part))
        top.yaml: include[0].problem: M='abc' is not a number
        >>> print(_at_include(SetupError("--problem: K='x' is not a number"), part))
        --problem: K='x' is not a number
    """
    said = str(exc)
    if not said.startswith("--problem: ") or not part.problem:
        return exc
    named = re.match(r"--problem: (\w+)=", said)
    if named is not None and named.group(1) not in part.problem:
        return exc  # a value --problem gave
    how = ".problem: " if named is not None else " (at its problem): "
    return SetupError(f"{part.where}{how}{said.removeprefix('--problem: ')}")


def tune_by_group(
    parts: list[Part],
    asked: dict[str, Any],
    output: Path | None,
    *,
    started: float,
    cache: bool,
    finish_top: int,
    finish_rounds: int,
) -> None:
    """Sweep every distinct part of a composed space (``asked``: ``build_settings``'s
    arguments for the whole space), one after another within the time budget counted from
    ``started``, then print each group's winner and write ``output``.

    Raises:
        SetupError: a space or problem a search by group cannot take (before any sweep).
        typer.Exit: 1 where a group found no winner, 130 when interrupted.
    """
    from autotune.cli_parsing import writable_output
    from autotune.cli_sweep import modules_run
    from autotune.driver.kept_processes import KeptProcesses
    from autotune.resume_hint import say_resume
    from autotune.sweep_defaults import DEFAULT_WORKLOAD

    workload = asked["workload"] or DEFAULT_WORKLOAD
    space = load_space(asked["space"])
    check_parts(space, parts, workload, asked)
    groups = plan_groups(parts, asked)
    writable_output(output, inputs={"the space file the sweep reads": space.source,
                                    **{f"the space file {f} the sweep's space includes": f
                                       for f in space.includes},
                                    **modules_run(groups[0].settings)})  # fmt: skip
    shared = len(parts) - len(groups)
    also = f" (prefixes of the same space and problem share one: {shared} fewer)" if shared else ""
    sweeps = counted(len(groups), "sweep")
    err.print(f"searched by group: {sweeps} for {counted(len(parts), 'prefix', 'prefixes')}{also}",
              highlight=False, markup=False)  # fmt: skip
    with KeptProcesses() as kept:  # each group's sweep takes up the last one's processes
        interrupted = _sweep_groups(groups, asked, started, cache, finish_top, finish_rounds,
                                    kept)  # fmt: skip
    _report(groups, output)
    if interrupted:
        if not asked["study"] and _stored_any(groups, asked["storage"]):  # a name it made
            say_resume(asked["command"], groups[0].base, asked["storage"], group=True)
        raise typer.Exit(130)
    if any(group.study is None for group in groups):
        raise typer.Exit(1)


def _sweep_groups(
    groups: list[Group], asked: dict[str, Any], started: float, cache: bool, finish_top: int,
    finish_rounds: int, kept: KeptProcesses,
) -> bool:  # fmt: skip
    """Sweep ``groups`` one after another within the time budget counted from ``started``,
    each with ``kept``'s processes; True where a Ctrl-C stopped them."""
    from autotune.cli_sweep import run_settings
    from autotune.driver.signals import raise_if_stopped

    budget = asked["time_budget_s"]
    deadline = None if budget is None else started + budget
    kept.deadline = deadline
    interrupted = False
    for i, group in enumerate(groups):
        # an equal share of the time left as the group starts: the command's own start-up
        # (imports, the space, the storage) is shared by all, not the first group's alone,
        # and so is its processes' start, re-planned once they are up (KeptProcesses.warm)
        left = len(groups) - i
        kept.replan = lambda settings, left=left: share_from_now(settings, deadline, left)
        budget_from = share_from_now(group.settings, deadline, left)
        if deadline is not None:
            group.settings.planned_budget_s = budget / len(groups)  # what the cache is asked
            if group.settings.time_budget_s < SHORTEST_SHARE_S:
                group.reason = "not run: the time budget was spent"
                continue
        err.print(f"group {i + 1}/{len(groups)}: {_prefixes(group)} "
                  f"({problem_text(group.settings.problem)})", highlight=False,
                  markup=False)  # fmt: skip
        ran: list[optuna.Study] = []
        try:
            # a Ctrl-C whose KeyboardInterrupt CPython dropped (raised in a garbage collector's
            # callback) stops the command here as one that was raised (the group it came in)
            raise_if_stopped()
            group.study = run_settings(
                group.settings, None, cache=cache, finish_top=finish_top,
                finish_rounds=finish_rounds, budget_from=budget_from, show_best=False,
                study_name=group.labels[0], ran=ran, resume_hint=False, kept=kept,
            )  # fmt: skip
            raise_if_stopped()
            group.reason = "no trial of its own succeeded yet" if group.study is None else ""
        except typer.Exit as stop:
            group.reason = "interrupted" if stop.exit_code == 130 else "no trial succeeded"
            if stop.exit_code == 130:
                group.study = _best_so_far(ran)
                interrupted = True
                break
        except KeyboardInterrupt:  # outside the sweep's own loop: its set-up, its finish
            err.print("interrupted; finished trials are stored")
            group.reason, group.study = "interrupted", _best_so_far(ran)
            interrupted = True
            break
    return interrupted


def share_from_now(settings: SweepSettings, deadline: float | None, groups_left: int) -> float:
    """Give the sweep ``settings`` describe an equal share of the time left before
    ``deadline`` (a ``time.monotonic()`` reading; None: no budget, nothing set) among the
    ``groups_left`` groups, its own included; returns now, when the share counts from.

    Example:
        >>> from types import SimpleNamespace
        >>> settings = SimpleNamespace(time_budget_s=None)
        >>> now = share_from_now(settings, time.monotonic() + 30.0, 3)
        >>> round(settings.time_budget_s)
        10
    """
    now = time.monotonic()
    if deadline is not None:
        settings.time_budget_s = max(0.0, deadline - now) / groups_left
    return now


def _stored_any(groups: list[Group], url: str) -> bool:
    """Whether the storage ``url`` holds a study of ``groups`` (an interrupt in the first
    group's set-up leaves none: nothing to resume)."""
    from autotune.group_resume import stored_names

    names = set(stored_names(url))
    return any(label in names for group in groups for label in group.labels)


def _best_so_far(ran: list[optuna.Study]) -> optuna.Study | None:
    """The study of an interrupted group's sweep where a trial of it succeeded (its best so
    far answers the group, as an interrupted `autotune tune` prints it); else None."""
    from autotune.driver.results import best_trials

    return next((study for study in ran if best_trials(study)), None)


def _prefixes(group: Group) -> str:
    return ", ".join(part.prefix for part in group.parts)


def combined_record(groups: list[Group]) -> dict[str, Any]:
    """Each prefix of ``groups`` (in the order they were written) mapped to its winner's
    record, as ``--output`` writes one sweep's; a prefix with no winner to its study (null:
    not run), its problem, ``config: null`` and the reason."""
    from autotune.export import best_record
    from autotune.redact import redact, redact_values

    records = {}
    for group in groups:
        if group.study is not None:
            record = best_record(group.study, group.settings.storage)
        else:  # its problem and reason as its study stores them: no password (a server's)
            ran = not group.reason.startswith("not run")
            secrets = group.settings.secrets
            record = {"study": (group.settings.study_name or group.labels[0]) if ran else None,
                      "problem": redact_values(group.settings.problem, secrets), "config": None,
                      "reason": redact(group.reason, secrets)}  # fmt: skip
        for part in group.parts:
            records[part.prefix] = json.loads(json.dumps(record, default=str))  # no shared dicts
    return records


def _report(groups: list[Group], output: Path | None) -> None:
    """A line per group (each objective's value; under it, with several objectives, the
    other configs of its Pareto front), the winners on stdout (``{prefix: config}``),
    ``output`` written."""
    import yaml
    from rich.console import Console

    from autotune.cli_parsing import UsageError
    from autotune.cli_stdout import names_stdout, result_stream, say_written, write_result
    from autotune.export import write_atomic
    from autotune.reference_verdict import describe
    from autotune.units import named

    record = combined_record(groups)
    err.print("searched by group: the winners", highlight=False, markup=False)
    for group in groups:
        first = record[group.parts[0].prefix]
        said = f"{_prefixes(group)} ({problem_text(group.settings.problem)})"
        said += f": study {first['study']}" if first["study"] else ""
        if first["config"] is None:
            said += f": no winner ({first['reason']})"
        else:
            values = ", ".join(named(k, v) for k, v in first["values"].items())
            finish = first.get("finish") or {}
            rows = finish.get("rows") or []
            if rows and rows[0].get("trial") == first["trial"]:
                metric = finish.get("metric") or next(iter(first["values"]))
                values += f" in the sweep, {named(metric, rows[0]['median'])} the finish's median"
            said += f", trial {first['trial']}: {values}"
            said += " (interrupted: its best so far)" if group.reason == "interrupted" else ""
        err.print(f"  {said}", highlight=False, markup=False)
        if first.get("reference_faster"):  # as one sweep's best config says it
            err.print(f"    note: {describe(first['reference_faster'])}", highlight=False,
                      markup=False)  # fmt: skip
        for member in (first.get("pareto_front") or [])[1:]:  # as one sweep's best lists them
            vals = ", ".join(named(k, v) for k, v in member["values"].items())
            config = json.dumps(member["config"])  # as one sweep's best: JSON, no None
            err.print(f"    Pareto front: trial {member['trial']}: {vals} {config}",
                      highlight=False, markup=False)  # fmt: skip
    configs = {prefix: rec["config"] for prefix, rec in record.items()}
    stream = result_stream()
    if output is not None and names_stdout(output):
        pass  # stdout holds one document: the combined record asked for
    elif stream.isatty():
        Console(file=stream).print_json(data=configs)
    else:
        write_result(json.dumps(configs, indent=2))
    if output is None:
        return
    text = (yaml.safe_dump(record, sort_keys=False) if output.suffix in (".yaml", ".yml")
            else json.dumps(record, indent=2) + "\n")  # fmt: skip
    try:
        if names_stdout(output):
            write_result(text.rstrip("\n"))
        else:
            write_atomic(output, text)
    except OSError as exc:
        raise UsageError(f"--output {output}: cannot write there ({exc.strerror}); the groups' "
                         "studies are stored") from None  # fmt: skip
    say_written(output)
