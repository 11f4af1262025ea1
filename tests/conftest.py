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


@pytest.fixture(scope="session")
def plate(tmp_path_factory) -> Path:
    """A rigid plate 0.2 x 0.2 x 0.02 m as an STL, its top face at z = 0 (the contact tests' floor)."""
    import trimesh

    from test_runtime_meshes import box_surface

    path = tmp_path_factory.mktemp("plate") / "plate.stl"
    trimesh.Trimesh(*box_surface([-0.1, -0.1, -0.02], [0.1, 0.1, 0.0]), process=False).export(path)
    return path


# --------------------------------------------------------------------------- ParaView
# tests/test_paraview.py runs the ParaView scripts in real ParaView. Without pvpython (or
# without Xvfb and a display) those tests are deselected, not skipped, and the run says so in
# one line; on CI (CI=true, or FIELDGEN_REQUIRE_PARAVIEW=1 as make check-paraview sets) they
# are kept and fail, so CI cannot pass without them.

def _paraview_missing() -> str | None:
    import os
    import shutil

    if shutil.which("pvpython") is None:
        return "pvpython not found"
    if not os.environ.get("DISPLAY") and shutil.which("Xvfb") is None:
        return "no display and no Xvfb"
    return None


def pytest_configure(config):
    config.addinivalue_line("markers", "paraview: runs pvpython (tests/test_paraview.py)")


def pytest_terminal_summary(terminalreporter):
    missing = _paraview_missing()
    if missing and not _on_ci():
        terminalreporter.write_line(f"ParaView checks NOT run ({missing}): apt-get install paraview python3-paraview xvfb, "
                                    "then make check-paraview", yellow=True)


def _on_ci() -> bool:
    """CI (or make check-paraview): missing ParaView is a failure, never a quiet pass."""
    import os

    return (os.environ.get("CI", "").lower() in ("1", "true", "yes")
            or bool(os.environ.get("FIELDGEN_REQUIRE_PARAVIEW")))


def pytest_collection_modifyitems(config, items):
    if _paraview_missing() is None or _on_ci():
        return
    kept = [item for item in items if item.get_closest_marker("paraview") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
