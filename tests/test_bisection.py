"""Layering by bisection (docs/model.md §2.4, step 2), on a case that takes it: a structured slab
(4 x 3 x 20 cubes, 6 tets each) whose extent is the slab's linear field, fine in the extent
against the levels of a hyperbolic law (M0 1e5, K 0.5) at a tolerance of 200 Pa, so only the
tets crossing a level are split and the mesh does not double (the slabs are not taken).

Checked independently of the implementation: conformity (every interior face shared by exactly
two tets, the boundary faces those used once, no vertex lying inside an edge of a tet it does not
belong to), positive volumes summing to the slab's, and the extent — unchanged at the original
vertices, and the slab's linear field at the new ones.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fieldgen.material.layering import layer
from fieldgen.material.modulus import hyperbolic_law
from test_layering import SLAB, slab_mesh

TOLERANCE = 200.0


@pytest.fixture(scope="module")
def bisected():
    mesh = slab_mesh(nx=4, ny=3, nz=20)
    extent = 1.0 - mesh.points[:, 2] / SLAB[2]
    result = layer(mesh, extent, hyperbolic_law(1e5, 0.5), TOLERANCE)
    return mesh, extent, result


def faces_of(tets: np.ndarray) -> Counter:
    """How many tets use each face (vertex triple, sorted)."""
    count: Counter = Counter()
    for tet in np.sort(tets, axis=1).tolist():
        for skip in range(4):
            count[tuple(v for i, v in enumerate(tet) if i != skip)] += 1
    return count


def hanging_vertices(points: np.ndarray, tets: np.ndarray) -> list[tuple[int, tuple[int, int]]]:
    """Vertices lying strictly inside an edge of some tet (a split not carried to that tet)."""
    edges = {tuple(sorted((t[i], t[j]))) for t in tets.tolist() for i in range(4) for j in range(i + 1, 4)}
    found = []
    for a, b in edges:
        pa, pb = points[a], points[b]
        length = np.linalg.norm(pb - pa)
        t = (points - pa) @ (pb - pa) / length ** 2
        off = np.linalg.norm(points - pa - np.outer(t, pb - pa), axis=1)
        inside = np.flatnonzero((t > 1e-9) & (t < 1 - 1e-9) & (off < 1e-9 * length))
        found += [(int(v), (a, b)) for v in inside]
    return found


def test_the_case_takes_bisection(bisected):
    mesh, _, result = bisected
    assert result.method == "bisection"
    assert mesh.n_tets < result.mesh.n_tets <= 2 * mesh.n_tets
    assert result.max_interpolation_error <= TOLERANCE


def test_bisection_is_conforming(bisected):
    _, _, result = bisected
    after = result.mesh
    uses = faces_of(after.tets)
    assert set(uses.values()) <= {1, 2}
    once = {face for face, n in uses.items() if n == 1}
    assert once == {tuple(f) for f in np.sort(after.boundary_faces, axis=1).tolist()}
    # every boundary face lies on the slab's six planes (no interior face left unmatched)
    p = after.points[np.array(sorted(once))]
    on_plane = np.zeros(len(p), dtype=bool)
    for axis, size in enumerate(SLAB):
        for value in (0.0, size):
            on_plane |= np.all(np.abs(p[:, :, axis] - value) < 1e-12, axis=1)
    assert on_plane.all()
    assert hanging_vertices(after.points, after.tets) == []


def test_bisection_volumes_are_positive_and_fill_the_slab(bisected):
    _, _, result = bisected
    p = result.mesh.points[result.mesh.tets]
    volumes = np.einsum("ij,ij->i", p[:, 1] - p[:, 0], np.cross(p[:, 2] - p[:, 0], p[:, 3] - p[:, 0])) / 6.0
    assert np.all(volumes > 0)
    assert volumes.sum() == pytest.approx(np.prod(SLAB), rel=1e-12)


def test_bisection_keeps_the_extent(bisected):
    """The original vertices keep their place and extent (none lies near a level here, so none is
    snapped), and every new vertex carries the slab's linear field 1 − z/H."""
    mesh, extent, result = bisected
    n = len(mesh.points)
    gap = np.min(np.abs(extent[:, None] - result.levels[None, :]))
    assert gap > 5e-4                                                # nothing to snap in this case
    np.testing.assert_array_equal(result.mesh.points[:n], mesh.points)
    np.testing.assert_array_equal(result.extent[:n], extent)
    assert len(result.mesh.points) > n
    np.testing.assert_allclose(result.extent[n:], 1.0 - result.mesh.points[n:, 2] / SLAB[2], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(result.pressure, hyperbolic_law(1e5, 0.5).pressure(result.extent))
