"""The hand-written fast paths of the build against their references: scikit-fem assembly,
batched linear solves, per-pair arccos, lexsort, and closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.fe.extent import assemble, assemble_skfem
from fieldgen.material.layering import max_interpolation_error
from fieldgen.meshing.tetmesh import (FREE, RIGID, TetMesh, boundary_faces_of, hat_gradients, min_dihedral_angles,
                           p1_gradients, tet_volumes)
from fieldgen.material.modulus import hyperbolic_law, linear_law
from fieldgen.meshing.statistics import mesh_statistics, radius_edge_ratios
from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize

REGULAR = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=float)


@pytest.fixture(scope="module")
def ball() -> TetMesh:
    import trimesh

    sphere = trimesh.creation.icosphere(subdivisions=2, radius=0.05)
    markers = np.where(sphere.triangles_center[:, 2] < -0.03, RIGID, FREE)
    return tetrahedralize(sphere.vertices, sphere.faces, markers, options=MeshingOptions(edge_length=0.012))


def random_tets(rng, count=500):
    points = rng.normal(size=(4 * count, 3))
    tets = np.arange(4 * count).reshape(-1, 4)
    negative = tet_volumes(points, tets) < 0
    tets[negative, 2], tets[negative, 3] = tets[negative, 3], tets[negative, 2].copy()
    return points, tets


@pytest.mark.parametrize("problem", ["laplace", "poisson"])
def test_direct_assembly_equals_scikit_fem(ball, problem):
    stiffness, load = assemble(ball, problem)
    reference, reference_load = assemble_skfem(ball, problem)
    assert stiffness.shape == reference.shape and ball.n_tets > 1000
    difference = abs(stiffness - reference).max()
    assert difference <= 1e-12 * abs(reference).max()
    np.testing.assert_allclose(load, reference_load, rtol=1e-12, atol=1e-18)
    # rows of a P1 stiffness matrix sum to zero (constants are in the kernel)
    assert np.abs(stiffness @ np.ones(ball.n_points)).max() <= 1e-12 * abs(reference).max()
    if problem == "poisson":
        assert load.sum() == pytest.approx(tet_volumes(ball.points, ball.tets).sum(), rel=1e-12)


def test_hat_gradients_of_the_regular_tet():
    gradients, det = hat_gradients(REGULAR, np.array([[0, 1, 2, 3]]))
    assert det[0] == pytest.approx(6 * tet_volumes(REGULAR, np.array([[0, 1, 2, 3]]))[0])
    # λ_i is 1 at vertex i and 0 at the others: ∇λ_i · (x_j - x_k) = δ_ij - δ_ik
    for i in range(4):
        for j in range(4):
            assert gradients[0, i] @ (REGULAR[j] - REGULAR[0]) == pytest.approx(float(i == j) - float(i == 0))


def test_p1_gradients_match_a_batched_solve():
    rng = np.random.default_rng(7)
    points, tets = random_tets(rng)
    values = rng.normal(size=(len(points), 2))
    p = points[tets]
    reference = np.linalg.solve(p[:, 1:] - p[:, :1], (values[tets[:, 1:]] - values[tets[:, :1]]))
    both = p1_gradients(points, tets, values)
    np.testing.assert_allclose(both, reference, rtol=1e-9, atol=1e-9 * np.abs(reference).max())
    np.testing.assert_array_equal(p1_gradients(points, tets, values[:, 1]), both[:, :, 1])


def test_min_dihedral_is_the_smallest_pairwise_angle():
    rng = np.random.default_rng(3)
    points, tets = random_tets(rng)
    p = points[tets]
    faces = ((1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1))
    normals = [np.cross(p[:, b] - p[:, a], p[:, c] - p[:, a]) for a, b, c in faces]
    normals = [n / np.linalg.norm(n, axis=1, keepdims=True) for n in normals]
    angles = [np.degrees(np.arccos(np.clip(-np.sum(normals[i] * normals[j], axis=1), -1, 1)))
              for i in range(4) for j in range(i + 1, 4)]
    np.testing.assert_allclose(min_dihedral_angles(points, tets), np.min(angles, axis=0), rtol=0, atol=1e-9)
    regular = min_dihedral_angles(REGULAR, np.array([[0, 1, 2, 3]]))[0]
    assert regular == pytest.approx(np.degrees(np.arccos(1 / 3)), abs=1e-12)


def test_radius_edge_ratio_closed_forms():
    assert radius_edge_ratios(REGULAR, np.array([[0, 1, 2, 3]]))[0] == pytest.approx(np.sqrt(6) / 4, rel=1e-14)
    # right-corner tet of legs 1: circumradius sqrt(3)/2, shortest edge 1
    corner = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    assert radius_edge_ratios(corner, np.array([[0, 1, 2, 3]]))[0] == pytest.approx(np.sqrt(3) / 2, rel=1e-14)
    # shortest edge not at vertex 0
    squashed = corner * np.array([1.0, 1.0, 1.0]) + np.array([[0, 0, 0], [0, 0, 0], [0.9, -0.1, 0], [0, 0, 0]])
    p = squashed
    lengths = [np.linalg.norm(p[i] - p[j]) for i in range(4) for j in range(i + 1, 4)]
    a, b, c = p[1] - p[0], p[2] - p[0], p[3] - p[0]
    centre = np.linalg.solve(2 * np.array([a, b, c]), [a @ a, b @ b, c @ c])
    expected = np.linalg.norm(centre) / min(lengths)
    assert radius_edge_ratios(p, np.array([[0, 1, 2, 3]]))[0] == pytest.approx(expected, rel=1e-12)


def test_boundary_faces_equal_a_counting_reference(ball):
    faces = boundary_faces_of(ball.tets)
    local = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])
    all_faces = ball.tets[:, local].reshape(-1, 3)
    keys, counts = np.unique(np.sort(all_faces, axis=1), axis=0, return_counts=True)
    once = keys[counts == 1]
    np.testing.assert_array_equal(np.sort(faces, axis=1), once)        # same set, sorted order
    assert len(faces) == len(ball.boundary_faces)
    # outward: the divergence theorem gives the volume from the faces
    tri = ball.points[faces]
    volume = np.einsum("ij,ij->i", tri[:, 0], np.cross(tri[:, 1], tri[:, 2])).sum() / 6
    assert volume == pytest.approx(tet_volumes(ball.points, ball.tets).sum(), rel=1e-12)


def test_linear_law_error_is_measured_at_the_vertices(ball):
    law = linear_law(1e5)
    extent = np.linalg.norm(ball.points, axis=1) / 0.05
    extent = np.clip(extent, 0, 1)
    pressure = law.pressure(extent)
    assert max_interpolation_error(ball.points, ball.tets, extent, pressure, law) == 0.0
    bumped = pressure.copy()
    bumped[7] += 3.5
    assert max_interpolation_error(ball.points, ball.tets, extent, bumped, law) == pytest.approx(3.5)
    # a nonlinear law is sampled and finds an error between vertices
    curved = hyperbolic_law(1e5, 0.9)
    assert max_interpolation_error(ball.points, ball.tets, extent, curved.pressure(extent), curved) > 0


def test_mesh_statistics_with_given_dihedral_angles(ball):
    plain = mesh_statistics(ball)
    given = mesh_statistics(ball, min_dihedral=min_dihedral_angles(ball.points, ball.tets))
    assert plain == given
