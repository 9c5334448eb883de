"""A server's command template: the placeholders it names, the checks that it can serve before
any trial (its program is on this machine, every placeholder is a parameter, a problem value
or ``{port}``, every format spec takes the values the space gives it), and its arguments for
one trial (split, never evaluated by a shell).

Example:
    >>> format_command("srv --port {port} -n {n}", {"port": 8000, "n": 16})
    ['srv', '--port', '8000', '-n', '16']
"""

from __future__ import annotations

import os
import shlex
import shutil
import string
from collections.abc import Mapping
from typing import Any

from autotune.failures import Infeasible


def format_command(template: str, values: dict[str, Any]) -> list[str]:
    """The template's arguments with ``{name}`` filled from ``values``.

    Raises:
        Infeasible: the template names a value that is neither a parameter nor a problem key,
            or formats one in a way its value does not take (``{policy:d}``).

    Example:
        >>> format_command("serve --max-num-seqs {max_num_seqs} --port {port}",
        ...                {"max_num_seqs": 64, "port": 8001})
        ['serve', '--max-num-seqs', '64', '--port', '8001']
    """
    try:
        return [part.format(**values) for part in shlex.split(template)]
    except KeyError as exc:
        raise Infeasible(f"the command template names {{{exc.args[0]}}}, which is neither a "
                         "parameter nor a problem value") from None  # fmt: skip
    except (ValueError, IndexError, AttributeError, TypeError, OverflowError) as exc:
        raise Infeasible(f"command={template!r} cannot be filled in: {exc}") from None


def template_names(template: str) -> list[str]:
    """The names the ``{placeholders}`` of a command template read, in order, once each.

    Raises:
        ValueError: naming the template and what is wrong with it: a line that does not parse
            as a command line, a lone ``{`` or ``}`` (``{{`` and ``}}`` are braces), a
            placeholder that is not a name (``{}``, ``{0}``, ``{a.b}``, ``{a[0]}``), an unknown
            conversion (``{port!x}``).

    Example:
        >>> template_names("serve --port {port!s} --max-num-seqs {max_num_seqs:d} {{x}}")
        ['port', 'max_num_seqs']
        >>> template_names("serve --port {port} {0}")
        Traceback (most recent call last):
        ...
        ValueError: command='serve --port {port} {0}': {0} is not a name: a placeholder names ...
    """
    try:
        parts = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"command={template!r} does not parse: {exc}") from None
    names: list[str] = []
    for part in parts:
        _placeholders(template, part, names)
    return names


def check_program(template: str, problem: Mapping[str, Any] | None = None) -> None:
    """Refuse a template whose program this machine cannot run: every trial's server would
    fail to start, each one a ``crashed`` trial. A program a problem value fills
    (``{engine} serve ...`` with ``engine=vllm``) is checked as filled in; one a trial fills
    (a parameter of the space, ``{port}``) is refused: each trial would run a config's value
    (``4``) as its program.

    Raises:
        ValueError: naming the template and the program.

    Example:
        >>> check_program("no-such-server-xyz --port {port}")
        Traceback (most recent call last):
        ...
        ValueError: command='no-such-server-xyz --port {port}': no program no-such-server-xyz ...
        >>> check_program("{max_num_seqs} --port {port}", {})
        Traceback (most recent call last):
        ...
        ValueError: command='{max_num_seqs} --port {port}': the program is {max_num_seqs}, ...
    """
    program = shlex.split(template)[0]
    if "{" in program:
        try:
            program = program.format(**(problem or {}))
        except KeyError:
            raise ValueError(f"command={template!r}: the program is {program}, which each trial "
                             "would fill with a config's value and run: name the server's "
                             "program first (vllm serve ... --max-num-seqs "
                             "{max_num_seqs})") from None  # fmt: skip
        except (ValueError, IndexError, AttributeError, TypeError, OverflowError):
            return  # a format the problem's value does not take: check_formats says so
    name, equals, _ = program.partition("=")
    if equals and name.isidentifier():  # HF_TOKEN=... vllm serve: a shell's way
        raise ValueError(f"command={template!r}: {name}= sets a variable, which only a shell "
                         "reads, and the command runs without one: write env "
                         f"{name}=... before the program")  # fmt: skip
    if os.sep in program:
        if not (os.path.isfile(program) and os.access(program, os.X_OK)):
            raise ValueError(f"command={template!r}: {program} is not an executable file: no "
                             "trial's server could start")  # fmt: skip
    elif shutil.which(program) is None:
        raise ValueError(f"command={template!r}: no program {program} on PATH: no trial's "
                         "server could start (install it, or give its full path)")  # fmt: skip


