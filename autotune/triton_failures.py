"""Map what Triton raises while compiling or launching a config to the sweep's typed failures.

Example:
    >>> from triton.runtime.errors import OutOfResources as TritonOOR
    >>> compile_failure(TritonOOR(262144, 232448, "shared memory")).status.value
    'out_of_resources'
"""

from __future__ import annotations

from autotune.failures import CompileError, Crashed, TrialFailure, classify


def compile_failure(exc: BaseException) -> TrialFailure:
    """The typed failure of an exception raised while compiling a config.

    Like :func:`autotune.failures.classify`, but any Triton compilation error (subclasses
    included) becomes a ``CompileError`` carrying Triton's own message (``classify`` would keep
    only the first line, a source position), and an MLIR pass failure (a ``RuntimeError`` from
    Triton's backend) counts as a compile error rather than a crash.
    """
    if isinstance(exc, TrialFailure):
        return exc
    from triton.compiler.errors import CompilationError

    if isinstance(exc, CompilationError):
        message = (exc.error_message or str(exc).strip().splitlines()[-1]).strip()
        return CompileError(f"{type(exc).__name__}: {message}")
    failure = classify(exc)
    if isinstance(failure, Crashed) and _from_triton_compiler(exc):
        return CompileError(str(failure))
    return failure


def _from_triton_compiler(exc: BaseException) -> bool:
    if type(exc).__module__.startswith("triton"):
        return True
    text = str(exc)
    return "PassManager" in text or "MLIR" in text
