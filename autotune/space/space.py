"""A search space: parameters in order, their conditions, and static constraints.

Example:
    >>> from autotune.space.params import Param
    >>> space = Space("demo", [Param("micro_batch", "pow2", low=1, high=8)],
    ...               constraints_from={"divides": "global_batch % micro_batch == 0"})
    >>> space.violations({"micro_batch": 4}, problem={"global_batch": 12})
    []
    >>> space.violations({"micro_batch": 8}, problem={"global_batch": 12})
    ['divides']
"""

from __future__ import annotations

import math
import random
import reprlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from autotune.space.expr import Expression, ExpressionError, UndefinedValue
from autotune.space.params import Constraint, Param

#: values tried by :meth:`Space.nearest` before it gives up
NEAREST_TRIES = 20_000
_INACTIVE = object()  # a parameter inactive where :meth:`Space.nearest` has reached
_DONE = object()  # a parameter's values all tried


def _nearest_first(values: Sequence[Any], preferred: Any, rng: random.Random) -> list[Any]:
    """``values`` in the order :meth:`Space.nearest` tries them: ``preferred`` first, then the
    others by their distance from it in ``values`` (ties at random); all at random where
    ``preferred`` is not among them.

    Example:
        >>> order = _nearest_first([1, 2, 3, 4, 5], 2, random.Random(0))
        >>> order[0], sorted(order[1:3]), order[3:]
        (2, [1, 3], [4, 5])
        >>> sorted(_nearest_first([1, 2, 3], None, random.Random(0)))
        [1, 2, 3]
    """
    at = next((i for i, v in enumerate(values) if v == preferred and type(v) is type(preferred)),
              None)  # fmt: skip
    if at is None:
        return rng.sample(list(values), len(values))
    keys = {i: (abs(i - at), rng.random()) for i in range(len(values))}
    return [values[i] for i in sorted(keys, key=keys.__getitem__)]


