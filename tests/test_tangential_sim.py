"""Tangentially compliant friction in the continuous integrator (D 6): exact statics and energy.

Gravity is tilted instead of the ground (the same physics, and the slab stays axis-aligned).
"""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.errors import OptionError
from fieldgen.meshing.tetmesh import box_grid
from fieldgen.runtime.scene import primitives as prim
from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState, box_mass_properties
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody, Schedule
from fieldgen.runtime.dynamics.simulate import simulate

E, H, MU, CHI = 1e6, 0.02, 0.5, 50.0
KBAR, CBAR = 1e3, 20.0          # slides after μ/K̄ = 0.5 mm; τ = 20 ms
SIDE, MASS, G = 0.1, 1.0, 9.81


def slab(chi=CHI):
    body = prim.compliant_slab([0.4, 0.4, H], E, cells=(8, 8), layers=1, dissipation=chi, mu_static=MU, name="slab")
    body.tangential_stiffness, body.tangential_damping = KBAR, CBAR
    return body


def tilted(theta_deg):
    th = np.radians(theta_deg)
    return G * np.array([np.sin(th), 0.0, -np.cos(th)])


def resting_box_scene(theta_deg, *, gravity=None, chi=CHI, wrench=None, velocity=(0, 0, 0)):
    """A rigid 1 kg cube on the slab, placed at its static penetration."""
    th = np.radians(theta_deg)
    d = MASS * G * np.cos(th) * H / (E * SIDE * SIDE)
    box = prim.rigid_box([SIDE] * 3, mu_static=MU, name="box")
    body = SceneBody("box", box, "dynamic", box_mass_properties(MASS, np.array([SIDE] * 3)),
                     RigidBodyState(np.array([0, 0, SIDE / 2 - d]), np.array([1.0, 0, 0, 0]), np.asarray(velocity, float)),
                     wrench=wrench)
    return Scene([SceneBody("slab", slab(chi), "fixed"), body], tilted(theta_deg) if gravity is None else gravity)


def test_velocity_integrator_refuses_compliant_friction():
    with pytest.raises(OptionError, match="continuous"):
        simulate(resting_box_scene(10), 0.01, 1e-3, "velocity", friction="compliant")


@pytest.mark.slow
def test_box_on_incline_stays_exactly_at_rest():
    """20° < atan 0.5 = 26.6°: after settling the box does not move (no creep), held by the spring
    alone (friction = spring force = m g sin θ, sticking)."""
    res = simulate(resting_box_scene(20), 2.5, 0.1, "continuous", friction="compliant", rtol=1e-6, atol=1e-10)
    settled = res.times >= 0.5 - 1e-9
    drift = np.linalg.norm(res.positions[settled, 1] - res.positions[settled, 1][0], axis=1).max()
    assert drift < 1e-9
    assert res.times[-1] - res.times[settled][0] >= 2.0 - 1e-9
    last = res.tangential[-1][0]
    assert last["status"] == "stick"
    assert last["friction_force"][0] == pytest.approx(-MASS * G * np.sin(np.radians(20)), rel=1e-6)
    np.testing.assert_allclose(last["spring_force"], last["friction_force"], rtol=1e-6, atol=1e-9)


@pytest.mark.slow
def test_box_starts_sliding_at_the_friction_angle():
    """Settle at 24°, then tilt by 0.25° every 50 ms from 25.5° and find the tilt at which the
    contact first slides (the sudden load at t = 0 makes it slip once while settling)."""
    steps = np.arange(25.5, 27.51, 0.25)
    times = 0.3 + 0.05 * np.arange(len(steps))
    rows = [[0.0] + list(MASS * tilted(24.0)) + [0, 0, 0]]
    rows += [[t] + list(MASS * tilted(a)) + [0, 0, 0] for t, a in zip(times, steps)]
    scene = resting_box_scene(24, gravity=np.zeros(3), wrench=Schedule.from_rows(rows))
    res = simulate(scene, times[-1] + 0.05, 0.05, "continuous", friction="compliant", rtol=1e-5, atol=1e-9)
    later = [k for k, t in enumerate(res.times) if t > times[0] + 1e-9]
    first = next(k for k in later if res.tangential[k][0]["status"] == "slide")
    angle = steps[np.searchsorted(times, res.times[first] - 1e-9) - 1]    # the tilt held when it slid
    assert angle == pytest.approx(np.degrees(np.arctan(MU)), abs=0.5)
    assert all(r[0]["status"] == "slide" for r in res.tangential[first + 2:])   # and it keeps sliding


