"""Velocity-level time stepping with compliant and rigid point contacts (M22 II-C, IV; T07; B92).

Solver choice. Each step solves one **Stewart-Trinkle / Anitescu-Potra mixed LCP**
(T07) in the next-step velocities ``v`` (6 per body), normal impulses ``p_n``,
friction impulses ``β`` along ``n_d`` tangent directions per contact and a
sliding-speed multiplier ``λ`` per contact, by Lemke's method (``lcp.lemke``)
after eliminating ``v`` with the block-diagonal mass matrix. Why this and not a
convex formulation: one formulation covers both kinds of contact the project
needs -- compliant point contacts from pressure-field polygons (M22 IV) and
rigid-rigid contacts that must never tunnel -- with exact complementarity (no
regularisation, so a box on an incline below the friction angle sticks exactly
instead of creeping), and Lemke's ray termination turns an inconsistent
configuration into a reported status instead of a crash (B92 13.2). The price
is a polygonal friction cone. To make friction exact where it matters, the first
of the ``n_d`` directions of each contact is aligned with that contact's
tangential velocity in the contact-free motion ``v* = v0 + M^-1 δt k``: a contact
that keeps sliding in its current direction feels exactly ``μ f_n`` opposite to
its slip (exact Coulomb), and the onset of sliding sees the full ``μ f_n`` in the
direction the load drives it. Other directions see an inscribed polygon (at
least ``μ cos(π/n_d)``).

Per contact ``i`` (M22 eq. 3, 7, with impulses ``p = δt f``)::

    0 <= φ0 + (δt + τ) v_n + c f_n  ⊥  f_n >= 0,     c = 1/k (0 for rigid)
    0 <= D^T v + e λ  ⊥  β >= 0,     0 <= μ p_n - e^T β  ⊥  λ >= 0
    M (v - v0) = δt k0 + N p_n + D β

``v_n = n·(v_B - v_A)`` at the contact point with ``n`` from A into B; a body that is not an
unknown of the step (kinematic: prescribed twist) adds its point velocity to ``v_B - v_A``
as a constant (``PointContact.prescribed_velocity``) in the normal and friction rows. Dissipation:
M22 incorporates it "as in (1)", the linear law ``f_n = (-kφ - d v_n)+``. The
project's dissipation is Hunt-Crossley ``χ`` in s/m (docs/model.md §4.2:
``p = p0 (1 - χ v_n)+``); linearising the polygon force ``A p0 (1 - χ v_n)`` about
the pressure at the start of the step gives ``d = χ k (-φ0)+``, i.e. ``τ = d c =
χ (-φ0)+`` (seconds). Rigid contacts (``stiffness = inf``) have ``c = τ = 0``:
``0 <= φ0/δt + v_n``, which lets a gap close exactly in one step and never more
(no tunnelling; penetration is pushed out at ``-φ0/δt``, Anitescu-Potra).
Gyroscopic torques are explicit (in ``k0``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fieldgen.errors import BuildError, InputError
from fieldgen.runtime.dynamics.lcp import LCPResult, lemke
from fieldgen.runtime.dynamics.rigid_body import (
    MassProperties,
    RigidBodyState,
    gyroscopic_torque,
    integrate_pose,
    point_jacobian,
    spatial_mass_matrix,
    world_inertia,
)

WORLD = -1
EPS_CONE = 1e-8     # see _assemble: sliding-speed regularisation, kg per kg of lightest body


@dataclass
class PointContact:
    """One point contact between body A and body B (``-1`` = the fixed world).

    ``normal`` points from A into B; ``phi0`` is the signed distance at the start of
    the step (negative = penetrating); ``stiffness`` in N/m (``inf`` = rigid);
    ``dissipation`` Hunt-Crossley χ in s/m; ``mu`` the Coulomb coefficient.
    """

    body_a: int
    body_b: int
    position: np.ndarray
    normal: np.ndarray
    phi0: float
    stiffness: float = np.inf
    dissipation: float = 0.0
    mu: float = 0.0
    #: world velocity of B's material point minus A's contributed by bodies that are not
    #: unknowns of the step (kinematic bodies with a prescribed twist); zero for the world
    prescribed_velocity: np.ndarray | None = None

    def __post_init__(self):
        self.position = np.asarray(self.position, dtype=np.float64).reshape(3)
        self.prescribed_velocity = np.zeros(3) if self.prescribed_velocity is None else \
            np.asarray(self.prescribed_velocity, dtype=np.float64).reshape(3)
        n = np.asarray(self.normal, dtype=np.float64).reshape(3)
        length = np.linalg.norm(n)
        if not length > 0:
            raise InputError("contact normal has zero length",
                             fix="give a unit normal pointing from body A into body B")
        self.normal = n / length
        self.phi0 = float(self.phi0)
        self.stiffness = float(self.stiffness)
        self.dissipation = float(self.dissipation)
        self.mu = float(self.mu)
        if not self.stiffness > 0:
            raise InputError(f"contact stiffness must be positive, got {self.stiffness} N/m",
                             fix="skip polygons whose effective gradient is not positive (M22 IV)")
        if self.mu < 0 or self.dissipation < 0:
            raise InputError(f"friction {self.mu} and dissipation {self.dissipation} s/m "
                             "must be non-negative", fix="use mu >= 0 and dissipation >= 0")

    @property
    def rigid(self) -> bool:
        return not np.isfinite(self.stiffness)


def point_contact_from_polygon(body_a: int, body_b: int, centroid: np.ndarray,
                               normal: np.ndarray, area: float, pressure: float,
                               g_a: float, g_b: float, dissipation: float = 0.0,
                               mu: float = 0.0) -> PointContact | None:
    """M22 IV: a contact polygon as a compliant point contact, or None if skipped.

    ``g_a = -∇p_A·n``, ``g_b = ∇p_B·n`` (pass ``inf`` for a rigid side);
    ``g = g_a g_b / (g_a + g_b)``, ``k = g·A``, ``φ0 = -p_c/g``. Polygons with
    ``g_a <= 0`` or ``g_b <= 0`` are skipped (M22 IV-A).
    """
    if not (g_a > 0 and g_b > 0) or not area > 0:
        return None
    if np.isinf(g_a) and np.isinf(g_b):
        return None  # rigid-rigid polygons do not exist in the pressure-field model
    g = g_b if np.isinf(g_a) else g_a if np.isinf(g_b) else g_a * g_b / (g_a + g_b)
    return PointContact(body_a, body_b, centroid, normal, phi0=-pressure / g,
                        stiffness=g * area, dissipation=dissipation, mu=mu)


# --------------------------------------------------------------------------- kinematics

def tangent_basis(normal: np.ndarray, preferred: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Orthonormal tangents (t1, t2) with t1 along ``preferred``'s tangential part if any."""
    n = normal
    if preferred is not None:
        t = preferred - (preferred @ n) * n
        norm = np.linalg.norm(t)
        if norm > 1e-10:
            t1 = t / norm
            return t1, np.cross(n, t1)
    axis = np.eye(3)[int(np.argmin(np.abs(n)))]
    t1 = np.cross(n, axis)
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


