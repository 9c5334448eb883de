"""Load search spaces from YAML: parameters, conditions, constraints and includes.

A space file is data. Example (``search_spaces/matmul.yaml`` is a real one)::

    name: matmul
    parameters:
      BLOCK_M: {type: pow2, low: 16, high: 256}
      GROUP_M: {type: categorical, choices: [1, 8]}
      loss_scale: {type: float, low: 1.0, high: 65536.0, log: true, when: "precision == 'fp16'"}
    constraints:
      shared_memory: "(BLOCK_M * BLOCK_K + BLOCK_K * BLOCK_N) * 2 * num_stages
                      <= device.max_shared_memory"
    include:
      - {space: matmul.yaml, prefix: "layer{i}.qkv.", repeat: 4}
      - {space: matmul.yaml, prefix: "lm_head.", problem: {M: 16, N: 128256, K: 4096}}

(an include's ``problem``: what its part runs at when searched by group,
:mod:`autotune.space.parts`)

Example:
    >>> space = load_space("matmul.yaml")
    >>> space.names[:3]
    ['BLOCK_M', 'BLOCK_N', 'BLOCK_K']
"""

from __future__ import annotations

import decimal
import keyword
import math
import sys
import unicodedata
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from autotune.space.expr import Expression, ExpressionError
from autotune.space.params import KINDS, Constraint, Param
from autotune.space.parts import include_problems
from autotune.space.space import Space, SpaceError, shown
from autotune.space.yaml_file import read_yaml_mapping

_PARAM_KEYS = {"type", "low", "high", "step", "log", "choices", "when"}
#: the keys each type takes (another is refused: it would be silently ignored)
_KIND_KEYS = {
    "int": ("type", "low", "high", "step", "log", "when"),
    "float": ("type", "low", "high", "step", "log", "when"),
    "pow2": ("type", "low", "high", "when"),
    "categorical": ("type", "choices", "when"),
    "bool": ("type", "when"),
}
_TOP_KEYS = {"name", "description", "workload", "parameters", "constraints", "include"}


def builtin_space_path(name: str) -> Path:
    """Path of a space file shipped with autotune (``search_spaces/`` in the repository)."""
    return Path(str(resources.files("autotune.search_spaces").joinpath(name)))


def resolve_space_path(name: str | Path, relative_to: Path | None = None) -> Path:
    """Find a space file. A space given on its own (``relative_to`` None: ``--space``) is read
    as given, from the working folder, else among the built-in spaces. An include
    (``relative_to`` the including file) is read next to the including file, else among the
    built-in spaces: never from the working folder, so a space reads the same files from any
    folder (a sweep resumed elsewhere finds the space it swept).

    Example:
        >>> resolve_space_path("matmul.yaml", relative_to=Path("/nowhere/top.yaml")).name
        'matmul.yaml'

    Raises:
        SpaceError: naming the file not found (or a folder given instead).
    """
    path = Path(name)
    beside = relative_to is not None and not path.is_absolute()
    candidates = [relative_to.parent / path if beside else path,
                  builtin_space_path(path.name if path.suffix else f"{path}.yaml")]  # fmt: skip
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    if candidates[0].is_dir():
        raise SpaceError(f"{name}: is a folder, not a space file")
    if beside:
        raise SpaceError(f"{name}: space file not found (looked next to {relative_to} and "
                         "among the built-in spaces)")  # fmt: skip
    raise SpaceError(f"{name}: space file not found")


#: the largest integer an int or pow2 parameter may reach (and the least, negated): Optuna
#: holds an int parameter's value as a float, exact up to 2**53 (above it, 2**53 + 1 would be
#: sampled as 2**53)
MAX_INT = 2**53


def _float(value: int, where: str) -> float:
    """An integer as a float (Optuna reads every number of a space as one), or refused in one
    line when it is too large for one."""
    try:
        return float(value)
    except OverflowError:
        raise SpaceError(f"{where}: {shown(value)} is too large: Optuna reads it as a float, "
                         f"at most about {sys.float_info.max:.1e}") from None  # fmt: skip


def _number(value: Any, where: str, integer: bool = False) -> float | int:
    if isinstance(value, str):  # YAML 1.1 reads 1e-5 as a string
        try:
            value = float(value)
        except ValueError:
            raise SpaceError(f"{where}: {value!r} is not a number") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpaceError(f"{where}: {shown(value)} is not a number")
    if isinstance(value, int):  # exact, of any size (YAML reads 1 and 400 zeros)
        return value if integer else _float(value, where)
    if not math.isfinite(value):  # YAML's .nan and .inf
        raise SpaceError(f"{where}: {value!r} is not a finite number")
    if integer:
        if not value.is_integer():
            raise SpaceError(f"{where}: {value!r} is not an integer")
        return int(value)
    return value


