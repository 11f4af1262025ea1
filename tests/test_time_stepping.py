"""Stewart-Trinkle stepping, compliant point contacts (M22 IV) and Baraff's LCP cases (B92 8-10)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fieldgen.errors import InputError
from fieldgen.runtime.dynamics.lcp import lemke
from fieldgen.runtime.dynamics.rigid_body import (
    MassProperties,
    RigidBodyState,
    body_to_world,
    box_mass_properties,
    quaternion_from_rotation_vector,
)
from fieldgen.runtime.dynamics.time_stepping import (
    EPS_CONE,
    PointContact,
    contact_force_lcp,
    point_contact_from_polygon,
    solve_mixed_lcp,
    step,
    stewart_trinkle_lcp,
)

SIZE = np.array([0.1, 0.1, 0.1])
CORNERS = np.array(list(itertools.product([-0.05, 0.05], repeat=3)))


def plane_contacts(state, corners=CORNERS, *, stiffness, mu, dissipation=0.0, margin=0.02):
    """Corners of a box against the plane z = 0 (world is body A, normal +z into the box)."""
    world = body_to_world(state, corners)
    return [PointContact(-1, 0, p, [0.0, 0.0, 1.0], phi0=p[2], stiffness=stiffness,
                         dissipation=dissipation, mu=mu)
            for p in world if p[2] < margin]


def simulate_box(state, mass, gravity, *, seconds, dt, stiffness, mu, dissipation=0.0,
                 record=None):
    for _ in range(int(round(seconds / dt))):
        contacts = plane_contacts(state, stiffness=stiffness, mu=mu, dissipation=dissipation)
        result = step([state], [mass], contacts, dt, gravity)
        state = result.states[0]
        if record is not None:
            record.append(state)
    return state


# --------------------------------------------------------------------------- assembly

def test_stewart_trinkle_size_and_mixed_solution():
    """Size 6n + n_c(n_d + 2) (T07) and the returned solution satisfies the mixed LCP."""
    rng = np.random.default_rng(3)
    masses = [box_mass_properties(1.0, SIZE), box_mass_properties(2.0, [0.2, 0.1, 0.05])]
    states = [RigidBodyState([0, 0, 0.05], quaternion_from_rotation_vector(rng.normal(size=3) * .1),
                             velocity=[0.1, 0, -0.3], angular_velocity=[0, 1, 0]),
              RigidBodyState([0, 0, 0.2], velocity=[0, 0.2, -1.0])]
    contacts = [PointContact(-1, 0, [0.05, 0.05, -0.001], [0, 0, 1], -0.001, 1e4, 0.5, 0.4),
                PointContact(-1, 0, [-0.05, 0.05, 0.0], [0, 0, 1], 0.0, np.inf, 0.0, 0.4),
                PointContact(0, 1, [0.0, 0.0, 0.12], [0, 0, 1], 0.01, np.inf, 0.0, 0.8)]
    for n_d in (4, 6, 9):
        M, q, sizes = stewart_trinkle_lcp(states, masses, contacts, 1e-3, n_directions=n_d)
        assert sizes.total == 6 * 2 + 3 * (n_d + 2) == M.shape[0] == M.shape[1] == q.shape[0]
        v, result = solve_mixed_lcp(M, q, sizes.n_velocities)
        assert result.status == "solution"
        x = np.concatenate([v, result.z])
        w = M @ x + q
        nv = sizes.n_velocities
        np.testing.assert_allclose(w[:nv], 0.0, atol=1e-9)
        assert result.z.min() >= 0 and w[nv:].min() >= -1e-9
        assert abs(result.z @ w[nv:]) < 1e-9
        # friction impulse inside the polygonal cone, up to the ε λ regularisation
        p_n = result.z[:3]
        beta = result.z[3:3 + 3 * n_d].reshape(3, n_d)
        slip = result.z[3 + 3 * n_d:]
        eps = EPS_CONE * 1.0
        assert np.all(beta.sum(axis=1) <= np.array([c.mu for c in contacts]) * p_n
                      + eps * slip + 1e-12)


def test_polygon_point_contact_m22():
    """k = g A, φ0 = -p_c/g with g = g_A g_B/(g_A + g_B); rigid side uses the other g."""
    c = point_contact_from_polygon(0, 1, [0, 0, 0], [0, 0, 1], area=2e-4, pressure=3e4,
                                   g_a=1e6, g_b=3e6, dissipation=2.0, mu=0.3)
    g = 1e6 * 3e6 / 4e6
    assert c.stiffness == pytest.approx(g * 2e-4) and c.phi0 == pytest.approx(-3e4 / g)
    # the point contact reproduces the polygon force A p_c at rest: -k φ0 = A p_c
    assert -c.stiffness * c.phi0 == pytest.approx(2e-4 * 3e4)
    rigid = point_contact_from_polygon(-1, 0, [0, 0, 0], [0, 0, 1], 1e-4, 1e3, np.inf, 5e5)
    assert rigid.stiffness == pytest.approx(5e5 * 1e-4) and rigid.phi0 == pytest.approx(-1e3 / 5e5)
    assert point_contact_from_polygon(0, 1, [0, 0, 0], [0, 0, 1], 1e-4, 1e3, -1.0, 5e5) is None
    assert point_contact_from_polygon(0, 1, [0, 0, 0], [0, 0, 1], 1e-4, 1e3, 1e5, 0.0) is None


def test_bad_inputs_raise_actionable_errors():
    with pytest.raises(InputError, match="stiffness"):
        PointContact(-1, 0, [0, 0, 0], [0, 0, 1], 0.0, stiffness=0.0)
    with pytest.raises(InputError, match="refers to body 3"):
        step([RigidBodyState()], [box_mass_properties(1, SIZE)],
             [PointContact(-1, 3, [0, 0, 0], [0, 0, 1], 0.0)], 1e-3)


# --------------------------------------------------------------------------- compliant stepping

def test_box_comes_to_rest_with_penetration_weight_over_stiffness():
    mass = box_mass_properties(1.0, SIZE)
    k_corner = 1e5
    state = RigidBodyState([0, 0, 0.05 + 0.002])        # dropped from 2 mm
    state = simulate_box(state, mass, [0, 0, -9.81], seconds=1.0, dt=1e-3,
                         stiffness=k_corner, mu=0.5, dissipation=5.0)
    penetration = 0.05 - state.position[2]
    # four corners in parallel: total stiffness 4k, so penetration = W / (4k)
    assert penetration == pytest.approx(9.81 / (4 * k_corner), rel=1e-3)
    assert np.abs(state.velocity).max() < 1e-6
    assert np.abs(state.angular_velocity).max() < 1e-5


def _incline(theta_deg, mu, seconds, dt=1e-3, k_corner=1e7):
    """Box on a plane tilted by θ: tilt gravity instead of the plane (slope along +x)."""
    theta = np.radians(theta_deg)
    gravity = 9.81 * np.array([np.sin(theta), 0.0, -np.cos(theta)])
    mass = box_mass_properties(1.0, SIZE)
    sink = 9.81 * np.cos(theta) / (4 * k_corner)
    state = RigidBodyState([0, 0, 0.05 - sink])
    record = []
    simulate_box(state, mass, gravity, seconds=seconds, dt=dt, stiffness=k_corner, mu=mu,
                 dissipation=1.0, record=record)
    return state, record, theta


def test_box_on_incline_below_friction_angle_sticks():
    start, record, _ = _incline(20.0, 0.5, 1.0)           # friction angle atan(0.5) = 26.6°
    drift = np.linalg.norm(record[-1].position[:2] - start.position[:2])
    assert drift < 1e-6
    assert max(abs(s.velocity[0]) for s in record[len(record) // 2:]) < 1e-6


def test_box_on_incline_above_friction_angle_slides_at_coulomb_rate():
    mu = 0.5
    _, record, theta = _incline(35.0, mu, 1.0)
    expected = 9.81 * (np.sin(theta) - mu * np.cos(theta))
    t0, t1 = 199, 999                                     # 0.2 s .. 1.0 s
    measured = (record[t1].velocity[0] - record[t0].velocity[0]) / ((t1 - t0) * 1e-3)
    assert measured == pytest.approx(expected, rel=0.02)
    assert abs(record[-1].velocity[1]) < 1e-6            # slides straight down the slope


# --------------------------------------------------------------------------- rigid stepping

def test_rigid_box_thrown_at_plane_does_not_tunnel():
    """50 m/s at δt = 1 ms moves 5 cm per step, half the box: rigid contacts stop it at φ = 0."""
    mass = box_mass_properties(1.0, SIZE)
    state = RigidBodyState([0, 0, 0.23], quaternion_from_rotation_vector([0.3, 0.2, 0.0]),
                           velocity=[1.0, 0.0, -50.0])
    lowest = []
    for _ in range(60):
        world = body_to_world(state, CORNERS)
        contacts = [PointContact(-1, 0, p, [0, 0, 1], p[2], np.inf, 0.0, 0.3) for p in world]
        state = step([state], [mass], contacts, 1e-3).states[0]
        lowest.append(body_to_world(state, CORNERS)[:, 2].min())
    # first-order rotation error only: never deeper than O(δt² ω²) and never through
    assert min(lowest) > -1e-3
    assert lowest[-1] > -1e-4
    assert state.position[2] < 0.1 and abs(state.velocity[2]) < 0.05


def test_rigid_painleve_rod_velocity_step_is_solvable():
    """Baraff's inconsistent sliding rod has no force solution; the impulse step does."""
    states, masses, contact = painleve_rod(g=9.81, omega=0.0)
    rigid = PointContact(-1, 0, contact.position, contact.normal, 0.0, np.inf, 0.0, contact.mu)
    result = step(states, masses, [rigid], 1e-3, gravity=[0, -9.81, 0], n_directions=8)
    s = result.states[0]
    tip_velocity = s.velocity + np.cross(s.angular_velocity, contact.position - states[0].position)
    assert tip_velocity[1] >= -1e-9                      # no penetration velocity
    p_n = result.normal_impulses[0]
    assert p_n > 0 and np.linalg.norm(result.friction_impulses[0]) <= contact.mu * p_n + 1e-12


