"""Best configs out of a study, into files that drop straight into the stack that runs them.

Formats: canonical JSON and YAML (config, metrics, device and software fingerprint, the
command that reproduces the sweep) and ``triton``: a Python file of ``triton.Config`` entries
for ``@triton.autotune(configs=...)`` (:mod:`autotune.triton_export`, which also writes
per-shape tables).

Example:
    >>> import optuna
    >>> export_text(optuna.create_study(), "toml")
    Traceback (most recent call last):
    ...
    autotune.export.ExportError: unknown export format 'toml'; choose one of json, yaml, triton
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import optuna
import yaml

from autotune import __version__
from autotune.driver.results import best_trials, objectives_of, study_info
from autotune.driver.trial_attrs import TELEMETRY, stored_finish, trial_metrics
from autotune.reference_verdict import reference_faster
from autotune.replay_info import replay_info, study_label
from autotune.std_paths import descriptor_of, write_to_descriptor
from autotune.storage import DEFAULT_STORAGE
from autotune.suggest import suggested
from autotune.triton_export import triton_export

FORMATS = ("json", "yaml", "triton")


class ExportError(ValueError):
    """Nothing to export, or a format that cannot express the study's configs."""


def trial_record(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """The canonical description of one trial's config and what it measured.

    For a replay, ``device`` is the device its table records the measurements were taken on
    (``{}`` where it records none, never the machine that looked them up), and ``replay``
    says where the figures come from (:func:`autotune.replay_info.replay_info`: the
    table's source, workload and problem as recorded, and ``replayed_on``)."""
    info = study_info(study)
    objectives = objectives_of(study)
    metrics = trial_metrics(trial)
    replay = replay_info(info, metrics)
    record = {
        "autotune_version": __version__,
        "study": study.study_name,
        "workload": info.get("workload"),
        "label": study_label(study),  # (an old replay's completed with its device)
        "problem": info.get("problem", {}),
        "trial": trial.number,
        "config": dict(trial.params),
        # what the objective ran for the knobs the space did not tune (its untuned default)
        "untuned": info.get("untuned", {}),
        "objectives": objectives,
        "values": dict(zip(objectives, trial.values or [], strict=False)),
        "metrics": metrics,
        "telemetry": trial.user_attrs.get(TELEMETRY, {}),
        "device": info.get("device", {}) if replay is None else replay["device"],
        "command": info.get("command", ""),
        "exported": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if replay is not None:
        record["replay"] = replay
    return record


def best_record(study: optuna.Study, storage: str = DEFAULT_STORAGE) -> dict[str, Any]:
    """The best trial's record; with several objectives, the Pareto front rides along.
    ``storage``: the study's URL, which a study without one names in the command it points to.

    When the sweep ended with the noise-aware finish, its winner is the best trial, and the
    re-measured medians and spreads ride along under ``finish``. When the best config is slower
    than the library kernel it was measured against, ``reference_faster`` says so (see
    :mod:`autotune.reference_verdict`)."""
    best = best_trials(study)
    if not best:
        name = study.study_name
        trials = suggested("trials", name, storage)
        why = f" (`{trials}` says why)" if trials else ""
        # "yet" only while a trial runs: a finished study's answer will not change
        running = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))
        yet = " yet" if running else ""
        raise ExportError(f"study {name!r} has no successful trial{yet}: no best config"
                          f"{why}")  # fmt: skip
    finish = stored_finish(study.user_attrs)
    chosen = best[0]
    if finish.get("rows"):
        by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
        chosen = by_number.get(finish["rows"][0]["trial"], chosen)
    record = trial_record(study, chosen)
    if finish:
        record["finish"] = finish
    verdict = reference_faster(record)
    if verdict is not None:
        record["reference_faster"] = verdict
    if len(objectives_of(study)) > 1:
        record["pareto_front"] = [
            {
                "trial": t.number,
                "config": dict(t.params),
                "values": dict(zip(objectives_of(study), t.values, strict=True)),
            }
            for t in best
        ]
    return record


