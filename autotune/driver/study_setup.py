"""Open (or resume) the Optuna study of a sweep: sampler, pruner, the untuned default as trial
0, a warm start from a related stored sweep, and the sweep's description.

Example:
    >>> from autotune.space import load_space
    >>> from autotune.driver.settings import SweepSettings
    >>> from autotune.storage import open_storage
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, storage="memory", study_name="s")
    >>> study = open_study(settings, open_storage("memory"), in_flight=1)
    >>> study.user_attrs["autotune"]["workload"]
    'faults'
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import warnings
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage

from autotune.driver.narrowed_space import outside_note
from autotune.driver.pruning import DivergencePruner
from autotune.driver.results import best_trials, ok_trials
from autotune.driver.samplers import make_sampler, resolve_sampler
from autotune.driver.settings import SweepSettings
from autotune.driver.signals import signals_deferred
from autotune.driver.trial_attrs import BASELINE, STUDY, WARM_START, stored_info
from autotune.driver.warm_start import (
    first_objective,
    most_similar_study,
    similarity,
    top_configs,
    tuned_params,
)
from autotune.redact import redact, redact_values

# How many of a related sweep's best configs a warm start queues first.
WARM_START_CONFIGS = 1


class StudyMismatch(ValueError):
    """A stored study of another workload or objective was named for resuming."""


def study_name_for(settings: SweepSettings) -> str:
    """The study's name: ``--study``, else the workload (a workload file by its stem) and the
    time, e.g. ``matmul-20261205-071521``."""
    if settings.study_name:
        return settings.study_name
    from autotune.objectives.external import is_file_workload

    workload = settings.workload
    if is_file_workload(workload):  # its path would put slashes in the name
        workload = Path(workload).stem
    return f"{workload}-{datetime.now():%Y%m%d-%H%M%S}"


def _create_or_load(
    storage: BaseStorage, name: str, directions: list[str], sampler: optuna.samplers.BaseSampler,
    named: bool,
) -> optuna.Study:  # fmt: skip
    """The study ``name``: a named one (``--study``) created or loaded to resume; a name the
    driver made up (workload and time) always a new study, ``-2``, ``-3``... appended where
    another driver took the name in the same second (two sweeps started together shared one
    study, or the second was refused as a resume at another problem).

    Example:
        >>> storage = optuna.storages.InMemoryStorage()
        >>> make = lambda: _create_or_load(storage, "mm-1", ["maximize"], None, named=False)
        >>> make().study_name, make().study_name
        ('mm-1', 'mm-1-2')
    """
    kind = {"directions": directions, "sampler": sampler, "pruner": DivergencePruner()}
    if named:
        return optuna.create_study(storage=storage, study_name=name, load_if_exists=True, **kind)
    for attempt in itertools.count(1):
        candidate = name if attempt == 1 else f"{name}-{attempt}"
        try:
            return optuna.create_study(storage=storage, study_name=candidate, **kind)
        except optuna.exceptions.DuplicatedStudyError:
            continue
    raise AssertionError("unreachable")  # pragma: no cover


def requeue_stopped_default(study: optuna.Study) -> bool:
    """Queue the untuned default (trial 0), and each warm-start config, again when every
    trial of it was stopped from outside (the budget's end, Ctrl-C, a killed driver: told
    FAIL) and none waits or runs: a resume measures it, so that the answer is never worse
    than it (nor than the source's best). True when one was queued.

    Example:
        >>> study = optuna.create_study()
        >>> study.enqueue_trial({"x": 1.0}, user_attrs={BASELINE: True})
        >>> trial = study.ask()
        >>> _ = study.tell(trial, state=optuna.trial.TrialState.FAIL)  # stopped mid-measurement
        >>> requeue_stopped_default(study), requeue_stopped_default(study)
        (True, False)
    """
    queued = False
    for attr in (BASELINE, WARM_START):
        tries: dict[tuple, list[optuna.trial.FrozenTrial]] = {}
        for t in study.get_trials(deepcopy=False):
            if t.user_attrs.get(attr):
                tries.setdefault(tuple(sorted(t.params.items())), []).append(t)
        for same in tries.values():
            if all(t.state == optuna.trial.TrialState.FAIL for t in same):
                last = same[-1]
                study.enqueue_trial(dict(last.params), user_attrs={attr: last.user_attrs[attr]})
                queued = True
    return queued


def open_study(settings: SweepSettings, storage: BaseStorage, in_flight: int) -> optuna.Study:
    """Create the study, or load a stored one of the same workload and objectives.

    A new study is written only once what it starts from is known (the warm start's source,
    found by reading every stored study, may take seconds), and then whole, its queued
    default and description together with a stop signal held till they are in: Ctrl-C while
    a sweep is set up leaves no study, or one a resume takes up as it is (it had left queued
    trials and no description: a resume by ``--study`` queued the default again)."""
    s = settings
    name = study_name_for(s)
    directions = list(s.objectives.values())
    # A resumed study must not replay its first proposals: the seed moves on by the number
    # of trials already stored (still deterministic for a given history).
    stored = _stored_trial_count(storage, name) if s.study_name else 0  # a made-up name: new
    seed = None if s.seed is None else s.seed + stored
    source_study = named_source(s, storage)  # refused before anything is stored
    sampler = make_sampler(
        s.sampler,
        seed=seed,
        space=s.space,
        n_objectives=len(directions),
        problem=s.problem,
        device=s.device,
        in_flight=in_flight,
    )
    study = None
    if s.study_name and _stored(storage, name):
        study = _create_or_load(storage, name, directions, sampler, named=True)
        info = study.user_attrs.get(STUDY)
        if info is not None:
            _resume(s, storage, study, info)
            s.study_notes += unapplied_warm_start(s.warm_start, study)
            s.study_notes += outside_note(name, best_trials(study), s.space)
            return study
        # else a study whose set-up was cut short (by a kill): set up here, as a new one
    start = _warm_start(s, storage, sampler, source_study, exclude=name)
    info = _description(s, directions)
    with signals_deferred():  # a stop now comes once the study is whole
        if study is None:
            study = _create_or_load(storage, name, directions, sampler, named=bool(s.study_name))
        stored_now = study.user_attrs.get(STUDY)
        if stored_now is not None:  # another driver of this --study set it up meanwhile
            _resume(s, storage, study, stored_now)
            s.study_notes += unapplied_warm_start(s.warm_start, study)
        else:
            _write_new(s, study, start, info)
            s.study_notes += empty_warm_start(start, s.space.source)
    return study


def unapplied_warm_start(asked: str, study: optuna.Study) -> list[str]:
    """The note for ``--warm-start`` ``asked`` of a resume of ``study`` where the study
    started otherwise: a warm start is a new study's first trials and prior, so a resume keeps
    what the study started from (it was taken in silence: a study started cold resumed
    ``--warm-start NAME`` without NAME's configs nor a word). ``auto``, the default, asks
    nothing of a resume.

    Example:
        >>> study = optuna.create_study(study_name="b")
        >>> unapplied_warm_start("a", study)
        ["--warm-start a: study b resumes as it started (cold); a warm start is a new study's first trials"]
        >>> study.set_user_attr(WARM_START, {"source": "a"})
        >>> unapplied_warm_start("a", study), unapplied_warm_start("auto", study)
        ([], [])
    """  # noqa: E501
    source = study.user_attrs.get(WARM_START, {}).get("source")
    if asked == "auto" or asked == (source or "off"):
        return []
    started = f"from {source}" if source else "cold"
    return [f"--warm-start {asked}: study {study.study_name} resumes as it started ({started}); "
            "a warm start is a new study's first trials"]  # fmt: skip


def empty_warm_start(start: WarmStart | None, space: str) -> list[str]:
    """The note for a warm start whose source holds no successful config of the space (a
    narrowed or shifted space): nothing of it runs first nor guides the sampler, which was
    said nowhere (``--warm-start NAME`` gave a cold sweep without a word).

    Example:
        >>> empty_warm_start(WarmStart("lo", 1.0, []), "hi.yaml")
        ['warm start from lo: it holds no successful config of hi.yaml, so nothing of it runs first or guides the sampler (the sweep starts cold)']
        >>> empty_warm_start(WarmStart("lo", 1.0, [{"x": 1}]), "hi.yaml"), empty_warm_start(None, "")
        ([], [])
    """  # noqa: E501
    if start is None or start.configs:
        return []
    return [f"warm start from {start.source}: it holds no successful config of {space}, so "
            "nothing of it runs first or guides the sampler (the sweep starts cold)"]  # fmt: skip


def _stored(storage: BaseStorage, name: str) -> bool:
    """Whether ``storage`` holds a study named ``name``."""
    try:
        storage.get_study_id_from_name(name)
    except KeyError:
        return False
    return True


def _resume(s: SweepSettings, storage: BaseStorage, study: optuna.Study, info: dict) -> None:
    """Check that stored ``study`` (its description ``info``) may resume as ``s`` asks, and
    record the resume.

    Raises:
        StudyMismatch: another workload, objective, problem, space or input file.
    """
    _check_resume(s, study, info)
    _record_resume(study, info, s)
    source = study.user_attrs.get(WARM_START, {}).get("source")
    if source:  # a resumed warm start keeps its prior
        with contextlib.suppress(KeyError):  # unless the source was deleted since
            _set_prior(s, study.sampler, optuna.load_study(study_name=source, storage=storage))


def check_resumable(s: SweepSettings, storage: BaseStorage) -> None:
    """Where the study ``s`` names is stored, that it may resume as ``s`` asks, checked as
    the sweep's set-up checks it, nothing written: a search by group checks every group's
    before the first sweep runs (a later group's refusal ended the command after the
    earlier groups had spent their time, without their winners).

    Raises:
        StudyMismatch: another workload, objective, problem, space or input file.
    """
    if not s.study_name or not _stored(storage, s.study_name):
        return
    study = optuna.load_study(study_name=s.study_name, storage=storage)
    info = study.user_attrs.get(STUDY)
    if info is not None:  # else a set-up cut short: set up as a new one
        _check_resume(s, study, info)


def _check_resume(s: SweepSettings, study: optuna.Study, info: dict) -> None:
    """Refuse to resume stored ``study`` (its description ``info``) as ``s`` where it differs.

    Raises:
        StudyMismatch: another workload, objective, problem, space or input file.
    """
    name = study.study_name
    if info.get("workload") != s.workload or info.get("objectives") != s.objectives:
        raise StudyMismatch(
            f"study {name!r} holds a {info.get('workload')} sweep of "
            f"{info.get('objectives')}; it cannot resume as {s.workload} of {s.objectives}"
        )
    changed = _changed(info.get("problem", {}), redact_values(s.problem))
    if changed:
        raise StudyMismatch(
            f"study {name!r} holds a sweep at {changed[0]}; it cannot resume at "
            f"{changed[1]} (start another --study)"
        )
    _check_space_fits(name, study, s)
    _check_files_kept(name, info, s.problem)


def _description(s: SweepSettings, directions: list[str]) -> dict[str, Any]:
    """What a new study records of its sweep (:data:`STUDY`): what a resume must match, and
    what the reports show."""
    return {
        "workload": s.workload,
        "problem": redact_values(s.problem),  # a command's database password left out
        "files": _file_digests(s.problem),  # what a replay table, a trace held: a
        # resume that finds them changed would mix two sets of measurements
        "space": whole_path(s.space.source),  # a resume from another folder finds it
        # the default's knobs the space does not tune: what every trial ran for them
        "untuned": {
            k: v
            for k, v in {**s.untuned, **(s.baseline or {})}.items()
            if k not in s.space.names and isinstance(v, str | int | float | bool)
        },
        "objectives": s.objectives,
        "slo": s.slo,  # what its trials were judged by: a resume keeps it
        "sampler": s.sampler,
        "sampler_used": resolve_sampler(s.sampler, s.space, len(directions)),
        "seed": s.seed,
        "n_trials": s.n_trials,
        "time_budget_s": s.time_budget_s,  # a resume without a budget runs this again
        "device": s.device,
        # a password on the command line stays out, and so does each secret of the
        # problem's values wherever it stands (--problem 'command=HF_TOKEN=X srv')
        "command": redact(s.command, s.secrets),
        "label": s.label,
        "fingerprint": _redacted_fingerprint(s.fingerprint or {}),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        **({"group": s.group} if s.group else {}),  # one group of a search by group's
    }


def _write_new(
    s: SweepSettings, study: optuna.Study, start: WarmStart | None, info: dict[str, Any]
) -> None:
    """A new study's writes: the untuned default queued first, then the warm start's configs,
    its metric names, and last its description ``info`` (a study with none is one whose
    set-up was cut short: what it queued is not queued twice)."""
    if s.baseline:
        # the untuned default runs first: the sweep's answer is never worse than it
        study.enqueue_trial(
            {k: v for k, v in s.baseline.items() if k in s.space.names},
            user_attrs={BASELINE: True},
            skip_if_exists=True,
        )
    if start is not None:
        for config in start.configs:
            study.enqueue_trial(config, user_attrs={WARM_START: start.source}, skip_if_exists=True)
        study.set_user_attr(WARM_START, {"source": start.source, "similarity": start.score,
                                         "configs": len(start.configs)})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(list(s.objectives))
    study.set_user_attr(STUDY, info)


#: Between the commands of the runs that made a study, in its stored ``command``.
RUNS_APART = "; "


def _record_resume(study: optuna.Study, info: dict[str, Any], s: SweepSettings) -> None:
    """A resume's part in the study's record, so that it says what produced the study: its
    command after the stored ones (``commands``, and ``command`` their reproduction, joined
    by :data:`RUNS_APART`; the same command run again, as after a stop, adds nothing), its
    sampler among the ``samplers`` its runs used, and its budget (``n_trials``,
    ``time_budget_s``), which a later resume that gives none runs to (the first run's kept
    there stopped a resume of a run to 6 trials at 3).

    Example:
        >>> from autotune.space import load_space
        >>> study = optuna.create_study()
        >>> info = {"command": "autotune tune faults --trials 3", "sampler": "auto"}
        >>> study.set_user_attr(STUDY, info)
        >>> s = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
        ...     objectives={"score": "maximize"}, sampler="random",
        ...     command="autotune tune --study s --sampler random")
        >>> _record_resume(study, info, s)
        >>> record = study.user_attrs[STUDY]
        >>> record["command"]
        'autotune tune faults --trials 3; autotune tune --study s --sampler random'
        >>> record["samplers"], record["n_trials"]
        (['auto', 'random'], 50)
    """
    record = dict(info)
    commands = stored_info(info).get("commands") or [str(info.get("command") or "")]
    command = redact(s.command, s.secrets)  # as the first run's: no password
    if command and command != commands[-1]:
        record["commands"] = [c for c in commands if c] + [command]
        record["command"] = RUNS_APART.join(record["commands"])
    samplers = stored_info(info).get("samplers") or [info.get("sampler", "auto")]
    record["samplers"] = samplers + [s.sampler] * (s.sampler not in samplers)
    record["n_trials"], record["time_budget_s"] = s.n_trials, s.time_budget_s
    if record != info:
        study.set_user_attr(STUDY, record)


def _redacted_fingerprint(fingerprint: dict[str, object]) -> dict[str, object]:
    """The cache key as stored: its parts' problem without a password (the key, a hash, is
    made of the real values)."""
    parts = fingerprint.get("parts")
    if not isinstance(parts, dict) or not isinstance(parts.get("problem"), dict):
        return fingerprint
    return {**fingerprint, "parts": {**parts, "problem": redact_values(parts["problem"])}}


def no_such_source(name: str) -> str:
    """What ``--warm-start NAME`` says where no study of that name is stored: the values it
    takes besides a study's name, which are lower case as every keyword of the CLI is (a
    study may be named ``OFF``).

    Example:
        >>> no_such_source("OFF")
        "--warm-start: no study named 'OFF' in this storage; give auto, off (lower case) or ..."
    """
    return (f"--warm-start: no study named {name!r} in this storage; give auto, off (lower "
            "case) or the name of a stored study")  # fmt: skip


def named_source(s: SweepSettings, storage: BaseStorage) -> optuna.Study | None:
    """The study ``--warm-start NAME`` names (None for ``auto`` and ``off``), checked to be a
    sweep of this workload and first objective that tunes a parameter of this space.

    Raises:
        StudyMismatch: no such study, one of another workload or objective, or one with no
            parameter in common with the space (nothing of it to start from).
    """
    if s.warm_start in ("off", "auto"):
        return None
    try:
        source = optuna.load_study(study_name=s.warm_start, storage=storage)
    except KeyError:
        raise StudyMismatch(no_such_source(s.warm_start)) from None
    info = stored_info(source.user_attrs)
    if not info.get("workload"):
        raise StudyMismatch(
            f"--warm-start {s.warm_start}: it is no autotune sweep (it records no workload); "
            "start from a study `autotune tune` ran"
        )
    if info.get("workload") != s.workload:
        raise StudyMismatch(
            f"--warm-start {s.warm_start}: it holds a {info.get('workload')} sweep; this one "
            f"tunes {s.workload}"
        )
    first = next(iter(s.objectives.items()))
    if first_objective(info) != first:
        raise StudyMismatch(
            f"--warm-start {s.warm_start}: it {_goal(first_objective(info))}; this sweep "
            f"{_goal(first)}"
        )
    theirs = tuned_params(source)
    if not theirs & set(s.space.names):
        what = f"tunes {', '.join(sorted(theirs))}" if theirs else "holds no trial yet"
        raise StudyMismatch(
            f"--warm-start {s.warm_start}: it {what}; no parameter in common with this "
            f"sweep's space ({', '.join(s.space.names)}), so nothing of it to start from"
        )
    return source


def _goal(objective: tuple[str, str] | None) -> str:
    """``maximizes tflops`` for ``("tflops", "maximize")``."""
    if objective is None:
        return "records no objective"
    return f"{objective[1][:-1]}es {objective[0]}"


@dataclass(frozen=True)
class WarmStart:
    """What a warm start queues: ``configs`` of study ``source``, whose problem is ``score``
    alike (:func:`~autotune.driver.warm_start.similarity`)."""

    source: str
    score: float
    configs: list[dict[str, Any]]


def _warm_start(
    s: SweepSettings,
    storage: BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    named: optuna.Study | None,
    exclude: str,
) -> WarmStart | None:
    """The best configs of a related stored sweep (``named``, or the most similar one for
    ``auto``, not study ``exclude``) to queue as the first trials, its measurements given to
    ``sampler`` as a prior; None where there is none. Nothing is written."""
    if s.warm_start == "off":
        return None
    if named is None:
        found = most_similar_study(
            storage,
            s.workload,
            s.problem,
            s.device.get("name"),
            exclude=exclude,
            objective=next(iter(s.objectives.items())),
        )
    else:
        problem = stored_info(named.user_attrs).get("problem", {})
        found = (named, similarity(s.problem, problem))
    if found is None or not tuned_params(found[0]) & set(s.space.names):
        return None  # a source that shares no parameter with the space holds nothing to start from
    source, score = found
    direction = next(iter(s.objectives.values()))
    _set_prior(s, sampler, source)
    # the source's best configs that this space can hold (a narrowed space may hold none); an
    # empty one (none of its parameters in the space) would only be a sampled trial mislabelled
    fitting = [
        {k: v for k, v in config.items() if k in s.space.names}
        for config in top_configs(source, direction, len(source.get_trials(deepcopy=False)))
    ]
    configs = [c for c in fitting if c and all(s.space[k].contains(v) for k, v in c.items())]
    return WarmStart(source.study_name, score, configs[:WARM_START_CONFIGS])


def _changed(stored: dict, given: dict) -> tuple[str, str] | None:
    """The problem keys whose values differ, as ``key=value`` lists stored and given (None if
    none), compared as JSON: a stored problem's lists equal a parsed one's tuples.

    Example:
        >>> _changed({"d_model": 128, "dims": [1, 2]}, {"d_model": 64, "dims": (1, 2)})
        ('d_model=128', 'd_model=64')
    """

    def text(value: object) -> str:
        return json.dumps(value, default=str)

    def same(a: object, b: object) -> bool:  # a file named relative and whole is one file
        return text(a) == text(b) or _same_file(a, b)

    keys = sorted(k for k in {*stored, *given} if not same(stored.get(k), given.get(k)))
    if not keys:
        return None
    return (", ".join(f"{k}={stored.get(k)!r}" for k in keys),
            ", ".join(f"{k}={given.get(k)!r}" for k in keys))  # fmt: skip


def _file_digests(problem: dict[str, Any]) -> dict[str, str]:
    """The hash of each file a problem value names (:func:`autotune.tuning_cache.named_files`)."""
    from autotune.tuning_cache import named_files

    return named_files(problem)


def _check_files_kept(name: str, info: dict[str, Any], problem: dict[str, Any]) -> None:
    """A resumed study's files (a replay's table, a trace) hold what they held when it
    started (:func:`~autotune.tuning_cache.named_files`; a study stored before it kept their
    hashes is not checked).

    Raises:
        StudyMismatch: naming the first file whose contents changed, or that its path no
            longer finds (a relative path resumed from another folder, a file removed: every
            trial of the resume failed ``crashed`` in its worker, and the sweep ended 0).
    """
    stored = info.get("files")
    if not isinstance(stored, dict):
        return
    digests = _file_digests(problem)
    gone = next((key for key in stored if key in problem and key not in digests), None)
    if gone is not None:
        raise StudyMismatch(
            f"{problem[gone]}: study {name!r} read this file ({gone}), and it is not there "
            "from here; resume from the folder the study ran in, or put the file back"
        )
    for key, digest in digests.items():
        if key in stored and stored[key] != digest:
            raise StudyMismatch(
                f"{problem[key]}: its contents changed since study {name!r} read it ({key}); "
                "a resume would mix two sets of measurements (start another --study)"
            )


def whole_path(source: str) -> str:
    """``source`` as a whole path when it names a file that exists (as typed otherwise: a
    built-in space's name).

    Example:
        >>> whole_path("no/such.yaml")
        'no/such.yaml'
    """
    path = Path(source).expanduser()
    return str(path.resolve()) if path.is_file() else source


def _same_file(a: object, b: object) -> bool:
    """Whether ``a`` and ``b`` are texts naming one existing file."""
    if not (isinstance(a, str) and isinstance(b, str) and a and b):
        return False
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _check_space_fits(name: str, study: optuna.Study, s: SweepSettings) -> None:
    """The space a resumed sweep asks from has the parameters the study swept (none dropped,
    none added but a conditional one) and gives each a distribution Optuna accepts beside the
    stored one (a categorical's choices may not change; a numeric range may narrow or widen).

    Raises:
        StudyMismatch: naming the first parameter whose choices changed.
    """
    trials = study.get_trials(deepcopy=False)
    stored = next((t for t in trials if t.distributions), None)
    if stored is None:
        return
    swept = {p for t in trials for p in t.distributions}
    gone = sorted(swept - set(s.space.names))
    if gone:  # its trials' configs are not configs of this space: the best would lack it
        raise StudyMismatch(
            f"{s.space.source}: study {name!r} swept parameter {gone[0]!r}, which this space "
            "does not have; a resumed sweep cannot drop a parameter (start another --study)"
        )
    added = [p.name for p in s.space.params if p.name not in swept and p.condition is None]
    if added:  # every stored trial lacks it: their best is no config of this space
        raise StudyMismatch(
            f"{s.space.source}: parameters.{added[0]}: study {name!r} never swept it; a resumed "
            "sweep cannot add a parameter (start another --study)"
        )
    for param in s.space.params:
        before = stored.distributions.get(param.name)
        if before is None:
            continue
        try:
            optuna.distributions.check_distribution_compatibility(before, param.distribution())
        except ValueError:
            raise StudyMismatch(
                f"{s.space.source}: parameters.{param.name}: study {name!r} holds it as "
                f"{_choices(before)}; a resumed sweep cannot change that (start another --study)"
            ) from None


def _choices(distribution: optuna.distributions.BaseDistribution) -> str:
    choices = getattr(distribution, "choices", None)
    return f"choices {list(choices)}" if choices is not None else repr(distribution)


def _set_prior(
    s: SweepSettings, sampler: optuna.samplers.BaseSampler, source: optuna.Study
) -> None:
    """Give ``sampler`` the source's measurements as a prior, where it takes one: trusted as
    far as it ranks this sweep's own measurements (autotune.driver.transfer_prior)."""
    if not hasattr(sampler, "set_prior"):
        return
    # a config with a value this space does not have is left out: the model would read
    # it as the nearest value it knows (x=64 of a wider space as this one's x=1)
    configs, values = [], []
    for t in ok_trials(source):
        config = {k: v for k, v in t.params.items() if k in s.space.names}
        if all(s.space[k].contains(v) for k, v in config.items()):
            configs.append(config)
            values.append(t.values[0])
    sampler.set_prior(
        configs,
        values,
        maximize=next(iter(s.objectives.values())) == "maximize",
    )


def _stored_trial_count(storage: BaseStorage, name: str) -> int:
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        return 0
    return len(storage.get_all_trials(study_id, deepcopy=False))
