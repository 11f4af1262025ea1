"""The velocity step's speed work (docs/design/runtime.md, "The full-resolution gripper"):
the convex solve's one-pass gradient and symmetric Hessian, the impulses it hands back, and the
rigid-triangle kernel's output room.

Expected values are independent of the kernels under test: numpy's evaluation of the impulses
(``normal_impulse`` and the disc friction law written out here), central differences of the
objective, and a closed-form polygon area.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from fieldgen.runtime.dynamics import convex_step
from fieldgen.runtime.dynamics.convex_step import contact_frames, normal_impulse, solve_compliant_step


def _problem(seed: int, n_c: int = 40):
    """One body (6 velocities) pressed on ``n_c`` random compliant point contacts."""
    rng = np.random.default_rng(seed)
    m = 0.05
    A = rng.normal(size=(3, 3))
    M = np.zeros((6, 6))
    M[:3, :3] = m * np.eye(3)
    M[3:, 3:] = 1e-5 * (np.eye(3) + 0.1 * (A @ A.T))
    normals = rng.normal(size=(n_c, 3))
    normals[:, 2] = np.abs(normals[:, 2]) + 2.0
    frames = contact_frames(normals / np.linalg.norm(normals, axis=1)[:, None])
    r = rng.uniform(-0.02, 0.02, size=(n_c, 3))
    J = np.zeros((n_c, 3, 6))
    for c in range(n_c):
        for k in range(3):
            f = frames[c, k]
            J[c, k, :3] = f
            J[c, k, 3:] = np.cross(r[c], f)
    bias = rng.normal(scale=1e-3, size=(n_c, 3))
    phi0 = -rng.uniform(1e-6, 1e-4, n_c)
    k = rng.uniform(1e2, 1e4, n_c)
    chi = rng.uniform(0.0, 5.0, n_c)
    mu = rng.uniform(0.2, 0.8, n_c)
    v_star = rng.normal(scale=0.05, size=6)
    return M, v_star, J, bias, phi0, k, chi, mu


def _numpy_impulses(J, bias, v, phi0, k, chi, mu, dt, eps):
    u = np.einsum("crj,j->cr", J, v) + bias
    gn, _, _ = normal_impulse(u[:, 2], phi0, k, chi, dt)
    s = mu * gn
    rr = np.sqrt(u[:, 0] ** 2 + u[:, 1] ** 2 + eps * eps)
    return np.stack([-s * u[:, 0] / rr, -s * u[:, 1] / rr, gn], axis=1)


def test_solution_balances_the_impulses_it_returns():
    """At the solve's answer M(v − v*) = Σ Jᵀγ with γ evaluated afresh by numpy at that v
    (the fixed point s = μγ_n converged), and the returned impulses are those γ."""
    dt, eps = 1e-3, 1e-7
    for seed in range(6):
        M, v_star, J, bias, phi0, k, chi, mu = _problem(seed)
        for guess in (None, v_star + 1e-3):
            res = solve_compliant_step(M, v_star, J, bias, phi0, k, chi, mu, dt, stiction_velocity=eps,
                                       initial_velocity=guess)
            gamma = _numpy_impulses(J, bias, res.velocity, phi0, k, chi, mu, dt, eps)
            np.testing.assert_allclose(res.impulses, gamma, rtol=1e-9, atol=1e-15)
            pushed = np.einsum("crj,cr->j", J, gamma)
            residual = M @ (res.velocity - v_star) - pushed
            # s = μγ_n converges to 1e-8 of its largest value (friction_tolerance)
            assert np.abs(residual).max() <= 1e-6 * np.abs(pushed).max()


def test_gradient_and_hessian_of_the_one_pass_cost():
    """_cost's gradient and Hessian against central differences of its own objective value
    (the value alone uses none of the gradient/Hessian code), friction bound s frozen."""
    dt, eps = 1e-3, 1e-4
    for seed in range(4):
        M, v_star, J, bias, phi0, k, chi, mu = _problem(seed, 25)
        rng = np.random.default_rng(100 + seed)
        v = v_star + rng.normal(scale=1e-3, size=6)
        s = rng.uniform(0.0, 1e-3, len(phi0))
        gamma = np.zeros((len(phi0), 3))
        H = np.zeros((6, 6))
        grad = np.zeros(6)

        def value(x):
            return convex_step._cost(J, bias, x, v_star, M, phi0, k, chi, s, dt, eps, False, gamma, H, grad)

        convex_step._cost(J, bias, v, v_star, M, phi0, k, chi, s, dt, eps, True, gamma, H, grad)
        g, Hc = grad.copy(), H.copy()
        h = 1e-7
        fd = np.array([(value(v + h * e) - value(v - h * e)) / (2 * h) for e in np.eye(6)])
        np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * np.abs(g).max())
        hd = np.empty((6, 6))
        for j, e in enumerate(np.eye(6)):
            gp, gm = np.zeros(6), np.zeros(6)
            convex_step._cost(J, bias, v + h * e, v_star, M, phi0, k, chi, s, dt, eps, True, gamma, H, gp)
            convex_step._cost(J, bias, v - h * e, v_star, M, phi0, k, chi, s, dt, eps, True, gamma, H, gm)
            hd[:, j] = (gp - gm) / (2 * h)
        np.testing.assert_allclose(Hc, hd, rtol=1e-4, atol=1e-6 * np.abs(Hc).max())
        np.testing.assert_array_equal(Hc, Hc.T)



_HEXAGONS = """
import numpy as np
from fieldgen.runtime.contact.clip import tri_tet_polygons
PT = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
TT = np.array([[0, 1, 2, 3]])
# the tet's section at z = 0.2 is the triangle (0, 0), (0.8, 0), (0, 0.8); the rigid triangle is
# its point reflection through the section's centroid: their intersection is a hexagon of 2/3
# the section's area (0.32)
g = 0.8 / 3
PS = np.array([[2 * g, 2 * g, 0.2], [2 * g - 0.8, 2 * g, 0.2], [2 * g, 2 * g - 0.8, 0.2]])
SF = np.array([[0, 1, 2]])
normals = np.array([[0.0, 0.0, 1.0]])
pairs = np.zeros((20, 2), np.int64)          # the same pair 20 times: 120 vertices out
out = tri_tet_polygons(pairs, PT, TT, PS, SF, normals, 1.0, np.zeros(4), np.zeros((1, 3)))
print(len(out[2]) - 1, int(out[2][-1]), float(out[4].min()), float(out[4].max()))
"""


def test_rigid_triangle_kernel_holds_its_largest_polygons(tmp_path):
    """tri_tet_polygons reserves MAX_POLYGON vertices a pair and never grows its output: 20
    hexagons (more than 4 vertices a pair) come out whole, checked with numba's bounds checks on
    (an IndexError if the room were short), and each has the closed-form area 2/3 · 0.32."""
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _HEXAGONS], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    faces, vertices, smallest, largest = done.stdout.split()
    assert int(faces) == 20 and int(vertices) == 120
    assert abs(float(smallest) - 0.32 * 2 / 3) < 1e-12 and abs(float(largest) - 0.32 * 2 / 3) < 1e-12


def test_one_body_hessian_sums_as_the_general_loop():
    """The one-body pass (6 velocities, local sums) gives the general path's Hessian and
    gradient bit for bit, with columns of J that are zero for a contact (skipped by both); and
    both are numpy's M + Jᵀ G J and g − Σ Jᵀγ."""
    for seed in range(4):
        M, v_star, J, bias, phi0, k, chi, mu = _problem(seed, 60)
        rng = np.random.default_rng(200 + seed)
        J[::7, :, 3:] = 0.0
        weights = rng.normal(size=(len(phi0), 4))
        gamma = rng.normal(size=(len(phi0), 3))
        g0 = rng.normal(size=6)
        H6, Hn = np.triu(M).copy(), np.triu(M).copy()
        g6, gn = g0.copy(), g0.copy()
        convex_step._hessian_and_gradient_6(J, weights, gamma, H6, g6)
        convex_step._add_hessian(J, weights, Hn)
        for c in range(len(phi0)):                # the general path's gradient loop, as in _cost
            for j in range(6):
                gn[j] -= J[c, 0, j] * gamma[c, 0] + J[c, 1, j] * gamma[c, 1] + J[c, 2, j] * gamma[c, 2]
        np.testing.assert_array_equal(H6, Hn)
        np.testing.assert_array_equal(g6, gn)
        G = np.zeros((len(phi0), 3, 3))
        G[:, 0, 0], G[:, 0, 1], G[:, 1, 0] = weights[:, 0], weights[:, 1], weights[:, 1]
        G[:, 1, 1], G[:, 2, 2] = weights[:, 2], weights[:, 3]
        expected = M + np.einsum("cri,crs,csj->ij", J, G, J)
        np.testing.assert_allclose(np.triu(H6), np.triu(expected), rtol=1e-12, atol=1e-12 * np.abs(expected).max())
        np.testing.assert_allclose(g6, g0 - np.einsum("crj,cr->j", J, gamma), rtol=1e-12,
                                   atol=1e-12 * np.abs(g6).max())
