"""Search spaces: parameters, conditions, constraints; YAML in, Optuna suggestions out.

Example:
    >>> from autotune.space import load_space
    >>> len(load_space("matmul")) >= 6
    True
"""

from autotune.space.expr import Expression, ExpressionError
from autotune.space.loader import builtin_space_path, load_space, resolve_space_path
from autotune.space.params import Constraint, Param
from autotune.space.space import Space, SpaceError

__all__ = [
    "Constraint",
    "Expression",
    "ExpressionError",
    "Param",
    "Space",
    "SpaceError",
    "builtin_space_path",
    "load_space",
    "resolve_space_path",
]
