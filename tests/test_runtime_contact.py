"""Contact surfaces and wrenches against closed forms (docs/model.md §3-4)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fieldgen.meshing.tetmesh import orient_positive
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.surface import PassThroughWarning, compute_contact_surface
from fieldgen.runtime.contact.pose import Pose, rotation_from_rpy
from fieldgen.runtime.contact.wrench import contact
from test_runtime_meshes import box_grid, box_surface, slab

H = 0.02      # slab thickness, m
M0 = 1e6      # Pa


@pytest.fixture(scope="module")
def foundation():
    """Slab [-0.1, 0.1]² × [0, H], bonded bottom, linear law p0 = M0·e, e = 1 − z/H."""
    points, tets = slab(0.2, H, 10, np.linspace(0, H, 5))
    extent = 1 - points[:, 2] / H
    return CompliantGeometry.from_arrays(points, tets, M0 * extent, extent=extent, name="slab")


@pytest.fixture(scope="module")
def box():
    return RigidGeometry(*box_surface([-0.03, -0.04, 0.0], [0.03, 0.04, 0.05]), name="box")


def test_slab_knows_its_core_and_thickness(foundation):
    # The bonded bottom (10 × 10 cells, 2 triangles each) is the rigid core; L = H (D C.3).
    assert len(foundation.core_faces) == 200
    assert np.all(foundation.points[foundation.core_faces, 2] == 0.0)
    assert foundation.characteristic_length == pytest.approx(H, rel=1e-12)
    assert foundation.modulus == M0


@pytest.mark.parametrize("representation", ["polygon", "triangle"])
@pytest.mark.parametrize("depth", [0.001, 0.003, 0.0137])
def test_elastic_foundation_box(foundation, box, representation, depth):
    """A rigid box pressed d into the bonded slab: F = M0·A·d/H (Winkler), and the torque
    about the surface centroid vanishes; a tilt-free box at an off-centre xy."""
    pose = Pose.from_xyz_rpy(0.0013, -0.0021, H - depth)
    surface, wrench = contact(foundation, np.eye(4), box, pose, representation=representation)
    expected = M0 * 0.06 * 0.08 * depth / H
    assert wrench.force[2] == pytest.approx(expected, rel=1e-9)
    assert np.abs(wrench.force[:2]).max() < 1e-9 * expected
    assert np.abs(wrench.torque_about_centroid).max() < 1e-9 * expected * 0.1
    # torque about the world origin = r_c × F with r_c the centre of the footprint
    assert np.allclose(wrench.torque, np.cross([0.0013, -0.0021, H - depth], wrench.force), atol=1e-9 * expected)
    # bottom face (0.06 × 0.08) plus the four side faces below the surface
    assert wrench.area == pytest.approx(0.06 * 0.08 + 2 * (0.06 + 0.08) * depth, rel=1e-12)
    assert np.all(np.diff(surface.face_offsets) >= 3)
    assert np.all(np.isnan(surface.grad_b)) and np.all(np.isfinite(surface.grad_a))
    # Newton's third law, by construction of the result
    assert np.array_equal(wrench.force_on_a, -wrench.force)


def test_rigid_as_body_a_flips_the_normal(foundation, box):
    """Swapping A and B: same surface, normals and force reversed (n points from A into B)."""
    pose = Pose.from_xyz_rpy(0.004, 0.0, H - 0.002, 3.0, -2.0, 10.0)
    s_ab, w_ab = contact(foundation, np.eye(4), box, pose)
    s_ba, w_ba = contact(box, pose, foundation, np.eye(4))
    assert s_ab.n_faces == s_ba.n_faces > 0
    assert np.allclose(w_ab.force, -w_ba.force, rtol=0, atol=1e-9 * np.linalg.norm(w_ab.force))
    assert np.allclose(w_ab.torque, -w_ba.torque, rtol=0, atol=1e-9 * np.linalg.norm(w_ab.force))
    # force on the box points up (out of the slab), on the slab down
    assert w_ab.force[2] > 0 and w_ba.force[2] < 0


def test_whole_scene_rotated_rotates_the_wrench(foundation, box):
    """Frame independence: moving both bodies by one rigid motion moves the wrench with it."""
    pose = Pose.from_xyz_rpy(0.004, 0.001, H - 0.002, 3.0, -2.0, 10.0)
    _, w0 = contact(foundation, np.eye(4), box, pose)
    G = Pose.from_xyz_rpy(0.3, -0.2, 0.1, 40.0, 25.0, -70.0)
    _, w1 = contact(foundation, G, box, G @ pose)
    scale = np.linalg.norm(w0.force)
    assert np.allclose(w1.force, G.rotation @ w0.force, atol=1e-9 * scale)
    assert np.allclose(w1.torque_about_centroid, G.rotation @ w0.torque_about_centroid, atol=1e-9 * scale * 0.1)
    assert np.allclose(w1.centroid, G.rotation @ w0.centroid + G.translation, atol=1e-12)


def test_rigid_rigid_and_separated_bodies_give_empty_surfaces(foundation, box):
    s, w = contact(box, np.eye(4), box, Pose.from_xyz_rpy(0.01))
    assert s.n_faces == 0 and w.n_faces == 0 and np.all(w.force == 0)
    s, w = contact(foundation, np.eye(4), box, Pose.from_xyz_rpy(z=H + 1e-6), representation="triangle")
    assert s.n_faces == 0 and np.all(w.force == 0) and w.area == 0


def test_pass_through_warns(foundation, box):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        contact(foundation, np.eye(4), box, Pose.from_xyz_rpy(z=0.004))    # 16 mm deep of 20: fine
    with pytest.warns(PassThroughWarning, match="rigid core of slab"):
        contact(foundation, np.eye(4), box, Pose.from_xyz_rpy(z=-0.001))   # through the bottom


def test_same_inputs_give_identical_arrays(foundation, box):
    pose = Pose.from_xyz_rpy(0.004, 0.001, H - 0.002, 3.0, -2.0, 10.0)
    s1, w1 = contact(foundation, np.eye(4), box, pose, representation="triangle")
    s2, w2 = contact(foundation, np.eye(4), box, pose, representation="triangle")
    for name in ("vertices", "face_vertices", "normals", "areas", "vertex_pressure", "grad_a"):
        assert np.array_equal(getattr(s1, name), getattr(s2, name), equal_nan=True)
    assert np.array_equal(w1.force, w2.force) and np.array_equal(w1.torque, w2.torque)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        s3, w3 = contact(foundation, np.eye(4), box, pose, representation="polygon")
    s4, w4 = contact(foundation, np.eye(4), box, pose, representation="polygon")
    assert np.array_equal(s3.vertices, s4.vertices) and np.array_equal(w3.force, w4.force)
    assert np.array_equal(w3.torque, w4.torque)


def drake_cube(E, coordinates):
    """Cube [-0.05, 0.05]³ on a grid, Drake's field p = E·d/max d with d the distance to the
    cube's boundary (exact for a box: the distance to the nearest face)."""
    points, tets = box_grid(coordinates, coordinates, coordinates)
    d = np.min(0.05 - np.abs(points), axis=1)
    return CompliantGeometry.from_arrays(points, tets, E * d / d.max(), name="cube")