def friction_directions(normal: np.ndarray, n_directions: int,
                        preferred: np.ndarray | None = None) -> np.ndarray:
    """``n_d`` unit tangents evenly spread, the first along ``preferred`` (T07)."""
    t1, t2 = tangent_basis(normal, preferred)
    angles = 2.0 * np.pi * np.arange(n_directions) / n_directions
    return np.cos(angles)[:, None] * t1 + np.sin(angles)[:, None] * t2


def contact_jacobian_row(states: list[RigidBodyState], contact: PointContact,
                         direction: np.ndarray) -> np.ndarray:
    """Row (6n,) mapping generalised velocities to ``direction·(v_B - v_A)`` at the contact."""
    row = np.zeros(6 * len(states))
    for body, sign in ((contact.body_b, 1.0), (contact.body_a, -1.0)):
        if body != WORLD:
            row[6 * body:6 * body + 6] += sign * point_jacobian(states[body], contact.position,
                                                                direction)
    return row


def _check_inputs(states, masses, contacts, dt):
    n = len(states)
    if len(masses) != n:
        raise InputError(f"{n} body states but {len(masses)} mass properties",
                         fix="give one MassProperties per RigidBodyState")
    if not dt > 0:
        raise InputError(f"time step must be positive, got {dt} s", fix="use dt > 0")
    for i, c in enumerate(contacts):
        for body in (c.body_a, c.body_b):
            if body != WORLD and not 0 <= body < n:
                raise InputError(f"contact {i} refers to body {body} but there are {n} bodies",
                                 fix="use body indices 0..n-1 or -1 for the world")
        if c.body_a == c.body_b:
            raise InputError(f"contact {i} joins body {c.body_a} to itself",
                             fix="a contact needs two different bodies")


