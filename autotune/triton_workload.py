"""Which sweeps a triton export can hold: a kernel's. A sweep of a training step, a serving
engine or a server (or a replay of a table one of them recorded) has no ``triton.Config`` to
write, and is pointed at its own export targets.

Example:
    >>> other_targets("train-step").startswith("--to ")
    True
"""

from __future__ import annotations

from typing import Any

from autotune.triton_names import TritonExportError


def compiles(workload: str) -> bool | None:
    """Whether ``workload`` is a kernel's (its objective compiles one), or None for a workload
    this version does not know; a built-in one's is its registry entry's (no torch imported)."""
    from autotune.objectives import WORKLOADS, get_objective

    if workload in WORKLOADS:
        return WORKLOADS[workload].compiles
    try:
        return bool(get_objective(workload).compiles)
    except (KeyError, ImportError):
        return None


def workload_of_params(params: list[str]) -> str | None:
    """The workload a table of unstamped ``params`` was recorded by, as far as the names say:
    the first built-in workload whose space holds every one of them, where none whose space
    does is a kernel's; None where a kernel's space could hold them or none does (a user's own
    table: its configs as they are).

    Example:
        >>> workload_of_params(["micro_batch", "precision", "optimizer"])
        'train-step'
        >>> workload_of_params(["BLOCK_M", "num_warps"]) is None
        True
    """
    from autotune.objectives import WORKLOADS
    from autotune.space import SpaceError, load_space

    matches: list[tuple[str, bool]] = []
    for name, entry in WORKLOADS.items():  # the registry's spaces: no objective imported
        if not entry.space:  # the replay's, made from its table
            continue
        try:
            names = set(load_space(entry.space).names)
        except (OSError, SpaceError):
            continue
        if params and set(params) <= names:
            matches.append((name, entry.compiles))
    if not matches or any(kernel for _, kernel in matches):
        return None
    return matches[0][0]


def other_targets(workload: str) -> str:
    """The ``--to`` targets that export a sweep of ``workload`` that is not a kernel's.

    Example:
        >>> other_targets("serving")
        '--to vllm or sglang'
    """
    from autotune.serving_export import TARGETS as SERVING
    from autotune.train_export import TARGETS as TRAINING

    targets = {"train-step": TRAINING, "serving": SERVING, "server": SERVING}.get(workload)
    if not targets:
        return "see --to's other targets"
    return f"--to {', '.join(targets[:-1])} or {targets[-1]}"


def check_kernel_workload(
    study_name: str, info: dict[str, Any], replay: dict[str, Any] | None = None
) -> None:
    """A triton.Config holds a kernel's tunables: a sweep of a training step, a serving engine
    or a server has none (its own exports are --to hf ... and --to vllm, sglang), and neither
    has a replay of a table they recorded: its ``workload`` column (:func:`replay_info`) says
    so, else, in a table without one, parameters that only such a sweep has
    (:func:`workload_of_params`).

    Raises:
        TritonExportError: the sweep, or the replayed table, is not a kernel's.

    Example:
        >>> info = {"workload": "replay", "problem": {"params": ["max_num_seqs"]}}
        >>> check_kernel_workload("s", info, {"workload": "serving"})
        Traceback (most recent call last):
        ...
        autotune.triton_names.TritonExportError: study 's' replays a serving table ... sglang)
    """
    workload = str(info.get("workload"))
    what = f"is a {workload} sweep"
    if workload == "replay":
        replay = replay or {}
        params = [str(p) for p in info.get("problem", {}).get("params") or []]
        workload = replay.get("workload") or workload_of_params(params) or ""
        if not workload:
            return  # a table nothing says is not a kernel's: its configs as they are
        what = (f"replays a {workload} table (its workload column)" if replay.get("workload")
                else f"replays a table of {workload} parameters ({', '.join(params)})")  # fmt: skip
    if compiles(workload) is False:
        raise TritonExportError(
            f"study {study_name!r} {what}, not a kernel's: triton.Config has nothing of it to "
            f"hold ({other_targets(workload)})"
        )