# --------------------------------------------------------------------------- force level (B92)

def painleve_rod(g, omega, m=1.0, mu=None):
    """B92 Fig. 10.1/10.3: rod of length 2, I = m/16, θ = 72°, 16(cos²θ - μ cosθ sinθ) = -2."""
    theta = np.radians(72.0)
    c, s = np.cos(theta), np.sin(theta)
    if mu is None:
        mu = (c * c + 1.0 / 8.0) / (c * s)
    inertia = np.diag([1e-6 * m, m / 16.0, m / 16.0])    # thin rod along body x
    r = np.array([-c, -s, 0.0])
    w = np.array([0.0, 0.0, -omega])                     # clockwise
    tip_velocity = np.array([-1.0, 0.0, 0.0])            # sliding opposite t = +x
    velocity = tip_velocity - np.cross(w, r)
    state = RigidBodyState([c, s, 0.0], quaternion_from_rotation_vector([0, 0, theta]),
                           velocity=velocity, angular_velocity=w)
    contact = PointContact(-1, 0, [0.0, 0.0, 0.0], [0.0, 1.0, 0.0], 0.0, np.inf, 0.0, mu)
    return [state], [MassProperties(m, inertia)], contact


def test_painleve_rod_lcp_matches_baraff_and_ends_on_a_ray():
    m = 2.0
    # Fig. 10.3a: no rotation, gravity on: a_N = -f/m - g, inconsistent
    states, masses, contact = painleve_rod(g=9.81, omega=0.0, m=m)
    A, b = contact_force_lcp(states, masses, [contact], gravity=[0, -9.81, 0])
    np.testing.assert_allclose(A, [[-1.0 / m]], rtol=1e-9)
    np.testing.assert_allclose(b, [-9.81], rtol=1e-12)
    result = lemke(A, b)
    assert result.status == "ray"
    # The ray's certificate (B92 eq. B-3), checked against A: w = A z + z0 with z > 0, z0 > 0,
    # w >= 0 and z·w = 0, so (A z)_0 = -z0 < 0 (B92 eq. 13-1: a valid impulse); and no force
    # solves the LCP: a_N = A f + b < 0 for every f >= 0.
    ray = result.ray
    assert ray.z[0] > 0 and ray.z0 > 0
    np.testing.assert_allclose(ray.w, A @ ray.z + ray.z0, atol=1e-12)
    assert ray.w.min() >= 0 and abs(ray.z @ ray.w) <= 1e-12
    assert (A @ ray.z)[0] == pytest.approx(-ray.z0) and (A @ ray.z)[0] < 0
    assert np.all(A @ np.linspace(0.0, 1e3, 101)[None, :] + b[:, None] < 0)
    # Fig. 10.3b: without gravity f = 0 is the unique solution (skimming)
    A, b = contact_force_lcp(states, masses, [contact], gravity=[0, 0, 0])
    result = lemke(A, b)
    assert result.status == "solution" and result.z[0] == 0.0
    # Fig. 10.2: |ω|² sinθ - g = 1 gives a_N = -f/m + 1 (indeterminate: f = 0 or f = m)
    g = 9.81
    omega = np.sqrt((1.0 + g) / np.sin(np.radians(72.0)))
    states, masses, contact = painleve_rod(g=g, omega=omega, m=m)
    A, b = contact_force_lcp(states, masses, [contact], gravity=[0, -g, 0])
    np.testing.assert_allclose(A, [[-1.0 / m]], rtol=1e-9)
    np.testing.assert_allclose(b, [1.0], rtol=1e-9)