def layered_box(name):
    """A compliant cube, p0 = E·(distance to the nearer of its top and bottom faces)/(SIDE/2):
    a function of height alone, exact on the 2×2×2-cell grid."""
    g = np.linspace(-SIDE / 2, SIDE / 2, 3)
    points, tets = box_grid(g, g, g)
    body = CompliantGeometry.from_arrays(points, tets, E * (SIDE / 2 - np.abs(points[:, 2])) / (SIDE / 2),
                                         dissipation=300.0, mu_static=MU, name=name)
    body.tangential_stiffness, body.tangential_damping = 1e4, 100.0
    return body


@pytest.mark.slow
def test_three_box_stack_stays_exactly_at_rest():
    """Compliant, rigid and compliant cubes stacked on the slab under gravity tilted 10°: once the
    damped stack has settled (3 s), nothing moves by 1e-9 m for 2 s. About 2 minutes here."""
    base = prim.compliant_slab([0.4, 0.4, H], E, cells=(4, 4), layers=1, dissipation=300.0, mu_static=MU,
                               name="slab")
    base.tangential_stiffness, base.tangential_damping = 1e4, 100.0
    geometries = [layered_box("box0"), prim.rigid_box([SIDE] * 3, mu_static=MU, name="box1"), layered_box("box2")]
    weight = MASS * G * np.cos(np.radians(10)) / (SIDE * SIDE)
    k_half = E / (SIDE / 2)
    sink = [3 * weight * (H / E + 1 / k_half), 2 * weight / k_half, weight / k_half]   # static overlaps
    bodies, z = [SceneBody("slab", base, "fixed")], 0.0
    for k, geometry in enumerate(geometries):
        z += SIDE / 2 - sink[k] if k == 0 else SIDE - sink[k]
        bodies.append(SceneBody(geometry.name, geometry, "dynamic", box_mass_properties(MASS, np.array([SIDE] * 3)),
                                RigidBodyState(np.array([0, 0, z]), np.array([1.0, 0, 0, 0]))))
    res = simulate(Scene(bodies, tilted(10)), 5.0, 0.25, "continuous", friction="compliant", rtol=1e-6, atol=1e-10)
    rest = res.times >= 3.0 - 1e-9
    assert res.times[-1] - res.times[rest][0] >= 2.0 - 1e-9
    for b in (1, 2, 3):
        p = res.positions[rest, b]
        assert np.linalg.norm(p - p[0], axis=1).max() < 1e-9
        assert np.abs(res.positions[-1, b, :2]).max() < 5e-3        # still stacked
        assert np.linalg.norm(res.velocities[-1, b]) < 1e-8


def box_energy(res, k, slab_modulus=E):
    """Kinetic + gravity + the slab's elastic energy ∫ p0 dV over the overlap (exact for the
    flat bottom face of a box over a slab with p0 = E·depth/H) + the springs' ½ sᵀs."""
    from fieldgen.runtime.dynamics.rigid_body import quaternion_to_matrix

    p, q = res.positions[k, 1], res.quaternions[k, 1]
    v, w = res.velocities[k, 1], res.angular_velocities[k, 1]
    R = quaternion_to_matrix(q)
    I = R @ box_mass_properties(MASS, np.array([SIDE] * 3)).inertia @ R.T
    kinetic = 0.5 * MASS * v @ v + 0.5 * w @ I @ w
    potential = -MASS * res.gravity_used @ p
    # bottom face: depth below the slab's top z = 0 is linear over the face; 2x2 Gauss is exact for d²
    g = SIDE / 2 / np.sqrt(3)
    pts = np.array([[sx * g, sy * g, -SIDE / 2] for sx in (-1, 1) for sy in (-1, 1)]) @ R.T + p
    depth = np.maximum(-pts[:, 2], 0.0)
    elastic = slab_modulus / (2 * H) * np.mean(depth ** 2) * SIDE * SIDE
    spring = sum(r["energy"] for r in res.tangential[k])
    return kinetic + potential + elastic + spring


@pytest.mark.slow
def test_sliding_box_never_gains_energy():
    """No normal damping (χ = 0): a box thrown along the slab slides, sticks and rocks; its total
    energy (kinetic + gravity + elastic + spring) never increases beyond the integration error."""
    scene = resting_box_scene(0, chi=0.0, velocity=(0.05, 0.02, 0))
    res = simulate(scene, 0.03, 0.003, "continuous", friction="compliant", rtol=1e-8, atol=1e-12)
    res.gravity_used = scene.gravity
    energy = np.array([box_energy(res, k) for k in range(len(res.times))])
    status = [r[0]["status"] for r in res.tangential]
    assert "slide" in status and status[-1] == "stick"
    scale = 0.5 * MASS * (0.05 ** 2 + 0.02 ** 2)
    assert np.max(np.diff(energy)) <= 1e-6 * scale
    assert energy[-1] < energy[0] - 0.5 * scale          # sliding dissipated most of it
