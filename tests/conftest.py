"""Shared fixtures. GPU code paths run here on the CPU (Triton interpreter, replay)."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "benchmarks" / "data"


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'studies.db'}"


@pytest.fixture
def write_space(tmp_path: Path):
    """Write a space file from YAML text and return its path."""

    def write(text: str, name: str = "space.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write
