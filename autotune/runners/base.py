"""What a runner returns for one trial, and the interface every runner has.

Example:
    >>> from autotune.failures import TrialStatus
    >>> TrialResult(TrialStatus.TIMEOUT, "no result after 5.0 s").ok
    False
"""

from __future__ import annotations

import numbers
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.failures import Crashed, Diverged, TrialStatus, first_line
from autotune.measurement import Measurement

#: Called by the runner with each value an objective reports (step, value); returns True when
#: the trial should stop (the driver's pruner decided so).
PruneCheck = Callable[[int, float], bool]


def pruned(step: int, value: float, first: float | None) -> Diverged:
    """The failure of a trial the pruner stopped at ``step`` on ``value``, with the first value
    the trial reported (None: this one), which the blow-up rule measures it against: a loss of
    16.47 says divergence only beside the 6.246 it started from.

    Example:
        >>> str(pruned(1, 16.4709, 6.24579))
        'pruned at step 1: value 16.47, up from 6.246 at the first report'
        >>> str(pruned(0, float("nan"), None))
        'pruned at step 0: value nan'
    """
    since = f", up from {first:.4g} at the first report" if first is not None else ""
    return Diverged(f"pruned at step {step}: value {value:.4g}{since}")


def never_prune(step: int, value: float) -> bool:
    return False


def checked_measurement(result: object) -> Measurement:
    """What an objective's ``evaluate`` returned, once shown to be a :class:`Measurement`
    whose values are numbers (an objective written outside autotune may return a bare float).

    Raises:
        Crashed: naming what came back instead, so the trial fails and the sweep goes on.

    Example:
        >>> checked_measurement(2.5)
        Traceback (most recent call last):
        ...
        autotune.failures.Crashed: evaluate returned a float, not a Measurement
        >>> checked_measurement(Measurement(values={"v": 10**400}))
        Traceback (most recent call last):
        ...
        autotune.failures.Crashed: evaluate measured v = an int of 401 digits, too large for a float
    """
    if not isinstance(result, Measurement):
        raise Crashed(f"evaluate returned a {type(result).__name__}, not a Measurement")
    for name, value in result.values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):  # numpy's too
            raise Crashed(f"evaluate measured {name} = {value!r}, not a number")
        try:
            float(value)
        except OverflowError:  # an int past float's range (10**400): no figure to compare
            digits = len(str(abs(int(value))))
            raise Crashed(f"evaluate measured {name} = an int of {digits} digits, too large for "
                          "a float") from None  # fmt: skip
    return result


def close_objective(workload: str, objective: Any) -> None:
    """Call ``objective.close()``; one that raises (a user's, its trials told by then) is a
    one-line warning on stderr, not the end of the sweep or a traceback.

    Example:
        >>> import contextlib, io
        >>> class Leaky:
        ...     def close(self):
        ...         raise RuntimeError("still busy\\nsecond line")
        >>> said = io.StringIO()
        >>> with contextlib.redirect_stderr(said):
        ...     close_objective("mine.py", Leaky())
        >>> said.getvalue()
        'warning: mine.py: Leaky.close raised RuntimeError: still busy\\n'
    """
    try:
        objective.close()
    except Exception as exc:  # noqa: BLE001 - whatever a user's close raises
        name = type(objective).__name__
        print(f"warning: {workload}: {name}.close raised {type(exc).__name__}: "
              f"{first_line(exc)}", file=sys.stderr)  # fmt: skip


@dataclass
class TrialResult:
    """How one trial ended: a status, a readable reason, and the measurement when ok."""

    status: TrialStatus
    reason: str = ""
    measurement: Measurement | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is TrialStatus.OK


class Runner(ABC):
    """Where trials run. ``evaluate`` never raises for a failing trial: it returns the failure."""

    @abstractmethod
    def evaluate(
        self, config: dict[str, Any], should_prune: PruneCheck = never_prune
    ) -> TrialResult:
        """Run one trial of the runner's workload with ``config``."""

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Stop whatever the runner started."""

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
