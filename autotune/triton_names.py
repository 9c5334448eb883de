"""Parameter names as a kernel spells them: the ``--rename`` map of a triton export
(``BLOCK_M=BLOCK_SIZE_M``; ``SPLIT_K=`` drops a parameter the kernel does not have), checked so
that every renamed config is one the kernel can take, and the export's error.

Example:
    >>> renamed({"BLOCK_M": 64, "SPLIT_K": 1}, {"BLOCK_M": "BLOCK_SIZE_M", "SPLIT_K": ""})
    {'BLOCK_SIZE_M': 64}
"""

from __future__ import annotations

import keyword
import unicodedata
from typing import Any

from autotune.kernel_config import LAUNCH_OPTIONS


class TritonExportError(ValueError):
    """Nothing to export, or studies that cannot share one table."""


def renamed(config: dict[str, Any], rename: dict[str, str]) -> dict[str, Any]:
    """Meta-parameters renamed; a name mapped to "" is dropped."""
    out = {}
    for name, value in config.items():
        new = rename.get(name, name)
        if new:
            out[new] = value
    return out


def python_name(name: str) -> str:
    """``name`` as Python reads it in source: NFKC-normalized (full-width ``Ａ`` is ``A``).

    Example:
        >>> python_name("\uff21A")
        'AA'
    """
    return unicodedata.normalize("NFKC", name)


def check_name(old: str, new: str) -> None:
    """A new name that a kernel's argument can have: a Python identifier, no keyword, and
    written as Python reads it (NFKC-normalized: the parser reads a full-width ``Ａ`` as ``A``,
    so a config's ``'ＡA'`` would never match the kernel's argument).

    Raises:
        TritonExportError: naming the rename's entry.

    Example:
        >>> check_name("BLOCK_M", "class")
        Traceback (most recent call last):
        ...
        autotune.triton_names.TritonExportError: --rename BLOCK_M=class: 'class' is not a ...
    """
    if not new.isidentifier() or keyword.iskeyword(new):
        raise TritonExportError(f"--rename {old}={new}: {new!r} is not a Python name")
    if python_name(new) != new:
        raise TritonExportError(
            f"--rename {old}={new}: Python reads {new!r} as {python_name(new)!r} (NFKC); "
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
        autotune.triton_names.TritonExportError: --rename ...: two parameters would be ... BLOCK_N
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
            check_name(old, new)
    final: dict[str, str] = {}  # each new name as Python reads it -> its parameter
    for name in sorted(names):
        new = rename.get(name, name)
        if not new:
            continue
        if python_name(new) in final:
            culprit = name if name in rename else final[python_name(new)]
            raise TritonExportError(
                f"--rename {culprit}={rename[culprit]}: two parameters would be called "
                f"{python_name(new)}"
            )
        final[python_name(new)] = name


def key_names(key: list[str], rename: dict[str, str]) -> list[str]:
    """The kernel's names of the table's ``key``: ``rename`` maps a key value as it maps a
    parameter (``M=m``), for a kernel whose size arguments are spelled otherwise; the module's
    ``prune`` and ``heuristics()`` read the launch's arguments by these names.

    Raises:
        TritonExportError: a key value dropped (``M=``: the module needs its argument), renamed
            to no Python name or to a launch option, or two renamed to one name.

    Example:
        >>> key_names(["M", "N", "K"], {"M": "m", "K": "k_", "BLOCK_M": "BLOCK_SIZE_M"})
        ['m', 'N', 'k_']
        >>> key_names(["M", "N"], {"M": ""})
        Traceback (most recent call last):
        ...
        autotune.triton_names.TritonExportError: --rename M=: M is of the table's --key; ...
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
            check_name(k, new)
            if new in LAUNCH_OPTIONS:
                raise TritonExportError(
                    f"--rename {k}={new}: {new} is a launch option of triton.Config, not a "
                    "kernel's size argument"
                )
        if python_name(new) in map(python_name, names):
            raise TritonExportError(f"--rename {k}={new}: two key values would be called {new}")
        names.append(new)
    return names


def distinct_configs(configs: list[dict[str, Any]], rename: dict[str, str]) -> list[int]:
    """The indices of ``configs`` that export as no earlier one does: once renamed (a name
    mapped to "" dropped), two configs that differ only in a dropped parameter, or not at all,
    are one ``triton.Config``, and only the first, the better ranked, is kept.

    Example:
        >>> distinct_configs([{"A": 1, "B": 1}, {"A": 1, "B": 2}, {"A": 2, "B": 1}], {"B": ""})
        [0, 2]
    """
    seen: set[tuple] = set()
    kept = []
    for i, config in enumerate(configs):
        exported = tuple(sorted((k, repr(v)) for k, v in renamed(config, rename).items()))
        if exported not in seen:
            seen.add(exported)
            kept.append(i)
    return kept
