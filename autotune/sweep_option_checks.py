"""The checks of how a sweep searches and runs, made while it is set up (so also when the
tuning cache would answer): its trial count, ``--executor`` and its slots (``--workers``,
``--compile-ahead``, Ray's options), ``--sampler`` for this space and ``--warm-start``'s study.

Example:
    >>> check_run_options(trials=4, executor="local", workers=1, compile_ahead=None,
    ...                   ray_address=None, gpus_per_trial=None)
    >>> try:
    ...     check_run_options(trials=0, executor="local", workers=None, compile_ahead=None,
    ...                       ray_address=None, gpus_per_trial=None)
    ... except SetupError as exc:
    ...     print(exc)
    --trials: 0 must be positive
"""

from __future__ import annotations

import importlib.util
import math
import os
from typing import Any

from autotune.driver import EXECUTORS, SweepSettings
from autotune.in_memory import in_memory
from autotune.setup_error import SetupError
from autotune.space import Space
from autotune.storage import open_storage, storage_files


def check_run_options(
    *,
    trials: int | None,
    executor: str,
    workers: int | None,
    compile_ahead: int | None,
    ray_address: str | None,
    gpus_per_trial: float | None,
) -> None:
    """The trial count is positive; ``executor`` is known, its slots and compile processes fit
    this machine's cores, Ray's options go with ``--executor ray`` and Ray is installed.

    Raises:
        SetupError: naming the option and why.
    """
    if trials is not None and trials <= 0:
        raise SetupError(f"--trials: {trials} must be positive")
    if executor not in EXECUTORS:
        raise SetupError(f"--executor: {executor!r} is not one of {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        raise SetupError(f"--workers: {workers} must be at least 1")
    if compile_ahead is not None and compile_ahead < 0:
        raise SetupError(f"--compile-ahead: {compile_ahead} must be 0 (off) or more processes")
    cores = os.cpu_count() or 1
    if executor == "local" and workers is not None and workers > cores:
        # a slot is a worker process, started as a trial needs it: 100,000 slots were taken
        # without a word, and a sweep of as many trials would start as many processes
        raise SetupError(f"--workers: {workers} worker processes on {cores} CPU cores; at most "
                         f"{cores} with --executor local (each slot is a process that runs a "
                         "trial; --executor ray spreads trials over a cluster)")  # fmt: skip
    if compile_ahead is not None and compile_ahead > cores:
        raise SetupError(f"--compile-ahead: {compile_ahead} processes on {cores} CPU cores; at "
                         f"most {cores} (each imports torch and compiles on a core)")  # fmt: skip
    if executor != "ray" and (ray_address is not None or gpus_per_trial is not None):
        raise SetupError("--address and --gpus-per-trial apply to --executor ray only")
    if gpus_per_trial is not None and not (math.isfinite(gpus_per_trial) and gpus_per_trial >= 0):
        raise SetupError(f"--gpus-per-trial: {gpus_per_trial:g} must be a finite number, 0 or more")
    if executor == "ray" and importlib.util.find_spec("ray") is None:
        from autotune.executors.ray import INSTALL_HINT  # (it imports no Ray)

        raise SetupError(f"--executor ray needs Ray: {INSTALL_HINT}")


def check_ray_address(executor: str, ray_address: str | None) -> None:
    """``--address HOST:PORT`` of ``--executor ray`` takes a TCP connection and answers as a
    Ray GCS (gRPC) does: a socket's check, made before the workload, torch and Ray are
    imported (5 s on an idle machine), so an address where nothing listens is refused at once.
    Other forms (``auto``, ``ray://``) are left to Ray. The executor checks it again as it
    connects (:func:`autotune.executors.ray.ensure_ray`).

    Raises:
        SetupError: naming the address and why it cannot be reached.

    Example:
        >>> try:
        ...     check_ray_address("ray", "127.0.0.1:1")
        ... except SetupError as exc:
        ...     print(exc)
        --address 127.0.0.1:1: cannot reach a Ray cluster: Connection refused
    """
    if executor != "ray" or ray_address is None:
        return
    from autotune.executors.base import ExecutorError
    from autotune.executors.ray import check_reachable  # (it imports no Ray)

    try:
        check_reachable(ray_address, handshake=True)
    except ExecutorError as exc:
        raise SetupError(str(exc)) from None


def check_sampler(
    sampler: str,
    space: Space,
    objectives: dict[str, str],
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> str | None:
    """``--sampler`` names ``auto`` or a registered sampler that serves this space and these
    objectives, as the driver will build it: refused while the sweep is set up, so also when
    the tuning cache would answer. Returns what the sweep should say of how it serves the
    space (its ``note``), or None.

    Raises:
        SetupError: an unknown sampler, or one that cannot serve (naming why).

    Example:
        >>> from autotune.space import Param
        >>> floats = Space("f", [Param("x", "float", low=0.0, high=1.0)], source="f.yaml")
        >>> check_sampler("tpe", floats, {"v": "maximize"})
        >>> for name in ("annealing", "bo"):
        ...     try:
        ...         check_sampler(name, floats, {"v": "maximize"})
        ...     except SetupError as exc:
        ...         print(exc)
        --sampler: unknown sampler 'annealing'; choose one of auto, ...
        --sampler: bo: it needs a discrete space of at most ... configs; use tpe
    """
    from autotune.driver.samplers import (
        SamplerContext,
        SamplerError,
        resolve_sampler,
        sampler_note,
        spec_for,
    )

    try:
        spec = spec_for(resolve_sampler(sampler, space, len(objectives)))
    except SamplerError as exc:
        raise SetupError(f"--sampler: {exc}") from None
    ctx = SamplerContext(space=space, n_objectives=len(objectives), problem=dict(problem or {}),
                         device=dict(device or {}))  # fmt: skip
    why_not = spec.serves(ctx)
    if why_not is not None:
        raise SetupError(f"--sampler: {spec.name}: {why_not}")
    return sampler_note(sampler, space, len(objectives), problem, device)


def check_warm_start(settings: SweepSettings) -> None:
    """``--warm-start STUDY`` names a stored sweep of this workload and first objective,
    checked as the driver checks it, while the sweep is set up (so also when the tuning cache
    would answer); a storage that holds nothing yet (memory, a file not written) is refused
    without being created.

    Raises:
        StudyMismatch: no such study, or one of another workload or objective.

    Example:
        >>> from autotune.space import load_space
        >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
        ...     objectives={"score": "maximize"}, storage="memory", warm_start="nosuch")
        >>> try:
        ...     check_warm_start(settings)
        ... except ValueError as exc:
        ...     print(exc)
        --warm-start: no study named 'nosuch' in this storage; give auto, off (lower case) ...
    """
    if settings.warm_start in ("off", "auto"):
        return
    from autotune.driver.study_setup import StudyMismatch, named_source, no_such_source

    files = storage_files(settings.storage)
    if in_memory(settings.storage) or (files and not files[0].exists()):
        raise StudyMismatch(no_such_source(settings.warm_start))
    named_source(settings, open_storage(settings.storage))
