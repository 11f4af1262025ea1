"""The velocity-level step's solver: a convex minimisation in the bodies' velocities (docs/model.md §5.3; M22 IV).

Normal impulse of a compliant point contact over the step, with Hunt–Crossley dissipation χ
(docs/model.md §4.2-4.3, the pair's combined χ)::

    γ_n(v_n) = δt · k (−φ0 − δt v_n)₊ (1 − χ v_n)₊          (M22 eq. 15-16 with eq. 1)

Because every compliant contact's normal impulse is an explicit, monotone function of the
next-step velocity, the step is the minimiser of a convex function of the 6n body velocities
alone (``½‖v − v*‖²_M + Σ Φ_n(v_n) + Σ s‖v_t‖``, ``Φ_n' = −γ_n``) once the friction bound
``s = μ γ_n`` is known; we minimise it by Newton's method with a backtracking line search and
update ``s`` by fixed-point iteration until it stops changing (the Coulomb law is then
satisfied with the disc cone, no polygonal approximation). ``‖v_t‖`` is smoothed as
``√(‖v_t‖² + ε²) − ε`` with ε = ``stiction_velocity`` (1e-7 m/s by default): a stuck contact
creeps at most about ε, while the Newton system stays 6n × 6n whatever the number of
polygons, which is what makes real-time rates possible in Python. Why not the Lemke LCP of
``time_stepping``: its dense tableau is ``n_c(n_d + 2)`` wide, and its friction cone is
polygonal. Rows of infinite stiffness (a rigid core reached, D 5.1.2) are hard constraints
solved by an augmented Lagrangian (:func:`solve_with_rigid_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from fieldgen.errors import BuildError

DEFAULT_STICTION_VELOCITY = 1e-7


def contact_frames(normals: np.ndarray) -> np.ndarray:
    """(n_c, 3, 3) rows t1, t2, n: an orthonormal frame per contact normal."""
    return _contact_frames(np.ascontiguousarray(normals, dtype=np.float64))


@nb.njit(cache=True)
def _contact_frames(normals):
    """t1 = n × e (e the axis where |n| is smallest, first on ties), normalised; t2 = n × t1."""
    out = np.empty((normals.shape[0], 3, 3))
    for c in range(normals.shape[0]):
        nx, ny, nz = normals[c, 0], normals[c, 1], normals[c, 2]
        r = np.sqrt(nx * nx + ny * ny + nz * nz)
        nx, ny, nz = nx / r, ny / r, nz / r
        ax, ay, az = abs(nx), abs(ny), abs(nz)
        if ax <= ay and ax <= az:          # n × e_x
            tx, ty, tz = 0.0, nz, -ny
        elif ay <= az:                     # n × e_y
            tx, ty, tz = -nz, 0.0, nx
        else:                              # n × e_z
            tx, ty, tz = ny, -nx, 0.0
        r = np.sqrt(tx * tx + ty * ty + tz * tz)
        tx, ty, tz = tx / r, ty / r, tz / r
        out[c, 0, 0], out[c, 0, 1], out[c, 0, 2] = tx, ty, tz
        out[c, 1, 0] = ny * tz - nz * ty
        out[c, 1, 1] = nz * tx - nx * tz
        out[c, 1, 2] = nx * ty - ny * tx
        out[c, 2, 0], out[c, 2, 1], out[c, 2, 2] = nx, ny, nz
    return out


def normal_impulse(u_n, phi0, stiffness, dissipation, dt):
    """γ_n = δt k (−φ0 − δt u_n)₊ (1 − χ u_n)₊, its derivative in u_n and the potential
    Φ(u_n) = ∫_{u_n}^∞ γ_n (convex, Φ' = −γ_n)."""
    a = -phi0
    chi = dissipation
    with np.errstate(divide="ignore"):
        u_max = np.minimum(a / dt, np.where(chi > 0, 1.0 / np.where(chi > 0, chi, 1.0), np.inf))
    active = u_n < u_max
    f1 = a - dt * u_n
    f2 = 1.0 - chi * u_n
    gamma = np.where(active, dt * stiffness * f1 * f2, 0.0)
    dgamma = np.where(active, dt * stiffness * (-dt * f2 - chi * f1), 0.0)

    def F(s):
        return a * s - (a * chi + dt) * s * s / 2.0 + dt * chi * s ** 3 / 3.0

    Phi = np.where(active, dt * stiffness * (F(np.where(active, u_max, 0.0)) - F(np.where(active, u_n, 0.0))), 0.0)
    return gamma, dgamma, Phi


@dataclass
class ConvexStepResult:
    velocity: np.ndarray         # (6n,) next-step generalised velocities
    impulses: np.ndarray         # (n_c, 3) impulse on B in the contact frame (t1, t2, n)
    newton_iterations: int
    friction_iterations: int


@nb.njit(cache=True)
def _cost(J, bias, v, v_star, M, phi0, k, chi, s, dt, eps, want, gamma, H, grad):
    """Objective ½‖v − v*‖²_M + Σ Φ_n + Σ s(√(|u_t|² + ε²) − ε); when ``want``: impulses
    ``gamma`` (n_c, 3), gradient ``grad`` = M(v − v*) − Σ Jᵀγ and Hessian ``H`` (its upper
    triangle summed, then mirrored: the Hessian is symmetric), filled in place: impulses and
    gradient in one pass over the contacts, which also keeps each contact's 3 × 3 weights for
    the Hessian's pass (:func:`_add_hessian`); for one body (6 velocities) the gradient's
    contact terms move to that pass (:func:`_hessian_and_gradient_6`)."""
    nv = v.shape[0]
    d = v - v_star
    Md = M @ d
    total = 0.5 * (d @ Md)
    if want:
        for i in range(nv):
            acc = 0.0
            for j in range(nv):
                acc += M[i, j] * (v[j] - v_star[j])
            grad[i] = acc
            for j in range(i, nv):
                H[i, j] = M[i, j]
    u = np.empty(3)
    weights = np.empty((J.shape[0] if want else 0, 4))
    for c in range(J.shape[0]):
        for r in range(3):
            acc = bias[c, r]
            for j in range(nv):
                acc += J[c, r, j] * v[j]
            u[r] = acc
        a = -phi0[c]
        un = u[2]
        umax = a / dt
        if chi[c] > 0.0 and 1.0 / chi[c] < umax:
            umax = 1.0 / chi[c]
        gn = 0.0
        dgn = 0.0
        if un < umax:
            f1 = a - dt * un
            f2 = 1.0 - chi[c] * un
            gn = dt * k[c] * f1 * f2
            dgn = dt * k[c] * (-dt * f2 - chi[c] * f1)
            c1 = a * chi[c] + dt
            c2 = dt * chi[c]
            total += dt * k[c] * ((a * umax - c1 * umax * umax / 2.0 + c2 * umax ** 3 / 3.0)
                                  - (a * un - c1 * un * un / 2.0 + c2 * un ** 3 / 3.0))
        rr = np.sqrt(u[0] * u[0] + u[1] * u[1] + eps * eps)
        total += s[c] * (rr - eps)
        if want:
            q0 = -s[c] * u[0] / rr
            q1 = -s[c] * u[1] / rr
            gamma[c, 0] = q0
            gamma[c, 1] = q1
            gamma[c, 2] = gn
            if nv != 6:
                for j in range(nv):
                    grad[j] -= J[c, 0, j] * q0 + J[c, 1, j] * q1 + J[c, 2, j] * gn
            sr = s[c] / rr
            t0 = u[0] / rr
            t1 = u[1] / rr
            weights[c, 0] = sr * (1.0 - t0 * t0)
            weights[c, 1] = -sr * (t0 * t1)
            weights[c, 2] = sr * (1.0 - t1 * t1)
            weights[c, 3] = -dgn
    if want:
        if nv == 6:
            _hessian_and_gradient_6(J, weights, gamma, H, grad)
        else:
            _add_hessian(J, weights, H)
        for i in range(nv):
            for j in range(i):
                H[i, j] = H[j, i]
    return total


@nb.njit(cache=True)
def _add_hessian(J, weights, H):
    """Upper triangle of ``H`` += Σ_c J_cᵀ G_c J_c, contact by contact in order; G_c the
    symmetric 3 × 3 of rows (g00, g01, 0), (g01, g11, 0), (0, 0, g22), ``weights[c]`` =
    (g00, g01, g11, g22)."""
    nv = J.shape[2]
    for c in range(J.shape[0]):
        g00, g01, g11, g22 = weights[c, 0], weights[c, 1], weights[c, 2], weights[c, 3]
        for i in range(nv):
            a0 = J[c, 0, i]
            a1 = J[c, 1, i]
            a2 = J[c, 2, i]
            if a0 == 0.0 and a1 == 0.0 and a2 == 0.0:
                continue
            w0 = g00 * a0 + g01 * a1
            w1 = g01 * a0 + g11 * a1
            w2 = g22 * a2
            for j in range(i, nv):
                H[i, j] += w0 * J[c, 0, j] + w1 * J[c, 1, j] + w2 * J[c, 2, j]


@nb.njit(cache=True)
def _hessian_and_gradient_6(J, weights, gamma, H, grad):
    """:func:`_add_hessian` for one free body (6 velocities), which also subtracts Σ Jᵀγ from
    ``grad`` (``gamma`` the impulses of the first pass); each entry of both gets the same
    operations in the same order as the general path (the same bits), summed in a local 6 × 6
    and 6 that the compiler keeps out of ``H``'s and ``grad``'s memory (the loops have constant
    bounds): ``_cost`` with the Hessian ≈ 25 % faster at 8,700 contacts
    (docs/design/runtime.md, "The full-resolution gripper")."""
    acc = np.empty((6, 6))
    gacc = np.empty(6)
    for i in range(6):
        gacc[i] = grad[i]
        for j in range(i, 6):
            acc[i, j] = H[i, j]
    for c in range(J.shape[0]):
        g00, g01, g11, g22 = weights[c, 0], weights[c, 1], weights[c, 2], weights[c, 3]
        q0, q1, gn = gamma[c, 0], gamma[c, 1], gamma[c, 2]
        for j in range(6):
            gacc[j] -= J[c, 0, j] * q0 + J[c, 1, j] * q1 + J[c, 2, j] * gn
        for i in range(6):
            a0 = J[c, 0, i]
            a1 = J[c, 1, i]
            a2 = J[c, 2, i]
            if a0 == 0.0 and a1 == 0.0 and a2 == 0.0:
                continue
            w0 = g00 * a0 + g01 * a1
            w1 = g01 * a0 + g11 * a1
            w2 = g22 * a2
            for j in range(i, 6):
                acc[i, j] += w0 * J[c, 0, j] + w1 * J[c, 1, j] + w2 * J[c, 2, j]
    for i in range(6):
        grad[i] = gacc[i]
        for j in range(i, 6):
            H[i, j] = acc[i, j]


def solve_compliant_step(M: np.ndarray, v_star: np.ndarray, J: np.ndarray, bias: np.ndarray,
                         phi0: np.ndarray, stiffness: np.ndarray, dissipation: np.ndarray, mu: np.ndarray,
                         dt: float, *, stiction_velocity: float = DEFAULT_STICTION_VELOCITY,
                         tolerance: float = 1e-12, friction_tolerance: float = 1e-8,
                         max_iterations: int = 200, initial_velocity: np.ndarray | None = None) -> ConvexStepResult:
    """Next-step velocities with compliant point contacts and Coulomb friction (see module doc).

    ``J`` (n_c, 3, 6n) maps velocities to contact-frame relative velocities (t1, t2, n) of B
    with respect to A; ``bias`` (n_c, 3) adds the part due to kinematic bodies. Newton on the
    convex objective with the friction bound ``s = μ γ_n`` frozen, then ``s`` updated until
    its largest change is below ``friction_tolerance`` × its largest value.

    ``initial_velocity`` (the previous step's velocities) warm-starts Newton and the friction
    bound: ``s`` starts at ``μ γ_n`` there, which for a resting or sliding contact is already
    the converged bound to within the change over one step. Warm-started, Newton runs
    directly at the final smoothing ε; if that fails to converge within ``max_iterations``
    the cold path (start at ``v*``, continuation ε = 1e-2, 1e-4, ε) is taken, so the answer
    never depends on the guess by more than the tolerances. The whole loop (cost, gradient,
    Hessian 6n × 6n, Cholesky-free solve, line search) is one numba kernel."""
    eps = float(stiction_velocity)
    n_c = len(phi0)
    v0 = np.ascontiguousarray(v_star, dtype=np.float64).copy()
    if n_c == 0:
        return ConvexStepResult(v0, np.zeros((0, 3)), 0, 0)
    J = np.ascontiguousarray(J, dtype=np.float64)
    bias = np.ascontiguousarray(bias, dtype=np.float64)
    phi0 = np.ascontiguousarray(phi0, dtype=np.float64)
    stiffness = np.ascontiguousarray(stiffness, dtype=np.float64)
    dissipation = np.ascontiguousarray(dissipation, dtype=np.float64)
    mu = np.ascontiguousarray(mu, dtype=np.float64)
    M = np.ascontiguousarray(M, dtype=np.float64)
    v_star = np.ascontiguousarray(v_star, dtype=np.float64)
    tol = tolerance * (1.0 + float(np.abs(v_star).max()))
    gamma = np.zeros((n_c, 3))
    cold = np.array([e for e in (1e-2, 1e-4) if e > 10 * eps] + [eps])
    if initial_velocity is not None:
        v = np.ascontiguousarray(initial_velocity, dtype=np.float64).copy()
        newton, outer, ok = _solve_convex(J, bias, v_star, M, phi0, stiffness, dissipation, mu, dt,
                                          np.array([eps]), v, tol, friction_tolerance, max_iterations, gamma)
        if ok:
            return ConvexStepResult(v, gamma, newton, outer)
    else:
        newton = 0
    v = v0
    n2, outer, ok = _solve_convex(J, bias, v_star, M, phi0, stiffness, dissipation, mu, dt, cold, v, tol,
                                  friction_tolerance, max_iterations, gamma)
    return ConvexStepResult(v, gamma, newton + n2, outer)


def solve_with_rigid_rows(M, v_star, J, bias, phi0, stiffness, dissipation, mu, dt, *,
                          stiction_velocity: float = DEFAULT_STICTION_VELOCITY,
                          initial_velocity: np.ndarray | None = None, tolerance: float = 1e-8,
                          max_outer: int = 100) -> ConvexStepResult:
    """:func:`solve_compliant_step` with the rows of infinite stiffness as hard constraints
    ``φ0 + δt u_n ≥ 0`` (a combined compliant + rigid step: a compliant body whose rigid core
    was reached, D 5.1.2, with hundreds of polygons that the LCP could not take).

    Augmented Lagrangian on the convex objective: with multipliers λ and penalty ρ, the term
    ``(ρ/2) max(0, λ/ρ − φ0/δt − u_n)²`` of a rigid row is exactly the potential of a compliant
    contact of stiffness ``ρ/δt²`` at ``φ0 − δt λ/ρ`` (no dissipation), so each outer iteration
    is one compliant solve; then ``λ ← max(0, λ − ρ (φ0/δt + u_n))``, which is that contact's
    normal impulse (its friction bound μλ follows). Stops when ``0 ≤ gap ⊥ λ ≥ 0`` holds to
    ``tolerance`` m (natural residual of the next-step gap and of δt λ/ρ). ρ is 10³ times the
    largest of the bodies' masses and δt² times the compliant stiffness: each outer iteration
    then shrinks the multipliers' error by about 10³; where it shrinks by less than 4 (nearly
    dependent rows), ρ grows tenfold, up to 10⁶ times its start."""
    rigid = ~np.isfinite(stiffness)
    k = np.array(stiffness, dtype=np.float64)
    phi = np.array(phi0, dtype=np.float64)
    chi = np.array(dissipation, dtype=np.float64)
    chi[rigid] = 0.0
    rho = 1e3 * max(float(np.max(np.diag(M))) if len(M) else 1.0, dt * dt * float(k[~rigid].sum()))
    k[rigid] = rho / (dt * dt)
    rho0, previous = rho, np.inf
    lam = np.zeros(int(rigid.sum()))
    v = None if initial_velocity is None else np.asarray(initial_velocity, dtype=np.float64)
    newton = friction = 0
    for _ in range(max_outer):
        phi[rigid] = phi0[rigid] - dt * lam / rho
        result = solve_compliant_step(M, v_star, J, bias, phi, k, chi, mu, dt, stiction_velocity=stiction_velocity,
                                      initial_velocity=v)
        v = result.velocity
        newton += result.newton_iterations
        friction += result.friction_iterations
        gap = phi0[rigid] / dt + J[rigid, 2, :] @ v + bias[rigid, 2]          # next-step gap / δt
        updated = np.maximum(0.0, lam - rho * gap)
        # natural residual of 0 <= gap ⊥ λ >= 0, both in metres over the step (redundant rows of a
        # resting body may share the load in any proportion: their split need not settle)
        residual = float(np.abs(np.minimum(gap * dt, updated * dt / rho)).max())
        lam = updated
        if residual <= tolerance:
            break
        if residual > 0.25 * previous and rho < 1e6 * rho0:
            # slow progress: nearly dependent rows (two features of one touch point, their normals a
            # few degrees apart) converge at a rate set by their smallest singular value; a stiffer
            # penalty restores it (the Newton system stays 6n × 6n, only its conditioning grows)
            rho *= 10.0
            k[rigid] = rho / (dt * dt)
        previous = residual
    else:
        raise BuildError(f"a step with {int(rigid.sum())} rigid-core contacts did not converge in {max_outer} "
                         f"augmented-Lagrangian iterations (gap {float(gap.min()) * dt:.3g} m)",
                         fix="reduce the time step or the load on the core")
    return ConvexStepResult(v, result.impulses, newton, friction)


@nb.njit(cache=True)
def _contact_impulses(J, bias, v, phi0, k, chi, mu, dt, eps, gamma):
    """Impulses at ``v`` with the bound s = μ γ_n(v), into ``gamma`` (n_c, 3); returns s.
    The same arithmetic as :func:`_cost` (u = J v + bias, γ_n, disc friction), without the
    objective or the Hessian: the friction bound and the reported impulses need only these."""
    nv = v.shape[0]
    s = np.empty(phi0.shape[0])
    for c in range(J.shape[0]):
        u0 = bias[c, 0]
        u1 = bias[c, 1]
        un = bias[c, 2]
        for j in range(nv):
            u0 += J[c, 0, j] * v[j]
            u1 += J[c, 1, j] * v[j]
            un += J[c, 2, j] * v[j]
        a = -phi0[c]
        umax = a / dt
        if chi[c] > 0.0 and 1.0 / chi[c] < umax:
            umax = 1.0 / chi[c]
        gn = 0.0
        if un < umax:
            gn = dt * k[c] * (a - dt * un) * (1.0 - chi[c] * un)
        s[c] = mu[c] * gn
        rr = np.sqrt(u0 * u0 + u1 * u1 + eps * eps)
        gamma[c, 0] = -s[c] * u0 / rr
        gamma[c, 1] = -s[c] * u1 / rr
        gamma[c, 2] = gn
    return s


@nb.njit(cache=True)
def _solve_convex(J, bias, v_star, M, phi0, k, chi, mu, dt, stages, v, tol, friction_tolerance, max_iterations,
                  gamma):
    """Newton with backtracking on the convex objective, ``s`` frozen, inside the fixed point
    ``s = μ γ_n``, for each smoothing ε in ``stages``; ``v`` in place. Ends with ``gamma``
    (n_c, 3) = the impulses at the final ``v`` and ε (the last call of :func:`_contact_impulses`,
    the same arithmetic as computing them afresh there).
    Returns (Newton iterations, fixed-point iterations, converged)."""
    nv = v.shape[0]
    n_c = J.shape[0]
    H = np.zeros((nv, nv))
    grad = np.empty(nv)
    trial = np.empty(nv)
    s = _contact_impulses(J, bias, v, phi0, k, chi, mu, dt, stages[0], gamma)
    newton = 0
    outer = 0
    converged = True
    for st in range(stages.shape[0]):
        eps = stages[st]
        fixed = False
        for outer in range(1, 101):
            inner_ok = False
            for _ in range(max_iterations):
                l0 = _cost(J, bias, v, v_star, M, phi0, k, chi, s, dt, eps, True, gamma, H, grad)
                dv = -np.linalg.solve(H, grad)
                newton += 1
                step = np.abs(dv).max()
                if step <= tol:
                    v += dv
                    inner_ok = True
                    break
                slope = grad @ dv
                alpha = 1.0
                for _ in range(80):
                    for j in range(nv):
                        trial[j] = v[j] + alpha * dv[j]
                    if _cost(J, bias, trial, v_star, M, phi0, k, chi, s, dt, eps, False, gamma, H, grad) \
                            <= l0 + 1e-4 * alpha * slope:
                        break
                    alpha *= 0.5
                v += alpha * dv
                if alpha * step <= tol:
                    inner_ok = True
                    break
            if not inner_ok:
                converged = False
            s_new = _contact_impulses(J, bias, v, phi0, k, chi, mu, dt, eps, gamma)
            change = 0.0
            smax = 1e-300
            for c in range(n_c):
                sn = s_new[c]
                change = max(change, abs(sn - s[c]))
                smax = max(smax, sn)
                s[c] = sn
            if change <= friction_tolerance * smax:
                fixed = True
                break
        if not fixed:
            converged = False
    return newton, outer, converged
