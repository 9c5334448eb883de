"""When a server sweep stops early: a server that cannot start for any config.

A command whose program exits at once (``/bin/false``, a model path that does not exist, a
flag the server does not know) made every trial a ``crashed`` one, a server start each,
trial after trial for the whole budget. The rule (:func:`never_starts`) stops the sweep only
where its first :data:`STARTUP_PROBES` trials, which (in a new study) are the untuned
default's and the first configs the sampler drew, each exited before it answered its health
check with the same exit code (or could not be started, for the same reason) and no trial of
the study ever served. A sweep where only some configs crash (out of memory at a large
``max_num_seqs``, a flag value the server refuses) is never stopped by it: one of those
first trials served or failed another way, or, once they are past, the rule no longer looks:
it reads only the first :data:`STARTUP_PROBES` trials, never a later run of crashes.

Example:
    >>> crash = ("crashed", "the server exited with code 1 before it was healthy: (it printed "
    ...          "nothing)")
    >>> print(never_starts("false --port {port}", [crash] * 4))
    the server never started: the first 4 trials of this run each exited with code 1 before it was healthy: (it printed nothing); command='false --port {port}' failed alike for each config tried: fix it and run again
    >>> never_starts("false --port {port}", [crash] * 3 + [("oom", "out of memory")]) is None
    True
    >>> never_starts("false --port {port}", [crash] * 4, served_before=True) is None
    True
    >>> other = ("crashed", crash[1].replace("code 1", "code 2"))
    >>> never_starts("false --port {port}", [crash] * 3 + [other]) is None
    True
"""  # noqa: E501

from __future__ import annotations

import re
from collections.abc import Sequence

#: trials at a run's start that must all fail to start alike before the sweep stops
STARTUP_PROBES = 4

_EXITED = re.compile(r"the server exited with code (-?\d+) before it was healthy: ")
_UNSTARTABLE = "the server command cannot start: "


def _startup_failure(status: str, reason: str) -> str | None:
    """What the trial's failure says of the start, the same for every config that failed
    alike (``exited with code 1``), or None for any other outcome."""
    if status != "crashed":
        return None
    exited = _EXITED.match(reason)
    if exited is not None:
        return f"exited with code {exited.group(1)}"
    if reason.startswith(_UNSTARTABLE):
        return reason
    return None


def never_starts(
    command: str, outcomes: Sequence[tuple[str, str]], served_before: bool = False
) -> str | None:
    """The line that stops the sweep, or None to go on (see the module docstring).

    ``outcomes`` are the run's launched trials as they were told, ``(status, reason)``, in
    order; ``served_before``: a trial of the study served (an earlier run's), so some config
    starts.
    """
    if served_before or len(outcomes) < STARTUP_PROBES:
        return None
    first = outcomes[:STARTUP_PROBES]
    kinds = {_startup_failure(status, reason) for status, reason in first}
    if len(kinds) != 1 or None in kinds:
        return None
    reason = first[-1][1]
    return (f"the server never started: the first {STARTUP_PROBES} trials of this run each "
            f"{reason.removeprefix('the server ')}; "
            f"command={command!r} failed alike for each config tried: fix it and run "
            "again")  # fmt: skip