class SpaceError(ValueError):
    """A search space that cannot be used; the message names the file and the key, on one
    line (a key or value holding line breaks shows them escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


def shown(value: Any) -> str:
    """A value of a space file as a message names it: as YAML writes it where Python's ``repr``
    reads otherwise (``null``, not ``None``), and a huge integer by its length, not its
    thousand digits (past 4300 of them, Python will not even write it).

    Example:
        >>> shown(None), shown("x"), shown(0.5), shown(2**53 + 1)
        ('null', "'x'", '0.5', '9007199254740993')
        >>> shown(10**400)
        'an integer of about 401 digits'
    """
    if value is None:
        return "null"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**20:
        return f"an integer of about {int(math.log10(abs(value))) + 1} digits"
    return repr(value)


def one_line(text: str) -> str:
    """``text`` with its line breaks escaped, so that it prints as one line.

    Example:
        >>> print(one_line("two" + chr(10) + "lines"))
        two\\nlines
    """
    return text.replace("\r", "\\r").replace("\n", "\\n")


@dataclass
class Space:
    """An ordered set of parameters plus static constraints.

    Parameters are suggested in order, so a parameter's condition may read any parameter
    before it. Constraints see the parameters, the problem (``M``, ``global_batch`` or
    ``problem.M``) and the device (``device.max_shared_memory``).
    """

    name: str
    params: list[Param]
    constraints: list[Constraint] = field(default_factory=list)
    source: str = "<memory>"
    constraints_from: dict[str, str] | None = None
    #: at most this many configs pass the constraints, where that is known to be fewer than
    #: the product of the parameters' values (a replay table's rows): bounds :meth:`grid_size`
    max_configs: int | None = None
    #: the files its includes were read from (each once, in the order read; the file of
    #: ``source`` itself is not among them): what else its parameters depend on
    includes: tuple[str, ...] = ()
    #: the workload the space file says it is for (its ``workload:`` key; None where it names
    #: none): a sweep of another workload refuses it (:func:`autotune.workload_checks.
    #: check_space_workload`); a replay takes a space of any workload
    workload: str | None = None

    def __post_init__(self) -> None:
        if self.constraints_from:
            self.constraints += [
                Constraint(name, Expression(expr), where=f"{self.source}: constraints.{name}")
                for name, expr in self.constraints_from.items()
            ]
            self.constraints_from = None
        self._by_name = {p.name: p for p in self.params}

    def __len__(self) -> int:
        return len(self.params)

    def __getitem__(self, name: str) -> Param:
        return self._by_name[name]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.params]

    # -- evaluation environments ---------------------------------------------------------
    @staticmethod
    def _env(
        values: Mapping[str, Any],
        prefix: str,
        problem: Mapping[str, Any],
        device: Mapping[str, Any],
    ) -> dict[str, Any]:
        env: dict[str, Any] = dict(problem)
        if prefix:
            env.update({k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)})
        else:
            env.update(values)
        # read-only inside an expression (attribute reads), so not copied
        env["problem"] = problem
        env["device"] = device
        return env

    def is_active(
        self,
        param: Param,
        values: Mapping[str, Any],
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
    ) -> bool:
        if param.condition is None:
            return True
        env = self._env(values, param.prefix, problem or {}, device or {})
        if not param.condition.names <= set(env):
            return False  # its condition reads a parameter that is itself inactive
        try:
            return bool(param.condition.evaluate(env))
        except ExpressionError as exc:
            raise SpaceError(f"{self.source}: parameters.{param.name}.when: {exc}") from None

    def sample(
        self,
        trial: optuna.Trial,
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Suggest a value for every active parameter, in order."""
        values: dict[str, Any] = {}
        for param in self.params:
            if self.is_active(param, values, problem, device):
                values[param.name] = param.suggest(trial)
        return values

    def violations(
        self,
        values: Mapping[str, Any],
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
    ) -> list[str]:
        """Names of the constraints ``values`` breaks; constraints over inactive params skip."""
        return self._broken(self.constraints, values, problem or {}, device or {})

    def check_defined(
        self,
        constraint: Constraint,
        values: Mapping[str, Any],
        problem: Mapping[str, Any],
        device: Mapping[str, Any],
    ) -> None:
        """Raise :class:`SpaceError` naming ``constraint``'s failure where it has no value at
        ``values`` (``log2(M)`` at M=0): for a constraint that admits no config, that failure,
        not "admits no config", is what the user must fix."""
        self._broken([constraint], values, problem, device, strict=True)

    def _broken(
        self,
        constraints: list[Constraint],
        values: Mapping[str, Any],
        problem: Mapping[str, Any],
        device: Mapping[str, Any],
        strict: bool = False,
    ) -> list[str]:
        """The names of ``constraints`` that ``values`` breaks. One that is undefined there
        (:class:`~autotune.space.expr.UndefinedValue`: ``x / (y - 2)`` at y=2) is broken, unless
        ``strict``: then, as any other failure to evaluate, it raises :class:`SpaceError`."""
        broken = []
        envs: dict[str, dict[str, Any]] = {}  # one environment a prefix
        for constraint in constraints:
            env = envs.get(constraint.prefix)
            if env is None:
                env = envs[constraint.prefix] = self._env(values, constraint.prefix, problem,
                                                          device)  # fmt: skip
            if not constraint.expression.names <= env.keys():
                continue
            try:
                ok = constraint.expression.evaluate(env)
            except UndefinedValue as exc:
                if strict:
                    raise SpaceError(f"{constraint.where}: {exc}{constraint.problem_read(problem)}"
                                     ) from None  # fmt: skip
                ok = False  # that config only: the sweep goes on without it
            except ExpressionError as exc:  # name the problem values it read: M=0, say
                raise SpaceError(f"{constraint.where}: {exc}{constraint.problem_read(problem)}"
                                 ) from None  # fmt: skip
            if not ok:
                broken.append(constraint.name)
        return broken

    def _checked_after(self) -> list[list[Constraint]]:
        """Each constraint under the last parameter it reads (index -1: it reads none): once
        that parameter has its value, the constraint's verdict is final, as later parameters
        cannot change what it reads. Used by :meth:`grid` to cut whole branches early."""
        index = {p.name: i for i, p in enumerate(self.params)}
        after: list[list[Constraint]] = [[] for _ in range(len(self.params) + 1)]
        for constraint in self.constraints:
            reads = [index[constraint.prefix + n] for n in constraint.expression.names
                     if constraint.prefix + n in index]  # fmt: skip
            after[max(reads, default=-1) + 1].append(constraint)
        return after

    def _reader_of(self, name: str, prefix: str) -> str | None:
        """The key of the first condition or constraint of ``prefix`` that reads ``name``."""
        for param in self.params:
            if param.prefix == prefix and param.condition and name in param.condition.names:
                return f"parameters.{param.name}.when"
        for constraint in self.constraints:
            if constraint.prefix == prefix and name in constraint.expression.names:
                return constraint.where.rpartition(": ")[2] or f"constraints.{constraint.name}"
        return None

    def validate_names(self, problem: Mapping[str, Any]) -> None:
        """Check that every name in a condition or constraint means something, and means one
        thing: a parameter named like a problem value hides it from the expressions beside it
        (where none reads it, the parameter is free to override the problem's value, as a
        space that tunes train-step's ``loss_scale_init`` does).

        Raises:
            SpaceError: naming the file and key of the first expression with an unknown name,
                or the parameter named like a problem value that an expression reads.

        Example:
            >>> space = Space("s", [Param("N", "pow2", low=1, high=8)], source="s.yaml",
            ...               constraints_from={"fits": "N <= 4"})
            >>> try:
            ...     space.validate_names({"N": 1024})
            ... except SpaceError as exc:
            ...     print(exc)
            s.yaml: parameters.N: shares its name with the problem key 'N' (1024), which
            constraints.fits reads as the parameter; rename the parameter
        """
        known_global = set(problem) | {"problem", "device"}
        for param in self.params:
            name = param.local_name()  # what an expression beside it reads it as
            reader = self._reader_of(name, param.prefix) if name in problem else None
            if reader is not None:
                raise SpaceError(
                    f"{self.source}: parameters.{param.name}: shares its name with the problem "
                    f"key {name!r} ({reprlib.repr(problem[name])}), which {reader} reads as the "
                    "parameter; rename the parameter"
                )
        earlier: dict[str, set[str]] = {}  # prefix -> local names defined so far
        for param in self.params:
            seen = earlier.setdefault(param.prefix, set())
            if param.condition is not None:
                unknown = param.condition.names - seen - known_global
                if unknown:
                    raise SpaceError(
                        f"{self.source}: parameters.{param.name}.when: unknown name "
                        f"{sorted(unknown)[0]!r} (a condition reads earlier parameters only)"
                    )
            seen.add(param.local_name())
        for constraint in self.constraints:
            local = {p.local_name() for p in self.params if p.prefix == constraint.prefix}
            unknown = constraint.expression.names - local - known_global
            if unknown:
                name = sorted(unknown)[0]
                raise SpaceError(f"{constraint.where}: {self._unknown_name(name, constraint)}")

    def _unknown_name(self, name: str, constraint: Constraint) -> str:
        """Why ``constraint`` cannot read ``name``: no such name, or a parameter of another
        include (a constraint reads those of its own include; a top-level one the top-level
        parameters)."""
        other = next((p for p in self.params if p.name == name and p.prefix != constraint.prefix),
                     None)  # fmt: skip
        if other is None:
            return f"unknown name {name!r} (not a parameter of this space or a problem value)"
        own = f"include {constraint.prefix!r}" if constraint.prefix else "the top level"
        theirs = f"include {other.prefix!r}" if other.prefix else "the top level"
        return (
            f"{name!r} is a parameter of {theirs}; a constraint of {own} reads only the "
            "parameters beside it (no constraint spans includes)"
        )

    # -- enumeration ---------------------------------------------------------------------
    def grid(
        self,
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every config of a discrete space that satisfies the constraints, in order.

        A constraint is checked as soon as the last parameter it reads has its value, so a
        branch it rules out is never expanded (the same configs, in the same order, as
        checking every constraint on every complete config).
        """
        problem, device = problem or {}, device or {}
        after = self._checked_after()
        if self._broken(after[0], {}, problem, device):
            return

        def expand(index: int, values: dict[str, Any]) -> Iterator[dict[str, Any]]:
            if index == len(self.params):
                yield dict(values)
                return
            param = self.params[index]
            if not self.is_active(param, values, problem, device):
                # its constraints skip, unless a problem value of the same name stands in
                if not self._broken(after[index + 1], values, problem, device):
                    yield from expand(index + 1, values)
                return
            for value in param.values():
                values[param.name] = value
                if not self._broken(after[index + 1], values, problem, device):
                    yield from expand(index + 1, values)
            del values[param.name]

        yield from expand(0, {})

    def nearest(
        self,
        config: Mapping[str, Any],
        rng: random.Random,
        problem: Mapping[str, Any] | None = None,
        device: Mapping[str, Any] | None = None,
        accept: Callable[[dict[str, Any]], bool] | None = None,
        budget: int = NEAREST_TRIES,
    ) -> dict[str, Any] | None:
        """A config of a discrete space that satisfies the constraints (and ``accept``), near
        ``config``: found as :meth:`grid` lists configs, a branch cut as soon as a constraint
        whose parameters all have values breaks, but depth first from ``config``: each
        parameter tries its value in ``config`` first, then its other values nearest first in
        their order (ties at random; a parameter ``config`` lacks, all at random). None where
        none is found within ``budget`` values tried, or the space has a float without a step.

        Where the constraints read the parameters in order (a replay table's rows, checked
        prefix by prefix), every value they let through leads to a config, so one is found in
        about as many tries as the parameters have values, however few configs of the product
        pass: draws of whole configs from the product missed 60,000 rows of 10**9 but once in
        17,000.

        Example:
            >>> from autotune.space.params import Param
            >>> space = Space("s", [Param("x", "int", low=0, high=9), Param("y", "int", low=0,
            ...               high=9)], constraints_from={"few": "x == y and x % 3 == 0"})
            >>> space.nearest({"x": 5, "y": 1}, random.Random(0))
            {'x': 6, 'y': 6}
            >>> space.nearest({"x": 5, "y": 1}, random.Random(0), accept=lambda c: c["x"] > 6)
            {'x': 9, 'y': 9}
        """
        if not all(p.discrete for p in self.params):
            return None
        problem, device = problem or {}, device or {}
        after = self._checked_after()
        if self._broken(after[0], {}, problem, device):
            return None
        if not self.params:  # one config, empty
            return {} if accept is None or accept({}) else None
        values: dict[str, Any] = {}

        def options(index: int) -> Iterator[Any]:
            param = self.params[index]
            if not self.is_active(param, values, problem, device):
                return iter((_INACTIVE,))
            return iter(_nearest_first(param.values(), config.get(param.name, _INACTIVE), rng))

        pending = [options(0)]  # the values left to try of each parameter so far
        tries = 0
        while pending:
            index = len(pending) - 1
            name = self.params[index].name
            value = next(pending[-1], _DONE)
            values.pop(name, None)
            if value is _DONE:
                pending.pop()
                continue
            if tries >= budget:
                return None
            tries += 1
            if value is not _INACTIVE:
                values[name] = value
            if self._broken(after[index + 1], values, problem, device):
                continue
            if index + 1 < len(self.params):
                pending.append(options(index + 1))
            elif accept is None or accept(dict(values)):
                return dict(values)
        return None

    def grid_size(self) -> int:
        """Size of the unconstrained cartesian grid (conditions ignored), or
        :attr:`max_configs` where that is less: an upper bound on the configs :meth:`grid`
        lists."""
        size = math.prod(p.count() for p in self.params)
        return size if self.max_configs is None else min(size, self.max_configs)

    def grid_search_space(self) -> dict[str, list[Any]]:
        """The ``search_space`` argument of Optuna's GridSampler."""
        try:
            return {p.name: p.values() for p in self.params}
        except ValueError as exc:
            raise SpaceError(
                f"{self.source}: grid search needs discrete parameters: {exc}"
            ) from None
