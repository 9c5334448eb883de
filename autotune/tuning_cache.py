"""A persistent tuning cache: a finished sweep answers again for the same kernel, problem,
device and toolchain, and nothing else.

The key is a hash of the workload, its problem (shape, dtype), the source of its objective and
of every kernel and objective module it imports, directly or through another (a function's own
import too: the serving model loads its Triton kernels where it first uses them; a relative
one, against its package), the search space file and the files it includes, the device (name,
compute capability, driver) and the software that compiled and ran it (torch, Triton, CUDA). A
sweep stores its key in the study; ``autotune tune`` finds a stored, finished sweep with the
same key and answers from it at once. Editing the kernel, upgrading Triton or moving to another
GPU changes the key, so the stale answer is never used.

Example:
    >>> a = fingerprint("faults", {}, {"name": "cpu", "software": {"torch": "2.13"}})
    >>> b = fingerprint("faults", {}, {"name": "cpu", "software": {"torch": "2.14"}})
    >>> a["key"] == b["key"], a["parts"]["software"]
    (False, {'torch': '2.13'})
"""

from __future__ import annotations

import ast
import contextlib
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import site
import sys
import sysconfig
import types
from pathlib import Path
from typing import Any

import optuna

from autotune.driver.results import best_trials
from autotune.driver.trial_attrs import (
    COMPLETE_STOPS,
    FINISH_OFF,
    finish_pending,
    is_launched,
    last_run,
    stored_info,
)

#: the device fields a compiled kernel and its timing depend on
_DEVICE_FIELDS = ("type", "name", "compute_capability", "driver")


def _sha(text: str | bytes) -> str:
    data = text.encode() if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:16]


#: the packages whose modules decide what a trial measures: the kernels and the objectives
MEASURED_PACKAGES = ("autotune.kernels", "autotune.objectives")


def source_modules(workload: str) -> list[types.ModuleType]:
    """The objective module of ``workload`` and every :data:`MEASURED_PACKAGES` module it
    imports, directly or through one of them, anywhere in its source (sorted by name); for a
    workload of a ``.py`` file or a plugin, the modules of its own folder or package too (the
    kernel file beside a workload file).

    Example:
        >>> names = [m.__name__ for m in source_modules("serving")]
        >>> "autotune.kernels.paged_attention_triton" in names  # imported in a method
        True
    """
    from autotune.objectives import get_objective
    from autotune.objectives.external import workload_folder

    module = inspect.getmodule(get_objective(workload))
    if module is None:
        return []
    folder = None if workload in _builtin() else workload_folder(workload)
    found = {module.__name__: module}
    waiting = [module]
    while waiting:
        for name in _imported(waiting.pop(), folder):
            if name not in found:
                found[name] = importlib.import_module(name)
                waiting.append(found[name])
    return [m for _, m in sorted(found.items())]


def _builtin() -> set[str]:
    from autotune.objectives import WORKLOADS

    return set(WORKLOADS)


def _imported(module: types.ModuleType, folder: Path | None = None) -> set[str]:
    """The modules of :data:`MEASURED_PACKAGES` (and of ``folder``) that ``module``'s source
    imports (``import a.b``, ``from a import b`` where b is a module, ``from a.b import c``,
    and relative ones, ``from .b import c``, against ``module``'s package), wherever the
    statement stands; an example in a docstring is text, not an import. The packages' own
    ``__init__`` (the workload registry) is left out: a new workload changes no answer.

    Example:
        >>> import autotune.kernels.matmul_triton as kernel
        >>> "autotune.kernels.tma" in _imported(kernel)
        True
    """
    named: set[str] = set()
    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module)
            if base is None:
                continue
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)
    return {
        name
        for name in named
        if (
            name.startswith(tuple(f"{package}." for package in MEASURED_PACKAGES))
            or (folder is not None and (_lies_in(name, folder) or _users_own(name)))
        )
        and _is_module(name)
    }


