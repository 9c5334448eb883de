"""Compile a Triton kernel for a GPU that is not here (sm_90 by default), with Triton's own
compiler and the ptxas it ships: no device needed.

A machine without a GPU (CI, a laptop) can thus check that a kernel compiles for Hopper and
read what the compiler decided: shared memory, registers, spills. The resource model of a
search space is tested against these figures, and a kernel change that breaks the GPU build
fails on the CPU.

The arguments are given the way a launch would pass them: a torch dtype where the kernel takes
a pointer (aligned to 16 bytes, as allocations are), an int or a float for a scalar, and the
compile-time values; integers are specialised as Triton does at a launch (a 1 becomes a
constant, a multiple of 16 is marked divisible by 16).

Run it in a process where ``TRITON_INTERPRET`` is unset or 0 (the interpreter compiles
nothing): :func:`compile_in_subprocess` does that for a caller under the interpreter.

Example (a script's body; the doctest only checks the dtype names):
    >>> triton_type(__import__("torch").bfloat16)
    'bf16'
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

_TYPES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "float32": "fp32",
    "float8_e4m3fn": "fp8e4nv",
    "float8_e5m2": "fp8e5",
    "int8": "i8",
    "uint8": "u8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
}


def triton_type(dtype: Any) -> str:
    """Triton's name for a torch dtype (``torch.bfloat16`` -> ``"bf16"``)."""
    return _TYPES[str(dtype).removeprefix("torch.")]


def compile_for_target(
    kernel: Any,
    args: dict[str, Any],
    *,
    num_warps: int = 4,
    num_stages: int = 3,
    arch: int = 90,
) -> Any:
    """Compile ``kernel`` (a ``@triton.jit`` function) for ``sm_<arch>``; returns Triton's
    compiled kernel (``.metadata.shared``, ``.asm``).

    Args:
        args: every argument of the kernel by name (see the module docstring).
    """
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature: dict[str, str] = {}
    constexprs: dict[tuple[int, ...], Any] = {}
    attrs: dict[tuple[int, ...], list[list[Any]]] = {}
    for i, param in enumerate(kernel.params):
        value = args[param.name]
        if param.is_constexpr:
            signature[param.name] = "constexpr"
            constexprs[(i,)] = value
        elif isinstance(value, torch.dtype):
            signature[param.name] = "*" + triton_type(value)
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[param.name] = "i1"
        elif isinstance(value, int):
            if value == 1:
                signature[param.name] = "constexpr"
                constexprs[(i,)] = 1
                continue
            signature[param.name] = "i32" if abs(value) < 2**31 else "i64"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[param.name] = "fp32"
        else:
            raise TypeError(f"{param.name}: cannot stand in for a {type(value).__name__}")
    source = ASTSource(kernel, signature, constexprs, attrs)
    options = {"num_warps": num_warps, "num_stages": num_stages}
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


_SCRIPT = """
import json, os, sys
os.environ["TRITON_INTERPRET"] = "0"
import importlib
spec = json.loads(sys.argv[1])
module = importlib.import_module(spec["module"])
kernel = getattr(module, spec["kernel"])
from autotune.cross_compile import compile_for_target
from autotune.triton_failures import compile_failure
import torch
out = []
for case in spec["cases"]:
    args = {k: (getattr(torch, v[6:]) if isinstance(v, str) and v.startswith("torch.") else v)
            for k, v in case["args"].items()}
    try:
        compiled = compile_for_target(kernel, args, **case["options"])
        ptx = compiled.asm["ptx"]
        out.append({"shared": int(compiled.metadata.shared),
                    "ptx_counts": {p: ptx.count(p) for p in case.get("count", [])}})
    except Exception as exc:
        failure = compile_failure(exc)
        out.append({"failure": failure.status.value, "reason": str(failure)[:500]})
print(json.dumps(out))
"""


def compile_in_subprocess(
    module: str, kernel: str, cases: list[dict[str, Any]], *, timeout_s: float = 600.0
) -> list[dict[str, Any]]:
    """Compile ``module.kernel`` for sm_90 in a fresh process with the interpreter off, once per
    case (``{"args": {...}, "options": {"num_warps": 4, "num_stages": 3}}``; torch dtypes
    written as ``"torch.bfloat16"``; an optional ``"count": ["cp.async.cg", ...]`` of PTX
    text to count). Returns per case ``{"shared": bytes, "ptx_counts": {text: n}}`` or
    ``{"failure": status, "reason": text}``.

    Raises:
        RuntimeError: the process itself failed (not a compile error of a case).
    """
    env = {**os.environ, "TRITON_INTERPRET": "0"}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, json.dumps({"module": module, "kernel": kernel,
                                                    "cases": cases})],
        env=env, capture_output=True, text=True, timeout=timeout_s,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return json.loads(done.stdout.strip().splitlines()[-1])