def chair(mass=3.0, a=0.2, b=0.15, h=0.25):
    """A box-like chair whose four legs touch the ground at (±a, ±b, -h) from its centre."""
    inertia = np.diag([0.11, 0.13, 0.07])
    state = RigidBodyState([0, 0, h])
    legs = [np.array([sx * a, sy * b, 0.0]) for sx in (-1, 1) for sy in (-1, 1)]
    contacts = [PointContact(-1, 0, p, [0, 0, 1], 0.0) for p in legs]
    return [state], [MassProperties(mass, inertia)], contacts, legs


def test_chair_on_four_legs_at_rest():
    states, masses, contacts, legs = chair()
    A, b = contact_force_lcp(states, masses, contacts, gravity=[0, 0, -9.81])
    assert np.linalg.matrix_rank(A) == 3                  # forces indeterminate (B92 ch. 8)
    result = lemke(A, b)
    assert result.status == "solution"
    np.testing.assert_allclose(A @ result.z + b, 0.0, atol=1e-12)   # no leg accelerates
    assert result.z.sum() == pytest.approx(3.0 * 9.81)
    moment = sum(f * np.cross(p - states[0].position, [0, 0, 1]) for f, p in zip(result.z, legs))
    np.testing.assert_allclose(moment, 0.0, atol=1e-12)


