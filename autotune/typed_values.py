"""``--problem`` values as the user wrote them, in a workload's refusal of one.

A whole number written with an exponent (``seed=1e30``) reaches the workload as the integer
of that float (:func:`autotune.workload_setup._as_defaults_kind`), which past 2**53 holds digits
no one typed: ``1000000000000000019884624838656``. A refusal that names the value names it as
written instead.

Example:
    >>> as_typed("seed=1000000000000000019884624838656 is out of range", {"seed": 1e30})
    'seed=1e30 is out of range'
"""

from __future__ import annotations

import re
from typing import Any


def written(value: float) -> str:
    """A float as ``--problem`` takes it written: Python's shortest form, its exponent
    without the ``+`` (``1e30``, ``2.5e17``).

    Example:
        >>> written(1e30), written(-2.5e17), written(1000.0)
        ('1e30', '-2.5e17', '1000.0')
    """
    return repr(value).replace("e+", "e")


def as_typed(text: str, overrides: dict[str, Any]) -> str:
    """``text`` with each ``key=INTEGER`` that stands for a float of ``overrides`` written
    with an exponent (past 1e16, where its integer shows digits no one typed) put back as
    written.

    Example:
        >>> as_typed("M=100000000000000000000 is too large; M=4 is not", {"M": 1e20})
        'M=1e20 is too large; M=4 is not'
        >>> as_typed("N=1000 is too large", {"N": 1e3})  # its integer is what was meant
        'N=1000 is too large'
    """
    for key, value in overrides.items():
        if not isinstance(value, float) or not value.is_integer() or "e" not in repr(value):
            continue
        named = rf"(?<![\w.]){re.escape(key)}={int(value)}(?!\d)"
        text = re.sub(named, f"{key}={written(value)}", text)
    return text
