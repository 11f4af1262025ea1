"""Guarantees of the model (D A.1, A.2, C.5): continuity in pose, conservative elastic force,
damping and friction never add energy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.surface import compute_contact_surface
from fieldgen.runtime.contact.pose import Pose, SpatialVelocity, rotation_from_rpy
from fieldgen.runtime.contact.wrench import combined_dissipation, combined_friction, compute_wrench, contact
from test_runtime_meshes import box_grid, box_surface, slab

H, M0 = 0.02, 1e6
BOX_LO, BOX_HI = np.array([-0.03, -0.04, 0.0]), np.array([0.03, 0.04, 0.05])


@pytest.fixture(scope="module")
def foundation():
    points, tets = slab(0.2, H, 10, np.linspace(0, H, 5))
    extent = 1 - points[:, 2] / H
    return CompliantGeometry.from_arrays(points, tets, M0 * extent, extent=extent, dissipation=0.5,
                                         mu_static=0.6, mu_dynamic=0.4, name="slab")


@pytest.fixture(scope="module")
def box():
    return RigidGeometry(*box_surface(BOX_LO, BOX_HI), mu_static=0.6, mu_dynamic=0.4, name="box")


@pytest.fixture(scope="module")
def drake_cube():
    c = np.linspace(-0.05, 0.05, 11)
    points, tets = box_grid(c, c, c)
    d = np.min(0.05 - np.abs(points), axis=1)
    return CompliantGeometry.from_arrays(points, tets, 1e5 * d / d.max(), name="cube")


def elastic_energy(pose: Pose) -> float:
    """U = ∫ p0 dV over the box ∩ slab (D A.1): p0 = M0(1 − z/H) is linear, so U = M0·V·(1 − z_c/H)
    with V and centroid z_c of the convex polyhedron box ∩ {z <= H}, from its convex hull."""
    corners = np.array([[BOX_LO[0] if b & 1 == 0 else BOX_HI[0], BOX_LO[1] if b & 2 == 0 else BOX_HI[1],
                         BOX_LO[2] if b & 4 == 0 else BOX_HI[2]] for b in range(8)])
    corners = corners @ pose.rotation.T + pose.translation
    keep = [c for c in corners if c[2] <= H]
    for i in range(8):
        for j in range(i + 1, 8):
            if bin(i ^ j).count("1") == 1:
                a, b = corners[i], corners[j]
                if (a[2] - H) * (b[2] - H) < 0:
                    keep.append(a + (H - a[2]) / (b[2] - a[2]) * (b - a))
    pts = np.array(keep)
    hull = ConvexHull(pts)
    inner = pts.mean(axis=0)
    volume, moment = 0.0, 0.0
    for simplex in hull.simplices:
        tet = np.vstack([inner, pts[simplex]])
        v = abs(np.linalg.det(tet[1:] - tet[0])) / 6
        volume += v
        moment += v * tet[:, 2].mean()
    return M0 * (volume - moment / H)


def test_elastic_force_is_minus_gradient_of_energy(foundation, box):
    """F = −∂U/∂x_B and τ (about the world origin) = −∂U/∂θ for rotations about the world axes,
    by central differences of the exact U of a tilted box (D A.1)."""
    pose = Pose.from_xyz_rpy(0.004, -0.003, H - 0.004, 4.0, -3.0, 20.0)
    _, w = contact(foundation, np.eye(4), box, pose)
    h = 1e-6
    grad = np.zeros(3)
    for i in range(3):
        step = np.zeros(3)
        step[i] = h
        grad[i] = (elastic_energy(Pose(pose.rotation, pose.translation + step))
                   - elastic_energy(Pose(pose.rotation, pose.translation - step))) / (2 * h)
    assert np.allclose(w.force, -grad, rtol=0, atol=1e-6 * np.linalg.norm(w.force))
    dtheta = np.zeros(3)
    for i in range(3):
        angles = np.zeros(3)
        angles[i] = np.degrees(1e-6)
        Rp, Rm = rotation_from_rpy(*angles), rotation_from_rpy(*-angles)
        up = Pose(Rp @ pose.rotation, Rp @ pose.translation)
        down = Pose(Rm @ pose.rotation, Rm @ pose.translation)
        dtheta[i] = (elastic_energy(up) - elastic_energy(down)) / 2e-6
    assert np.allclose(w.torque, -dtheta, rtol=0, atol=1e-6 * np.linalg.norm(w.torque))


def test_work_around_a_closed_loop_vanishes(foundation, box):
    """Elastic work ∮ (F·dx + τ_o·dθ) around a loop in (x, z, roll) is zero for a conservative
    force (D A.2). Midpoint rule on 400 steps: the quadrature error is O(step²); require
    |W| < 1e-6·(mean |F|)·(path length)."""
    n = 400
    t = np.linspace(0, 2 * np.pi, n + 1)
    xs = 0.002 * np.cos(t)
    zs = H - 0.004 + 0.002 * np.sin(t)
    rolls = 3.0 * np.sin(2 * t) + 2.0
    work, scale, path = 0.0, 0.0, 0.0
    for k in range(n):
        mid = 0.5 * (t[k] + t[k + 1])
        x, z, roll = 0.002 * np.cos(mid), H - 0.004 + 0.002 * np.sin(mid), 3.0 * np.sin(2 * mid) + 2.0
        pose = Pose.from_xyz_rpy(x, 0.001, z, roll, 0.0, 0.0)
        _, w = contact(foundation, np.eye(4), box, pose, representation="triangle")
        about_box = w.torque - np.cross(pose.translation, w.force)
        dx = np.array([xs[k + 1] - xs[k], 0.0, zs[k + 1] - zs[k]])
        droll = np.radians(rolls[k + 1] - rolls[k])
        work += w.force @ dx + about_box[0] * droll
        scale += np.linalg.norm(w.force)
        path += np.linalg.norm(dx)
    assert abs(work) < 1e-6 * (scale / n) * path


def test_compliant_pair_work_around_a_closed_loop_vanishes(drake_cube):
    """Two compliant cubes: the elastic force is −∇ of U = ∫ min(p_A, p_B) dV (D A.1; the
    region where p_B < p_A is bounded by the equal-pressure surface and B's p = 0 boundary),
    so ∮ (F·dx + τ_B·dθ) = 0 around a loop that moves and turns B. Midpoint rule on 200
    steps (measured 8e-7 at 100 steps, 3e-7 at 200, 8e-8 at 400: it converges); require
    |W| < 2e-6·(mean |F|)·(path length). τ_B is the torque about B's origin, dθ the world-axis
    rotation vector of each step."""
    n = 200

    def path(u):
        return (np.array([0.094 + 0.002 * np.cos(u), 0.003 * np.sin(u), 0.002 * np.sin(2 * u)]),
                rotation_from_rpy(10 + 3 * np.sin(u), 20, 5 + 2 * np.cos(u)))

    s = np.linspace(0, 2 * np.pi, n + 1)
    work, scale, length = 0.0, 0.0, 0.0
    for k in range(n):
        x, R = path(0.5 * (s[k] + s[k + 1]))
        _, w = contact(drake_cube, np.eye(4), drake_cube, Pose(R, x), representation="triangle")
        (x0, R0), (x1, R1) = path(s[k]), path(s[k + 1])
        dR = R1 @ R0.T
        dtheta = 0.5 * np.array([dR[2, 1] - dR[1, 2], dR[0, 2] - dR[2, 0], dR[1, 0] - dR[0, 1]])
        work += w.force @ (x1 - x0) + w.torque_about(x) @ dtheta
        scale += np.linalg.norm(w.force)
        length += np.linalg.norm(x1 - x0)
    assert scale / n > 1.0
    assert abs(work) < 2e-6 * (scale / n) * length


def _sweep(body_a, body_b, poses, representation):
    out = []
    for pose in poses:
        surface, wrench = contact(body_a, np.eye(4), body_b, pose, representation=representation)
        out.append((surface, wrench))
    return out


def test_wrench_is_continuous_through_topology_changes(drake_cube, box):
    """A tilted rigid box pressed into the Drake cube, swept in 1e-6 m steps so its bottom corner
    enters a new layer of tets (the face count changes during the sweep).

    Bound: the triangle-fan surface changes only by zero-area triangles, so the elastic force
    F = ∫_S p0 n dA is Lipschitz in the translation δ of the indenter: p0 at a point of the
    moving surface changes by ∇p0·δ, n is fixed, and area gained or lost lies at the p0 = 0
    boundary of the compliant body (or pieces of it are traded between tets at equal p0). Hence
    |ΔF| <= max|∇p0|·A·|δ| to first order; for the torque about the origin
    |Δτ| <= (max|∇p0|·A·max|r| + ∫ p0 dA)·|δ|. We allow 1% for second-order terms plus 1e-9·|F|
    for rounding. The polygon force equals the triangle force to 1e-9 at every step."""
    step = np.array([0.3, 0.2, -1.0]) / np.linalg.norm([0.3, 0.2, -1.0]) * 1e-6
    R = rotation_from_rpy(12.0, -8.0, 30.0)
    # Put the lowest box corner 60 steps above the grid layer z = 0.04 (cells are 1 cm): it
    # enters a new layer of tets halfway through the sweep.
    corners = np.array([[BOX_LO[0] if b & 1 == 0 else BOX_HI[0], BOX_LO[1] if b & 2 == 0 else BOX_HI[1],
                         BOX_LO[2] if b & 4 == 0 else BOX_HI[2]] for b in range(8)]) @ R.T
    low = corners[np.argmin(corners[:, 2])]
    origin = np.array([0.003, 0.002, 0.04 - 60 * step[2]]) - low
    poses = [Pose(R, origin + k * step) for k in range(120)]
    tri = _sweep(drake_cube, box, poses, "triangle")
    counts = [s.n_faces for s, _ in tri]
    assert len(set(counts)) > 1, "the sweep must change the surface topology"
    G = np.linalg.norm(drake_cube.gradient, axis=1).max()
    for (s0, w0), (s1, w1) in zip(tri, tri[1:]):
        A = max(w0.area, w1.area)
        F = max(np.linalg.norm(w0.force), np.linalg.norm(w1.force))
        rmax = np.abs(np.concatenate([s0.vertices, s1.vertices])).max() * np.sqrt(3)
        P = max(np.sum(s0.areas * s0.centroid_pressure), np.sum(s1.areas * s1.centroid_pressure))
        assert np.linalg.norm(w1.force - w0.force) <= 1.01 * G * A * 1e-6 + 1e-9 * F
        assert np.linalg.norm(w1.torque - w0.torque) <= 1.01 * (G * A * rmax + P) * 1e-6 + 1e-9 * F
    for pose, (_, wt) in zip(poses[::10], tri[::10]):
        _, wp = contact(drake_cube, np.eye(4), box, pose, representation="polygon")
        assert np.allclose(wp.force, wt.force, rtol=0, atol=1e-9 * np.linalg.norm(wt.force))
        assert np.allclose(wp.torque, wt.torque, rtol=0, atol=1e-9 * np.linalg.norm(wt.torque))


def test_compliant_pair_polygon_equals_triangle_and_is_smooth(drake_cube):
    """Two Drake cubes, B rotated, swept in 1e-6 m steps: polygon and triangle forces agree to
    1e-9, and no step's change exceeds 20× the median change (a jump from a lost or duplicated
    polygon would be orders of magnitude larger than the smooth variation)."""
    R = rotation_from_rpy(15.0, 25.0, 5.0)
    step = np.array([-1.0, 0.2, 0.1]) * 1e-6
    poses = [Pose(R, np.array([0.095, 0.01, -0.005]) + k * step) for k in range(60)]
    forces = []
    for pose in poses:
        _, wt = contact(drake_cube, np.eye(4), drake_cube, pose, representation="triangle")
        _, wp = contact(drake_cube, np.eye(4), drake_cube, pose, representation="polygon")
        assert np.allclose(wp.force, wt.force, rtol=0, atol=1e-9 * np.linalg.norm(wt.force))
        forces.append(wt.force)
    jumps = np.linalg.norm(np.diff(forces, axis=0), axis=1)
    assert np.linalg.norm(forces[0]) > 0.1
    assert jumps.max() <= 20 * np.median(jumps)


def test_damping_and_friction_never_add_energy(foundation, box):
    """∫ (t − p0 n̂)·(v_B − v_A) dA <= 0 for random spatial velocities (D A.2)."""
    rng = np.random.default_rng(20240611)
    pose = Pose.from_xyz_rpy(0.004, -0.003, H - 0.004, 4.0, -3.0, 20.0)
    surface = compute_contact_surface(foundation, np.eye(4), box, pose, representation="triangle")
    for _ in range(50):
        VA = SpatialVelocity(linear=rng.normal(size=3) * 0.01, angular=rng.normal(size=3))
        VB = SpatialVelocity(linear=rng.normal(size=3) * 0.01, angular=rng.normal(size=3))
        w = compute_wrench(surface, foundation, box, V_WA=VA, V_WB=VB)
        assert w.dissipated_power <= 0.0
    # same with the dissipative parts integrated on polygon fans
    surface = compute_contact_surface(foundation, np.eye(4), box, pose, representation="polygon")
    w = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(*(rng.normal(size=(2, 3)) * 0.01)))
    assert w.dissipated_power < 0.0


def test_damping_and_friction_directions(foundation, box):
    """Box 2 mm deep in the Winkler slab (bottom 0.06 × 0.08 m carries 480 N; each x wall
    ∫p0 dA = 8 N, each y wall 6 N, normal ∓x and ∓y into the box). Closed forms (D 5.2.2, 5.2.3):
    - frictionless box pushed down at 0.2 m/s: only the bottom has v_n ≠ 0: F_z = 480·(1 + 0.2χ);
    - with friction, the walls add μ·(2·8 + 2·6) of upward drag;
    - separating faster than 1/χ: the bottom pressure drops to zero, walls feel friction only;
    - sliding +x at 0.05 m/s (>> v_c): bottom and y walls resist with μ·(480 + 12), the leading
      x wall presses 8·(1 + 0.05χ) and the trailing one 8·(1 − 0.05χ)."""
    pose = Pose.from_xyz_rpy(0.0, 0.0, H - 0.002)
    slick = RigidGeometry(box.vertices, box.faces, name="slick box")
    chi, mu = combined_dissipation(foundation, box), combined_friction(foundation, box)
    assert chi == 0.5 and mu == pytest.approx(0.4) and combined_friction(foundation, slick) == 0.0
    surface = compute_contact_surface(foundation, np.eye(4), box, pose, representation="triangle")
    rest = compute_wrench(surface, foundation, box)
    assert rest.force[2] == pytest.approx(480.0, rel=1e-12)
    down = compute_wrench(surface, foundation, slick, V_WB=SpatialVelocity(linear=[0, 0, -0.2]))
    assert down.force[2] == pytest.approx(480.0 * (1 + chi * 0.2), rel=1e-12)
    down = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(linear=[0, 0, -0.2]))
    assert down.force[2] == pytest.approx(480.0 * (1 + chi * 0.2) + mu * 28.0, rel=1e-12)
    up = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(linear=[0, 0, 1.0 / chi + 1.0]))
    assert up.force[2] == pytest.approx(-mu * 28.0, rel=1e-12)
    slide = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(linear=[0.05, 0, 0]))
    assert slide.force[0] == pytest.approx(-mu * (480.0 + 12.0) - 2 * 8.0 * chi * 0.05, rel=1e-12)
    assert slide.force[2] == pytest.approx(480.0, rel=1e-12)
    # below the stiction velocity friction is viscous: scaled by |v_t|/v_c
    creep = compute_wrench(surface, foundation, slick, V_WB=SpatialVelocity(linear=[0, 2e-5, 0]))
    creep_f = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(linear=[0, 2e-5, 0]))
    assert creep_f.force[1] - creep.force[1] == pytest.approx(-mu * (480.0 + 16.0) * 0.2, rel=1e-9)


def test_velocity_parts_are_named(foundation, box):
    """The angular part spins B about its own origin: friction opposes the spin (torque about the
    centroid −z, net x/y force ~0 by symmetry); the linear part alone gives no z torque about
    the centroid. A bare 6-vector is refused before any work (its order would be ambiguous)."""
    pose = Pose.from_xyz_rpy(0.0, 0.0, H - 0.002)
    surface = compute_contact_surface(foundation, np.eye(4), box, pose, representation="triangle")
    spin = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(angular=[0, 0, 5.0]))
    mu = combined_friction(foundation, box)
    assert spin.torque_about_centroid[2] < -0.01 * mu * 480.0
    assert np.allclose(spin.force[:2], 0.0, atol=1e-3 * mu * 480.0)   # quadrature of |r| on an asymmetric mesh
    slide = compute_wrench(surface, foundation, box, V_WB=SpatialVelocity(linear=[0.05, 0, 0]))
    assert abs(slide.torque_about_centroid[2]) < 1e-9 * 480.0
    # spinning B is the same relative motion as spinning A the other way about B's origin
    o = pose.translation
    omega = np.array([0, 0, 5.0])
    same = compute_wrench(surface, foundation, box,
                          V_WA=SpatialVelocity(linear=np.cross(omega, o), angular=-omega))
    assert np.allclose(same.force, spin.force, rtol=1e-12, atol=1e-12)
    for bad in ([0, 0, 5.0, 0, 0, 0], np.zeros(6)):
        with pytest.raises(TypeError, match="SpatialVelocity"):
            compute_wrench(surface, foundation, box, V_WB=bad)
        with pytest.raises(TypeError, match="ambiguous"):
            contact(foundation, np.eye(4), box, pose, V_WA=bad)
    with pytest.raises(ValueError, match="3 finite"):
        SpatialVelocity(linear=[0, 0, 0, 0, 0, 1])


def test_combined_dissipation_formula():
    """χ = (χ_A c_A² + χ_B c_B²)/(c_A + c_B)², c = L/M0 (D C.4): equal bodies keep χ/2·... i.e.
    χ_A = χ_B = χ with c_A = c_B gives χ/2; a much stiffer B (c_B → 0) leaves χ_A."""
    pts, tets = box_grid([0, 1], [0, 1], [0, 1])
    a = CompliantGeometry.from_arrays(pts, tets, pts[:, 2] * 1e5, dissipation=2.0, modulus=1e5, characteristic_length=0.1)
    b = CompliantGeometry.from_arrays(pts, tets, pts[:, 2] * 1e5, dissipation=2.0, modulus=1e5, characteristic_length=0.1)
    assert combined_dissipation(a, b) == pytest.approx(1.0)
    stiff = CompliantGeometry.from_arrays(pts, tets, pts[:, 2] * 1e5, dissipation=7.0, modulus=1e12,
                                          characteristic_length=0.1)
    assert combined_dissipation(a, stiff) == pytest.approx(2.0, rel=1e-6)