def test_chair_pushed_off_centre_has_unique_accelerations():
    """Downward push inside the support: zero accelerations; pull up at an edge: it tips."""
    m, a, h = 3.0, 0.2, 0.25
    states, masses, contacts, legs = chair(m, a=a, h=h)
    push = np.array([0.0, 0.0, -20.0])
    at = np.array([0.13, -0.07, 0.0])                    # relative to the centre of mass
    wrench = np.concatenate([push, np.cross(at, push)])[None]
    A, b = contact_force_lcp(states, masses, contacts, [0, 0, -9.81], wrench)
    result = lemke(A, b)
    assert result.status == "solution"
    np.testing.assert_allclose(A @ result.z + b, 0.0, atol=1e-12)
    assert result.z.sum() == pytest.approx(m * 9.81 + 20.0)

    # lift with F > mg/2 at the middle of the +x edge (height z_F irrelevant: vertical force)
    g, F = 9.81, 0.8 * m * 9.81
    I_yy = masses[0].inertia[1, 1]
    lift = np.array([0.0, 0.0, F])
    at = np.array([a, 0.0, 0.1])
    wrench = np.concatenate([lift, np.cross(at, lift)])[None]
    A, b = contact_force_lcp(states, masses, contacts, [0, 0, -g], wrench)
    result = lemke(A, b)
    assert result.status == "solution"
    acc = A @ result.z + b
    # closed form: -x legs stay down (edge slides freely, frictionless), chair rotates about y
    alpha = a * (m * g - 2 * F) / (I_yy + m * a * a)
    R = m * g - F - m * alpha * a
    for leg, acceleration, force in zip(legs, acc, result.z):
        if leg[0] < 0:
            assert acceleration == pytest.approx(0.0, abs=1e-10)
            assert force == pytest.approx(R / 2, rel=1e-9)
        else:
            assert acceleration == pytest.approx(-2 * alpha * a, rel=1e-9)
            assert force == 0.0


def test_step_is_deterministic():
    mass = box_mass_properties(1.0, SIZE)
    runs = []
    for _ in range(2):
        state = RigidBodyState([0, 0, 0.051], quaternion_from_rotation_vector([0.05, 0.02, 0.0]),
                               velocity=[0.3, 0.1, 0.0], angular_velocity=[0.0, 0.0, 2.0])
        state = simulate_box(state, mass, [0, 0, -9.81], seconds=0.05, dt=1e-3,
                             stiffness=1e5, mu=0.4, dissipation=2.0)
        runs.append(np.concatenate([state.position, state.quaternion, state.twist]))
    assert runs[0].tobytes() == runs[1].tobytes()


# --------------------------------------------------------------------------- Lemke's answer is checked

