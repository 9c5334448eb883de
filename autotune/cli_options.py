"""What the ``autotune`` commands share: their common options, the console they print results
on, and the libraries' logging turned down.

Example:
    >>> DEFAULT_STORAGE
    'sqlite:///autotune.db'
"""

from __future__ import annotations

import inspect
import os
import warnings
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints

import typer
from rich.console import Console
from typer.models import OptionInfo

from autotune.redact import STORAGE_ENV

#: results go to stdout; progress and errors to stderr (:data:`autotune.cli_errors.err`)
out = Console()


def quiet_libraries() -> None:
    """Optuna's log below warnings, no experimental-feature warnings, and no SQLAlchemy
    traceback of a read that Ctrl-C cut short. Every command that opens a storage calls this
    first, so the others (``--help``, ``workloads``) never import Optuna and SQLAlchemy."""
    import optuna

    from autotune.interrupt_logging import quiet_interrupted_cursor_close

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    quiet_interrupted_cursor_close()


def output_file(text: str | Path) -> Path:
    """An ``--output`` value as a path: ``-`` is standard output (``/dev/stdout``). One ending
    in a slash names a folder: refused here, before ``Path`` drops the slash and the command
    writes a file of the folder's name.

    Example:
        >>> output_file("runs/best.json"), output_file("-")
        (PosixPath('runs/best.json'), PosixPath('/dev/stdout'))
        >>> output_file("runs/")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ...
        click.exceptions.BadParameter: 'runs/' names a folder; name a file in it
        >>> output_file("")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ...
        click.exceptions.BadParameter: '' names no file; name one (or - for standard output)
    """
    name = os.fspath(text)
    if not name.strip():  # Path("") is the working folder: refused as "." being a folder
        raise typer.BadParameter(f"{name!r} names no file; name one (or - for standard output)")
    if name == "-":  # the usual name for standard output
        return Path("/dev/stdout")
    if name.endswith(("/", os.sep)):
        raise typer.BadParameter(f"{name!r} names a folder; name a file in it")
    return Path(name)


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


def _storage_env_not_blank(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """``value``, unless ``--storage`` was not given and ``$AUTOTUNE_STORAGE`` is set but
    blank (``AUTOTUNE_STORAGE=$DB_URL`` with ``DB_URL`` unset), which the option parser reads
    as unset: the command would read or write the default storage without a word.

    Raises:
        typer.BadParameter: naming the variable (a usage error: one line, exit code 2).
    """
    given = os.environ.get(STORAGE_ENV)
    source = ctx.get_parameter_source(param.name or "storage")
    if given is not None and not given.strip() and getattr(source, "name", "") != "COMMANDLINE":
        raise typer.BadParameter(f"${STORAGE_ENV} is set but blank: put a storage URL in it, "
                                 "unset it for the default, or pass --storage")  # fmt: skip
    return value


StorageOption = Annotated[
    str,
    typer.Option(
        "--storage",
        callback=_storage_env_not_blank,
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


#: The value label of an option whose value has a form of its own (the others: their type's)
FORMS = {
    "--problem": "KEY=VALUE",
    "--slo": "METRIC=LIMIT",
    "--space": "PATH",
    "--storage": "URL",
    "--address": "HOST:PORT",
    "--time-budget": "DURATION",
}
#: The value label of an option of each type (a repeatable option's: its items' type)
TYPE_LABELS = {str: "TEXT", int: "INTEGER", float: "NUMBER", Path: "PATH"}


def _value_type(annotation: Any) -> Any:
    """The type of one value of a parameter annotated ``annotation``: ``T`` of ``T | None``,
    of ``list[T]``, of ``Annotated[T, ...]``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated or origin is list:
            annotation = get_args(annotation)[0]
        elif origin in (Union, UnionType):
            annotation = next(a for a in get_args(annotation) if a is not type(None))
        else:
            return annotation


def label_option_values(app: typer.Typer) -> None:
    """Give each option of ``app``'s commands without a metavar of its own one label for its
    value, in capitals: its form (:data:`FORMS`) or its type's (:data:`TYPE_LABELS`). Typer's
    own read ``<Path>`` for a ``Path``, ``<path>`` for a ``Path`` of ``exists=...``, and
    ``<list[str]>`` for a repeatable option. Call it once every command is registered.

    Example:
        >>> demo = typer.Typer()
        >>> @demo.command()
        ... def go(out: Annotated[Path | None, typer.Option("--out")] = None) -> None: ...
        >>> label_option_values(demo)
        >>> inspect.signature(go).parameters["out"].annotation.__metadata__[0].metavar
        'PATH'
    """
    for info in app.registered_commands:
        hints = get_type_hints(info.callback, include_extras=True)
        for name in inspect.signature(info.callback).parameters:
            hint = hints.get(name)
            extras = getattr(hint, "__metadata__", ())
            option = next((e for e in extras if isinstance(e, OptionInfo)), None)
            kind = _value_type(hint)
            if option is None or option.metavar is not None or kind is bool:
                continue
            flag = str(option.default if isinstance(option.default, str) else "")
            flags = [d for d in (flag, *option.param_decls) if d.startswith("--")]
            flags = flags or ["--" + name.replace("_", "-")]  # named by its parameter
            form = next((FORMS[f.split("/")[0]] for f in flags if f.split("/")[0] in FORMS), None)
            option.metavar = form or TYPE_LABELS.get(kind, "TEXT")
            # a string annotation (``from __future__ import annotations``) is evaluated anew,
            # its option built again, each time it is read: the one labelled here replaces it
            for function in {info.callback, inspect.unwrap(info.callback)}:
                function.__annotations__[name] = hint
