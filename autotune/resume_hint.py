"""The closing line of an interrupted ``autotune tune`` that named its own study (no
``--study`` given): the study's name and the command that resumes it, the command as typed
with ``--study NAME`` added. A search by group's is its groups' common name, ``NAME`` of
``NAME.<prefix>``, which the same command resumes whole.

Example:
    >>> print(resume_line("autotune tune faults --trials 20", "faults-20261206"))
    resume study faults-20261206: autotune tune faults --trials 20 --study faults-20261206
"""

from __future__ import annotations

import shlex

from autotune.cli_errors import err
from autotune.in_memory import in_memory


def resume_command(command: str, study: str) -> str:
    """``command`` (a command line as stored, shell-quoted) with ``--study study`` added
    before a ``--`` that ends its options, else at its end.

    Example:
        >>> resume_command("autotune tune ./w.py -- x", "my run")
        "autotune tune ./w.py --study 'my run' -- x"
        >>> resume_command("", "s")
        'autotune tune --study s'
    """
    args = shlex.split(command) if command else ["autotune", "tune"]
    at = args.index("--") if "--" in args else len(args)
    return shlex.join([*args[:at], "--study", study, *args[at:]])


def resume_line(command: str, study: str, group: bool = False) -> str:
    """What an interrupted run that named ``study`` itself says last (``group``: the name
    of a search by group's studies)."""
    what = f"the studies {study}.*" if group else f"study {study}"
    return f"resume {what}: {resume_command(command, study)}"


def say_resume(command: str, study: str, storage: str, group: bool = False) -> None:
    """Print :func:`resume_line`, unless ``storage`` keeps nothing (memory)."""
    if in_memory(storage):
        return
    err.print(resume_line(command, study, group), highlight=False, markup=False, soft_wrap=True)