def test_two_drake_cubes_face_to_face():
    """Two 0.1 m cubes, E = 1e5 Pa, overlapping 2 mm: Drake reports 19.208 N and a 2000 Pa peak
    (pydrake 1.51.1). On a grid whose outer cells are 2 mm the mid-plane pressure is 2000 Pa inside
    the 2 mm rim and falls linearly to 0 across it, so F = 2000·(0.1 − 0.002)² = 19.208 N."""
    half = np.array([0.0, 0.002, 0.01, 0.02, 0.03, 0.04, 0.05])
    c = np.concatenate([half - 0.05, (0.05 - half[::-1])[1:]])
    cube = drake_cube(1e5, c)
    for representation in ("polygon", "triangle"):
        surface, wrench = contact(cube, np.eye(4), cube, Pose.from_xyz_rpy(x=0.098), representation=representation)
        assert wrench.force[0] == pytest.approx(19.208, rel=1e-9)
        assert surface.vertex_pressure.max() == pytest.approx(2000.0, rel=1e-12)
        # equal-pressure plane is the mid-plane x = 0.049 where it is not bent by the rim
        inner = np.all(np.abs(surface.centroids[:, 1:]) < 0.048, axis=1)
        assert np.allclose(surface.centroids[inner, 0], 0.049, atol=1e-15)
        assert np.allclose(surface.normals[inner], [1, 0, 0], atol=1e-15)
    # The small lateral force comes from the rim, where the Kuhn split (all diagonals along
    # +x+y+z) makes the P1 fields lopsided; the mirror-image mesh gives the mirror-image wrench.
    _, wrench = contact(cube, np.eye(4), cube, Pose.from_xyz_rpy(x=0.098))
    points = cube.points * [1, -1, 1]
    mirror = CompliantGeometry.from_arrays(points, orient_positive(points, cube.tets), cube.pressure)
    _, mirrored = contact(mirror, np.eye(4), mirror, Pose.from_xyz_rpy(x=0.098))
    assert abs(wrench.force[1]) > 1e-3
    assert np.allclose(mirrored.force, wrench.force * [1, -1, 1], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("representation", ["polygon", "triangle"])
def test_two_linear_slabs_closed_form(representation):
    """Slab A (z ∈ [−H, 0], p_a = M_a·(−z)/H, 0.2 m wide) under slab B (z ∈ [−d, H−d],
    p_b = M_b·(z+d)/H, 0.08 × 0.06 m, shifted): the equal-pressure plane is z* = −M_b d/(M_a+M_b),
    p* = M_a M_b d/((M_a + M_b) H), F = p*·(overlap area), normal +z from A into B.
    Both fields are exactly linear, so this holds to rounding on any mesh; the whole scene is
    rotated to exercise the frames."""
    Ma, Mb, d = 2e6, 5e5, 0.0031
    pa_pts, pa_tets = box_grid(np.linspace(-0.1, 0.1, 6), np.linspace(-0.1, 0.1, 7), np.linspace(-H, 0, 4))
    pb_pts, pb_tets = box_grid(np.linspace(-0.04, 0.04, 5), np.linspace(-0.03, 0.03, 4), np.linspace(0, H, 3))
    A = CompliantGeometry.from_arrays(pa_pts, pa_tets, Ma * (-pa_pts[:, 2]) / H, name="A")
    B = CompliantGeometry.from_arrays(pb_pts, pb_tets, Mb * pb_pts[:, 2] / H, name="B")
    G = Pose.from_xyz_rpy(0.5, 0.2, -0.3, 20, -35, 60)
    X_WB = G @ Pose.from_xyz_rpy(0.0123, -0.007, -d, 0, 0, 0)
    surface, wrench = contact(A, G, B, X_WB, representation=representation)
    p_star = Ma * Mb * d / ((Ma + Mb) * H)
    z_star = -Mb * d / (Ma + Mb)
    R = G.rotation
    assert np.allclose(wrench.force, R @ [0, 0, p_star * 0.08 * 0.06], rtol=0, atol=1e-9 * p_star * 0.0048)
    assert np.allclose(surface.vertex_pressure, p_star, rtol=1e-9)
    local = (surface.vertices - G.translation) @ R
    assert np.allclose(local[:, 2], z_star, atol=1e-12)
    assert np.allclose(surface.normals, R[:, 2], atol=1e-12)
    assert surface.total_area == pytest.approx(0.08 * 0.06, rel=1e-12)
    assert np.allclose(surface.grad_a, R @ [0, 0, -Ma / H], rtol=1e-9)
    assert np.allclose(surface.grad_b, R @ [0, 0, Mb / H], rtol=1e-9)


def test_equal_gradients_contribute_nothing():
    """Identical linear fields with the same gradient: no equal-pressure plane (D C.2)."""
    pts, tets = box_grid(np.linspace(0, 1, 3), np.linspace(0, 1, 3), np.linspace(0, 1, 3))
    A = CompliantGeometry.from_arrays(pts, tets, 1e4 * (1 + pts[:, 0]))
    s = compute_contact_surface(A, np.eye(4), A, Pose.from_xyz_rpy(0.3, 0.2, 0.1))
    assert s.n_faces == 0


def test_rotation_convention():
    """Fixed-axis roll-pitch-yaw: R = Rz(yaw)·Ry(pitch)·Rx(roll) in degrees."""
    assert np.allclose(rotation_from_rpy(90, 0, 0) @ [0, 1, 0], [0, 0, 1])
    assert np.allclose(rotation_from_rpy(0, 90, 0) @ [0, 0, 1], [1, 0, 0])
    assert np.allclose(rotation_from_rpy(0, 0, 90) @ [1, 0, 0], [0, 1, 0])
    R = rotation_from_rpy(10, 20, 30)
    assert np.allclose(R, rotation_from_rpy(0, 0, 30) @ rotation_from_rpy(0, 20, 0) @ rotation_from_rpy(10, 0, 0))
    X = Pose.from_xyz_rpy(1, 2, 3, 10, 20, 30)
    assert np.allclose((X @ X.inverse()).matrix, np.eye(4))


def test_compliant_pair_pass_through_warns_and_polygons_stay_small():
    """Two bonded slabs (cores at their far faces), B ten times stiffer: with B's core at z_B the
    equal-pressure plane is z* = 10·z_B/11, so it reaches A's core z = −H when z_B = −1.1H; tilt
    B by 5° and the plane crosses A's core face: pass-through (D 5.1.2), reported as a warning.
    Every polygon of a tet pair has at most 8 vertices (D C.1)."""
    pa, ta = box_grid(np.linspace(-0.1, 0.1, 5), np.linspace(-0.1, 0.1, 5), np.linspace(-H, 0, 4))
    pb, tb = box_grid(np.linspace(-0.05, 0.05, 4), np.linspace(-0.05, 0.05, 4), np.linspace(0, H, 3))
    A = CompliantGeometry.from_arrays(pa, ta, M0 * (-pa[:, 2]) / H, name="A")
    B = CompliantGeometry.from_arrays(pb, tb, 10 * M0 * pb[:, 2] / H, name="B")
    assert len(A.core_faces) and len(B.core_faces)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        surface = compute_contact_surface(A, np.eye(4), B, Pose.from_xyz_rpy(0.003, 0.001, -0.7 * H, 5, 3, 20))
        assert surface.vertex_pressure.max() < 0.99 * M0
    assert surface.n_faces > 0 and surface.face_vertex_counts().max() <= 8
    with pytest.warns(PassThroughWarning, match="rigid core of A"):
        surface = compute_contact_surface(A, np.eye(4), B, Pose.from_xyz_rpy(z=-1.1 * H, roll=5.0))
    assert surface.n_faces > 0 and surface.vertex_pressure.max() == pytest.approx(M0, rel=1e-9)
