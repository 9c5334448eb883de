"""The checks of a workload against its search space: the space is one for this workload, its
parameters are the workload's config keys, the untuned default fits in it, the objective's
own checks of the space, ``--slo`` and the trial timeout; and a note for a kernel that names
no outputs to poison.

Example:
    >>> from autotune.space import Param
    >>> space = Space("s", [Param("BLOCK", "int", low=1, high=4)], source="s.yaml")
    >>> check_config_keys(space, "mine", ("BLOCK", "warps"))
    >>> baseline_in_space({"BLOCK": 8}, space)[1]
    ['the untuned default (BLOCK=8) lies outside s.yaml: no default is measured first']
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from autotune.objectives import Objective
from autotune.objectives.external import WorkloadError, setup_call
from autotune.setup_error import SetupError
from autotune.space import Space
from autotune.typed_values import as_typed


def check_config_keys(space: Space, workload: str, known: tuple[str, ...] | None) -> None:
    """Every parameter of ``space`` is a knob of ``workload`` (``known``; None: any name).

    Raises:
        SetupError: naming the space file and the first parameter the workload does not have.
    """
    if known is None:
        return
    unknown = [name for name in space.names if name not in known]
    if unknown:
        raise SetupError(
            f"{space.source}: parameters.{unknown[0]}: {workload} has no such config key; "
            f"its keys: {', '.join(known)}"
        )


def unpoisoned_note(workload: str, objective_cls: type[Any]) -> list[str]:
    """A note for a kernel objective that names no ``outputs``: nothing is poisoned before its
    run, so a kernel that leaves its output unwritten passes the correctness check on the
    buffer's old contents (``outputs`` is optional, as ``footprint_bytes`` is).

    Example:
        >>> from autotune.objectives.kernel import KernelObjective
        >>> class Mine(KernelObjective):
        ...     pass
        >>> print(*unpoisoned_note("mine.py", Mine))  # doctest: +NORMALIZE_WHITESPACE
        mine.py: Mine.outputs is not set: no output is poisoned (NaN) before the kernel runs,
        so one it leaves unwritten can pass the correctness check; name the tensors it writes
    """
    # a subclass of KernelObjective imported its module (and torch with it); where nothing
    # did, the workload is none, and asking costs no import of torch (about 1.5 s of CPU)
    kernel = sys.modules.get("autotune.objectives.kernel")
    if kernel is None or not issubclass(objective_cls, kernel.KernelObjective):
        return []
    if objective_cls.outputs:  # its outputs are poisoned before each run
        return []
    return [
        f"{workload}: {objective_cls.__name__}.outputs is not set: no output is poisoned (NaN) "
        "before the kernel runs, so one it leaves unwritten can pass the correctness check; "
        "name the tensors it writes"
    ]


def check_space_workload(space: Space, workload: str, objective_cls: type[Any]) -> None:
    """A space file that names a workload (its ``workload:`` key) is one for the workload
    tuned: ``workload`` as given, its objective's ``name``, or (a workload file) that file,
    named relative to the space file's folder. A space that names none (a user's own space
    for a workload file, say) serves any; a replay reads no workload's space this way (it
    takes a space of any workload: :mod:`autotune.replay_setup`).

    Example:
        >>> from autotune.space import Param
        >>> from autotune.objectives.rmsnorm import OBJECTIVE as RMSNorm
        >>> rms = Space("r", [Param("x", "int", low=1, high=4)], source="rmsnorm.yaml",
        ...             workload="rmsnorm")
        >>> check_space_workload(rms, "rmsnorm", RMSNorm)
        >>> try:
        ...     check_space_workload(rms, "./sm.py", type("S", (), {"name": "softmax"}))
        ... except SetupError as exc:
        ...     print(exc)  # doctest: +NORMALIZE_WHITESPACE
        rmsnorm.yaml: a space for workload 'rmsnorm', not for softmax (./sm.py); pass a space
        of softmax's parameters
    """
    named = space.workload
    if named is None or named in (workload, getattr(objective_cls, "name", None)):
        return
    if workload.endswith(".py") and named.endswith(".py"):
        folder = Path(space.source).resolve().parent
        if (folder / named).resolve() == Path(workload).resolve():
            return
    tuned = getattr(objective_cls, "name", None) or workload
    also = f" ({workload})" if tuned != workload else ""
    raise SetupError(f"{space.source}: a space for workload {named!r}, not for {tuned}{also}; "
                     f"pass a space of {tuned}'s parameters")  # fmt: skip


def baseline_in_space(
    baseline: dict[str, Any] | None,
    space: Space,
    problem: dict[str, Any] | None = None,
    device: dict[str, Any] | None = None,
) -> tuple[dict[str, Any] | None, list[str]]:
    """The untuned default, to measure first, if ``space`` can hold it, and a note if not: a
    space narrowed past the default's value (micro_batch 1 or 2 where the default is 8), or one
    with a parameter the default leaves out (that trial 0 would sample, so it would be no
    default), has no trial 0, rather than fail its first trial or mislabel it. A parameter
    whose condition the default leaves off (``when``, read with ``problem`` and ``device``)
    needs no value; the default's keys that are not parameters run untuned.

    Example:
        >>> from autotune.space import Param
        >>> narrow = Space("n", [Param("mb", "categorical", choices=[1, 2])], source="n.yaml")
        >>> baseline_in_space({"mb": 8}, narrow)[1]
        ['the untuned default (mb=8) lies outside n.yaml: no default is measured first']
        >>> two = Space("t", [Param("x", "int", low=1, high=4), Param("y", "int", low=1, high=4)],
        ...             source="t.yaml")
        >>> baseline_in_space({"x": 1}, two)[1]
        ['the untuned default sets no y (a parameter of t.yaml): no default is measured first']
        >>> baseline_in_space({"x": 1, "y": 2, "lr": 0.1}, two)
        ({'x': 1, 'y': 2, 'lr': 0.1}, [])
        >>> from autotune.space import Constraint, Expression
        >>> above = Space("a", two.params, [Constraint("above", Expression("x >= 2"))],
        ...               source="a.yaml")
        >>> baseline_in_space({"x": 1, "y": 2}, above)[1]
        ["the untuned default breaks a.yaml's constraint above: no default is measured first"]
    """
    if not baseline:
        return baseline, []
    outside = [p for p in space.params if p.name in baseline and not p.contains(baseline[p.name])]
    if outside:
        name = outside[0].name
        return None, [
            f"the untuned default ({name}={baseline[name]!r}) lies outside {space.source}: no "
            "default is measured first"
        ]
    values: dict[str, Any] = {}  # the default's values of the parameters active so far
    for param in space.params:
        if not space.is_active(param, values, problem, device):
            continue
        if param.name not in baseline:
            return None, [
                f"the untuned default sets no {param.name} (a parameter of {space.source}): no "
                "default is measured first"
            ]
        values[param.name] = baseline[param.name]
    broken = space.violations(values, problem or {}, device or {})
    if broken:  # the sweep would reject it unlaunched: no trial 0, no baseline of the finish
        return None, [
            f"the untuned default breaks {space.source}'s constraint {broken[0]}: no default is "
            "measured first"
        ]
    return baseline, []


def check_objective_hooks(
    objective_obj: Objective,
    objective_cls: type[Objective],
    workload: str,
    space_obj: Space,
    slo: dict[str, float] | None,
    timeout_s: float,
    typed: dict[str, Any],
) -> None:
    """The objective's optional checks against the space (a server's template;
    ``check_space_values``: the values the space gives each knob), the SLO (a trace) and the
    trial timeout (a trace replayed in real time) (``check_space``: each parameter by its
    name, whose values a server's template is test-formatted with); a refusal names the
    ``--problem`` values as ``typed``.

    Raises:
        SetupError: a check refused (naming the space file or the option it came of).
        WorkloadError: the workload's own code failed otherwise.
    """
    params = {param.name: param for param in space_obj.params}
    for hook, given, option in (("check_space_values", params, space_obj.source),
                                ("check_space", params, "--problem"),
                                ("check_slo", dict(slo or {}), "--slo"),
                                ("check_trial_timeout", timeout_s, "--problem")):  # fmt: skip
        check = getattr(objective_obj, hook, None)
        if check is None:
            continue
        try:
            with setup_call(workload, objective_cls, hook, passing=(ValueError,)):
                check(given)
        except WorkloadError:
            raise
        except ValueError as exc:
            raise SetupError(f"{option}: {as_typed(str(exc), typed)}") from None
