"""Workloads defined outside this package: a Python file named on the command line, or a
module another installed package registers under the ``autotune.workloads`` entry points.

A user's own kernel is tuned without editing autotune: write an objective module (a class
with ``name``, ``space``, ``directions``, ``default_problem`` and ``evaluate``, bound to
``OBJECTIVE``, as the built-in ones are) and run ``autotune tune ./my_objective.py``. The file's
folder goes on ``sys.path``, so it may import its kernel from a file beside it, and a relative
``space`` is read next to it. A package makes its workloads known to every ``autotune`` command
by an entry point, e.g. in its ``pyproject.toml``::

    [project.entry-points."autotune.workloads"]
    my-gemm = "my_package.gemm_objective"

Example:
    >>> import tempfile, pathlib
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "toy.py").write_text(
    ...     "from autotune.objectives.base import Objective\\n"
    ...     "class Toy(Objective):\\n"
    ...     "    name, space, directions = 'toy', 'toy.yaml', {'value': 'maximize'}\\n"
    ...     "    def evaluate(self, config, report=None): ...\\n"
    ...     "OBJECTIVE = Toy\\n")
    >>> _ = (folder / "toy.yaml").write_text("parameters:\\n  x: {type: int, low: 1, high: 4}\\n")
    >>> cls = load_external(str(folder / "toy.py"))
    >>> cls.name, pathlib.Path(cls.space) == folder / "toy.yaml"
    ('toy', True)
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
import time
import types
from collections.abc import Iterator
from contextlib import AbstractContextManager
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, NoReturn

from autotune.time_limit import TimeLimit, TimeUp

#: the entry-point group an installed package registers its workloads under
ENTRY_POINT_GROUP = "autotune.workloads"


#: the directions a metric may take
DIRECTIONS = ("maximize", "minimize")


class WorkloadError(ValueError):
    """A workload file or plugin that cannot serve: it does not import, defines no
    ``OBJECTIVE``, or a method of its objective class raises while the sweep is set up (its
    memory model too: :mod:`autotune.driver.memory_guard`)."""


def is_file_workload(name: str) -> bool:
    """Whether ``name`` names a Python file rather than a registered workload."""
    return name.endswith(".py")


def plugin_workloads() -> dict[str, str]:
    """The workloads installed packages register: name -> module."""
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def plugin_help(value: str) -> str:
    """The first line of a plugin module's docstring, its line of help in ``autotune
    workloads``, read from its source without running it (its package's ``__init__`` runs, as
    for any import of it); "" where there is none or the module cannot be found.

    Example:
        >>> plugin_help("autotune.objectives.rmsnorm:OBJECTIVE")
        'The ``rmsnorm`` objective: memory throughput of the fused RMSNorm kernel, checked first.'
    """
    import ast

    try:
        spec = importlib.util.find_spec(_plugin_target(value)[0])
        source = Path(spec.origin).read_text(encoding="utf-8") if spec and spec.origin else ""
        doc = ast.get_docstring(ast.parse(source)) or ""
    except Exception:  # noqa: BLE001 - a broken plugin is refused where it is used, not here
        return ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def _plugin_target(value: str) -> tuple[str, str]:
    """An entry point's value as (module, attribute): a module (its ``OBJECTIVE``), or the
    entry points' usual ``module:attribute``.

    Example:
        >>> _plugin_target("mypkg.tuning"), _plugin_target("mypkg.tuning:Mine")
        (('mypkg.tuning', 'OBJECTIVE'), ('mypkg.tuning', 'Mine'))
    """
    module, _, attribute = value.partition(":")
    return module.strip(), attribute.strip() or "OBJECTIVE"


def load_external(name: str) -> type[Any]:
    """The ``OBJECTIVE`` of a workload file (``.py``) or of a registered plugin module (or the
    attribute its entry point names: ``mypkg.tuning:MyObjective``).

    Raises:
        KeyError: ``name`` is neither an existing ``.py`` file nor a plugin.
        WorkloadError: the module does not import, or defines no ``OBJECTIVE``.
    """
    attribute = "OBJECTIVE"
    if is_file_workload(name):
        module = _import_file(Path(name))
    else:
        plugins = plugin_workloads()
        if name not in plugins:
            raise KeyError(name)
        module_name, attribute = _plugin_target(plugins[name])
        try:
            with keeps_working_folder(), _exit_raises(), _within_budget():
                module = importlib.import_module(module_name)
        except BaseException as exc:  # sys.exit() at import too: one line
            _interrupts_go_on(exc)
            raise WorkloadError(f"{name} ({plugins[name]}): {_failure(exc)}") from None
    objective = getattr(module, attribute, None)
    if objective is None:
        raise WorkloadError(f"{name}: defines no {attribute} (the objective class of the workload)")
    _check_objective(name, objective)
    _space_beside(objective, module)
    return objective


def _check_objective(name: str, objective: Any) -> None:
    """What the sweep reads of an objective class is there: it is an ``Objective``, names its
    metrics and measures (``evaluate``).

    Raises:
        WorkloadError: naming the first thing missing.
    """
    from autotune.objectives.base import Objective

    if not (isinstance(objective, type) and issubclass(objective, Objective)):
        raise WorkloadError(
            f"{name}: OBJECTIVE is not a subclass of autotune.objectives.base.Objective"
        )
    directions = getattr(objective, "directions", None)
    if not isinstance(directions, dict) or not directions:
        raise WorkloadError(
            f"{name}: {objective.__name__}.directions is not set (metric -> 'maximize' or"
            " 'minimize', the first the one tuned)"
        )
    for metric, direction in directions.items():
        if not isinstance(metric, str):
            raise WorkloadError(
                f"{name}: {objective.__name__}.directions: {metric!r} is not a metric name"
            )
        if direction not in DIRECTIONS:
            raise WorkloadError(
                f"{name}: {objective.__name__}.directions: {metric!r}: {direction!r} is not"
                " 'maximize' or 'minimize'"
            )
    space = getattr(objective, "space", "")
    if space and not isinstance(space, str | os.PathLike):
        raise WorkloadError(
            f"{name}: {objective.__name__}.space is a {type(space).__name__}; it must name a "
            "space YAML file (a path, relative to the workload's folder)"
        )
    if inspect.isabstract(objective):
        missing = ", ".join(sorted(objective.__abstractmethods__))
        raise WorkloadError(f"{name}: {objective.__name__} does not define {missing}")


def workload_folder(name: str) -> Path | None:
    """The folder whose modules decide what an external workload measures (its file's
    folder, or a plugin's top-level package), for the tuning cache; None for a built-in."""
    if is_file_workload(name):
        return Path(name).resolve().parent
    from autotune.objectives import WORKLOADS

    target = plugin_workloads().get(name)
    if target is None or name in WORKLOADS:  # a built-in keeps its name
        return None
    top = importlib.import_module(_plugin_target(target)[0].split(".")[0])
    path = getattr(top, "__file__", None)
    return Path(path).resolve().parent if path else None


def _import_file(path: Path) -> types.ModuleType:
    """Import a workload file once per process, under a name unique to its path (so two
    ``objective.py`` of different folders do not collide), its folder on ``sys.path``."""
    path = path.resolve()
    if not path.is_file():
        raise KeyError(str(path))
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:10]
    module_name = f"autotune_workload_{path.stem}_{digest}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look the module up
    try:
        with keeps_working_folder(), _exit_raises(), _within_budget():
            spec.loader.exec_module(module)
    except BaseException as exc:  # sys.exit() at import too: one line
        del sys.modules[module_name]
        _interrupts_go_on(exc)
        raise WorkloadError(f"{path}: {_failure(exc, path)}") from None
    return module


