"""When the command's process began, and its end without the interpreter's teardown.

``--time-budget`` counts from the process's start (:func:`process_started`), not from the
moment the CLI module is imported, so the interpreter's start and the imports before it are
inside the budget. A sweep's process ends at once when its command is done
(:func:`end_process`): the exit handlers run and the output is flushed, but the interpreter's
own teardown (freeing torch's, Optuna's and pandas's modules object by object: 0.7-1.2 s on
2 cores after a sweep) is skipped, so a command given 10 s ends within them.

Example:
    >>> import time
    >>> started = process_started()  # this process's start, or now in a long-lived one
    >>> started <= time.monotonic()
    True
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time


def process_started() -> float:
    """When this process started, as a :func:`time.monotonic` reading (to the kernel's clock
    tick, 10 ms); now where the system does not say (no ``/proc``), or where the process ran
    for longer than a start takes (:data:`MOST_START_S`) before asking."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as stat:
            start_ticks = int(stat.read().rpartition(b")")[2].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    # older than an interpreter's start and its imports take: no command's own process (the
    # CLI called from a notebook's or a service's), whose budget counts from now
    return now - age if 0 <= age < MOST_START_S else now


#: the longest a command's process may have run before the CLI module is imported for its
#: start to count in the budget
MOST_START_S = 60.0


def end_process(code: int) -> None:
    """End the process with ``code``: the exit handlers run (:mod:`atexit`: multiprocessing's
    children reaped, Ray's, a test's), stdout and stderr are flushed, then :func:`os._exit`.
    Where a thread other than a daemon still runs, the interpreter ends as usual
    (``SystemExit``), which waits for it.

    Raises:
        SystemExit: a non-daemon thread is alive (the usual end, which joins it).
    """
    if any(t.is_alive() and not t.daemon for t in threading.enumerate()
           if t is not threading.current_thread()):  # fmt: skip
        raise SystemExit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`autotune trials | head`)
            with contextlib.suppress(OSError, ValueError):
                stream.close()
    os._exit(code)