def _integer_bound(value: Any, where: str) -> int:
    """An int or pow2 parameter's ``low``/``high``: an integer within -2**53..2**53.

    Example:
        >>> _integer_bound(2**53, "s.yaml: parameters.A.high")
        9007199254740992
        >>> try:
        ...     _integer_bound(2**53 + 1, "s.yaml: parameters.A.high")
        ... except SpaceError as exc:
        ...     print(exc)  # doctest: +ELLIPSIS
        s.yaml: parameters.A.high: 9007199254740993 is outside -2**53..2**53, ...
    """
    number = int(_number(value, where, integer=True))
    if abs(number) > MAX_INT:
        raise SpaceError(f"{where}: {shown(number)} is outside -2**53..2**53, the integers "
                         "Optuna holds exactly (it reads an int parameter as a float)")  # fmt: skip
    return number


def _expression(source: Any, where: str) -> Expression:
    try:
        return Expression(source)
    except ExpressionError as exc:
        raise SpaceError(f"{where}: {exc}") from None


def check_name(name: Any, where: str) -> None:
    """A parameter's name is one an expression can read: a Python identifier, not a keyword,
    not a function or namespace of the expression language (``max``, ``device``).

    Raises:
        SpaceError: naming the place.
    """
    from autotune.space.expr import FUNCTIONS, NAMESPACES

    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise SpaceError(f"{where}: {shown(name)} is not a name an expression can read (letters, "
                         "digits, _)")  # fmt: skip
    if name in FUNCTIONS or name in NAMESPACES:
        raise SpaceError(f"{where}: {name!r} is taken by the expression language; rename it")
    read_as = unicodedata.normalize("NFKC", name)
    if read_as != name:  # Python reads identifiers in NFKC: an expression would see another name
        raise SpaceError(f"{where}: {name!r} reads as {read_as!r} in an expression; name it "
                         f"{read_as!r}")  # fmt: skip


def _equal_choices(choices: list[Any]) -> tuple[Any, Any] | None:
    """The first two choices that compare equal (``False == 0``, ``1 == 1.0``), which Optuna
    (and a config's ``==``) cannot tell apart, or None.

    Example:
        >>> _equal_choices([False, True, 0, 1]), _equal_choices(["no", "yes", 0, 1])
        ((False, 0), None)
    """
    first: dict[Any, Any] = {}  # equal values hash alike: a dict finds the earlier one
    for choice in choices:
        if choice in first:
            return first[choice], choice
        first[choice] = choice
    return None


def _float_step(param: Param, step: Any, where: str) -> float:
    """A float parameter's ``step``: positive, ``high - low`` a multiple of it (in decimal, as
    Optuna checks it: 0.1 divides 0..1).

    Example:
        >>> x = Param("x", "float", low=0.0, high=1.0)
        >>> _float_step(x, 0.1, "s.yaml: parameters.x")
        0.1
        >>> try:
        ...     _float_step(x, 0.3, "s.yaml: parameters.x")
        ... except SpaceError as exc:
        ...     print(exc)
        s.yaml: parameters.x.step: the range 0.0..1.0 is not a multiple of 0.3
    """
    value = float(_number(step, f"{where}.step"))
    if value <= 0:
        raise SpaceError(f"{where}.step: must be positive")
    span = decimal.Decimal(str(param.high)) - decimal.Decimal(str(param.low))
    try:
        rest = span % decimal.Decimal(str(value))
    except decimal.InvalidOperation:  # more than 10**28 steps: Optuna could not count them
        raise SpaceError(f"{where}.step: {value} is too fine for the range {param.low}.."
                         f"{param.high}") from None  # fmt: skip
    if rest != 0:
        raise SpaceError(f"{where}.step: the range {param.low}..{param.high} is not a multiple "
                         f"of {value}")  # fmt: skip
    return value