def _mass_and_momentum(states, masses, dt, gravity, external_wrenches):
    """Block mass matrix ``M`` (6n, 6n) and ``M v0 + δt k0`` (gravity, external, gyroscopic)."""
    n = len(states)
    H = np.zeros((6 * n, 6 * n))
    h = np.zeros(6 * n)
    g = np.asarray(gravity, dtype=np.float64).reshape(3)
    ext = np.zeros((n, 6)) if external_wrenches is None else np.asarray(
        external_wrenches, dtype=np.float64).reshape(n, 6)
    for i, (s, m) in enumerate(zip(states, masses)):
        Mi = spatial_mass_matrix(m, s.quaternion)
        H[6 * i:6 * i + 6, 6 * i:6 * i + 6] = Mi
        k0 = np.concatenate([m.mass * g, gyroscopic_torque(s, m)]) + ext[i]
        h[6 * i:6 * i + 6] = Mi @ s.twist + dt * k0
    return H, h


@dataclass
class LCPSizes:
    """Block sizes of the mixed Stewart-Trinkle LCP (T07): ``6n + n_c (n_d + 2)``."""

    n_bodies: int
    n_contacts: int
    n_directions: int

    @property
    def n_velocities(self) -> int:
        return 6 * self.n_bodies

    @property
    def n_complementary(self) -> int:
        return self.n_contacts * (self.n_directions + 2)

    @property
    def total(self) -> int:
        return self.n_velocities + self.n_complementary


@dataclass
class _Assembly:
    directions: np.ndarray            # (n_c, n_d, 3)
    normal_rows: np.ndarray           # (n_c, 6n)
    friction_rows: np.ndarray         # (n_c * n_d, 6n)