@contextlib.contextmanager
def _exit_raises() -> Iterator[None]:
    """Around a workload module's import: ``os._exit(n)`` raises ``SystemExit`` instead, so
    that it is refused in one line as ``sys.exit()`` is (it ended ``autotune tune`` at once
    with its code, 0 included: no line, no output file, and a `&& deploy` went ahead)."""
    real = os._exit

    def refused(code: int) -> NoReturn:
        raise SystemExit(f"os._exit({code})")

    os._exit = refused
    try:
        yield
    finally:
        os._exit = real


def before_budget_ends(deadline: float | None) -> None:
    """Set when the command's time budget ends (a :func:`time.monotonic` reading; None: no
    budget): a workload's own set-up code (its import, ``default_problem``,
    ``default_config``, ...) still running then is stopped with a one-line error, not left
    to hang the command past its budget.
    """
    global _SETUP_DEADLINE
    _SETUP_DEADLINE = deadline


_SETUP_DEADLINE: float | None = None


@contextlib.contextmanager
def _within_budget() -> Iterator[None]:
    """Around a workload's own set-up code: :class:`~autotune.time_limit.TimeUp` at the
    budget's end (none without a budget, nor where no alarm can be set)."""
    deadline = _SETUP_DEADLINE
    limit = TimeLimit(None if deadline is None else max(deadline - time.monotonic(), 0.001))
    with limit.running():
        yield


@contextlib.contextmanager
def keeps_working_folder() -> Iterator[None]:
    """Around a workload's own code: a working folder it changes to is changed back, so that
    the paths the user gave relative to theirs (``--storage sqlite:///a.db``, ``--output``)
    stay where they meant them.

    Example:
        >>> before = os.getcwd()
        >>> with keeps_working_folder():
        ...     os.chdir("/")
        >>> os.getcwd() == before
        True
    """
    folder = os.getcwd()
    try:
        yield
    finally:
        if os.getcwd() != folder:
            os.chdir(folder)