def _absolute(node: ast.ImportFrom, module: types.ModuleType) -> str | None:
    """The absolute name of the module a ``from ... import`` statement of ``module`` imports
    from: a relative one (``from .helpers import f``, ``from .. import g``) is resolved
    against ``module``'s package; None where it cannot be (a relative import in a module of
    no package, or reaching above its top package: it fails when run, too).

    Example:
        >>> pkg = types.ModuleType("pkg.kern"); pkg.__package__ = "pkg"
        >>> _absolute(ast.parse("from .helpers import f").body[0], pkg)
        'pkg.helpers'
        >>> _absolute(ast.parse("from ... import f").body[0], pkg) is None
        True
    """
    if not node.level:
        return node.module
    relative = "." * node.level + (node.module or "")
    try:
        return importlib.util.resolve_name(relative, module.__package__ or None)
    except (ImportError, ValueError):
        return None


def _lies_in(name: str, folder: Path) -> bool:
    """Whether module ``name`` is importable and its file lies in ``folder``, and not in an
    installed library (a virtual environment inside the folder holds torch)."""
    resolved = _module_file(name)
    if resolved is None:
        return False
    installed = any(
        resolved.is_relative_to(root) and not folder.is_relative_to(root)
        for root in _library_roots()
    )
    return resolved.is_relative_to(folder) and not installed


def _users_own(name: str) -> bool:
    """Whether module ``name`` is the user's own code wherever it lies: importable from a
    file that neither an installed library (a ``site-packages`` folder, wherever a ``.pth``
    or PYTHONPATH put it) nor Python's own library holds, and no module of autotune (whose
    kernels and objectives :data:`MEASURED_PACKAGES` count). A workload file's kernels in a
    package beside its folder (``proj/workloads/w.py`` importing ``proj/kernels``) were left
    out of the key, and an edit to them was answered from the cache."""
    resolved = None if name.split(".")[0] == "autotune" else _module_file(name)
    if resolved is None or {"site-packages", "dist-packages"} & set(resolved.parts):
        return False
    return not any(resolved.is_relative_to(root) for root in _library_roots() | _stdlib_roots())


def _module_file(name: str) -> Path | None:
    """The resolved file of importable module ``name``; None where it is none or has no file
    (a module built into the interpreter).

    Example:
        >>> _module_file("json").name, _module_file("sys"), _module_file("no_such_module_x")
        ('__init__.py', None, None)
    """
    if not _is_module(name):
        return None
    path = getattr(importlib.import_module(name), "__file__", None)
    return Path(path).resolve() if path else None


@functools.cache
def _library_roots() -> frozenset[Path]:
    """Where installed libraries live: the environment and its site-packages folders (asked
    once: a key walks every module a workload imports)."""
    roots = {sys.prefix, sys.base_prefix, *site.getsitepackages(), site.getusersitepackages()}
    return frozenset(Path(root).resolve() for root in roots)


@functools.cache
def _stdlib_roots() -> frozenset[Path]:
    """Where Python's own library lives."""
    return frozenset(Path(sysconfig.get_paths()[k]).resolve() for k in ("stdlib", "platstdlib"))


def _source(module: types.ModuleType) -> str:
    """The text of ``module``'s file ('' for one without: ``inspect.getsource`` refuses an
    empty package ``__init__``)."""
    path = getattr(module, "__file__", None)
    return Path(path).read_text() if path else ""


def _is_module(name: str) -> bool:
    """Whether ``name`` is an importable module (``a.b.c`` may name a class c of module a.b)."""
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


def module_files(modules: list[types.ModuleType]) -> dict[str, str]:
    """The file of each of ``modules`` that has one, by module name.

    Example:
        >>> list(module_files([json, types.ModuleType("built_here")]))
        ['json']
    """
    return {m.__name__: m.__file__ for m in modules if getattr(m, "__file__", None)}


def source_hash(
    workload: str, space_file: str | None = None, modules: list[types.ModuleType] | None = None
) -> str:
    """Hash of :func:`source_modules` (``modules``, where the caller found them already) and
    of the search space file (``space_file``, default the workload's) with every file its
    includes read, at any depth (a space of no includes keeps the hash it had before they
    counted).

    Example:
        >>> source_hash("matmul") == source_hash("matmul"), len(source_hash("matmul"))
        (True, 16)
    """
    from autotune.objectives import get_objective
    from autotune.space import load_space

    parts = [_source(m) for m in (source_modules(workload) if modules is None else modules)]
    space = space_file or getattr(get_objective(workload), "space", "")
    if space:
        loaded = load_space(space)
        path = Path(loaded.source)
        parts.append(path.read_text() if path.is_file() else space)
        parts += [Path(included).read_text() for included in loaded.includes]
    return _sha("\n".join(parts))


