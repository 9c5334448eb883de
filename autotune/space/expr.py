"""A restricted evaluator for constraint and condition expressions in space files.

Space files are data: their expressions are parsed with :mod:`ast` and only arithmetic,
comparisons, boolean logic, ``x if c else y``, membership tests, a few pure functions and
attribute reads on the ``device`` and ``problem`` namespaces are allowed. Nothing is passed to
Python's ``eval``.

Example:
    >>> expr = Expression("(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 * stages <= device.smem")
    >>> sorted(expr.names), sorted(expr.attributes)
    (['BLOCK_K', 'BLOCK_M', 'BLOCK_N', 'device', 'stages'], ['device.smem'])
    >>> env = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "stages": 3,
    ...        "device": {"smem": 232448}}
    >>> expr.evaluate(env)
    True
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
FUNCTIONS = {
    "min": min,
    "max": max,
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "log2": math.log2,
    "cdiv": lambda a, b: -(-a // b),
    "is_pow2": lambda x: isinstance(x, int) and x > 0 and x & (x - 1) == 0,
}
# Namespaces readable with attribute syntax (device.max_shared_memory, problem.M).
NAMESPACES = ("device", "problem")
_MAX_POWER = 64  # keeps `2 ** huge` from eating the machine
#: the most characters (or items) a text or tuple an expression builds may hold: `'ab' * 10**9`
#: took 2 GB and `(0,) * 10**10` would take 80 GB, per config
MAX_SEQUENCE = 4096
_BUILT = (str, tuple)  # what an expression's operators can build: lists evaluate as tuples
MAX_SOURCE_CHARS = 2000  # an expression is a line; a longer one is a mistake
#: how deep an expression may nest: its own limit, not the interpreter's recursion limit (which
#: another library in the same process may have raised, and then 1900 nested minus signs parse)
MAX_DEPTH = 100


class ExpressionError(ValueError):
    """An expression that cannot be parsed, uses something not allowed, or fails to evaluate."""


class UndefinedValue(ExpressionError):
    """An expression whose arithmetic has no value at these values (a division by zero, the
    log of 0, an overflow): a constraint holds for no config where it is undefined."""


def _count(value: int) -> str:
    """An integer as a message shows it: a huge one by its size (Python will not write one of
    more than 4300 digits)."""
    return str(value) if abs(value) < 10**20 else f"about 2**{value.bit_length() - 1}"


def _sized(op: type[ast.operator], fn: Callable[[Any, Any], Any], source: str
           ) -> Callable[[Any, Any], Any]:  # fmt: skip
    """``fn`` (the operator ``op``), refusing a text or tuple it would build past
    :data:`MAX_SEQUENCE` before building it: a repetition (``*``), a join (``+``); text
    formatting (``'%*d' % (10**9, 1)``) is refused whatever its size, which only running it
    tells.

    Example:
        >>> times = _sized(ast.Mult, operator.mul, "'ab' * n")
        >>> times("ab", 3)
        'ababab'
        >>> try:
        ...     times("ab", 10**9)
        ... except ExpressionError as exc:
        ...     print(exc)
        a text of 2 characters repeated 1000000000 times, too large (more than 4096) in "'ab' * n"
    """

    def check(lhs: Any, rhs: Any) -> None:
        if op is ast.Mod and isinstance(lhs, str):
            raise ExpressionError(f"text formatting (text % values) is not allowed in {source!r}")
        joined = op is ast.Add and isinstance(lhs, _BUILT) and isinstance(rhs, _BUILT)
        if joined and len(lhs) + len(rhs) > MAX_SEQUENCE:
            raise ExpressionError(f"a join of {len(lhs)} and {len(rhs)} items, too large (more "
                                  f"than {MAX_SEQUENCE}) in {source!r}")  # fmt: skip
        if op is ast.Mult:
            seq, times = (lhs, rhs) if isinstance(lhs, _BUILT) else (rhs, lhs)
            if isinstance(times, int) and len(seq) * times > MAX_SEQUENCE:
                unit = "character" if isinstance(seq, str) else "item"
                what = f"{'text' if isinstance(seq, str) else 'tuple'} of {len(seq)} {unit}"
                what += "s" if len(seq) != 1 else ""
                raise ExpressionError(f"a {what} repeated {_count(times)} "
                                      f"times, too large (more than {MAX_SEQUENCE}) in "
                                      f"{source!r}")  # fmt: skip

    def guarded(lhs: Any, rhs: Any) -> Any:
        if isinstance(lhs, _BUILT) or isinstance(rhs, _BUILT):  # numbers: no check to make
            check(lhs, rhs)
        return fn(lhs, rhs)

    return guarded


class Expression:
    """A parsed, validated expression; evaluate it against a mapping of names to values."""

    def __init__(self, source: str) -> None:
        if not isinstance(source, str) or not source.strip():
            raise ExpressionError("an expression must be a non-empty string")
        self.source = source
        if len(source) > MAX_SOURCE_CHARS:
            raise ExpressionError(f"longer than {MAX_SOURCE_CHARS} characters: {source[:40]!r}...")
        self.names: set[str] = set()
        #: the namespaces' attributes it reads, as written: ``problem.M``, ``device.smem``
        self.attributes: set[str] = set()
        try:
            self._tree = ast.parse(source.strip(), mode="eval").body
            self._check(self._tree)
            self._run = self._compile(self._tree)
        except SyntaxError as exc:
            raise ExpressionError(f"invalid syntax in {source!r}: {exc.msg}") from None
        except (RecursionError, MemoryError):
            raise ExpressionError(f"nested too deeply: {source[:40]!r}...") from None

    def __repr__(self) -> str:
        return f"Expression({self.source!r})"

    def _check(self, node: ast.AST, depth: int = 0) -> None:
        if depth > MAX_DEPTH:
            raise RecursionError  # said as 'nested too deeply', as the parser's own is
        allowed = (
            ast.BinOp,
            ast.UnaryOp,
            ast.BoolOp,
            ast.Compare,
            ast.IfExp,
            ast.Constant,
            ast.Name,
            ast.Tuple,
            ast.List,
            ast.Call,
            ast.Attribute,
        )
        if not isinstance(node, allowed):
            raise ExpressionError(f"{type(node).__name__} is not allowed in {self.source!r}")
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
            raise ExpressionError(f"operator {type(node.op).__name__} not allowed")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                raise ExpressionError(
                    f"only these functions may be called: {', '.join(sorted(FUNCTIONS))}"
                )
            if node.keywords:
                raise ExpressionError("keyword arguments are not allowed")
            for arg in node.args:
                self._check(arg, depth + 1)
            return
        if isinstance(node, ast.Attribute):
            if not isinstance(node.value, ast.Name) or node.value.id not in NAMESPACES:
                raise ExpressionError(f"attributes may only be read from {' or '.join(NAMESPACES)}")
            if node.attr.startswith("_"):
                raise ExpressionError(f"private attribute {node.attr!r} not allowed")
            self.names.add(node.value.id)
            self.attributes.add(f"{node.value.id}.{node.attr}")
            return
        if isinstance(node, ast.Name):
            if node.id not in FUNCTIONS:
                self.names.add(node.id)
            return
        for child in ast.iter_child_nodes(node):
            if not isinstance(
                child, ast.operator | ast.cmpop | ast.unaryop | ast.boolop | ast.expr_context
            ):
                self._check(child, depth + 1)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Evaluate against ``env`` (names to values; namespaces as mappings)."""
        try:
            return self._run(env)
        except ExpressionError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. ZeroDivisionError, TypeError
            kind = (
                UndefinedValue if isinstance(exc, ArithmeticError | ValueError) else ExpressionError
            )
            raise kind(f"{self.source!r} failed: {type(exc).__name__}: {exc}") from None

    def _compile(self, node: ast.AST) -> Callable[[Mapping[str, Any]], Any]:
        """The checked tree as nested closures, each node's work decided once: evaluating a
        constraint for each of thousands of configs (a space's enumeration) then costs a call
        a node instead of a walk that matches every node's type again."""
        source = self.source
        match node:
            case ast.Constant(value=value):
                return lambda env: value
            case ast.Name(id=name):

                def read(env: Mapping[str, Any]) -> Any:
                    if name not in env:
                        raise ExpressionError(f"unknown name {name!r} in {source!r}")
                    return env[name]

                return read
            case ast.Attribute(value=ast.Name(id=space), attr=attr):

                def read_attr(env: Mapping[str, Any]) -> Any:
                    namespace = env.get(space, {})
                    if attr not in namespace:
                        raise ExpressionError(f"unknown name {space}.{attr} in {source!r}")
                    return namespace[attr]

                return read_attr
            case ast.BinOp(left=left, op=op, right=right):
                lhs, rhs, fn = self._compile(left), self._compile(right), _BINARY[type(op)]
                if isinstance(op, ast.Pow):

                    def power(env: Mapping[str, Any]) -> Any:
                        base, exponent = lhs(env), rhs(env)
                        # too large to compute at these values: no value there (a config
                        # ruled out), as an overflow has none; at every config, a refusal
                        if abs(exponent) > _MAX_POWER:
                            raise UndefinedValue(f"exponent {exponent} too large in {source!r}")
                        if isinstance(base, int) and base.bit_length() * abs(exponent) > 4096:
                            raise UndefinedValue(f"{base} ** {exponent} too large in {source!r}")
                        return fn(base, exponent)

                    return power
                if isinstance(op, ast.Mult | ast.Add | ast.Mod):  # they build text and tuples
                    fn = _sized(type(op), fn, source)
                return lambda env: fn(lhs(env), rhs(env))
            case ast.UnaryOp(op=op, operand=operand):
                inner, fn = self._compile(operand), _UNARY[type(op)]
                return lambda env: fn(inner(env))
            case ast.BoolOp(op=ast.And(), values=values):
                parts = [self._compile(v) for v in values]
                return lambda env: all(part(env) for part in parts)
            case ast.BoolOp(op=ast.Or(), values=values):
                parts = [self._compile(v) for v in values]
                return lambda env: any(part(env) for part in parts)
            case ast.Compare(left=left, ops=ops, comparators=comparators):
                first = self._compile(left)
                steps = [(_COMPARE[type(op)], self._compile(right))
                         for op, right in zip(ops, comparators, strict=True)]  # fmt: skip

                def compare(env: Mapping[str, Any]) -> bool:
                    lhs = first(env)
                    for fn, right in steps:
                        rhs = right(env)
                        if not fn(lhs, rhs):
                            return False
                        lhs = rhs
                    return True

                return compare
            case ast.IfExp(test=test, body=body, orelse=orelse):
                when, then, other = self._compile(test), self._compile(body), self._compile(orelse)
                return lambda env: then(env) if when(env) else other(env)
            case ast.Tuple(elts=elts) | ast.List(elts=elts):
                parts = [self._compile(e) for e in elts]
                return lambda env: tuple(part(env) for part in parts)
            case ast.Call(func=ast.Name(id=fname), args=args):
                fn, parts = FUNCTIONS[fname], [self._compile(a) for a in args]
                return lambda env: fn(*(part(env) for part in parts))
        raise ExpressionError(f"cannot evaluate {ast.dump(node)}")  # unreachable after _check