def _parse_param(name: str, spec: Any, where: str, prefix: str) -> Param:
    if not isinstance(spec, dict):
        raise SpaceError(f"{where}: expected a mapping like {{type: int, low: 1, high: 8}}")
    unknown = set(spec) - _PARAM_KEYS
    if unknown:
        raise SpaceError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    kind = spec.get("type")
    if kind not in KINDS:
        raise SpaceError(f"{where}.type: {shown(kind)} is not one of {', '.join(KINDS)}")
    untaken = [key for key in spec if key not in _KIND_KEYS[kind]]
    if untaken:
        raise SpaceError(f"{where}: a {kind} parameter takes no {untaken[0]!r} (it takes "
                         f"{', '.join(_KIND_KEYS[kind])})")  # fmt: skip
    param = Param(name=prefix + name, kind=kind, prefix=prefix)
    if "when" in spec:
        param.condition = _expression(spec["when"], f"{where}.when")
    if kind == "bool":
        param.choices = [False, True]
    elif kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            raise SpaceError(f"{where}.choices: must be a non-empty list")
        odd = next((c for c in choices if not isinstance(c, (str, int, float, bool))), None)
        if odd is not None or any(c is None for c in choices):
            raise SpaceError(f"{where}.choices: {shown(odd)} is not a number, text or bool")
        for choice in choices:  # Optuna reads each number as a float, to tell a nan
            if isinstance(choice, int):
                _float(choice, f"{where}.choices")
        if len({repr(c) for c in choices}) != len(choices):
            raise SpaceError(f"{where}.choices: repeated values")
        equal = _equal_choices(choices)
        if equal is not None:  # Optuna would sample one of the two only: a sweep without end
            raise SpaceError(f"{where}.choices: {equal[0]!r} and {equal[1]!r} compare equal, so "
                             "only one of them is ever sampled (YAML reads unquoted no/yes/off/on "
                             "as false/true): quote text ('no') or drop one")  # fmt: skip
        param.choices = choices
    else:
        for key in ("low", "high"):
            if key not in spec:
                raise SpaceError(f"{where}: missing {key!r}")
        bound = _integer_bound if kind in ("int", "pow2") else _number
        param.low = bound(spec["low"], f"{where}.low")
        param.high = bound(spec["high"], f"{where}.high")
        if param.low > param.high:
            raise SpaceError(f"{where}: low {param.low} is greater than high {param.high}")
        if not math.isfinite(param.high - param.low):
            raise SpaceError(f"{where}: the range {param.low}..{param.high} is too wide to sample")
        param.log = spec.get("log", False)
        if not isinstance(param.log, bool):
            raise SpaceError(f"{where}.log: {shown(param.log)} is not true or false")
        if param.log and "step" in spec:
            raise SpaceError(f"{where}: a log-scaled parameter takes no step")
        if param.log and param.low <= 0:
            raise SpaceError(f"{where}.low: must be > 0 for a log-scaled parameter")
        if "step" in spec and kind == "float":
            param.step = _float_step(param, spec["step"], where)
        elif "step" in spec:
            param.step = _integer_bound(spec["step"], f"{where}.step")
            if param.step <= 0:
                raise SpaceError(f"{where}.step: must be positive")
            if (param.high - param.low) % param.step:  # Optuna would cut high, with a warning
                raise SpaceError(f"{where}.step: the range {param.low}..{param.high} is not a "
                                 f"multiple of {param.step}")  # fmt: skip
        if kind == "pow2":
            for key in ("low", "high"):
                value = getattr(param, key)
                if value <= 0 or not math.log2(value).is_integer():
                    raise SpaceError(f"{where}.{key}: {value} is not a power of two")
    return param


#: most layers a repeated include may expand to (a decoder has tens; a typo can have millions)
MAX_REPEAT = 1024
#: most parameters (and, apart, constraints) a space may expand to, its includes counted: a
#: decoder's every projection of 128 layers is 4608 matmul parameters; nested repeated includes
#: can make a million, which took minutes to load and no sampler could search
MAX_PARAMS = 20_000


@dataclass
class _Reading:
    """What one :func:`load_space` has read so far: each file's YAML, once, in the order read
    (a file included 1024 times is parsed once), and how many parameters and constraints the
    space has come to."""

    files: dict[Path, dict[str, Any]] = field(default_factory=dict)
    params: int = 0
    constraints: int = 0

    def grow(self, params: int, constraints: int, where: str, *, counted: bool = True) -> None:
        """Count ``params`` and ``constraints`` more (or, not ``counted``, see that they would
        fit), refusing a space past :data:`MAX_PARAMS` of either.

        Example:
            >>> reading = _Reading()
            >>> reading.grow(9, 10, "s.yaml: parameters")
            >>> reading.grow(20_000, 0, "s.yaml: include[0]", counted=False)
            Traceback (most recent call last):
            ...
            autotune.space.space.SpaceError: s.yaml: include[0]: the space expands to 20009 \
parameters, more than 20000 (nested or repeated includes?)
        """
        counts = (self.params + params, self.constraints + constraints)
        for count, what in zip(counts, ("parameters", "constraints"), strict=True):
            if count > MAX_PARAMS:
                raise SpaceError(f"{where}: the space expands to {count} {what}, more than "
                                 f"{MAX_PARAMS} (nested or repeated includes?)")  # fmt: skip
        if counted:
            self.params, self.constraints = counts


def _read_space_yaml(path: Path) -> dict[str, Any]:
    """A space file's top-level mapping, its keys checked against the space's schema."""
    data = read_yaml_mapping(path)
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise SpaceError(f"{path}: unknown key {sorted(unknown)[0]!r}")
    return data


