"""Another copy of a module loaded from its file, for the side-by-side benchmarks that time the
code before a change against the code after it in one process (``git show
REV:kernels/x.py > /tmp/x_old.py``, then ``--old /tmp/x_old.py``).

Example:
    >>> from pathlib import Path
    >>> again = load_module(Path(__file__), "module_file_again")
    >>> again.load_module is not load_module  # a second copy, with its own names
    True
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_module(path: str | Path, name: str) -> ModuleType:
    """The module in ``path`` under ``name`` (registered in ``sys.modules``, where dataclasses
    defined in it look their module up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python module file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
