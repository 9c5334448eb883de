"""Parameters of a search space and how each one asks Optuna for a value.

Example:
    >>> import optuna
    >>> p = Param(name="BLOCK_M", kind="pow2", low=16, high=256)
    >>> p.values()
    [16, 32, 64, 128, 256]
    >>> study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    >>> p.suggest(study.ask()) in p.values()
    True
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune.space.expr import Expression

KINDS = ("int", "float", "categorical", "pow2", "bool")


@dataclass
class Param:
    """One tunable.

    Attributes:
        name: full name, including the prefix of the space that included it.
        kind: "int", "float" (``log`` for log scale), "categorical", "pow2" (powers of two
            between ``low`` and ``high``, sampled as ordered categories) or "bool".
        step: an int's or a float's spacing from ``low``: a float with a step takes
            finitely many values, listed as Optuna's ``FloatDistribution`` draws them.
        condition: active only when this expression (over earlier parameters) holds.
        prefix: the include prefix; the condition sees names without it.
    """

    name: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    step: int | float | None = None
    log: bool = False
    choices: list[Any] = field(default_factory=list)
    condition: Expression | None = None
    prefix: str = ""

    @property
    def discrete(self) -> bool:
        """True when :meth:`values` lists every value: all but a float without a ``step``.

        Example:
            >>> x = Param("x", "float", low=0, high=1)
            >>> x.discrete, Param("x", "float", low=0, high=1, step=0.25).discrete
            (False, True)
        """
        return self.kind != "float" or self.step is not None

    def values(self) -> list[Any]:
        """Every value the parameter can take (for grids and tables); a float without a step
        has none.

        Example:
            >>> Param("x", "float", low=0, high=1, step=0.25).values()
            [0.0, 0.25, 0.5, 0.75, 1.0]
        """
        if self.kind == "bool":
            return list(self.choices) or [False, True]
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "pow2":
            lo, hi = int(math.log2(self.low)), int(math.log2(self.high))
            return [2**e for e in range(lo, hi + 1)]
        if self.kind == "int":
            return list(range(int(self.low), int(self.high) + 1, self.step or 1))
        if self.step is not None:  # as Optuna computes them: low + k * step, within high
            low, high, step = float(self.low), float(self.high), float(self.step)
            return [min(high, k * step + low) for k in range(self.count())]
        raise ValueError(f"float parameter {self.name!r} has no finite set of values")

    def count(self) -> int:
        """How many values :meth:`values` lists, without listing them (an int parameter may
        span billions).

        Example:
            >>> Param("n", "int", low=0, high=10**11, step=10).count()
            10000000001
        """
        if self.kind == "int":
            return (int(self.high) - int(self.low)) // (self.step or 1) + 1
        if self.kind == "pow2":
            return int(math.log2(self.high)) - int(math.log2(self.low)) + 1
        if self.kind == "float" and self.step is not None:  # in decimal, as Optuna counts
            span = decimal.Decimal(str(self.high)) - decimal.Decimal(str(self.low))
            return int(span // decimal.Decimal(str(self.step))) + 1
        return len(self.values())

    def contains(self, value: Any) -> bool:
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                return False
            if self.step is None:
                return self.low <= value <= self.high
            k = (value - self.low) / self.step  # Optuna's tolerance
            return self.low <= value <= self.high and abs(k - round(k)) < 1e-8
        if self.kind == "int":  # arithmetic: the list of a wide range would not fit in memory
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                return False
            if not float(value).is_integer():  # 3.0 (YAML, JSON) and numpy's ints are whole
                return False
            low, high, step = int(self.low), int(self.high), self.step or 1
            return low <= int(value) <= high and (int(value) - low) % step == 0
        return value in self.values()

    def suggest(self, trial: optuna.Trial) -> Any:
        """Ask ``trial`` for this parameter's value."""
        if self.kind == "float":
            return trial.suggest_float(self.name, self.low, self.high, log=self.log, step=self.step)
        if self.kind == "int":
            step = self.step or 1
            if self.log:
                return trial.suggest_int(self.name, int(self.low), int(self.high), log=True)
            return trial.suggest_int(self.name, int(self.low), int(self.high), step=step)
        # Tile and batch sizes are powers of two whose effect is far from smooth in their
        # value: as categories TPE models each one separately, which measured better than
        # treating them as ordered integers.
        return trial.suggest_categorical(self.name, self.values())

    def distribution(self) -> optuna.distributions.BaseDistribution:
        """The Optuna distribution that :meth:`suggest` draws from."""
        if self.kind == "float":
            return optuna.distributions.FloatDistribution(
                self.low, self.high, log=self.log, step=self.step
            )
        if self.kind == "int":
            if self.log:
                return optuna.distributions.IntDistribution(int(self.low), int(self.high), log=True)
            return optuna.distributions.IntDistribution(
                int(self.low), int(self.high), step=self.step or 1
            )
        return optuna.distributions.CategoricalDistribution(self.values())

    def local_name(self) -> str:
        return self.name[len(self.prefix) :]


@dataclass
class Constraint:
    """A static constraint; a config that violates one is never launched."""

    name: str
    expression: Expression
    prefix: str = ""
    where: str = ""  # "file.yaml: constraints[0]" for error messages

    def problem_read(self, problem: Mapping[str, Any]) -> str:
        """`` at K=16`` (the problem values it reads, for an error message), `` on this
        device`` where it reads the device, or '' (:func:`problem_read`).

        Example:
            >>> from autotune.space.expr import Expression
            >>> Constraint("fits", Expression("BLOCK_K <= K")).problem_read({"K": 16, "M": 1})
            ' at K=16'
        """
        return problem_read([self], problem)


def problem_read(constraints: list[Constraint], problem: Mapping[str, Any]) -> str:
    """`` at K=16, problem.M=1`` (the problem values the ``constraints`` read, by name or as
    ``problem.NAME``, for an error message), `` on this device`` where one reads the device,
    or ''.

    Example:
        >>> from autotune.space.expr import Expression
        >>> rules = [Constraint("m", Expression("BLOCK_M <= problem.M")),
        ...          Constraint("k", Expression("BLOCK_K <= K and device.smem > 0"))]
        >>> problem_read(rules, {"K": 16, "M": 1, "N": 8})
        ' at K=16, problem.M=1 on this device'
    """
    names: set[str] = set()
    attributes: set[str] = set()
    for constraint in constraints:  # a table's recorded rows are no Expression: names alone
        names |= set(constraint.expression.names)
        attributes |= set(getattr(constraint.expression, "attributes", ()))
    read = [f"{n}={problem[n]!r}" for n in sorted(names) if n in problem]
    dotted = sorted(a for a in attributes if a.startswith("problem."))
    read += [f"{a}={problem[a[8:]]!r}" for a in dotted if a[8:] in problem]
    text = f" at {', '.join(read)}" if read else ""
    return text + (" on this device" if "device" in names else "")
