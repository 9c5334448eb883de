"""A kernel config as Triton keeps it: meta-parameters (the kernel's ``tl.constexpr``
arguments) apart from launch options (``num_warps``, ``num_stages``, ...).

Example:
    >>> config = KernelConfig.from_flat({"BLOCK_M": 64, "num_warps": 4, "GROUP_M": 8})
    >>> config.meta, config.launch
    ({'BLOCK_M': 64, 'GROUP_M': 8}, {'num_warps': 4})
    >>> config.triton_source()
    "triton.Config({'BLOCK_M': 64, 'GROUP_M': 8}, num_warps=4)"
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: Arguments of ``triton.Config`` itself; every other parameter is a kernel meta-parameter.
LAUNCH_OPTIONS: tuple[str, ...] = ("num_warps", "num_stages", "num_ctas", "maxnreg")


@dataclass(frozen=True)
class KernelConfig:
    """Meta-parameters and launch options of one kernel config."""

    meta: dict[str, Any] = field(default_factory=dict)
    launch: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_flat(cls, config: dict[str, Any]) -> KernelConfig:
        """Split a flat config (a sweep's parameters) into meta-parameters and options."""
        meta = {k: v for k, v in config.items() if k not in LAUNCH_OPTIONS}
        launch = {k: v for k, v in config.items() if k in LAUNCH_OPTIONS}
        return cls(meta, launch)

    def flat(self) -> dict[str, Any]:
        return {**self.meta, **self.launch}

    def renamed(self, names: dict[str, str]) -> KernelConfig:
        """The same config with meta-parameters renamed (``{"BLOCK_M": "BLOCK_SIZE_M"}``),
        for a kernel that spells them otherwise."""
        return KernelConfig({names.get(k, k): v for k, v in self.meta.items()}, dict(self.launch))

    def triton_source(self) -> str:
        """The ``triton.Config(...)`` expression for this config."""
        meta = ", ".join(f"{k!r}: {literal(v)}" for k, v in self.meta.items())
        options = "".join(f", {k}={literal(v)}" for k, v in self.launch.items())
        return f"triton.Config({{{meta}}}{options})"


def literal(value: Any) -> str:
    """Python source for a config value; a float that is not finite reads back as itself.

    Example:
        >>> literal(0.5), literal(float("nan")), literal(float("-inf"))
        ('0.5', "float('nan')", "float('-inf')")
    """
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    return repr(value)
