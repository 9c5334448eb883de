"""Pieces of the Python source a triton export writes, each safe for the data it holds: a
comment no value can end, a docstring no value can close, a dict whose infinities read back, the
module's header (where its figures come from) and a ``configs`` list of ``triton.Config``.

Example:
    >>> text = triton_config_source([{"BLOCK_M": 64, "num_warps": 4}], ["trial 3"])
    >>> "triton.Config({'BLOCK_M': 64}, num_warps=4)" in text
    True
"""

from __future__ import annotations

from typing import Any

from autotune import __version__
from autotune.kernel_config import KernelConfig, literal
from autotune.triton_names import renamed


def safe_comment(text: str) -> str:
    """``text`` made safe for a ``#`` comment: a line break (or any other unprintable
    character) is written as its escape, so data never ends the comment and runs as code.

    Example:
        >>> safe_comment('a\\nimport os')
        'a\\\\nimport os'
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def docstring_literal(text: str) -> str:
    """A triple-quoted literal whose value is ``text``: backslashes doubled, unprintable
    characters but newlines escaped, and a quote escaped where it could close the literal.

    Example:
        >>> import ast
        >>> text = 'ends it: ' + '"' * 3 + ', a unicode escape: \\\\N{x}'
        >>> ast.literal_eval(docstring_literal(text)) == text
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


def dict_source(values: dict[Any, Any]) -> str:
    """Python source of ``values``, its keys in order, each value as a config's is written
    (:func:`~autotune.kernel_config.literal`): a value that is not finite reads back as itself,
    where its repr (``-inf``) is a name the module does not have.

    Example:
        >>> dict_source({"X": float("-inf"), "A": 1})
        "{'A': 1, 'X': float('-inf')}"
    """
    return "{" + ", ".join(f"{k!r}: {literal(v)}" for k, v in sorted(values.items())) + "}"


def dropped_note(configs: list[dict[str, Any]], rename: dict[str, str]) -> str:
    """The docstring's line naming the parameters a rename dropped and the values they had (a
    name the configs never had is left out: nothing of it was lost)."""
    dropped = sorted(name for name, new in rename.items() if not new)
    values = {n: sorted({str(c[n]) for c in configs if n in c}) for n in dropped}
    listed = "; ".join(f"{n} (values: {', '.join(v)})" for n, v in values.items() if v)
    if not listed:
        return ""
    return f"Dropped for a kernel without them: {listed}.\n"


def figures_origin(info: dict[str, Any], replay: dict[str, Any] | None) -> str:
    """Where the figures come from: the device a sweep ran on, or a replay's source (its
    table's workload where stamped) and the machine that replayed it.

    Example:
        >>> figures_origin({"device": {"name": "NVIDIA H100"}}, None)
        'on NVIDIA H100'
        >>> figures_origin({}, {"source": "replay of measurements on NVIDIA H200",
        ...                     "workload": "matmul", "replayed_on": {"name": "a CPU"}})
        'replay of measurements on NVIDIA H200 (a matmul table); replayed on a CPU'
    """
    if replay is None:
        return f"on {info.get('device', {}).get('name') or 'a device it did not record'}"
    stamp = f" (a {replay['workload']} table)" if replay.get("workload") else ""
    machine = replay.get("replayed_on", {}).get("name", "an unrecorded machine")
    return f"{replay['source']}{stamp}; replayed on {machine}"


def module_header(title: str, where: str, body: str) -> str:
    """The module's docstring (``title`` and ``where`` its figures come from,
    :func:`figures_origin`; ``body``: data, written safely) and its import."""
    headline = f"{title} {where}" if title else where
    doc = docstring_literal(f"Tuned by autotune {__version__}: {headline}.\n\n{body}")
    return f"{doc}\n\nimport triton\n\n"


def triton_config_source(
    configs: list[dict[str, Any]], comments: list[str], rename: dict[str, str] | None = None
) -> str:
    """Python source of a ``configs`` list of ``triton.Config`` for ``@triton.autotune``;
    ``rename`` maps meta-parameter names for a kernel that spells them otherwise; each comment
    is written on its config's line, made safe (:func:`safe_comment`)."""
    lines = []
    for config, comment in zip(configs, comments, strict=True):
        source = KernelConfig.from_flat(renamed(config, rename or {})).triton_source()
        lines.append(f"    {source},  # {safe_comment(comment)}")
    return "configs = [\n" + "\n".join(lines) + "\n]\n"
