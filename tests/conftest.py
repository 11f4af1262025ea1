"""Shared test fixtures: where the read-only mesh corpus lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FIELDGEN_SHARED", ROOT.parent / "shared"))
MESHES = SHARED / "meshes"


@pytest.fixture(scope="session")
def meshes() -> Path:
    """The corpus of real meshes in ../shared/meshes (never modified by tests)."""
    if not MESHES.is_dir():
        pytest.fail(f"mesh corpus not found at {MESHES}; set FIELDGEN_SHARED")
    return MESHES
