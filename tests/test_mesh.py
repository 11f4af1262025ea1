"""The shared geometry helpers of fieldgen.meshing.tetmesh against independent computations."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from fieldgen.meshing.tetmesh import (box_grid, boundary_faces_of, cross, min_dihedral_angles, orient_positive, p1_gradients,
                           tet_volumes)


def cube_tets(n: int = 3):
    """A structured n^3 grid of the unit cube, 6 tets per cell (Kuhn split)."""
    g = np.linspace(0.0, 1.0, n + 1)
    return box_grid(g, g, g)


def test_orientation_and_volume_sum():
    points, tets = cube_tets()
    volumes = tet_volumes(points, tets)
    assert np.all(volumes > 0)
    assert volumes.sum() == pytest.approx(1.0, rel=1e-14)


def test_boundary_faces_are_the_once_used_faces_wound_outward():
    points, tets = cube_tets()
    faces = boundary_faces_of(tets)
    counts = Counter(tuple(sorted(f)) for t in tets for f in (t[[1, 2, 3]], t[[0, 2, 3]], t[[0, 1, 3]], t[[0, 1, 2]]))
    once = {f for f, c in counts.items() if c == 1}
    assert {tuple(sorted(f)) for f in faces} == once
    assert len(faces) == 6 * 9 * 2
    # Outward: the normal points away from the cube's centre, and the face areas sum to 6.
    p = points[faces]
    normals = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    assert np.all(np.einsum("ij,ij->i", normals, p.mean(axis=1) - 0.5) > 0)
    assert np.sum(np.linalg.norm(normals, axis=1)) / 2 == pytest.approx(6.0, rel=1e-14)


def test_p1_gradient_of_a_linear_field_is_exact():
    points, tets = cube_tets()
    g = np.array([0.3, -2.0, 5.0])
    gradients = p1_gradients(points, tets, points @ g + 1.5)
    assert np.allclose(gradients, g, rtol=0, atol=1e-12)


def test_min_dihedral_angle_of_known_tets():
    regular = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1.0]])
    tets = orient_positive(regular, np.array([[0, 1, 2, 3]]))
    assert min_dihedral_angles(regular, tets)[0] == pytest.approx(np.degrees(np.arccos(1 / 3)), rel=1e-12)
    corner = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]])
    assert min_dihedral_angles(corner, np.array([[0, 1, 2, 3]]))[0] == pytest.approx(np.degrees(np.arctan(np.sqrt(2))), rel=1e-12)


def test_row_cross_product_is_bit_identical_to_numpy():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(1000, 3)) * 1e3, rng.normal(size=(1000, 3)) * 1e-3
    np.testing.assert_array_equal(cross(a, b), np.cross(a, b))


def test_shared_p1_geometry_gives_the_same_bits():
    """The build computes the mesh geometry of the gradients once (during the extent solve) and
    takes the volumes from it: the validation recomputes both without it, so they must agree to
    the bit, not merely to rounding."""
    from fieldgen.meshing.tetmesh import p1_geometry, tet_volumes

    rng = np.random.default_rng(11)
    points, tets = box_grid(*(np.linspace(0, 1, 7),) * 3)
    points = points + rng.normal(scale=0.02, size=points.shape) * 1e-3
    values = np.column_stack([np.sin(points @ [1.0, 2.0, 3.0]) * 1e5, points[:, 2]])
    geometry = p1_geometry(points, tets)
    np.testing.assert_array_equal(p1_gradients(points, tets, values, geometry=geometry),
                                  p1_gradients(points, tets, values))
    np.testing.assert_array_equal(p1_gradients(points, tets, values[:, 0], geometry=geometry),
                                  p1_gradients(points, tets, values[:, 0]))
    np.testing.assert_array_equal(geometry[3] / 6.0, tet_volumes(points, tets))
