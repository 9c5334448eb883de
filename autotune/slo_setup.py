"""The checks of ``--slo``: which figures a workload lets a limit cap (an upper bound), the
problem keys a limit also sets, and the limit a resumed sweep keeps.

Example:
    >>> with_slo_limits("serving", {"rate": 4}, {"ttft_p99_ms": 1000.0})
    {'rate': 4, 'slo_ttft_ms': 1000.0, 'stop_ttft_p99_ms': 1000.0}
"""

from __future__ import annotations

from typing import Any

from autotune.objectives import WORKLOADS, Objective, get_objective
from autotune.objectives.external import setup_call
from autotune.setup_error import SetupError


def with_slo_limits(
    workload: str, overrides: dict[str, Any], slo: dict[str, float]
) -> dict[str, Any]:
    """``overrides`` plus the workload's problem keys that take a limit of ``slo``
    (``slo_problem_keys``) where ``overrides`` does not set them: a serving sweep under
    ``--slo ttft_p99_ms=1000`` counts in goodput the requests whose TTFT is within 1000 ms, not
    the problem's default 500, and stops a trial once its TTFT p99 is certain to pass 1000.

    Example:
        >>> with_slo_limits("serving", {"rate": 4}, {"ttft_p99_ms": 1000.0})
        {'rate': 4, 'slo_ttft_ms': 1000.0, 'stop_ttft_p99_ms': 1000.0}
        >>> with_slo_limits("serving", {"slo_ttft_ms": 300}, {"ttft_p99_ms": 1000.0})
        {'slo_ttft_ms': 300, 'stop_ttft_p99_ms': 1000.0}
        >>> with_slo_limits("matmul", {}, {"ttft_p99_ms": 1000.0})
        {}
    """
    try:
        keys = get_objective(workload).slo_problem_keys
    except KeyError:  # an unknown workload: resolve_workload says so
        return overrides
    limits = {key: limit for metric, limit in slo.items() for key in keys.get(metric, ())
              if key not in overrides}  # fmt: skip
    return {**overrides, **limits}


def resumed_slo(
    study: str | None, stored: dict[str, Any], slo: dict[str, float] | None
) -> dict[str, float] | None:
    """The SLO a resumed sweep runs under: the stored one (its trials were judged by it);
    another one is refused, as another problem is.

    Example:
        >>> resumed_slo("s", {"slo": {"ttft_p99_ms": 500.0}}, None)
        {'ttft_p99_ms': 500.0}
        >>> try:
        ...     resumed_slo("s", {"slo": {"ttft_p99_ms": 500.0}}, {"ttft_p99_ms": 1.0})
        ... except SetupError as exc:
        ...     print(exc)
        --slo: study 's' holds a sweep under ttft_p99_ms=500; it cannot resume under ...
    """
    held = stored.get("slo")
    if not isinstance(held, dict):  # stored before the SLO was: as given
        return slo
    if slo and slo != held:
        shown = [",".join(f"{k}={v:g}" for k, v in x.items()) or "no --slo" for x in (held, slo)]
        raise SetupError(f"--slo: study {study!r} holds a sweep under {shown[0]}; it cannot "
                         f"resume under {shown[1]} (start another --study)")  # fmt: skip
    return held


def check_slo_metrics(workload: str, slo: dict[str, float]) -> None:
    """Every ``--slo`` metric is a figure ``workload`` reports and keeps low (where it says
    which): a limit is an upper bound.

    Raises:
        SetupError: naming the first metric the workload cannot cap.

    Example:
        >>> try:
        ...     check_slo_metrics("matmul", {"ttft_p99_ms": 500.0})
        ... except SetupError as exc:
        ...     print(exc)
        --slo: matmul does not measure 'ttft_p99_ms'; a limit (an upper bound) may cap ms, ...
    """
    objective_cls = get_objective(workload)
    with setup_call(workload, objective_cls, "slo_metrics"):
        known = objective_cls.slo_metrics()
    if known is None and workload not in WORKLOADS:  # a user's: what its directions declare
        check_declared_slo(workload, objective_cls, slo)
        return
    if known is None:  # a workload that does not say what it reports: refuse only a maximum
        maximized = [name for name in slo if objective_cls.directions.get(name) == "maximize"]
        if maximized:
            raise SetupError(f"--slo: {workload} maximizes {maximized[0]!r}, and a limit is an "
                             "upper bound")  # fmt: skip
        return
    for name in slo:
        if name in known:
            continue
        capped = ", ".join(known)
        why = getattr(objective_cls, "not_slo", {}).get(name)
        if why is not None:  # a figure it reports, that no --slo may limit
            raise SetupError(f"--slo: {workload}'s {name!r} {why}; a --slo limit may cap "
                             f"{capped}")  # fmt: skip
        if objective_cls.directions.get(name) == "maximize":
            raise SetupError(f"--slo: {workload} maximizes {name!r}, and a limit is an upper "
                             f"bound; it may cap {capped}")  # fmt: skip
        raise SetupError(
            f"--slo: {workload} does not measure {name!r}; a limit (an upper bound) may cap "
            f"{capped}"
        )


def check_declared_slo(
    workload: str, objective_cls: type[Objective], slo: dict[str, float]
) -> None:
    """The ``--slo`` check of a workload file or plugin whose class names no
    :meth:`~autotune.objectives.base.Objective.slo_metrics`: the figures it declares are its
    ``directions``, and a limit may cap one it minimizes; another name would fail every trial
    as over a limit it never measured.

    Raises:
        SetupError: naming the first metric it maximizes or does not declare.

    Example:
        >>> class Mine(Objective):
        ...     directions = {"score": "maximize", "ms": "minimize"}
        ...     def evaluate(self, config, report=None): ...
        >>> check_declared_slo("mine.py", Mine, {"ms": 5.0})  # declared, kept low: fine
        >>> try:
        ...     check_declared_slo("mine.py", Mine, {"bogus": 1.0})
        ... except SetupError as exc:
        ...     print(exc)
        --slo: mine.py does not declare 'bogus' (Mine.directions names score, ms); a ...
    """
    directions = objective_cls.directions
    for name in slo:
        if directions.get(name) == "maximize":
            raise SetupError(f"--slo: {workload} maximizes {name!r}, and a limit is an upper "
                             "bound")  # fmt: skip
        if name not in directions:
            raise SetupError(
                f"--slo: {workload} does not declare {name!r} ({objective_cls.__name__}"
                f".directions names {', '.join(directions)}); a classmethod slo_metrics() "
                "names the further figures it reports that a limit may cap"
            )