def coin_polygon_contacts():
    """The M22 V-A coin's first step: its 152-fan bottom on a 1 GPa plane split by a 2 × 2-cell
    slab's tets into ~150 stiff compliant point contacts on one body."""
    from fieldgen.runtime.scene import primitives as prim
    from fieldgen.runtime.dynamics.bodies import Scene, SceneBody
    from fieldgen.runtime.dynamics.point_contacts import scene_contacts

    r, t, m = 0.01213, 0.00175, 0.00567
    plane = prim.compliant_slab([0.6, 0.6, 0.01], 1e9, cells=(2, 2), layers=1, mu_static=0.2, name="plane")
    coin = prim.rigid_cylinder(r, t, 152, mu_static=0.2, name="coin")
    mass = MassProperties(m, np.diag([m * (3 * r * r + t * t) / 12] * 2 + [m * r * r / 2]))
    state = RigidBodyState([0, 0, t / 2 - 1.2e-10], [1, 0, 0, 0], [0.7071, 0, 0], [0, 0, 58.3])
    scene = Scene([SceneBody("plane", plane, "fixed"), SceneBody("coin", coin, "dynamic", mass, state)])
    c = scene_contacts(scene, [b.state for b in scene.bodies])
    points = [PointContact(-1, 0, c.position[i], c.normal[i], c.phi0[i], c.stiffness[i], c.dissipation[i],
                           c.mu[i]) for i in range(c.n)]
    return state, mass, points


@pytest.mark.slow
def test_lemke_never_calls_a_non_solution_a_solution():
    """Regression: on the coin's nearly singular LCP (156 stiff contacts on one body, condition
    ~1e20) floating-point Lemke ends with z0 leaving the basis at a point violating w >= 0 by
    about 1 and used to call it a solution; ``step`` then threw the coin upward (v_z 0.04 m/s,
    v_x 0.71 -> -0.66 m/s). The point is now checked: this problem is reported ``inaccurate``
    (its residual recomputed here from the reduced LCP, independently of the solver's w), and
    ``step`` returns a point that solves the LCP (checked independently)."""
    from fieldgen.runtime.dynamics.lcp import DEFAULT_RESIDUAL_TOL, residual_scale

    state, mass, points = coin_polygon_contacts()
    assert len(points) > 100
    M, q, sizes = stewart_trinkle_lcp([state], [mass], points, 1e-3)
    _, result = solve_mixed_lcp(M, q, sizes.n_velocities)
    f = sizes.n_velocities
    reduced_q = q[f:] - M[f:, :f] @ np.linalg.solve(M[:f, :f], q[:f])
    reduced_M = M[f:, f:] - M[f:, :f] @ np.linalg.solve(M[:f, :f], M[:f, f:])
    w = reduced_M @ result.z + reduced_q
    residual = float(np.abs(np.minimum(result.z, w)).max())
    scale = residual_scale(reduced_M, reduced_q, result.z)
    assert residual > 100 * DEFAULT_RESIDUAL_TOL * scale          # the point is no solution ...
    assert result.status == "inaccurate" and not result.solved    # ... and is not called one
    assert result.residual == pytest.approx(residual, rel=1e-3)
    # ``step`` retries such a step (a stronger cone regularisation, then q perturbed by 1e-10 of
    # its size) and here one retry succeeds: it returns, and what it returns solves the
    # unperturbed LCP to the tolerance (checked here independently); the coin slides on at
    # about 0.71 m/s, not thrown upward nor backward.
    out = step([state], [mass], points, 1e-3)
    assert out.lcp.status == "solution"
    z = out.lcp.z
    w = reduced_M @ z + reduced_q
    assert float(np.abs(np.minimum(z, w)).max()) <= DEFAULT_RESIDUAL_TOL * residual_scale(reduced_M, reduced_q, z)
    assert abs(out.states[0].velocity[2]) < 1e-3
    assert out.states[0].velocity[0] > 0.5


def test_lemke_solution_reports_its_residual():
    rng = np.random.default_rng(7)
    A = rng.normal(size=(6, 6))
    M = A @ A.T + np.eye(6)                 # positive definite: a unique solution
    q = rng.normal(size=6)
    result = lemke(M, q)
    assert result.solved
    assert result.residual <= 1e-12 and result.residual == np.abs(np.minimum(result.z, result.w)).max()
    # a point that is not a solution is never reported as one
    bad = lemke(M, q, residual_tol=-1.0)
    assert bad.status == "inaccurate" and not bad.solved
