"""A child process in a process group of its own, ended with the block that runs it: what the
export tests that launch DeepSpeed or accelerate ranks use, so that no rank outlives its test.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator


@contextlib.contextmanager
def own_group(command: list[str], **options) -> Iterator[subprocess.Popen]:
    """``subprocess.Popen(command, **options)`` in a session of its own, whose whole process
    group is ended if it still runs as the block leaves, however it leaves (:func:`end_group`).

    Example:
        with own_group([sys.executable, "-c", "print(1)"], stdout=subprocess.PIPE) as child:
            out, _ = child.communicate(timeout=60)
    """
    with subprocess.Popen(command, start_new_session=True, **options) as process:
        try:
            yield process
        finally:
            end_group(process)


def end_group(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """End the process group ``process`` leads, unless it ended and was reaped already: SIGINT
    first, so that a JIT build in it stops and releases torch's lock file (its ``finally``),
    then SIGKILL to what is left after ``grace_s``. The leader is reaped last, so that the
    group's id is still its own when signalled."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    deadline = time.monotonic() + grace_s
    exited = os.WEXITED | os.WNOHANG | os.WNOWAIT  # a look that leaves the leader unreaped
    while os.waitid(os.P_PID, process.pid, exited) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