def _assemble(states, masses, contacts, dt, gravity, external_wrenches, n_directions,
              cone_regularisation=1.0):
    _check_inputs(states, masses, contacts, dt)
    if n_directions < 3:
        raise InputError(f"need at least 3 friction directions, got {n_directions}",
                         fix="use n_directions >= 4 (8 is a good default)")
    H, h = _mass_and_momentum(states, masses, dt, gravity, external_wrenches)
    n, n_c, n_d = len(states), len(contacts), n_directions
    sizes = LCPSizes(n, n_c, n_d)
    v_free = np.linalg.solve(H, h) if n else np.zeros(0)
    N = np.zeros((n_c, 6 * n))
    D = np.zeros((n_c * n_d, 6 * n))
    directions = np.zeros((n_c, n_d, 3))
    for i, c in enumerate(contacts):
        N[i] = contact_jacobian_row(states, c, c.normal)
        # relative velocity at the contact in the contact-free motion, for alignment
        v_rel = np.array([contact_jacobian_row(states, c, e) @ v_free for e in np.eye(3)]) + c.prescribed_velocity
        directions[i] = friction_directions(c.normal, n_d, v_rel)
        for j in range(n_d):
            D[i * n_d + j] = contact_jacobian_row(states, c, directions[i, j])

    nv, m = 6 * n, sizes.n_complementary
    M = np.zeros((nv + m, nv + m))
    q = np.zeros(nv + m)
    i_n = slice(nv, nv + n_c)
    i_b = slice(nv + n_c, nv + n_c + n_c * n_d)
    i_l = slice(nv + n_c + n_c * n_d, nv + m)
    # momentum: M v - N^T p_n - D^T β - (M v0 + δt k0) = 0
    M[:nv, :nv] = H
    M[:nv, i_n] = -N.T
    M[:nv, i_b] = -D.T
    q[:nv] = -h
    # normal: φ0/a + v_n + c/(a δt) p_n with a = δt + τ (row scaled by 1/a)
    phi0 = np.array([c.phi0 for c in contacts])
    compliance = np.array([0.0 if c.rigid else 1.0 / c.stiffness for c in contacts])
    tau = np.array([0.0 if c.rigid else c.dissipation * max(-c.phi0, 0.0) for c in contacts])
    a = dt + tau
    M[i_n, :nv] = N
    M[i_n, i_n] = np.diag(compliance / (a * dt)) if n_c else 0.0
    prescribed = np.array([c.prescribed_velocity for c in contacts]).reshape(n_c, 3)
    q[i_n] = phi0 / a + np.einsum("ij,ij->i", prescribed, np.array([c.normal for c in contacts]).reshape(n_c, 3))
    # friction: D v + E λ ⊥ β ;  μ p_n - E^T β ⊥ λ
    E = np.kron(np.eye(n_c), np.ones((n_d, 1)))
    M[i_b, :nv] = D
    q[i_b] = np.einsum("ijk,ik->ij", directions, prescribed).reshape(-1)      # prescribed slip
    M[i_b, i_l] = E
    M[i_l, i_n] = np.diag([c.mu for c in contacts]) if n_c else 0.0
    M[i_l, i_b] = -E.T
    # A tiny sliding-speed "mass" ε λ in the cone rows (ε = EPS_CONE × the lightest
    # body's mass, so friction may exceed μ p_n by ε v_slip): removes the degenerate
    # secondary ray along λ alone that floating-point Lemke otherwise meets when
    # q_λ = 0 (exact arithmetic never does; T07). ``cone_regularisation`` scales it.
    eps = cone_regularisation * EPS_CONE * min((m.mass for m in masses), default=1.0)
    M[i_l, i_l] = eps * np.eye(n_c)
    return M, q, sizes, _Assembly(directions, N, D)


def stewart_trinkle_lcp(states: list[RigidBodyState], masses: list[MassProperties],
                        contacts: list[PointContact], dt: float, gravity=(0.0, 0.0, -9.81),
                        external_wrenches=None, *, n_directions: int = 8):
    """Assemble the mixed velocity-level LCP (T07 Stewart-Trinkle; M22 eq. 6-7).

    Unknowns ``x = [v (6n), p_n (n_c), β (n_c n_d), λ (n_c)]``; the first ``6n`` rows
    are equalities (``v`` free), the rest complementary: ``0 <= M x + q ⊥ x >= 0``.
    Returns ``(M, q, sizes)`` with ``sizes.total == 6n + n_c (n_d + 2)``.
    ``external_wrenches`` is (n, 6) ``[force, torque about the centre]`` in world.
    """
    M, q, sizes, _ = _assemble(states, masses, contacts, dt, gravity, external_wrenches,
                               n_directions)
    return M, q, sizes


def solve_mixed_lcp(M: np.ndarray, q: np.ndarray, n_free: int, **lemke_options):
    """Eliminate the first ``n_free`` (equality) unknowns and solve the rest by Lemke.

    ``M[:f,:f] x_f + M[:f,f:] z + q_f = 0``; the Schur complement gives the LCP in ``z``.
    Returns ``(x_free, result)``.
    """
    f = n_free
    A, B, C, Dm = M[:f, :f], M[:f, f:], M[f:, :f], M[f:, f:]
    if f:
        AinvB = np.linalg.solve(A, B)
        Ainvq = np.linalg.solve(A, q[:f])
        reduced_M = Dm - C @ AinvB
        reduced_q = q[f:] - C @ Ainvq
    else:
        AinvB, Ainvq, reduced_M, reduced_q = np.zeros((0, len(q))), np.zeros(0), Dm, q
    result = lemke(reduced_M, reduced_q, **lemke_options)
    x_free = -(Ainvq + AinvB @ result.z) if f else np.zeros(0)
    return x_free, result