def _load(
    path: Path, prefix: str, stack: tuple[Path, ...], read: _Reading
) -> tuple[list[Param], list[Constraint], dict[str, Any]]:
    """The parameters and constraints of the space file ``path`` and of its includes, and its
    own YAML; each file read is kept in ``read`` (once, in the order read), which counts the
    parameters and constraints as they come."""
    resolved = path.resolve()
    if resolved in stack:
        raise SpaceError(f"{path}: include cycle ({' -> '.join(p.name for p in stack)})")
    data = read.files.get(resolved)
    if data is None:
        data = read.files[resolved] = _read_space_yaml(path)
    stack = (*stack, resolved)
    params: list[Param] = []
    constraints: list[Constraint] = []

    includes = data.get("include") or []
    if not isinstance(includes, list):
        raise SpaceError(f"{path}: include: must be a list")
    for i, entry in enumerate(includes):
        where = f"{path}: include[{i}]"
        if not isinstance(entry, dict) or "space" not in entry:
            raise SpaceError(f"{where}: expected {{space: FILE, prefix: PREFIX}}")
        unknown = set(entry) - {"space", "prefix", "repeat", "problem"}
        if unknown:
            raise SpaceError(f"{where}: unknown key {sorted(unknown, key=str)[0]!r} (space, "
                             "prefix, repeat, problem)")  # fmt: skip
        for key in ("space", "prefix"):
            if key in entry and not isinstance(entry[key], str):
                raise SpaceError(f"{where}.{key}: must be text, not {shown(entry[key])}")
        repeat = int(_number(entry.get("repeat", 1), f"{where}.repeat", integer=True))
        if not 0 <= repeat <= MAX_REPEAT:
            raise SpaceError(f"{where}.repeat: {shown(repeat)} is not within 0..{MAX_REPEAT}")
        sub_prefix = entry.get("prefix", "")
        if repeat > 1 and "{i}" not in sub_prefix:
            raise SpaceError(f"{where}.prefix: a repeated include needs '{{i}}' in its prefix")
        include_problems(entry.get("problem"), repeat, where)  # what a search by group reads
        try:
            sub_path = resolve_space_path(entry["space"], relative_to=path)
        except SpaceError as exc:
            raise SpaceError(f"{where}.space: {exc}") from None
        for k in range(repeat):
            sub_params, sub_constraints, _ = _load(
                sub_path, prefix + sub_prefix.replace("{i}", str(k)), stack, read
            )
            if k == 0:  # each layer is as large as the first: refuse before expanding them all
                more = repeat - 1
                read.grow(len(sub_params) * more, len(sub_constraints) * more, where,
                          counted=False)  # fmt: skip
            params += sub_params
            constraints += sub_constraints

    raw_params = data.get("parameters") or {}
    if not isinstance(raw_params, dict):
        raise SpaceError(f"{path}: parameters: must be a mapping of name to spec")
    for name, spec in raw_params.items():
        where = f"{path}: parameters.{name if isinstance(name, str) else shown(name)}"
        check_name(name, where)
        params.append(_parse_param(str(name), spec, where, prefix))
        read.grow(1, 0, where)

    raw_constraints = data.get("constraints") or {}
    if isinstance(raw_constraints, list):
        raw_constraints = {f"constraint_{i}": c for i, c in enumerate(raw_constraints)}
    if not isinstance(raw_constraints, dict):
        raise SpaceError(f"{path}: constraints: must be a mapping of name to expression")
    for cname, source in raw_constraints.items():
        where = f"{path}: constraints.{cname}"
        constraints.append(
            Constraint(prefix + str(cname), _expression(source, where), prefix, where)
        )
        read.grow(0, 1, where)
    return params, constraints, data


def load_space(name: str | Path) -> Space:
    """Load a space file (a path, or the name of a built-in space such as ``matmul``); the
    files its includes read are its ``includes``.

    Example:
        >>> [Path(f).name for f in load_space("llm_projections").includes]
        ['matmul.yaml']

    Raises:
        SpaceError: with a one-line message naming the file and the key at fault.
    """
    path = resolve_space_path(name)
    read = _Reading()
    params, constraints, data = _load(path, "", (), read)
    seen: set[str] = set()
    duplicates: set[str] = set()
    for param in params:  # a set, not names.count: 36,864 names took 10 s
        (duplicates if param.name in seen else seen).add(param.name)
    if duplicates:
        raise SpaceError(f"{path}: parameter {min(duplicates)!r} defined twice (use a prefix)")
    if not params:
        raise SpaceError(f"{path}: parameters: the space has no parameters")
    includes = tuple(str(p) for p in list(read.files)[1:])  # the first is the file itself
    workload = data.get("workload")
    if workload is not None and (not isinstance(workload, str) or not workload.strip()):
        raise SpaceError(f"{path}: workload: {shown(workload)} is not a workload's name")
    return Space(
        str(data.get("name", path.stem)), params, constraints, source=str(path),
        includes=includes, workload=workload,
    )  # fmt: skip