def fingerprint(
    workload: str,
    problem: dict[str, Any],
    device: dict[str, Any],
    source: str = "",
    objectives: dict[str, str] | None = None,
    slo: dict[str, float] | None = None,
    external: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The cache key of a sweep and the parts it was made of: a limit of ``--slo``, the
    contents of a file a problem value names (``trace=requests.jsonl``) and what the objective
    says of a program outside autotune that it measures (``external``: a server's files and
    package version, its ``cache_parts()``) are parts of it.

    Example:
        >>> a = fingerprint("serving", {"rate": 4}, {"name": "cpu"})
        >>> a == fingerprint("serving", {"rate": 4}, {"name": "cpu"})
        True
        >>> a["key"] == fingerprint("serving", {"rate": 4}, {"name": "cpu"},
        ...                         slo={"ttft_p99_ms": 500.0})["key"]
        False
        >>> ab, ba = {"a": "maximize", "b": "minimize"}, {"b": "minimize", "a": "maximize"}
        >>> both = [fingerprint("train", {}, {}, objectives=o)["key"] for o in (ab, ba)]
        >>> both[0] == both[1]
        False
    """
    parts = {
        "workload": workload,
        "problem": problem,
        "objectives": objectives or {},
        "source": source,
        "device": {k: device.get(k) for k in _DEVICE_FIELDS if device.get(k) is not None},
        "software": {k: v for k, v in device.get("software", {}).items() if k != "optuna"},
    }
    if slo:  # (absent when empty: the keys of sweeps stored before stay as they were)
        parts["slo"] = slo
    if len(objectives or {}) > 1:  # the first one picks the best config: its order counts
        parts["objective_order"] = list(objectives or {})
    files = named_files(problem)
    if files:
        parts["files"] = files
    if external:
        parts["external"] = external
    return {"key": _sha(json.dumps(parts, sort_keys=True, default=str)), "parts": parts}


#: Files a problem value names up to this size are hashed whole; a larger one (a checkpoint)
#: by its size, modification time and first and last :data:`_EDGE_BYTES`.
WHOLE_FILE_BYTES = 256 * 2**20
_EDGE_BYTES = 2**20


def named_files(problem: dict[str, Any]) -> dict[str, str]:
    """The hash of each file a problem value names (:func:`file_digest`; the trace file's
    requests, a replay's table, change what a sweep measures, their paths do not)."""
    files = {}
    for key, value in problem.items():
        if names_a_file(value):
            with contextlib.suppress(OSError):
                files[key] = file_digest(Path(value).expanduser())
    return files


def names_a_file(value: Any) -> bool:
    """Whether ``value`` is text that names a file that exists (a problem value is most
    often a number or a name).

    Example:
        >>> names_a_file(__file__), names_a_file("4096"), names_a_file(4096)
        (True, False, False)
    """
    if not isinstance(value, str) or not value or len(value) >= 4096:
        return False
    try:
        return Path(value).expanduser().is_file()
    except (OSError, ValueError):  # a name too long for the system, a NUL byte
        return False


def file_digest(path: Path) -> str:
    """A short hash of a file's contents, read in pieces (a many-GiB file never in memory
    at once): whole up to :data:`WHOLE_FILE_BYTES`; past that, the size, the modification
    time and the first and last MiB (a checkpoint rewritten in place changes its time).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        ...     _ = f.write(b'{"arrival": 0}\\n'); f.flush()
        ...     len(file_digest(Path(f.name)))
        16
    """
    with path.open("rb") as f:
        if path.stat().st_size <= WHOLE_FILE_BYTES:
            return hashlib.file_digest(f, "sha256").hexdigest()[:16]
        stat = path.stat()
        digest = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        digest.update(f.read(_EDGE_BYTES))
        f.seek(-_EDGE_BYTES, 2)
        digest.update(f.read(_EDGE_BYTES))
    return digest.hexdigest()[:16]


def cached_study(
    storage: optuna.storages.BaseStorage, key: str, sampler: str = "auto",
    trials: int | None = None, time_budget_s: float | None = None,
    unfinished: list[optuna.Study] | None = None, wants_finish: bool = False,
) -> optuna.Study | None:  # fmt: skip
    """The newest stored study with this key, a successful trial, and a last run that went as
    far as it was asked to (:data:`~autotune.driver.trial_attrs.COMPLETE_STOPS`: a sweep
    stopped by Ctrl-C or a kill after 3 of its 12 trials answers nothing; nor does one
    stopped in the finish it asked for, whose winner was never re-measured: it is
    appended to ``unfinished``, where one is given), if any; searched
    by the same ``sampler`` in each of its runs (another strategy is another sweep, and a
    study resumed by another is neither) with at least ``trials``
    trials launched, counted as ``--trials`` counts them, rejections by a constraint and
    repeats left out (a 20-trial sweep does not answer an ask for 100, unless it measured the
    whole space). A sweep its time budget stopped answers only an ask with a time budget no
    longer than its own (a 6-s smoke test does not answer a 1-hour sweep), and one run
    without a finish (``--finish-top 0``) does not answer an ask that ``wants_finish``: its
    best is a single noisy reading, never re-measured.

    Example:
        >>> storage = optuna.storages.InMemoryStorage()
        >>> cached_study(storage, "a key nothing stored") is None
        True
    """
    for summary in reversed(optuna.study.get_all_study_summaries(storage)):
        info = stored_info(summary.user_attrs)
        stored = info.get("fingerprint")
        if not isinstance(stored, dict) or stored.get("key") != key:
            continue
        run = last_run(summary.user_attrs)
        stopped_by = run.get("stopped_by")
        if stopped_by not in COMPLETE_STOPS:
            continue
        searched_all = stopped_by in ("every config tried", "no unvisited config left")
        # every run of it by this sampler (a resume by another made it a mix of both); every
        # trial (rejections and repeats too): a bound on the launched, read unloaded
        used = info.get("samplers") or [info.get("sampler", "auto")]
        if set(used) != {sampler} or (summary.n_trials < (trials or 0) and not searched_all):
            continue
        asked_s = run.get("asked_budget_s", run.get("time_budget_s"))  # a group's: its share
        if stopped_by == "time" and not _budget_covers(asked_s, time_budget_s, trials):
            continue
        study = optuna.load_study(study_name=summary.study_name, storage=storage)
        if launched_trials(study) < (trials or 0) and not searched_all:
            continue
        if not best_trials(study):
            continue
        if wants_finish and run.get("finish") == FINISH_OFF:
            continue
        if finish_pending(summary.user_attrs):
            if unfinished is not None:
                unfinished.append(study)
            continue
        return study
    return None


def launched_trials(study: optuna.Study) -> int:
    """The trials of ``study`` that ran, as the sweep's ``--trials`` budget counts them (a
    resume of it counts the same): not a config a constraint rejected, nor a repeat answered
    from the study.

    Example:
        >>> from autotune.driver.trial_attrs import STATUS
        >>> study = optuna.create_study()
        >>> for status in ("ok", "infeasible", "ok"):
        ...     study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={STATUS: status}))
        >>> len(study.trials), launched_trials(study)
        (3, 2)
    """
    return sum(is_launched(t) for t in study.get_trials(deepcopy=False))


def _budget_covers(stored_s: object, asked_s: float | None, trials: int | None) -> bool:
    """Whether a sweep its time budget of ``stored_s`` stopped answers an ask for ``asked_s``
    and ``trials``: an ask with a time budget only if no longer than its own (a stored run
    that kept no budget answers none); one without, by its trial count (checked before:
    the stopped sweep ran at least as many).

    Example:
        >>> _budget_covers(60.0, 30.0, None), _budget_covers(6.0, 3600.0, None)
        (True, False)
        >>> _budget_covers(6.0, None, 5), _budget_covers(None, 30.0, None)
        (True, False)
    """
    if asked_s is None:
        return trials is not None
    return isinstance(stored_s, int | float) and asked_s <= stored_s