def check_formats(template: str, params: Mapping[str, Any], problem: dict[str, Any]) -> None:
    """Refuse a template that one of a parameter's values cannot fill in (``{n:s}`` over an
    int, ``{x:d}`` over a float or a text choice): each value of a parameter with few of them,
    the ends of one with many (:func:`_standing_values`), the others' values standing in as
    :class:`AnyValue`.

    Raises:
        ValueError: naming the template, the parameter's value and the formatting's error.

    Example:
        >>> from autotune.space.params import Param
        >>> check_formats("srv --port {port} -n {n:s}", {"n": Param("n", "pow2", 4, 64)}, {})
        Traceback (most recent call last):
        ...
        ValueError: command='srv --port {port} -n {n:s}' cannot be filled in at n=4, a value of ...
    """
    probe: dict[str, Any] = {name: AnyValue() for name in template_names(template)}
    probe.update({k: v for k, v in problem.items() if k in probe}, port=8000)
    parts = shlex.split(template)
    for name, param in params.items():
        if name not in probe:
            continue
        for value in _standing_values(param):
            try:
                for part in parts:
                    part.format(**{**probe, name: value})
            except (ValueError, IndexError, AttributeError, TypeError, OverflowError) as exc:
                raise ValueError(f"command={template!r} cannot be filled in at {name}={value!r}, "
                                 f"a value of the space: {exc}") from None  # fmt: skip


def _standing_values(param: Any) -> list[Any]:
    """Values that stand for all a space's parameter takes, as a trial's config holds them:
    every one where it takes at most 64, else its ends (a float's as floats).

    Example:
        >>> from autotune.space.params import Param
        >>> _standing_values(Param("x", "float", low=0, high=1))
        [0.0, 1.0]
        >>> _standing_values(Param("n", "int", low=1, high=10**6))
        [1, 1000000]
    """
    if param.kind == "float" and (param.step is None or param.count() > 64):
        return [float(param.low), float(param.high)]
    if param.kind in ("categorical", "bool") or param.count() <= 64:
        return list(param.values())
    return [int(param.low), int(param.high)]


def _placeholders(template: str, text: str, names: list[str]) -> None:
    """Add the names ``text``'s placeholders read (those in format specs too) to ``names``."""
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError as exc:  # a lone brace
        raise ValueError(f"command={template!r}: {exc} (write {{{{ and }}}} for braces)") from None
    for _, name, spec, conversion in fields:
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(f"command={template!r}: {{{name}}} is not a name: a placeholder "
                             "names a parameter, a problem value or {port} (write {{ and }} "
                             "for braces)")  # fmt: skip
        if conversion not in (None, "s", "r", "a"):
            raise ValueError(f"command={template!r}: {{{name}!{conversion}}}: unknown "
                             "conversion (!s, !r or !a)")  # fmt: skip
        if name not in names:
            names.append(name)
        if spec:
            _placeholders(template, spec, names)


class AnyValue:
    """Stands for a parameter's value while a template is test-formatted before the sweep
    (its type is the space's to say): it takes a format spec that a number or a text takes
    (``{x:d}``, ``{x:.2f}``, ``{x:>8}``), not one that none takes (``{x:q}``).

    Example:
        >>> format(AnyValue(), ".2f")
        '1'
        >>> format(AnyValue(), "q")
        Traceback (most recent call last):
        ...
        ValueError: Invalid format specifier 'q' for a parameter's value (a number or a text)
    """

    def __format__(self, spec: str) -> str:
        for sample in (1, 1.5, "x"):
            try:
                format(sample, spec)
            except (ValueError, TypeError):
                continue
            return "1"
        raise ValueError(f"Invalid format specifier {spec!r} for a parameter's value (a number "
                         "or a text)")  # fmt: skip

    def __str__(self) -> str:
        return "1"
