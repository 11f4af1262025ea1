"""Test fixtures: where the mesh corpus kept in the repository lives."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MESHES = ROOT / "tests" / "data" / "meshes"


@pytest.fixture(scope="session")
def meshes() -> Path:
    """The corpus of real meshes in tests/data/meshes (see its SOURCES.md; never modified by tests)."""
    return MESHES
