"""Tangential compliance (D 6.1, 6.2, App. D) against the dissertation's closed forms and numbers.

Contact surfaces are built directly as runtime ContactSurface objects: flat polar triangle
meshes whose vertex pressures follow a profile (linear on each triangle), which is what
Table 6.1 compares (the pressure distribution's shape over a flat circle).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from fieldgen.runtime.contact.surface import ContactSurface, empty_surface
from fieldgen.runtime.contact.tangential import (
    friction_wrench,
    point_friction,
    state_from_deformation,
    stiffness_scaling,
    surface_quadrature,
)


def disc_surface(radius, profile, rings=150, segments=256, inner=0.0, normal=(0, 0, 1), centre=(0, 0, 0),
                 representation="triangle"):
    """Flat annulus inner..radius (inner 0: a disc) in the plane through ``centre`` normal to
    ``normal``, triangles CCW about the normal, vertex pressure ``profile(ρ)``."""
    n = np.asarray(normal, float) / np.linalg.norm(normal)
    e1 = np.cross(n, [1.0, 0, 0] if abs(n[0]) < 0.9 else [0, 1.0, 0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    angle = 2 * np.pi * np.arange(segments) / segments
    radii = np.linspace(inner, radius, rings + 1)
    pts2, rho, tris = [], [], []
    if inner == 0.0:
        pts2.append([0.0, 0.0]), rho.append(0.0)
        first = 1
        for s in range(segments):
            tris.append((0, first + s, first + (s + 1) % segments))
        rr = radii[1:]
    else:
        first = 0
        rr = radii
    for ring, r in enumerate(rr):
        for a in angle:
            pts2.append([r * np.cos(a), r * np.sin(a)]), rho.append(r)
    for ring in range(len(rr) - 1):
        o, q = first + ring * segments, first + (ring + 1) * segments
        for s in range(segments):
            t = (s + 1) % segments
            tris += [(o + s, q + s, q + t), (o + s, q + t, o + t)]
    pts2, rho, tris = np.array(pts2), np.array(rho), np.array(tris, np.int64)
    V = np.asarray(centre, float) + pts2[:, :1] * e1 + pts2[:, 1:] * e2
    p = np.array([profile(x) for x in rho])
    t = V[tris]
    areas = 0.5 * np.einsum("ij,j->i", np.cross(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), n)
    nf = len(tris)
    normals = np.tile(n, (nf, 1))
    nan = np.full((nf, 3), np.nan)
    return ContactSurface(representation, V, np.arange(0, 3 * nf + 1, 3), tris.ravel(), normals, areas,
                          t.mean(axis=1), p, p[tris].mean(axis=1), nan, nan.copy(), np.zeros(nf, np.int64),
                          np.zeros(nf, np.int64))


def square_surface(side=0.02, pressure=1e4):
    """Two triangles, uniform pressure, normal +z (a uniform flat patch)."""
    h = side / 2
    V = np.array([[-h, -h, 0], [h, -h, 0], [h, h, 0], [-h, h, 0]], float)
    tris = np.array([[0, 1, 2], [0, 2, 3]])
    n = np.tile([0.0, 0, 1], (2, 1))
    p = np.full(4, pressure)
    nan = np.full((2, 3), np.nan)
    return ContactSurface("triangle", V, np.array([0, 3, 6]), tris.ravel(), n, np.full(2, side * side / 2),
                          V[tris].mean(axis=1), p, np.full(2, pressure), nan, nan.copy(), np.zeros(2, np.int64),
                          np.zeros(2, np.int64))


# --------------------------------------------------------------------------- Table 6.1

R, P0, MU, KBAR, CBAR, OMEGA = 0.01, 2e4, 0.5, 1e4, 1.0, 1.0
TABLE_6_1 = {  # name: (profile, inner radius, continuum moment 2πμ∫pρ²dρ, dissertation's ratio)
    "circle": (lambda r: P0, 0.0, 2 * np.pi * MU * P0 * R ** 3 / 3, 0.750),
    "thin ring": (lambda r: P0, 0.995 * R, 2 * np.pi * MU * P0 * (R ** 3 - (0.995 * R) ** 3) / 3, 1.000),
    "half-sphere": (lambda r: P0 * np.sqrt(max(1 - (r / R) ** 2, 0.0)), 0.0, np.pi ** 2 * MU * P0 * R ** 3 / 8,
                    32 / (15 * np.pi)),
    "cone": (lambda r: P0 * max(1 - r / R, 0.0), 0.0, np.pi * MU * P0 * R ** 3 / 6, 0.600),
}


def onset_moment(surface):
    """Spin B about the surface normal at constant ω from rest (D 6.2.2) and return the
    moment when the first point starts to slide, found by bisection on time. While the whole
    surface sticks the rate is constant (checked), so s(t) = t ṡ(0)."""
    quad = surface_quadrature(surface)
    kw = dict(linear_velocity=np.zeros(3), angular_velocity=[0, 0, OMEGA], mu=MU, stiffness=KBAR, damping=CBAR)
    rate0 = friction_wrench(quad, np.zeros(6), **kw).rate
    lo, hi = 0.0, 1e-3
    while friction_wrench(quad, hi * rate0, **kw).status == "stick":
        lo, hi = hi, 2 * hi
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if friction_wrench(quad, mid * rate0, **kw).status == "stick":
            lo = mid
        else:
            hi = mid
    res = friction_wrench(quad, lo * rate0, **kw)
    np.testing.assert_allclose(res.rate, rate0, rtol=1e-9, atol=1e-12 * np.abs(rate0).max())
    return res, lo


@pytest.mark.parametrize("shape", list(TABLE_6_1))
def test_table_6_1_rotation_resistance(shape):
    profile, inner, m_cont, expected = TABLE_6_1[shape]
    rings = 8 if inner else 150
    res, t_star = onset_moment(disc_surface(R, profile, rings=rings, segments=256, inner=inner))
    moment = -res.torque_about_centre[2]        # resists the spin: negative about +z
    assert res.sliding_fraction == 0.0 and moment > 0
    assert moment / m_cont == pytest.approx(expected, rel=0.01)


def test_disc_reduced_moment_closed_form():
    """(6.16): M_reduced = π μ p R³ / 2 for a uniform disc, and the onset time follows from
    the outer edge reaching k̄ (Δ_θ + τ ω) R = μ."""
    res, t_star = onset_moment(disc_surface(R, lambda r: P0, rings=60, segments=256))
    assert -res.torque_about_centre[2] == pytest.approx(np.pi * MU * P0 * R ** 3 / 2, rel=2e-3)
    tau = CBAR / KBAR
    assert t_star == pytest.approx((MU / (KBAR * R) - tau * OMEGA) / OMEGA, rel=2e-3)
    assert res.deformation[2] == pytest.approx(OMEGA * t_star, rel=1e-9)


# --------------------------------------------------------------------------- 1D drag (Fig. 6.2)

def drag(surface, velocity_of_t, t_end, breaks, *, mu=MU, stiffness=KBAR, damping=CBAR, samples=None):
    """Integrate ṡ for a prescribed relative velocity history; returns (times, results)."""
    quad = surface_quadrature(surface)
    kw = dict(angular_velocity=np.zeros(3), mu=mu, stiffness=stiffness, damping=damping)
    s = np.zeros(6)
    times, out = [], []
    edges = [0.0] + list(breaks) + [t_end]
    for a, b in zip(edges[:-1], edges[1:]):
        v = velocity_of_t(0.5 * (a + b))
        sol = solve_ivp(lambda t, y: friction_wrench(quad, y, linear_velocity=v, **kw).rate, (a, b), s,
                        method="Radau", rtol=1e-10, atol=1e-16, dense_output=True)
        assert sol.success
        ts = np.linspace(a, b, samples or 200)
        for t in ts:
            times.append(t)
            out.append(friction_wrench(quad, sol.sol(t), linear_velocity=v, **kw))
        s = sol.y[:, -1]
    return np.array(times), out


def test_drag_1d_figure_6_2():
    side, p = 0.02, 1e4
    N = p * side * side
    v, t1, t_end = 0.05, 0.02, 0.03
    tau = CBAR / KBAR
    t_star = (MU - CBAR * v) / (KBAR * v)          # spring + damper reach μ p
    assert 0 < t_star < t1
    times, res = drag(square_surface(side, p), lambda t: np.array([v, 0, 0]) if t < t1 else np.zeros(3),
                      t_end, [t1], samples=400)
    fx = np.array([r.force[0] for r in res])
    status = [r.status for r in res]
    before = (times > 0) & (times < t_star * 0.999)
    # linear rise: F = −N (k̄ v t + c̄ v), the damper's jump c̄ v N at t = 0
    np.testing.assert_allclose(fx[before], -N * (KBAR * v * times[before] + CBAR * v), rtol=1e-7)
    assert all(s == "stick" for s, b in zip(status, before) if b)
    # saturation at μ N from t* until the stop
    sliding = (times > t_star * 1.001) & (times < t1 * 0.9999)
    np.testing.assert_allclose(fx[sliding], -MU * N, rtol=1e-9)
    assert all(s == "slide" for s, b in zip(status, sliding) if b)
    first_slide = times[[s == "slide" for s in status].index(True)]
    assert first_slide == pytest.approx(t_star, abs=(t1 / 400) * 1.01)
    # locked in after the stop: the spring alone, N k̄ δ(t1), δ relaxing towards μ/k̄ with τ
    locked = -N * (MU - CBAR * v * np.exp(-(t1 - t_star) / tau))
    after = times > t1 * 1.0001
    np.testing.assert_allclose(fx[after], locked, rtol=1e-6)
    np.testing.assert_allclose([r.spring_force[0] for r, a in zip(res, after) if a], locked, rtol=1e-6)
    assert all(s == "stick" for s, a in zip(status, after) if a)


# --------------------------------------------------------------------------- 2D drag (Fig. 6.3)

def point_model_2d(delta0, v, m, tau, t):
    """Independent point-model solution (6.4–6.6 written out, per unit k̄ p): stretch δ(t)
    while sliding with B moving at constant v, spring k, damper c = τ k, μp/k = m."""
    def rhs(_, d):
        u = d + tau * v                          # −t_s / k
        size = np.linalg.norm(u)
        if size <= m:
            return v
        return -(d - m * u / size) / tau        # δ̇ = −τ⁻¹ (t_f/k + δ), t_f/k = −m û
    return solve_ivp(rhs, (0, t[-1]), delta0, t_eval=t, method="Radau", rtol=1e-11, atol=1e-16).y.T


def test_drag_2d_figure_6_3():
    side, p = 0.02, 1e4
    N = p * side * side
    kbar, cbar = 1e4, 10.0
    tau, m, v = cbar / kbar, MU / kbar, 0.5
    quad = surface_quadrature(square_surface(side, p))
    kw = dict(angular_velocity=np.zeros(3), mu=MU, stiffness=kbar, damping=cbar)
    # steady sliding in +y: the damper carries nothing, the spring sits at μ/k̄
    K = friction_wrench(quad, None, linear_velocity=[0, v, 0], **kw).stiffness
    s0 = state_from_deformation(K, [0, 0, 0, 0, m, 0])
    steady = friction_wrench(quad, s0, linear_velocity=[0, v, 0], **kw)
    np.testing.assert_allclose(steady.rate, 0, atol=1e-12 * np.linalg.norm(s0) / tau)
    np.testing.assert_allclose(steady.force, [0, -MU * N, 0], rtol=1e-12, atol=1e-12 * N)
    # turn 90°: B now moves in +x
    t = np.linspace(0, 20 * tau, 801)
    sol = solve_ivp(lambda _, y: friction_wrench(quad, y, linear_velocity=[v, 0, 0], **kw).rate, (0, t[-1]), s0,
                    t_eval=t, method="Radau", rtol=1e-11, atol=1e-16)
    res = [friction_wrench(quad, y, linear_velocity=[v, 0, 0], **kw) for y in sol.y.T]
    # the spring force is continuous across the turn; friction and damper jump
    np.testing.assert_allclose(res[0].spring_force, steady.spring_force, rtol=1e-12)
    assert np.linalg.norm(res[0].damping_force) > 0.5 * MU * N
    # matches the point model integrated independently
    delta = point_model_2d(np.array([0, m]), np.array([v, 0]), m, tau, t)
    np.testing.assert_allclose([r.deformation[3:5] for r in res], delta, rtol=1e-6, atol=1e-8 * m)
    # friction opposes the shell's slip: v_slip = v_T − δ̇ (6.1), t_f = −μ p v̂_slip when sliding
    for r, y in zip(res[1:], sol.y.T[1:]):
        assert r.status == "slide"
        sc = stiffness_scaling(r.stiffness)
        ddelta = (sc.inv_sqrt_bar @ r.rate) / sc.scale
        slip = np.array([v, 0, 0]) - ddelta[3:]
        assert r.force @ slip == pytest.approx(-np.linalg.norm(r.force) * np.linalg.norm(slip), rel=1e-9)
        assert np.linalg.norm(r.force) == pytest.approx(MU * N, rel=1e-9)
    # the damper's share decays to zero; linearised about the new steady state its time
    # constant is τ + μ/(k̄ v) (τ when v ≫ μ/c̄)
    damper = np.array([np.linalg.norm(r.damping_force) for r in res])
    assert damper[-1] < 1e-6 * damper[0]
    late = slice(400, 800)
    slope = np.polyfit(t[late], np.log(damper[late]), 1)[0]
    assert -1 / slope == pytest.approx(tau + m / v, rel=0.01)


# --------------------------------------------------------------------------- point model

def test_point_model_closed_form_cases():
    k, c, p = 1e3, 2.0, 10.0
    # sticking: t_f = t_s and δ̇ = v_T
    t_f, rate, sliding, t_s = point_friction([1e-3, 0, 0], tangential_velocity=[0.1, 0, 0], pressure=p, mu=0.5,
                                             stiffness=k, damping=c)
    np.testing.assert_allclose(t_f, [-k * 1e-3 - c * 0.1, 0, 0])
    np.testing.assert_allclose(rate, [0.1, 0, 0])
    assert not sliding
    # sliding: |t_f| = μ p along t_s, and (6.4) δ̇ = −(k/c)(t_f/k + δ)
    d = np.array([4e-3, 3e-3, 0])
    t_f, rate, sliding, t_s = point_friction(d, tangential_velocity=[0, 0.2, 0], pressure=p, mu=0.5,
                                             stiffness=k, damping=c)
    assert sliding and np.linalg.norm(t_f) == pytest.approx(0.5 * p)
    np.testing.assert_allclose(t_f / np.linalg.norm(t_f), t_s / np.linalg.norm(t_s))
    np.testing.assert_allclose(rate, -(k / c) * (t_f / k + d))


# --------------------------------------------------------------------------- integration (6.2.4)

def random_surface(rng):
    """A curved, tilted patch with a random positive pressure field."""
    surf = disc_surface(0.01, lambda r: 1e4 * (1.2 - (r / 0.01) ** 2), rings=6, segments=24,
                        normal=rng.normal(size=3), centre=rng.normal(size=3) * 0.05, representation="polygon")
    bump = rng.normal(size=3)
    surf.vertices = surf.vertices + 20.0 * np.outer(((surf.vertices - surf.vertices.mean(0)) @ bump) ** 2, surf.normals[0])
    surf.vertex_pressure = surf.vertex_pressure * rng.uniform(0.5, 1.5, len(surf.vertex_pressure))
    return surf


def printed_rate_6_26(state, K, f_c, tau):
    """(6.26) as printed, written here from docs/tangential.md and not from the implementation:
    ṡ = −τ⁻¹ (K̄^{−1/2} S⁻¹ f_c + s), with K = S K̄ S, S = diag(a I₃, b I₃), a² = tr K_θθ / 3,
    b² = tr K_rr / 3, and K̄^{−1/2} the square root of K̄'s pseudo-inverse (K̄ is symmetric positive
    semi-definite: by its eigenvectors, eigenvalues below 1e-12 of the largest taken as 0)."""
    a, b = np.sqrt(np.trace(K[:3, :3]) / 3.0), np.sqrt(np.trace(K[3:, 3:]) / 3.0)
    S_inv = np.diag(1.0 / np.array([a, a, a, b, b, b]))
    K_bar = S_inv @ K @ S_inv
    lam, Q = np.linalg.eigh(0.5 * (K_bar + K_bar.T))
    kept = lam > 1e-12 * lam.max()
    inv_sqrt = Q[:, kept] @ np.diag(lam[kept] ** -0.5) @ Q[:, kept].T
    return -(inv_sqrt @ (S_inv @ f_c) + state) / tau


def test_rate_equals_printed_formula_6_26():
    rng = np.random.default_rng(1)
    for _ in range(20):
        quad = surface_quadrature(random_surface(rng))
        kw = dict(mu=rng.uniform(0.1, 1), stiffness=rng.uniform(1e2, 1e4), damping=rng.uniform(0.1, 10))
        s = rng.normal(size=6) * rng.uniform(1e-4, 1e-1)
        res = friction_wrench(quad, s, linear_velocity=rng.normal(size=3) * 0.01,
                              angular_velocity=rng.normal(size=3), **kw)
        lit = printed_rate_6_26(s, res.stiffness, np.concatenate([res.torque_about_centre, res.force]),
                                kw["damping"] / kw["stiffness"])
        np.testing.assert_allclose(res.rate, lit, rtol=1e-6, atol=1e-7 * np.abs(lit).max())


def test_lost_contact_decays_with_tau():
    s = np.array([1.0, -2, 3, 0.5, 0, -1])
    res = friction_wrench(empty_surface("polygon", np.eye(4), np.eye(4)), s, linear_velocity=[1, 0, 0],
                          angular_velocity=[0, 0, 1], mu=0.5, stiffness=1e4, damping=5.0)
    assert res.status == "none"
    np.testing.assert_allclose(res.rate, -s / 5e-4)
    np.testing.assert_allclose(res.force, 0)


def test_vanishing_contact_is_bounded():
    """As the pressure goes to zero K → 0 and Δ grows without bound, but the wrench and the
    rate stay bounded (6.26: ṡ → −s/τ once f_c is negligible)."""
    s = np.array([0.0, 0, 0.02, 0.03, -0.01, 0])
    for scale in (1.0, 1e-6, 1e-12, 1e-18):
        surf = disc_surface(0.01, lambda r: 1e4 * scale, rings=4, segments=16)
        res = friction_wrench(surf, s, linear_velocity=[0, 0, 0], angular_velocity=[0, 0, 0], mu=0.5,
                              stiffness=1e4, damping=1.0)
        assert np.all(np.isfinite(res.rate)) and np.all(np.isfinite(res.force))
        assert np.linalg.norm(res.force) <= 0.5 * 1e4 * scale * np.pi * 1e-4 * 1.01
        assert np.linalg.norm(res.rate) <= 2 * np.linalg.norm(s) / 1e-4


def test_energy_closed_cycle_without_damping():
    """C̄ = 0, no sliding, constant load: the spring energy is exactly the work done on it along
    a closed cycle of relative motion (6.22–6.23), so it returns to zero."""
    quad = surface_quadrature(random_surface(np.random.default_rng(3)))
    kw = dict(mu=1e6, stiffness=3e3, damping=0.0)
    legs = [([1e-3, 0, 0], [0, 0, 0]), ([0, 2e-3, 0], [0, 0, 0.3]), ([0, 0, 0], [0.2, -0.1, 0.4]),
            ([-1e-3, 0, 0], [0, 0, 0]), ([0, -2e-3, 0], [0, 0, -0.3]), ([0, 0, 0], [-0.2, 0.1, -0.4])]
    s = np.zeros(6)
    work, peak = 0.0, 0.0
    for v, w in legs:                       # each leg 1 s at a constant twist about the origin
        r0 = friction_wrench(quad, s, linear_velocity=v, angular_velocity=w, **kw)
        assert r0.status == "stick"
        s1 = s + r0.rate                   # the rate is constant while the load is
        r1 = friction_wrench(quad, s1, linear_velocity=v, angular_velocity=w, **kw)
        np.testing.assert_allclose(r1.rate, r0.rate, rtol=1e-10, atol=1e-14)
        twist_c = np.concatenate([w, np.asarray(v) + np.cross(w, r0.centre)])
        power0 = -np.concatenate([r0.spring_torque, r0.spring_force]) @ twist_c
        power1 = -np.concatenate([r1.spring_torque, r1.spring_force]) @ twist_c
        work += 0.5 * (power0 + power1)     # power is linear in time here: trapezoid is exact
        s = s1
        peak = max(peak, r1.energy)
        assert r1.energy == pytest.approx(work, rel=1e-9, abs=1e-12 * peak)
    assert peak > 0
    assert 0.5 * s @ s <= 1e-9 * peak


def test_energy_changes_only_by_work_under_varying_load():
    """The load (pressure) varies while B moves: U(t) = ∫ power dt (D 6.2.4 requirement 1)."""
    base = random_surface(np.random.default_rng(5))
    q0 = surface_quadrature(base)
    v, w = np.array([2e-3, -1e-3, 0]), np.array([0.1, 0.2, -0.3])
    kw = dict(mu=1e6, stiffness=2e3, damping=0.0)

    def at(t):
        from fieldgen.runtime.contact.tangential import Quadrature
        return Quadrature(q0.points, q0.weights, q0.pressures * (1.0 + 0.8 * np.sin(3 * t)), q0.normals)

    def rhs(t, y):
        r = friction_wrench(at(t), y[:6], linear_velocity=v, angular_velocity=w, **kw)
        twist = np.concatenate([w, v + np.cross(w, r.centre)])
        return np.concatenate([r.rate, [-np.concatenate([r.spring_torque, r.spring_force]) @ twist]])

    sol = solve_ivp(rhs, (0, 2.0), np.zeros(7), method="DOP853", rtol=1e-12, atol=1e-20)
    s, work = sol.y[:6, -1], sol.y[6, -1]
    assert 0.5 * s @ s == pytest.approx(work, rel=1e-9)


def test_sliding_never_adds_energy():
    """Power into the bodies from friction plus the spring's dU/dt is never positive, for random
    states, motions and loads (sticking and sliding points mixed)."""
    rng = np.random.default_rng(7)
    slid = 0
    for _ in range(200):
        quad = surface_quadrature(random_surface(rng))
        kbar, cbar = rng.uniform(1e2, 1e4), rng.uniform(0.01, 10)
        s = rng.normal(size=6) * rng.uniform(1e-3, 1.0)
        v, w = rng.normal(size=3) * rng.uniform(1e-4, 1), rng.normal(size=3) * rng.uniform(1e-3, 10)
        res = friction_wrench(quad, s, linear_velocity=v, angular_velocity=w, mu=rng.uniform(0.05, 1),
                              stiffness=kbar, damping=cbar)
        twist = np.concatenate([w, v + np.cross(w, res.centre)])
        friction_power = np.concatenate([res.torque_about_centre, res.force]) @ twist
        total = friction_power + res.energy_rate
        scale = abs(friction_power) + abs(res.energy_rate)
        assert total <= 1e-9 * scale
        slid += res.status == "slide"
    assert slid > 50


def test_invariant_to_rotation_translation_and_units():
    """D 6.2.4 requirement 2: turning and moving the whole contact (surface, velocities, state)
    turns the results, and measuring lengths in mm instead of m leaves the state, energy and
    status unchanged (K̄ per length, C̄ per velocity rescale; s is in √J)."""
    from scipy.spatial.transform import Rotation

    from fieldgen.runtime.contact.tangential import Quadrature

    rng = np.random.default_rng(11)
    quad = surface_quadrature(random_surface(rng))
    s = rng.normal(size=6) * 0.02
    v, w = rng.normal(size=3) * 1e-3, rng.normal(size=3) * 0.1
    kw = dict(mu=0.4, stiffness=3e3, damping=2.0)
    base = friction_wrench(quad, s, linear_velocity=v, angular_velocity=w, **kw)
    R = Rotation.from_rotvec([0.3, -1.1, 0.7]).as_matrix()
    shift = np.array([0.5, -0.2, 1.0])
    moved = Quadrature(quad.points @ R.T + shift, quad.weights, quad.pressures, quad.normals @ R.T)
    # the same material velocity field: v(x) = v + ω × x, seen at the moved points
    res = friction_wrench(moved, np.concatenate([R @ s[:3], R @ s[3:]]), linear_velocity=R @ v - np.cross(R @ w, shift),
                          angular_velocity=R @ w, **kw)
    np.testing.assert_allclose(res.force, R @ base.force, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.torque_about_centre, R @ base.torque_about_centre, rtol=1e-9, atol=1e-14)
    np.testing.assert_allclose(res.rate, np.concatenate([R @ base.rate[:3], R @ base.rate[3:]]), rtol=1e-9,
                               atol=1e-9 * np.abs(base.rate).max())
    assert res.status == base.status and res.energy == pytest.approx(base.energy)
    # units: lengths × 1000 (mm), pressures in N/mm² (× 1e-6), K̄ in 1/mm, C̄ in s/mm
    L = 1e3
    mm = Quadrature(quad.points * L, quad.weights * L ** 2, quad.pressures * 1e-6, quad.normals)
    res = friction_wrench(mm, s * np.sqrt(L), linear_velocity=v * L, angular_velocity=w, mu=0.4,
                          stiffness=3e3 / L, damping=2.0 / L)
    np.testing.assert_allclose(res.force, base.force, rtol=1e-9)               # N either way
    np.testing.assert_allclose(res.deformation[3:], base.deformation[3:] * L, rtol=1e-7)
    np.testing.assert_allclose(res.deformation[:3], base.deformation[:3], rtol=1e-7, atol=1e-12)
    assert res.energy == pytest.approx(base.energy * L) and res.status == base.status
