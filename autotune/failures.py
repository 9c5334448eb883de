"""Trial outcomes: one status per trial, typed exceptions that produce them.

Every trial ends in exactly one :class:`TrialStatus` with a reason a person can read.
Objectives raise a :class:`TrialFailure` subclass (or any exception, which
:func:`classify` maps to the right one); the driver records the status and moves on.

Example:
    >>> classify(MemoryError("no room")).status
    <TrialStatus.OOM: 'oom'>
    >>> str(WrongResult("max rel error 0.3 > 0.01"))
    'max rel error 0.3 > 0.01'
"""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar


class TrialStatus(StrEnum):
    """The one state every trial ends in."""

    OK = "ok"
    INFEASIBLE = "infeasible"  # rejected before running (a static constraint)
    COMPILE_ERROR = "compile_error"
    OUT_OF_RESOURCES = "out_of_resources"  # e.g. too much shared memory for the kernel
    OOM = "oom"
    WRONG_RESULT = "wrong_result"
    DIVERGED = "diverged"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    INTERRUPTED = "interrupted"  # the sweep itself was stopped while the trial ran
    SLO_VIOLATED = "slo_violated"  # measured, but over a limit of --slo (e.g. ttft_p99_ms)

    @property
    def is_failure(self) -> bool:
        return self is not TrialStatus.OK


class TrialFailure(Exception):
    """Base of every failure an objective may raise; ``status`` says which."""

    status: ClassVar[TrialStatus] = TrialStatus.CRASHED


class Infeasible(TrialFailure):
    status = TrialStatus.INFEASIBLE


class CompileError(TrialFailure):
    status = TrialStatus.COMPILE_ERROR


class OutOfResources(TrialFailure):
    status = TrialStatus.OUT_OF_RESOURCES


class OutOfMemory(TrialFailure):
    status = TrialStatus.OOM


class SloViolated(TrialFailure):
    """Over a limit of ``--slo`` for certain before the measurement ended (stopped early)."""

    status = TrialStatus.SLO_VIOLATED


class WrongResult(TrialFailure):
    status = TrialStatus.WRONG_RESULT


class Diverged(TrialFailure):
    status = TrialStatus.DIVERGED


class TrialTimeout(TrialFailure):
    status = TrialStatus.TIMEOUT


class Crashed(TrialFailure):
    status = TrialStatus.CRASHED


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".strip().rstrip(":")


def classify(exc: BaseException) -> TrialFailure:
    """Map any exception raised by a trial to the typed failure it stands for.

    Recognises torch's out-of-memory errors, Triton's resource and compilation errors,
    and CUDA errors; anything else is a crash of the trial with the exception's first line.
    """
    if isinstance(exc, TrialFailure):
        return exc
    name = type(exc).__name__
    text = str(exc)
    lowered = text.lower()
    if isinstance(exc, MemoryError) or name == "OutOfMemoryError" or "out of memory" in lowered:
        return OutOfMemory(_first_line(exc))
    if "can't allocate memory" in lowered or "cannot allocate memory" in lowered:
        return OutOfMemory(_first_line(exc))
    if name in ("OutOfResources", "PTXASError") or "out of resource" in lowered:
        return OutOfResources(_first_line(exc))
    if name in ("CompilationError", "CompileTimeAssertionFailure", "BackendCompilerFailed"):
        return CompileError(_first_line(exc))
    return Crashed(_first_line(exc))


def first_line(exc: BaseException) -> str:
    """An exception's message as a one-line error shows it: its first line, or its type's
    name when it has none.

    Example:
        >>> first_line(ValueError("bad header\\n  at line 3")), first_line(KeyError())
        ('bad header', 'KeyError')
    """
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
