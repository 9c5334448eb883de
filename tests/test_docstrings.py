"""Every docstring example in the installed package runs and shows what it says."""

import doctest
import importlib
import pkgutil

import pytest

import autotune
import autotune.kernels
import autotune.objectives

# objectives/ and kernels/ are installed as autotune.objectives and autotune.kernels; in an
# editable install they are not under autotune's own folder, so each is walked on its own.
MODULES = sorted(
    {
        info.name
        for package in (autotune, autotune.objectives, autotune.kernels)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")
    }
)


def test_the_walk_reaches_the_mapped_packages():
    assert "autotune.objectives.replay" in MODULES
    assert "autotune.kernels.matmul_triton" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
