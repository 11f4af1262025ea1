"""One check for the layered first meshes (plates, tubes, trays): they fill the part and conform,
and keep a bonded face's condition, the same mesh twice; and the right prism of a 2-D outline,
the input several tests build.

Expected values are the input surface's own volume and area (trimesh), not the mesher's output:
a mesh that leaves a gap loses volume, and one that does not conform (two tets meeting on part
of a face) leaves inner faces on its boundary, so its boundary's area exceeds the surface's.
"""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.meshing.tetmesh import FREE, RIGID, tet_volumes


def boundary_areas(points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area of each triangle ``faces`` of ``points``."""
    corners = points[faces]
    return 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)


def assert_fills_and_conforms(mesh, volume: float, area: float, rel: float = 1e-9) -> np.ndarray:
    """Every tet positive, their volume ``volume``, the boundary's area ``area``; returns the
    boundary faces' corners (k, 3, 3) for the caller's checks of each face's condition."""
    tets = tet_volumes(mesh.points, mesh.tets)
    assert tets.min() > 0, f"{int(np.count_nonzero(tets <= 0))} tets are not positive"
    assert tets.sum() == pytest.approx(volume, rel=rel)
    assert boundary_areas(mesh.points, mesh.boundary_faces).sum() == pytest.approx(area, rel=rel)
    return mesh.points[mesh.boundary_faces]


def assert_keeps_a_bonded_face(layered, part: trimesh.Trimesh, axis: int, level: float):
    """``layered(vertices, faces, markers)`` on ``part`` with its faces facing down ``axis``
    bonded: the same mesh twice, filling and conforming (:func:`assert_fills_and_conforms`), the
    boundary faces lying at ``level`` on ``axis`` bonded and no other. Returns the mesh."""
    markers = np.where(part.face_normals[:, axis] < -0.9, RIGID, FREE)
    mesh = layered(part.vertices, part.faces, markers)
    again = layered(part.vertices, part.faces, markers)
    assert np.array_equal(mesh.points, again.points) and np.array_equal(mesh.tets, again.tets)
    corners = assert_fills_and_conforms(mesh, abs(part.volume), part.area)
    bonded = np.isclose(corners[..., axis], level).all(axis=1)
    assert np.all(mesh.boundary_markers[bonded] == RIGID) and np.all(mesh.boundary_markers[~bonded] == FREE)
    return mesh


def right_prism(outline, caps, height: float, process: bool = False) -> trimesh.Trimesh:
    """The right prism of a 2-D ``outline`` (its points in order round it) triangulated by ``caps``
    (counter-clockwise triples of outline indices), from z = 0 to ``height``, its normals outward
    (``process``: trimesh's merging and cleaning on loading)."""
    xy = np.asarray(outline, dtype=float)
    n = len(xy)
    vertices = np.vstack([np.column_stack([xy, np.zeros(n)]), np.column_stack([xy, np.full(n, height)])])
    faces = [(a, c, b) for a, b, c in caps] + [(a + n, b + n, c + n) for a, b, c in caps]
    for i in range(n):
        j = (i + 1) % n
        faces += [(i, j, j + n), (i, j + n, i + n)]
    mesh = trimesh.Trimesh(vertices, np.array(faces), process=process)
    trimesh.repair.fix_normals(mesh)
    assert mesh.is_watertight and mesh.volume > 0
    return mesh