def pareto_pick(record: dict[str, Any]) -> str | None:
    """What a record of several objectives exports: one config of the Pareto front, the best
    by the first objective; None for a record of one objective (or a front of one).

    Example:
        >>> front = [{"trial": 3, "values": {"tok_s": 9.0, "gb": 2.0}},
        ...          {"trial": 0, "values": {"tok_s": 5.0, "gb": 1.0}}]
        >>> pareto_pick({"trial": 3, "pareto_front": front})
        'trial 3 is one of 2 configs on the Pareto front of tok_s and gb: the best by tok_s, ...'
    """
    front = record.get("pareto_front") or []
    if len(front) < 2:
        return None
    names = list(front[0].get("values") or {})
    return (f"trial {record['trial']} is one of {len(front)} configs on the Pareto front of "
            f"{' and '.join(names)}: the best by {names[0]}, the first objective (`autotune "
            "best` lists the others)")  # fmt: skip


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors: one dict that stands twice in a record (a replay's device) is
    written out twice, not as ``&id001`` and ``*id001``.

    Example:
        >>> shared = {"name": "H200"}
        >>> print(yaml.dump({"a": shared, "b": shared}, Dumper=_PlainDumper), end="")
        a:
          name: H200
        b:
          name: H200
    """

    def ignore_aliases(self, data: Any) -> bool:
        return True


def write_atomic(path: str | Path, text: str | bytes) -> Path:
    """Write ``text`` (str or bytes) to ``path`` through a temporary file and a rename: never
    half a file.

    A link is followed (the file it names is replaced, not the link), and what is not a
    regular file (``/dev/null``, a pipe) is written in place: a rename would replace the
    device or the pipe itself with a file. So is a path that names one of the process's
    descriptors (``/dev/stdout``: :mod:`autotune.std_paths`), through the descriptor, even
    where the shell opened it on a file: ``--output /dev/stdout >> run.log`` appends to the
    log, as a rename over it would not.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "best.json").write_text("old")
        3
        >>> (folder / "link.json").symlink_to(folder / "best.json")
        >>> _ = write_atomic(folder / "link.json", "new")
        >>> (folder / "link.json").is_symlink(), (folder / "best.json").read_text()
        (True, 'new')
    """
    fd = descriptor_of(path)
    if fd is not None:
        if fd == 1:
            sys.stdout.flush()  # what the command printed before stays before it
        try:
            write_to_descriptor(fd, text)
        except OSError as exc:
            exc.filename = exc.filename or str(path)
            raise
        return Path(path)
    path = Path(path)
    writes_in_place = path.exists() and not path.is_file()  # a device or a pipe, through a link too
    if path.is_symlink() and not writes_in_place:
        path = path.resolve()  # not /dev/stdout into a pipe: it links to no path resolve() can name
    try:
        return _write_atomic(path, text)
    except OSError as exc:
        exc.filename = exc.filename or str(path)  # the place, in the one-line error
        raise


def _write_atomic(path: Path, text: str | bytes) -> Path:
    mode = "wb" if isinstance(text, bytes) else "w"
    if path.exists() and not path.is_file():
        with open(path, mode) as f:
            f.write(text)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise _naming(exc, path) from None
    try:
        # mkstemp makes the file 0600: give it the mode a plain open() would (0666 less umask)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, mode) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points at it
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename == tmp:  # the rename: the output's fault
            raise _naming(exc, path) from None
        raise
    return path


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` naming ``path``, not the temporary file made beside it (a name the user never
    gave, gone once the write failed)."""
    exc.filename, exc.filename2 = str(path), None
    return exc


def export_text(
    study: optuna.Study,
    fmt: str,
    top: int = 5,
    rename: dict[str, str] | None = None,
    storage: str = DEFAULT_STORAGE,
) -> str:
    """Render the study's best config(s) in ``fmt`` (one of :data:`FORMATS`); ``rename``
    applies to ``triton``; ``storage``: the study's URL (:func:`best_record`)."""
    if fmt == "json":
        return json.dumps(best_record(study, storage), indent=2, sort_keys=False) + "\n"
    if fmt == "yaml":
        return yaml.dump(best_record(study, storage), Dumper=_PlainDumper, sort_keys=False)
    if fmt == "triton":
        return triton_export(study, top, rename)
    raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")


def load_record(path: str | Path) -> dict[str, Any]:
    """Read back a JSON or YAML record written by :func:`export_text`."""
    text = Path(path).read_text()
    return json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
