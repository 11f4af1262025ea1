"""Every mesh in tests/data/meshes/ is accounted for: an entry in SOURCES.md naming its origin and a
licence that lets us redistribute it, and a file the readers can read, with finite coordinates.
The parts outside the development corpus also have their documented units and size checked
against the file (a wrong unit would make every benchmark figure about a different part)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fieldgen.io.surface_readers import read_triangles
from fieldgen.surface.stage import UNIT_SCALE, load_surface

MESHES = Path(__file__).parent / "data" / "meshes"
SOURCES = MESHES / "SOURCES.md"

#: Licences that permit redistribution with attribution.
REDISTRIBUTABLE = ("MIT", "BSD-2-Clause", "BSD-3-Clause", "Apache-2.0", "CC-BY-4.0", "CC0", "Zlib")

#: Volume-mesh formats: a tet mesh has vertices but may have no triangle cells.
VOLUME_MESH_SUFFIXES = (".vtk", ".vtu", ".msh")

#: Parts the benchmark builds without --robust: they must be closed surfaces as published.
OPEN_OR_SELF_INTERSECTING = ("robotiq_fts150.stl", "counter.unitsmm.STL", "stretch_link_arm_l1.STL",
                             "interbotix_uxarm_left_inner_knuckle.stl", "cycloidal.ply", "wallhole.obj",
                             "box_sides.STEP", "shadow_palm.stl", "schunk_pw70_square_holder.stl")


def _tables(text: str) -> list[list[dict[str, str]]]:
    """The markdown tables of ``text``, each a list of rows keyed by the (lower-case) header."""
    tables, header, rows = [], None, []
    for line in text.splitlines() + [""]:
        if not line.startswith("|"):
            if header:
                tables.append(rows)
            header, rows = None, []
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = [c.lower() for c in cells]
        elif not set("".join(cells)) <= set("-: "):
            rows.append(dict(zip(header, cells)))
    return tables


def _entries() -> dict[str, dict[str, str]]:
    """File name -> its SOURCES.md row (a row may name several files, comma-separated)."""
    entries = {}
    for table in _tables(SOURCES.read_text(encoding="utf-8")):
        for row in table:
            for name in row.get("file", "").split(","):
                entries[name.strip().strip("`")] = row
    return entries


def _mesh_files() -> list[str]:
    return sorted(p.name for p in MESHES.iterdir() if p.is_file() and p.name != "SOURCES.md")


def _licence(row: dict[str, str]) -> str:
    return next((v for k, v in row.items() if k.startswith("licen")), "")


def test_every_mesh_has_a_sources_entry_with_a_redistributable_licence():
    entries = _entries()
    missing = [name for name in _mesh_files() if name not in entries]
    assert not missing, f"no SOURCES.md entry for {missing}"
    for name in _mesh_files():
        row = entries[name]
        licence = _licence(row)
        assert any(known in licence for known in REDISTRIBUTABLE), f"{name}: licence {licence!r}"
        origin = " ".join(v for k, v in row.items() if k not in ("file",) and not k.startswith("licen"))
        assert re.search(r"github\.com/|RobotLocomotion/|trimesh", origin), f"{name}: no origin in {row}"


def test_every_sources_entry_names_a_file_that_is_here():
    here = set(_mesh_files())
    stale = [name for name in _entries() if name not in here]
    assert not stale, f"SOURCES.md names files that are not in tests/data/meshes/: {stale}"


@pytest.mark.parametrize("name", _mesh_files())
def test_every_mesh_reads_with_finite_coordinates(name):
    read = read_triangles(MESHES / name)
    assert len(read.vertices) > 0 and np.isfinite(read.vertices).all()
    if Path(name).suffix.lower() not in VOLUME_MESH_SUFFIXES:
        assert len(read.faces) > 0
        assert read.faces.min() >= 0 and read.faces.max() < len(read.vertices)


def _sized_entries() -> list[tuple[str, str, tuple[float, ...]]]:
    """(file, units, documented bounding box in mm) of each row with a "units, size" column."""
    out = []
    for name, row in _entries().items():
        cell = row.get("units, size")
        if cell:
            units, size = cell.split(";", 1)
            numbers = re.match(r"\s*([\d.]+) × ([\d.]+) × ([\d.]+) mm", size)
            assert numbers, f"{name}: size {size!r} is not 'A × B × C mm'"
            out.append((name, units.strip(), tuple(float(v) for v in numbers.groups())))
    return sorted(out)


def test_the_parts_outside_the_development_corpus_are_documented_with_their_size():
    assert len(_sized_entries()) >= 10


@pytest.mark.parametrize("name, units, size_mm", _sized_entries())
def test_documented_units_and_size_match_the_file(name, units, size_mm):
    read = read_triangles(MESHES / name)
    extents_mm = np.ptp(read.vertices, axis=0) * UNIT_SCALE[units] * 1000.0
    np.testing.assert_allclose(sorted(extents_mm), sorted(size_mm), rtol=0.01, atol=0.6)


@pytest.mark.parametrize("name, units", [(n, u) for n, u, _ in _sized_entries()
                                         if n not in OPEN_OR_SELF_INTERSECTING])
def test_the_closed_parts_load_as_closed_surfaces(name, units):
    surface = load_surface(MESHES / name, units)
    assert np.isfinite(surface.vertices).all() and surface.volume > 0
