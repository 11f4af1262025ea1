"""One check for the layered first meshes (plates, tubes, trays): they fill the part and conform.

Expected values are the input surface's own volume and area (trimesh), not the mesher's output:
a mesh that leaves a gap loses volume, and one that does not conform (two tets meeting on part
of a face) leaves inner faces on its boundary, so its boundary's area exceeds the surface's.
"""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.meshing.tetmesh import tet_volumes


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
