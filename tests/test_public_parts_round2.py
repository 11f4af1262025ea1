"""Failures a second batch of public parts found (benchmarks/README.md, "Fifteen more public parts
(second batch)"), each reduced to a small input built here."""

from __future__ import annotations

import os

import numpy as np
import pytest
import trimesh

from fieldgen.errors import MesherCrash
from fieldgen.io.polygons import MAX_CLIPPED_CORNERS, split_polygon
from fieldgen.io.surface_readers import read_triangles
from fieldgen.meshing.tetgen import tetrahedralize
from fieldgen.meshing.tetmesh import FREE
from fieldgen.surface.intersections import intersecting_face_pairs

#: An L-shaped prism, 2 high: the L (3 x 3 with a 2 x 2 notch cut from one corner) as two
#: hexagons, and six side quads. The caps start at a corner whose fan crosses the notch.
L_PRISM_OBJ = """\
# an L-shaped prism written as polygons, as CAD exporters write them
v 1 1 0
v 1 3 0
v 0 3 0
v 0 0 0
v 3 0 0
v 3 1 0
v 1 1 2
v 1 3 2
v 0 3 2
v 0 0 2
v 3 0 2
v 3 1 2
f 2 1 6 5 4 3
f 8 9 10 11 12 7
f 1 2 8 7
f 2 3 9 8
f 3 4 10 9
f 4 5 11 10
f 5 6 12 11
f 6 1 7 12
"""


def _mesh(path) -> trimesh.Trimesh:
    read = read_triangles(path)
    mesh = trimesh.Trimesh(read.vertices, read.faces, process=False)
    mesh.merge_vertices()
    return mesh


def test_a_non_convex_obj_polygon_is_split_inside_itself(tmp_path):
    """A fan from a corner of a non-convex face covers its notch with triangles outside the face,
    which overlap the notch's walls: the part was refused as intersecting itself (and --robust
    meshed the notch filled). Ear clipping keeps the triangles inside the face."""
    path = tmp_path / "l_prism.obj"
    path.write_text(L_PRISM_OBJ)
    mesh = _mesh(path)
    assert mesh.is_watertight and mesh.is_winding_consistent
    assert np.isclose(mesh.volume, 2 * (9 - 4))
    assert len(intersecting_face_pairs(mesh.vertices, mesh.faces)) == 0


def test_a_convex_obj_polygon_keeps_its_fan(tmp_path):
    """Convex polygons are split as before: a fan from their first corner."""
    path = tmp_path / "quad.obj"
    path.write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0.5 0 0\nf 1 5 2 3 4\n")
    assert read_triangles(path).faces.tolist() == [[0, 4, 1], [0, 1, 2], [0, 2, 3]]


def test_an_obj_line_continued_with_a_backslash_is_read(tmp_path):
    """Rhino writes long faces over several lines, each but the last ending in a backslash; the
    reader stopped at the backslash as "not a vertex number", advising another format."""
    text = L_PRISM_OBJ.replace("f 2 1 6 5 4 3", "f 2 1 6 \\\n5 4 \\\n3").replace("\n", "\r\n")
    path = tmp_path / "rhino.obj"
    path.write_bytes(text.encode())
    mesh = _mesh(path)
    assert len(read_triangles(path).faces) == 20
    assert mesh.is_watertight and np.isclose(mesh.volume, 10.0)


def test_an_internal_tetgen_error_advises_remeshing_the_surface(monkeypatch):
    """A 3D-printed fingertip (closed, manifold, needle triangles) under a 2 mm skin: TetGen stopped
    within `split_segment` at every size the skin tried, and the error advised repairing a surface
    that needed none, or relaxing radius_edge (at --radius-edge 4 TetGen ran past 9 minutes). The
    advice now names the remesh that meshed it (--surface-tolerance)."""
    import subprocess

    class Child:
        def __init__(self, args, cwd=None, **kwargs):
            with open(os.path.join(cwd, "error.txt"), "w") as handle:
                handle.write("Internal TetGen error within `split_segment`.")

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(subprocess, "Popen", Child)
    box = trimesh.creation.box(extents=(1, 1, 1))
    with pytest.raises(MesherCrash) as info:
        tetrahedralize(box.vertices, box.faces, np.full(len(box.faces), FREE))
    assert "--surface-tolerance" in info.value.fix


