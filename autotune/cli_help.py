"""How the ``autotune`` commands describe themselves in ``autotune --help``: each command's line
there is its docstring's first paragraph, its lines joined as one text (the renderer wraps it to
the terminal), never the docstring's own line breaks nor a sentence cut short.

Example:
    >>> summary('''Run a sweep. A --space of prefixed
    ...     includes is searched by group.
    ...
    ...     More detail.''')
    'Run a sweep. A --space of prefixed includes is searched by group.'
"""

from __future__ import annotations

import inspect

import typer


def summary(doc: str | None) -> str:
    """The first paragraph of the docstring ``doc`` on one line: its line breaks and
    indentation read as single spaces ('' for no docstring)."""
    first = inspect.cleandoc(doc or "").partition("\n\n")[0]
    return " ".join(first.split())


def summarize_commands(app: typer.Typer) -> None:
    """Give each command of ``app`` that has no short help of its own its docstring's
    :func:`summary`, the line ``autotune --help`` lists it by. Typer's listing otherwise keeps
    the docstring's line breaks (its rich layout), or Click's cuts the text at about 45
    characters with '...' (its plain one). Call it once every command is registered."""
    for info in app.registered_commands:
        if info.short_help is None:
            info.short_help = summary(info.help or inspect.getdoc(info.callback))
