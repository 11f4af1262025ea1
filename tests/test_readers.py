"""One reader per file kind: surface meshes (fieldgen.surface.read_triangles, behind
load_surface), assets (fieldgen.asset.read_vtu, behind read_asset/read_metadata) and legacy .vtk
tet meshes (fieldgen.runtime.bodies.read_legacy_vtk_tets). Build and runtime read a file alike."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from fieldgen.runtime.bodies import RigidBody, load_body
from fieldgen.surface import load_surface

PACKAGE = Path(__file__).resolve().parents[1] / "fieldgen"
CLI = Path(__file__).resolve().parents[1] / "cli"

#: the calls that parse a file of each kind, and the one module allowed to make them
READERS = {
    r"trimesh\.load\w*\(|meshio\.read\(|stl\.mesh|def _read_obj\(": "fieldgen/surface.py",
    r"vtkXMLUnstructuredGridReader\(\)": "fieldgen/asset.py",
    r"vtkUnstructuredGridReader\(\)|==\s*[\"']POINTS|\.startswith\([\"']POINTS": "fieldgen/runtime/bodies.py",
}


@pytest.mark.parametrize("pattern", sorted(READERS))
def test_each_format_is_parsed_in_one_module(pattern):
    users = set()
    for source in [*PACKAGE.rglob("*.py"), *CLI.rglob("*.py")]:
        if re.search(pattern, source.read_text(encoding="utf-8")):
            users.add(source.relative_to(PACKAGE.parent).as_posix())
    assert users == {READERS[pattern]}


@pytest.mark.parametrize("name, units", [("unit_sphere.STL", "mm"), ("fandisk.obj", "m"), ("torus.STL", "mm")])
def test_runtime_rigid_body_reads_like_the_builder(meshes, name, units):
    """A closed, outward part: the same vertices and faces (seams merged, in metres) both ways."""
    surface = load_surface(meshes / name, units)
    body = RigidBody.from_mesh(meshes / name, units)
    assert np.array_equal(body.vertices, surface.vertices)
    assert np.array_equal(body.faces, surface.faces)


def test_stl_seams_merged_for_the_runtime(meshes):
    """STL stores 3 corners per face; merged, the part has as many vertices as trimesh's own
    exact-duplicate merge finds, and Euler's V - E + F = 2 for the closed sphere."""
    import trimesh

    body = load_body(meshes / "unit_sphere.STL")
    reference = trimesh.load(meshes / "unit_sphere.STL", force="mesh", process=True)
    assert len(body.vertices) == len(reference.vertices) and len(body.faces) == len(reference.faces)
    edges = np.unique(np.sort(body.faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)
    assert len(body.vertices) - len(edges) + len(body.faces) == 2