def _l_prism_off() -> str:
    """The L-shaped prism as an OFF: vertices numbered from 0, each face a count and its corners
    (the hexagons with a colour after them, as some exporters write)."""
    lines = L_PRISM_OBJ.splitlines()
    vertices = [line[2:] for line in lines if line.startswith("v ")]
    faces = [[int(k) - 1 for k in line[2:].split()] for line in lines if line.startswith("f ")]
    rows = [f"{len(f)} " + " ".join(map(str, f)) + (" 0.5 0.5 0.5" if len(f) == 6 else "") for f in faces]
    return f"OFF\n# an L prism\n{len(vertices)} {len(faces)} 0\n" + "\n".join(vertices + rows) + "\n"


def test_an_off_with_non_convex_polygons_is_read_and_split_inside_them(tmp_path):
    """OFF, read through trimesh, stopped on its hexagons (numpy 2 refuses trimesh's fan of a
    face past four corners: "cannot be read as an OFF mesh (The 'out' kwarg is necessary ...)",
    advising another format); a fan would also have crossed the notch. Now read here."""
    path = tmp_path / "l_prism.off"
    path.write_text(_l_prism_off())
    mesh = _mesh(path)
    assert mesh.is_watertight and np.isclose(mesh.volume, 10.0)
    assert len(intersecting_face_pairs(mesh.vertices, mesh.faces)) == 0


def test_an_off_of_triangles_reads_as_trimesh_reads_it(tmp_path):
    """Triangle OFF files read as before: the same vertices and faces in the same order."""
    box = trimesh.creation.box(extents=(1, 2, 3))
    path = tmp_path / "box.off"
    box.export(path)
    read = read_triangles(path)
    assert np.array_equal(read.faces, box.faces) and np.allclose(read.vertices, box.vertices)


def test_a_backslash_ending_an_obj_comment_continues_nothing(tmp_path):
    """A Windows path in a comment (``# C:\\parts\\``) once joined the next line to it, so a vertex
    was lost and the faces after it named vertices one off."""
    path = tmp_path / "tetra.obj"
    path.write_text("v 0 0 0 # C:\\parts\\\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    read = read_triangles(path)
    assert len(read.vertices) == 4 and read.faces.max() == 3


def test_a_polygon_of_more_corners_than_ear_clipping_takes_is_a_fan():
    """Ear clipping is quadratic or worse (1,600 corners took 7 s): past MAX_CLIPPED_CORNERS a
    non-convex polygon is split into the fan every reader made before, at once."""
    n = MAX_CLIPPED_CORNERS + 2
    angle = np.linspace(0.0, 2 * np.pi, n, endpoint=False)
    radius = np.where(np.arange(n) % 2 == 0, 1.0, 0.5)            # a star: not convex
    points = np.column_stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros(n)])
    assert split_polygon(list(range(n)), points) == [(0, i, i + 1) for i in range(1, n - 1)]
    small = points[::2][:40].copy()
    small[1::2, :2] *= 0.5                                         # a 40-corner star is clipped
    assert split_polygon(list(range(40)), small)[0] != (0, 1, 2)


def test_a_non_convex_quad_of_a_volume_mesh_file_is_split_inside_itself(tmp_path):
    """meshio's quad and polygon cells were split as fans from their first corner, as the OBJ
    reader's were: a dart's fan covered its notch (area 2.5 for a face of 1.5). Now they go
    through the one polygon splitter."""
    import meshio  # lazy: only this test writes a volume-mesh file

    dart = np.array([[0.0, 0.0, 0.0], [2.0, 1.0, 0.0], [0.0, 2.0, 0.0], [0.5, 1.0, 0.0]])
    path = tmp_path / "dart.vtk"
    meshio.write(path, meshio.Mesh(dart, [("quad", np.array([[0, 1, 2, 3]]))]))
    read = read_triangles(path)
    corners = read.vertices[read.faces]
    areas = 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    assert len(read.faces) == 2 and areas.sum() == pytest.approx(1.5)
