"""Resolve a workload: its objective class, its problem (the defaults and ``--problem``'s
values, checked against them) and its search space; and build its objective on that problem.

Example:
    >>> cls, space, problem = resolve_workload("faults", None, {}, {"type": "cpu"})
    >>> space.names
    ['fault', 'score']
    >>> objective, default = built_objective("faults", cls, problem, {})
    >>> default is None or isinstance(default, dict)
    True
"""

from __future__ import annotations

from typing import Any

from autotune.objectives import Objective, get_objective
from autotune.objectives.external import WorkloadError, setup_call
from autotune.setup_error import SetupError
from autotune.space import Space, load_space
from autotune.space.feasibility import check_satisfiable
from autotune.typed_values import as_typed
from autotune.workload_checks import check_space_workload


def resolve_workload(
    workload: str,
    space_path: str | None,
    overrides: dict[str, Any],
    device: dict[str, Any],
    satisfiable: bool = True,
) -> tuple[type[Objective], Space, dict[str, Any]]:
    """The objective class, its search space and its problem (defaults + ``overrides``);
    with ``satisfiable``, the space checked to admit a config for that problem (a caller that
    builds the objective first, whose own check of the problem says more, checks it after)."""
    try:
        objective_cls = get_objective(workload)
    except KeyError as exc:
        raise SetupError(str(exc.args[0])) from None
    with setup_call(workload, objective_cls, "default_problem"):
        problem = objective_cls.default_problem(device)
    if not isinstance(problem, dict):
        raise WorkloadError(f"{workload}: {objective_cls.__name__}.default_problem returned "
                            f"{type(problem).__name__}, not a dict")  # fmt: skip
    closed = bool(problem) or not objective_cls.takes_problem  # else a plugin's: any key
    unknown = sorted(set(overrides) - set(problem)) if closed else []
    if unknown:
        known = f"known: {', '.join(problem)}" if problem else "it takes no problem values"
        raise SetupError(f"--problem: unknown key {unknown[0]!r} for {workload}; {known}")
    _check_value_kinds(workload, problem, overrides)
    problem.update(_as_defaults_kind(problem, overrides))
    try:
        with setup_call(workload, objective_cls, "resolve_problem", passing=(ValueError,)):
            problem = objective_cls.resolve_problem(problem)
    except WorkloadError:
        raise
    except ValueError as exc:
        raise SetupError(f"--problem: {as_typed(str(exc), overrides)}") from None
    unused = [key for key in overrides if key not in problem]
    if unused:  # e.g. rate=5 beside trace=FILE.jsonl, whose requests replace the Poisson keys
        raise SetupError(f"--problem: {unused[0]}={overrides[unused[0]]!r} does not apply to "
                         f"{workload} with the other values given; leave it out")  # fmt: skip
    space_name = space_path or getattr(objective_cls, "space", "")
    if not space_name:
        raise SetupError(f"{workload}: the objective names no space file; pass --space FILE.yaml")
    space = load_space(space_name)
    check_space_workload(space, workload, objective_cls)
    space.validate_names(problem)
    if satisfiable:
        check_satisfiable(space, problem, device)
    return objective_cls, space, problem


def built_objective(
    workload: str, objective_cls: type[Objective], problem: dict[str, Any], typed: dict[str, Any]
) -> tuple[Objective, Any]:
    """The objective of ``workload`` built on ``problem``, and its untuned default config (not
    checked yet: a dict or None); a problem value it refuses (ValueError, TypeError) is a
    ``--problem`` error naming the values as ``typed``.

    Raises:
        SetupError: the objective refused the problem.
        WorkloadError: the workload's own code failed otherwise.
    """
    refusals = (ValueError, TypeError)  # a problem value the objective cannot take
    try:
        with setup_call(workload, objective_cls, "__init__", passing=refusals):
            objective_obj = objective_cls(problem)
        with setup_call(workload, objective_cls, "default_config", passing=refusals):
            baseline = objective_obj.default_config()
    except WorkloadError:
        raise
    except refusals as exc:
        raise SetupError(f"--problem: {as_typed(str(exc), typed)}") from None
    return objective_obj, baseline


def _check_value_kinds(workload: str, defaults: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Refuse a ``--problem`` value of another kind than the workload's default: a word where
    a number belongs (``M=abc``), anything but true/false for a switch.

    Example:
        >>> _check_value_kinds("matmul", {"M": 64}, {"M": "abc"})
        Traceback (most recent call last):
        ...
        autotune.setup_error.SetupError: --problem: M='abc' is not a number (matmul's default: 64)
    """
    for key, value in overrides.items():
        default = defaults.get(key)
        if isinstance(default, bool) and not isinstance(value, bool):
            raise SetupError(f"--problem: {key}={value!r} is not true or false")
        numeric = isinstance(value, int | float) and not isinstance(value, bool)
        if isinstance(default, int | float) and not isinstance(default, bool) and not numeric:
            raise SetupError(
                f"--problem: {key}={value!r} is not a number ({workload}'s default: {default})"
            )
        whole = isinstance(default, int) and not isinstance(default, bool)
        if whole and isinstance(value, float) and not value.is_integer():
            raise SetupError(f"--problem: {key}={value!r} is not a whole number ({workload}'s "
                             f"default: {default})")  # fmt: skip


def _as_defaults_kind(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with a whole float where the default is an int made an int (``N=1e3``
    is N=1000, as the workload's shapes and the stored problem take it, not 1000.0).

    Example:
        >>> _as_defaults_kind({"N": 4, "eps": 1e-6}, {"N": 1000.0, "eps": 1.0})
        {'N': 1000, 'eps': 1.0}
    """
    whole = {k for k, v in defaults.items() if isinstance(v, int) and not isinstance(v, bool)}
    return {k: int(v) if k in whole and isinstance(v, float) else v for k, v in overrides.items()}
