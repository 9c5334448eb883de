"""The one place that turns a sweep's settings into an executor.

Example:
    >>> from autotune.space import load_space
    >>> from autotune.driver.settings import SweepSettings
    >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
    ...     objectives={"score": "maximize"}, executor="inline", workers=3)
    >>> with make_executor(settings) as executor:
    ...     executor.name, executor.capacity
    ('inline', 3)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from autotune.device import visible_gpu_ids
from autotune.driver.pruning import DivergencePruner
from autotune.driver.settings import EXECUTORS, SweepSettings
from autotune.executors.base import Executor, ExecutorError


def default_gpus_per_trial(workload: str, device: dict[str, Any]) -> float:
    """1 for a workload that measures on a GPU; 0 on a CPU and for replay (it looks its
    figures up)."""
    from autotune.objectives import get_objective

    return 1.0 if get_objective(workload).measures and _on_gpu(device) else 0.0


def make_executor(settings: SweepSettings, workers: int | None = None) -> Executor:
    """The executor ``settings.executor`` names, with ``workers`` (default: the settings')
    slots."""
    s = settings
    return build_executor(
        s.executor,
        s.workload,
        s.problem,
        device=s.device,
        workers=s.workers if workers is None else workers,
        timeout_s=s.trial_timeout_s,
        ray_address=s.ray_address,
        gpus_per_trial=s.gpus_per_trial,
    )


@contextlib.contextmanager
def command_session(settings: SweepSettings) -> Iterator[float]:
    """What the executor keeps for a whole command (the sweep and its finish): a Ray for
    ``--executor ray`` (:func:`autotune.executors.ray.command_session`), nothing for the
    others. Yields the seconds its teardown at the end will take, for the time budget to hold
    back.

    Example:
        >>> from autotune.space import load_space
        >>> settings = SweepSettings(workload="faults", problem={}, space=load_space("faults"),
        ...     objectives={"score": "maximize"}, executor="inline")
        >>> with command_session(settings) as teardown_s:
        ...     teardown_s
        0.0
    """
    if settings.executor != "ray":
        yield 0.0
        return
    from autotune.executors.ray import command_session as ray_session

    with ray_session(settings.ray_address) as teardown_s:
        yield teardown_s


def build_executor(
    kind: str,
    workload: str,
    problem: dict[str, Any],
    *,
    device: dict[str, Any],
    workers: int | None = None,
    timeout_s: float = 300.0,
    ray_address: str | None = None,
    gpus_per_trial: float | None = None,
) -> Executor:
    """An executor of ``kind`` (one of :data:`EXECUTORS`) for ``workload``.

    Raises:
        ExecutorError: an unknown kind, or one that cannot start (missing Ray extra).
    """
    if workers is not None and workers < 1:
        raise ExecutorError(f"--workers: {workers} must be at least 1")
    if kind == "inline":
        from autotune.executors.inline import InlineExecutor

        return InlineExecutor(workload, problem, capacity=workers or 1, timeout_s=timeout_s)
    if kind == "local":
        from autotune.executors.local import LocalExecutor

        gpu_ids = visible_gpu_ids(int(device.get("count", 0))) if _on_gpu(device) else []
        return LocalExecutor(
            workload, problem, workers=workers, gpu_ids=gpu_ids, timeout_s=timeout_s
        )
    if kind == "ray":
        from autotune.executors.ray import RayExecutor

        if gpus_per_trial is None:
            gpus_per_trial = default_gpus_per_trial(workload, device)
        return RayExecutor(
            workload,
            problem,
            address=ray_address,
            gpus_per_trial=gpus_per_trial,
            workers=workers,
            timeout_s=timeout_s,
            prune_rule=DivergencePruner.diverged,
        )
    raise ExecutorError(f"--executor: {kind!r} is not one of {', '.join(EXECUTORS)}")


def _on_gpu(device: dict[str, Any]) -> bool:
    return device.get("type") == "cuda"