def _interrupts_go_on(exc: BaseException) -> None:
    """Re-raise Ctrl-C (and a generator's close): whatever else a workload's own code raises
    (``SystemExit``, pytest's ``Skipped``, a ``BaseException`` of its own) is its failure."""
    if isinstance(exc, (KeyboardInterrupt, GeneratorExit)):
        raise exc


def _failure(exc: BaseException, path: Path | None = None) -> str:
    """One line on why a workload module did not import (with the line, for a syntax error,
    and the file it is in where that is not ``path``, the workload file: a kernel file the
    objective imports, say).

    Example:
        >>> _failure(SystemExit(4)), _failure(RuntimeError("no GPU\\nat line 3"))
        ('does not import: SystemExit: 4', 'does not import: RuntimeError: no GPU')
        >>> error = SyntaxError("expected ':'", ("/w/kernel.py", 60, 1, "def f()\\n"))
        >>> _failure(error, Path("/w/objective.py"))
        "does not import: /w/kernel.py: line 60: expected ':'"
        >>> _failure(error, Path("/w/kernel.py"))
        "does not import: line 60: expected ':'"
    """
    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}: {exc.msg}"
        if exc.filename and not _same_file(exc.filename, path):
            where = f"{exc.filename}: {where}"
        return f"does not import: {where}"
    if isinstance(exc, TimeUp):
        return "its import was still running when the time budget ran out"
    return f"does not import: {_exception_line(exc)}"


def _same_file(filename: str, path: Path | None) -> bool:
    """Whether a syntax error's ``filename`` is the file ``path`` (False without one)."""
    if path is None:
        return False
    try:
        return Path(filename).resolve() == path.resolve()
    except (OSError, ValueError):
        return False


def _exception_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (the type alone for an exception without one)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0].strip()}" if lines else type(exc).__name__


@contextlib.contextmanager
def user_code(
    name: str, objective: type[Any], method: str, passing: tuple[type[Exception], ...] = ()
) -> Iterator[None]:
    """Run a method of an external workload's objective class while the sweep is set up:
    whatever it raises (``sys.exit()`` too) becomes a one-line :class:`WorkloadError` naming
    the workload, the method and the exception's first line; exceptions of ``passing`` go
    on as they are (a ``ValueError`` that refuses a problem value, say).

    Example:
        >>> class Mine:
        ...     @classmethod
        ...     def default_problem(cls, device):
        ...         raise RuntimeError("no GPU here\\nmore")
        >>> try:
        ...     with user_code("mine.py", Mine, "default_problem"):
        ...         Mine.default_problem({})
        ... except WorkloadError as exc:
        ...     print(exc)
        mine.py: Mine.default_problem raised RuntimeError: no GPU here
    """
    try:
        with keeps_working_folder(), _within_budget():
            yield
    except WorkloadError:
        raise
    except TimeUp:
        raise WorkloadError(f"{name}: {objective.__name__}.{method} was still running when "
                            "the time budget ran out") from None  # fmt: skip
    except BaseException as exc:  # sys.exit() and a test runner's Skipped too
        _interrupts_go_on(exc)
        if isinstance(exc, passing):
            raise
        raise WorkloadError(
            f"{name}: {objective.__name__}.{method} raised {_exception_line(exc)}"
        ) from None


def _space_beside(objective: type[Any], module: types.ModuleType) -> None:
    """A relative ``space`` of an external objective is read next to its module."""
    space, path = getattr(objective, "space", ""), getattr(module, "__file__", None)
    if space and path and not Path(space).is_absolute():
        beside = Path(path).resolve().parent / space
        if beside.is_file():
            objective.space = str(beside)


def setup_call(
    workload: str,
    objective_cls: type[Any],
    method: str,
    passing: tuple[type[Exception], ...] = (),
) -> AbstractContextManager[None]:
    """Around a call of ``method`` of ``objective_cls`` while the sweep is set up: for a
    workload file or a plugin, whatever the user's method raises (but ``passing``) is one line
    naming the workload and the method (:func:`user_code`); a
    built-in workload's keeps its traceback (a bug of autotune's).

    Example:
        >>> from autotune.objectives.base import Objective
        >>> class Mine(Objective):
        ...     def evaluate(self, config, report=None): ...
        ...     @classmethod
        ...     def default_problem(cls, device):
        ...         raise KeyError("type")
        >>> try:
        ...     with setup_call("/home/me/mine.py", Mine, "default_problem"):
        ...         Mine.default_problem({})
        ... except WorkloadError as exc:
        ...     print(exc)
        /home/me/mine.py: Mine.default_problem raised KeyError: 'type'
    """
    from autotune.objectives import WORKLOADS

    if workload in WORKLOADS:
        return contextlib.nullcontext()
    return user_code(workload, objective_cls, method, passing)