@dataclass
class StepResult:
    """States after one step and what the contacts did (impulses in N s, on body B).

    Unpacks as ``states, impulses = step(...)``.
    """

    states: list[RigidBodyState]
    impulses: np.ndarray                      # (n_c, 3) total contact impulse on B, world
    normal_impulses: np.ndarray               # (n_c,)
    friction_impulses: np.ndarray             # (n_c, 3)
    lcp: LCPResult = field(repr=False, default=None)
    sizes: LCPSizes | None = None

    def __iter__(self):
        yield self.states
        yield self.impulses


def step(states: list[RigidBodyState], masses: list[MassProperties],
         contacts: list[PointContact], dt: float, gravity=(0.0, 0.0, -9.81),
         external_wrenches=None, *, n_directions: int = 8) -> StepResult:
    """Advance all bodies by ``dt`` (M22 eq. 6-10, semi-implicit Euler in ``v``).

    Solves the Stewart-Trinkle LCP for the next-step velocities, then moves each
    pose with them (``integrate_pose``). Raises ``BuildError`` if Lemke cannot solve
    the step (it never silently skips contacts), including when the point it ends on
    violates the LCP by more than ``lcp.DEFAULT_RESIDUAL_TOL`` × ``lcp.residual_scale`` in the
    natural residual (round-off on a nearly singular problem: hundreds of stiff compliant point
    contacts on one body give a reduced matrix of condition ~1e20).
    """
    # Floating-point Lemke can still meet a degenerate ray; retry with a stronger
    # (still tiny) cone regularisation, then with the complementary rows of q perturbed by
    # δ (1..m)/m, δ = 1e-10 and 1e-8 of ‖q‖∞ (a numerical stand-in for the symbolic
    # perturbation that resolves degenerate ties: many contacts at φ0 = 0 and at rest, e.g. a
    # peg resting in the corner of a hole, give rows with q = 0 exactly), before giving up loudly.
    # The answer's residual in the unperturbed LCP is at most δ, far inside the tolerance.
    # A well-posed step takes O(m) pivots (41 for m = 160 in a peg-in-hole step); attempts but
    # the last stop at 2 (m + 1) + 50, so a cycling degenerate attempt costs little.
    attempts = ((1.0, 0.0), (1.0, 1e-10), (1e2, 0.0), (1e4, 0.0), (1.0, 1e-8))
    for k, (scale, perturbation) in enumerate(attempts):
        M, q, sizes, asm = _assemble(states, masses, contacts, dt, gravity, external_wrenches,
                                     n_directions, scale)
        n_c, n_d, nv = sizes.n_contacts, sizes.n_directions, sizes.n_velocities
        m = len(q) - nv
        if perturbation:
            q = q.copy()
            q[nv:] += perturbation * max(1.0, float(np.abs(q).max())) * np.arange(1, m + 1) / m
        v, result = solve_mixed_lcp(M, q, nv, max_pivots=None if k == len(attempts) - 1 else 2 * (m + 1) + 50)
        if result.solved:
            break
    if not result.solved:
        detail = (f" with complementarity residual {result.residual:.3g} (Lemke lost feasibility to "
                  f"round-off: the LCP is nearly singular, e.g. many redundant contacts on one body)"
                  if result.status == "inaccurate" else "")
        raise BuildError(
            f"velocity-level contact problem with {n_c} contacts ended in status "
            f"'{result.status}' after {result.pivots} pivots{detail}",
            fix="use fewer, larger contact polygons (a coarser compliant mesh) or the convex compliant "
                "solver (simulate's velocity integrator), reduce the time step, or check contact normals "
                "(from A into B) and stiffnesses")
    p_n = result.z[:n_c]
    beta = result.z[n_c:n_c + n_c * n_d].reshape(n_c, n_d)
    friction = np.einsum("ij,ijk->ik", beta, asm.directions) if n_c else np.zeros((0, 3))
    normals = np.array([c.normal for c in contacts]).reshape(n_c, 3)
    new_states = []
    for i, s in enumerate(states):
        moved = RigidBodyState(s.position, s.quaternion, v[6 * i:6 * i + 3], v[6 * i + 3:6 * i + 6])
        new_states.append(integrate_pose(moved, dt))
    return StepResult(states=new_states, impulses=p_n[:, None] * normals + friction,
                      normal_impulses=p_n.copy(), friction_impulses=friction,
                      lcp=result, sizes=sizes)


