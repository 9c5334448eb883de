"""The versions of the toolchain a measurement depends on (Python, torch and its CUDA, Triton,
Optuna), asked of the imported packages or read from their sources without importing them.

Reading costs a few milliseconds where importing torch costs about 2 s of CPU, which is what a
GPU-less machine's device check (:func:`autotune.device.detect_device`) saves.

Example:
    >>> read = declared_versions()
    >>> read is None or read == software_versions()
    True
"""

from __future__ import annotations

import ast
import importlib.util
import os
import platform
import sys
from typing import Any

#: the source file of each package whose ``__version__`` (and torch's ``version.cuda``) it
#: assigns as a literal: ``torch.__version__`` is made from torch/version.py's, and
#: ``optuna.__version__`` is optuna/version.py's (installed wheels' versions can differ from
#: their distributions': pytorch-triton's carry a +commit suffix that triton.__version__ lacks)
VERSION_FILES = {"torch": "version.py", "triton": "__init__.py", "optuna": "version.py"}


def software_versions() -> dict[str, str]:
    """Versions of the toolchain that a measurement depends on."""
    versions = {"python": platform.python_version()}
    for module in ("torch", "triton", "optuna"):
        try:
            versions[module] = __import__(module).__version__
        except Exception:  # noqa: BLE001 - an absent or broken package is simply not listed
            continue
    try:
        import torch

        if torch.version.cuda:
            versions["cuda"] = torch.version.cuda
    except Exception:  # noqa: BLE001
        pass
    return versions


def _literals(path: str) -> dict[str, Any]:
    """The names that the Python file ``path`` binds to a literal at its top level and nowhere
    else (no other assignment, import, definition or ``global`` of the name, no ``*`` import),
    with their values: read from its source, nothing run.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        ...     _ = f.write("from x import y\\nv = '1.0'\\ncuda: str | None = None\\ny = 2\\n"
        ...                 "w = '1'\\nw = '2'\\nz = f()\\nt = 3\\nif z:\\n    t = 4\\n")
        >>> sorted(_literals(f.name).items())
        [('cuda', None), ('v', '1.0')]
        >>> os.remove(f.name)
    """
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    bindings: dict[str, int] = {}
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names = [node.id]
        elif isinstance(node, ast.alias):
            if node.name == "*":
                return {}  # may bind any name
            names = [node.asname or node.name.split(".")[0]]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Global | ast.Nonlocal):
            names = list(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names = [node.name]
        for name in names:
            bindings[name] = bindings.get(name, 0) + 1
    literals = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and bindings.get(target.id) == 1:
            try:
                literals[target.id] = ast.literal_eval(value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
    return literals


def _declared_version(module: str) -> tuple[str, str | None] | None:
    """``module``'s ``__version__`` and, for torch, its ``version.cuda``, as the package's source
    assigns them (:data:`VERSION_FILES`), read without importing it; None where it does not say
    so (not installed, another layout).

    Example:
        >>> _declared_version("no_such_package") is None
        True
    """
    try:
        spec = importlib.util.find_spec(module)
        folder = (spec.submodule_search_locations or [])[0] if spec else None
        if folder is None:
            return None
        literals = _literals(os.path.join(folder, VERSION_FILES[module]))
        version = literals["__version__"]
        cuda = literals["cuda"] if module == "torch" else None
    except Exception:  # noqa: BLE001 - unreadable, or not as expected: the caller imports it
        return None
    return (version, cuda) if isinstance(version, str) else None


def declared_versions() -> dict[str, str] | None:
    """What :func:`software_versions` returns (the same keys, values and order) without
    importing torch, Triton or Optuna: each version as its package's source assigns it (one
    already imported is asked); None where a package's source does not say (not installed,
    another layout), for the caller to ask torch as before."""
    versions = {"python": platform.python_version()}
    cuda = None
    for module in VERSION_FILES:
        if module in sys.modules:  # imported already: asking it costs nothing
            try:
                versions[module] = sys.modules[module].__version__
                cuda = sys.modules[module].version.cuda if module == "torch" else cuda
            except Exception:  # noqa: BLE001 - half imported, or broken: ask as before
                return None
            continue
        declared = _declared_version(module)
        if declared is None:
            return None
        versions[module], torch_cuda = declared
        cuda = torch_cuda if module == "torch" else cuda
    if cuda:
        versions["cuda"] = cuda
    return versions