# --------------------------------------------------------------------------- force level (B92)

def contact_force_lcp(states: list[RigidBodyState], masses: list[MassProperties],
                      contacts: list[PointContact], gravity=(0.0, 0.0, -9.81),
                      external_wrenches=None, *, sliding_tolerance: float = 1e-9):
    """Baraff's force-level contact LCP ``a = A f + b`` (B92 ch. 8-9, eq. 8-7, 10-10).

    For contacts that are touching (``φ0 = 0``, ``v_n = 0``) the relative normal
    accelerations are affine in the normal force magnitudes ``f``. Contacts whose
    tangential speed exceeds ``sliding_tolerance`` carry dynamic friction
    ``-μ f v̂_t`` (on B), which makes ``A`` unsymmetric; others are frictionless.
    Includes gravity, external wrenches, gyroscopic and centripetal terms; the
    normal is taken as fixed in body A (``ṅ = ω_A × n``). Solve ``0 <= f ⊥ A f + b >= 0``
    with ``lemke(A, b)``; a ray means the configuration is inconsistent (B92 10.2).
    """
    _check_inputs(states, masses, contacts, 1.0)
    n, n_c = len(states), len(contacts)
    g = np.asarray(gravity, dtype=np.float64)
    ext = np.zeros((n, 6)) if external_wrenches is None else np.asarray(
        external_wrenches, dtype=np.float64).reshape(n, 6)
    inv_I = [np.linalg.inv(world_inertia(m, s.quaternion)) for s, m in zip(states, masses)]

    directions = []
    b = np.zeros(n_c)
    for i, c in enumerate(contacts):
        va, aa, wa = _free_point_motion(states, masses, inv_I, g, ext, c.body_a, c.position)
        vb, ab, _ = _free_point_motion(states, masses, inv_I, g, ext, c.body_b, c.position)
        v_rel = vb - va
        n_dot = np.cross(wa, c.normal)
        b[i] = c.normal @ (ab - aa) + 2.0 * n_dot @ v_rel
        v_t = v_rel - (v_rel @ c.normal) * c.normal
        speed = np.linalg.norm(v_t)
        slip = v_t / speed if speed > sliding_tolerance and c.mu > 0 else np.zeros(3)
        directions.append(c.normal - c.mu * slip)      # force on B per unit f_N
    A = np.zeros((n_c, n_c))
    for j, cj in enumerate(contacts):
        force = directions[j]
        for i, ci in enumerate(contacts):
            acc = np.zeros(3)
            for body, sign in ((cj.body_b, 1.0), (cj.body_a, -1.0)):
                for other, osign in ((ci.body_b, 1.0), (ci.body_a, -1.0)):
                    if body == other and body != WORLD:
                        acc += sign * osign * _unit_force_response(states[body], masses[body], inv_I[body],
                                                                   cj.position, force, ci.position)
            A[i, j] = ci.normal @ acc
    return A, b


def _free_point_motion(states, masses, inv_I, g, ext, body, point):
    """(velocity of the material point of ``body`` at ``point``, its acceleration with zero
    contact force, the body's angular velocity); zeros for the world."""
    if body == WORLD:
        return np.zeros(3), np.zeros(3), np.zeros(3)
    s, m = states[body], masses[body]
    r = point - s.position
    w = s.angular_velocity
    lin = g + ext[body, :3] / m.mass
    alpha = inv_I[body] @ (ext[body, 3:] + gyroscopic_torque(s, m))
    acc = lin + np.cross(alpha, r) + np.cross(w, np.cross(w, r))
    return s.velocity + np.cross(w, r), acc, w


def _unit_force_response(state, mass, inv_I, point, force, at):
    """Acceleration of the material point ``at`` of a body from a unit ``force`` at ``point``."""
    alpha = inv_I @ np.cross(point - state.position, force)
    return force / mass.mass + np.cross(alpha, at - state.position)
