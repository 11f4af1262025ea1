"""Rigid-body dynamics driven by pressure-field contact (docs/model.md §5; M22 IV; D 5.3, 7.1).

Two integrators over a :class:`~fieldgen.runtime.scene.load.Scene`:

``"velocity"`` (M22 IV), fixed step δt. Each polygon of each contact surface whose
gradients satisfy ``g_A = −∇p_A·n̂ > 0`` and ``g_B = ∇p_B·n̂ > 0`` becomes a compliant
point contact at its centroid with ``g = g_A g_B/(g_A + g_B)`` (a rigid side contributes
``g`` of the compliant one), ``k = g·A``, ``φ0 = −p_c/g``. Normal impulse over the step,
with Hunt–Crossley dissipation χ (docs/model.md §4.2-4.3, the pair's combined χ)::

    γ_n(v_n) = δt · k (−φ0 − δt v_n)₊ (1 − χ v_n)₊          (M22 eq. 15-16 with eq. 1)

Solver: because every compliant contact's normal impulse is an explicit, monotone
function of the next-step velocity, the step is the minimiser of a convex function of
the 6n body velocities alone (``½‖v − v*‖²_M + Σ Φ_n(v_n) + Σ s‖v_t‖``, ``Φ_n' = −γ_n``)
once the friction bound ``s = μ γ_n`` is known; we minimise it by Newton's method with a
backtracking line search and update ``s`` by fixed-point iteration until it stops
changing (the Coulomb law is then satisfied with the disc cone, no polygonal
approximation). ``‖v_t‖`` is smoothed as ``√(‖v_t‖² + ε²) − ε`` with ε =
``stiction_velocity`` (1e-7 m/s by default): a stuck contact creeps at most about ε,
which is below every tolerance the tests check (drift < 1e-6 m/s), while the Newton
system stays 6n × 6n whatever the number of polygons (152+ for the coin), which is what
makes real-time rates possible in Python. Why not the Lemke LCP of ``time_stepping``:
its dense tableau is ``n_c(n_d + 2)`` wide, hundreds of milliseconds per step at 150+
polygons, and its friction cone is polygonal. Steps that contain **rigid** point
contacts (two rigid geometries; see ``rigid_contact.mesh_contacts``) go to
``time_stepping.step`` instead (Stewart–Trinkle LCP by Lemke, exact non-penetration,
ray termination reported as an error rather than a silent tunnel).

``"continuous"`` (D 5.3, E19 VIII): the pressure-field wrench (triangle representation,
damping, regularised friction, ``wrench.compute_wrench``) is a force in the Newton–Euler
equations (gyroscopic term included), integrated by scipy's Radau with error control;
quaternions are renormalised at every output time.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field, replace

import numba as nb
import numpy as np
from threadpoolctl import threadpool_limits

from fieldgen.errors import BuildError, OptionError
from fieldgen.progress import Progress
from fieldgen.runtime.contact.geometries import CompliantBody, RigidBody
from fieldgen.runtime.contact.surface import ContactSurface, compute_contact_surface
from fieldgen.runtime.dynamics.warnings import ContactWarningLog, collecting, set_time, watched
from fieldgen.runtime.contact.pose import SpatialVelocity
from fieldgen.runtime.dynamics.rigid_body import (
    RigidBodyState,
    integrate_pose,
    newton_euler_rhs,
    quaternion_to_matrix,
)
from fieldgen.runtime.dynamics.rigid_contact import contact_margin, core_body, mesh_contacts, mesh_features, pair_speed
from fieldgen.runtime.scene.load import Scene
from fieldgen.runtime.scene.schema import FRICTION_MODELS, INTEGRATORS
from fieldgen.runtime.dynamics.time_stepping import WORLD, PointContact
from fieldgen.runtime.dynamics.time_stepping import step as lcp_step
from fieldgen.runtime.contact.wrench import combined_dissipation, combined_friction, compute_wrench

DEFAULT_STICTION_VELOCITY = 1e-7
#: a step's rigid-contact searches: the first at the bodies' speed, more when the solution outran it
MAX_MARGIN_ATTEMPTS = 4


# --------------------------------------------------------------------------- contacts

@dataclass
class PointContacts:
    """Point contacts of one step, as arrays (n_c rows). Bodies are scene indices; ``normal``
    points from A into B; ``stiffness`` inf marks a rigid contact."""

    body_a: np.ndarray
    body_b: np.ndarray
    position: np.ndarray
    normal: np.ndarray
    phi0: np.ndarray
    stiffness: np.ndarray
    dissipation: np.ndarray
    mu: np.ndarray
    surfaces: list = field(default_factory=list)   # (index_a, index_b, ContactSurface)
    core: np.ndarray | None = None                 # (n_c,) bool: a rigid contact with a rigid core
    #: per pair searched for rigid contacts: (margin, features of each side), see scene_contacts
    margins: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.core is None:
            self.core = np.zeros(self.n, bool)

    @property
    def n(self) -> int:
        return int(self.phi0.shape[0])

    @property
    def rigid(self) -> np.ndarray:
        return ~np.isfinite(self.stiffness)


def polygon_point_contacts(surface: ContactSurface, dissipation: float, mu: float):
    """M22 IV: arrays (position, normal, phi0, stiffness) of the polygons kept, and their count.

    ``g_A = −∇p_A·n̂``, ``g_B = ∇p_B·n̂`` (inf for a rigid side), keep both > 0;
    ``g = g_A g_B/(g_A + g_B)``, ``k = g·A``, ``φ0 = −p_c/g``. Polygons whose stiffness is
    below ``1e-12`` of the surface's total (e.g. the side slivers of a rigid coin tilted by
    1e-7 rad) are dropped too: their force is below the round-off of the total, and they
    would otherwise double the constraint count."""
    return _polygon_point_contacts(surface.normals, surface.grad_a, surface.grad_b, surface.areas,
                                   surface.centroids, surface.centroid_pressure)


@nb.njit(cache=True)
def _polygon_point_contacts(normals, grad_a, grad_b, areas, centroids, centroid_pressure):
    """Kernel of :func:`polygon_point_contacts` (one pass to keep, one to drop the negligible)."""
    m = areas.shape[0]
    g = np.empty(m)
    k = np.empty(m)
    keep = np.zeros(m, np.bool_)
    total = 0.0
    for f in range(m):
        ga = -(grad_a[f, 0] * normals[f, 0] + grad_a[f, 1] * normals[f, 1] + grad_a[f, 2] * normals[f, 2])
        gb = grad_b[f, 0] * normals[f, 0] + grad_b[f, 1] * normals[f, 1] + grad_b[f, 2] * normals[f, 2]
        if np.isnan(ga):
            ga = np.inf
        if np.isnan(gb):
            gb = np.inf
        if not (ga > 0.0 and gb > 0.0 and areas[f] > 0.0) or (np.isinf(ga) and np.isinf(gb)):
            continue
        if np.isinf(ga):
            g[f] = gb
        elif np.isinf(gb):
            g[f] = ga
        else:
            g[f] = ga * gb / (ga + gb)
        k[f] = g[f] * areas[f]
        keep[f] = True
        total += k[f]
    n = 0
    for f in range(m):
        if keep[f] and k[f] > 1e-12 * total:
            n += 1
    position = np.empty((n, 3))
    normal = np.empty((n, 3))
    phi0 = np.empty(n)
    stiffness = np.empty(n)
    c = 0
    for f in range(m):
        if keep[f] and k[f] > 1e-12 * total:
            for i in range(3):
                position[c, i] = centroids[f, i]
                normal[c, i] = normals[f, i]
            phi0[c] = -centroid_pressure[f] / g[f]
            stiffness[c] = k[f]
            c += 1
    return position, normal, phi0, stiffness


def scene_contacts(scene: Scene, states: list[RigidBodyState], *, rigid_margin: float = 0.0,
                   keep_surfaces: bool = False, dt: float = 0.0, speeds: dict | None = None,
                   cache: dict | None = None) -> PointContacts:
    """All point contacts of the scene at ``states``: M22 IV polygons, and between two rigid
    geometries (or a rigid core and a rigid geometry) the mesh features within the pair's
    signed-distance margin (``rigid_contact``): the larger of ``rigid_margin`` and what the
    pair's relative speed can close within ``dt`` (that speed: the larger of what ``states``
    give and ``speeds[(i, j)]``). The margin used per such pair is in ``PointContacts.margins``.
    ``cache`` (a dict kept by the caller across calls at the same ``states``) keeps the
    compliant pairs' polygons, so a call that only widens margins recomputes only rigid pairs."""
    cols = {k: [] for k in ("a", "b", "p", "n", "phi", "k", "chi", "mu", "core")}
    surfaces = []
    margins = {}
    speeds = speeds or {}
    poses = [b.pose(s) for b, s in zip(scene.bodies, states)]
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if bi.kind != "dynamic" and bj.kind != "dynamic":
                continue
            gi, gj = bi.geometry, bj.geometry
            chi, mu = combined_dissipation(gi, gj), combined_friction(gi, gj)
            extra = speeds.get((i, j), 0.0)
            if isinstance(gi, CompliantBody) or isinstance(gj, CompliantBody):
                if cache is not None and (i, j) in cache:
                    surface, polygons = cache[(i, j)]
                else:
                    with watched((bi.name, bj.name)):   # kept once per (pair, kind) by simulate()
                        surface = compute_contact_surface(gi, poses[i], gj, poses[j], "polygon",
                                                          face_rule=scene.face_rule)
                    polygons = polygon_point_contacts(surface, chi, mu) if surface.n_faces else None
                    if cache is not None:
                        cache[(i, j)] = (surface, polygons)
                if surface.n_faces == 0:
                    continue
                if keep_surfaces:
                    surfaces.append((i, j, surface))
                p, n, phi, k, c = _with_core_contacts(gi, poses[i], states[i], gj, poses[j], states[j], dt,
                                                      rigid_margin, polygons, extra, margins, (i, j))
            else:
                p, n, phi = _rigid_pair_contacts(gi, poses[i], states[i], gj, poses[j], states[j], dt,
                                                 rigid_margin, extra, margins, (i, j))
                k = np.full(len(phi), np.inf)
                c = np.zeros(len(phi), bool)
            m = len(phi)
            if m == 0:
                continue
            cols["a"].append(np.full(m, i)), cols["b"].append(np.full(m, j))
            cols["p"].append(p), cols["n"].append(n), cols["phi"].append(phi), cols["k"].append(k)
            cols["chi"].append(np.full(m, chi)), cols["mu"].append(np.full(m, mu)), cols["core"].append(c)
    if not cols["a"]:
        z = np.zeros(0)
        return PointContacts(z.astype(int), z.astype(int), np.zeros((0, 3)), np.zeros((0, 3)), z, z, z, z, surfaces,
                             margins=margins)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    return PointContacts(cat["a"], cat["b"], cat["p"], cat["n"], cat["phi"], cat["k"], cat["chi"], cat["mu"],
                         surfaces, cat["core"], margins)


def _with_core_contacts(gi, Xi, si, gj, Xj, sj, dt, floor, polygons, speed=0.0, margins=None, pair=None):
    """Polygon contacts of a compliant pair plus, where a side has a rigid core (D 5.1.2: the
    boundary faces at e = 1, ``CompliantBody.core_faces``) and the other side is rigid or has a
    core too, the rigid contacts between that core and the other side (``rigid_contact``),
    within the pair's signed-distance margin: the core is rigid geometry, so nothing passes
    through it. Returns (p, n, φ0, k, from_core)."""
    ci, cj = core_body(gi), core_body(gj)
    oi = ci if ci is not None else gi if isinstance(gi, RigidBody) else None
    oj = cj if cj is not None else gj if isinstance(gj, RigidBody) else None
    p, n, phi, k = polygons
    core = np.zeros(len(phi), bool)
    if (ci is None and cj is None) or oi is None or oj is None:
        return p, n, phi, k, core
    pc, nc, phic = _rigid_pair_contacts(oi, Xi, si, oj, Xj, sj, dt, floor, speed, margins, pair)
    return (np.vstack([p, pc]), np.vstack([n, nc]), np.concatenate([phi, phic]),
            np.concatenate([k, np.full(len(phic), np.inf)]), np.concatenate([core, np.ones(len(phic), bool)]))


def _rigid_pair_contacts(gi, Xi, si, gj, Xj, sj, dt, floor, speed=0.0, margins=None, pair=None):
    """``rigid_contact.mesh_contacts`` with the margin of this pair's relative motion: the larger
    of the speed its states give and ``speed``; the margin used goes into ``margins[pair]``."""
    fi, fj = mesh_features(gi), mesh_features(gj)
    speed = max(speed, pair_speed(fi, si.velocity, si.angular_velocity, fj, sj.velocity, sj.angular_velocity))
    margin = max(contact_margin(speed, dt, min(fi.diagonal, fj.diagonal)), floor)
    if margins is not None:
        margins[pair] = (margin, fi, fj)
    return mesh_contacts(gi, Xi, gj, Xj, margin)


def margin_shortfalls(contacts: PointContacts, twists: np.ndarray, dt: float) -> dict:
    """Pairs whose rigid contacts were searched within a margin the step's solution outran:
    ``{(i, j): speed}`` for each pair whose surfaces can move closer within ``dt`` at the
    solved ``twists`` (n_bodies, 6) than the margin used, with the speed to search again at.
    Empty when every gap the step can close was a constraint of the step."""
    out = {}
    for (i, j), (margin, fi, fj) in contacts.margins.items():
        speed = pair_speed(fi, twists[i, :3], twists[i, 3:], fj, twists[j, :3], twists[j, 3:])
        if speed * dt > margin:
            out[(i, j)] = speed
    return out


# --------------------------------------------------------------------------- convex step

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
def _cost(J, bias, v, v_star, M, phi0, k, chi, s, dt, eps, want, gamma, H):
    """Objective ½‖v − v*‖²_M + Σ Φ_n + Σ s(√(|u_t|² + ε²) − ε); when ``want``: impulses
    ``gamma`` (n_c, 3) and Hessian ``H`` (filled in place)."""
    nv = v.shape[0]
    d = v - v_star
    Md = M @ d
    total = 0.5 * (d @ Md)
    if want:
        H[:, :] = M
    u = np.empty(3)
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
            gamma[c, 0] = -s[c] * u[0] / rr
            gamma[c, 1] = -s[c] * u[1] / rr
            gamma[c, 2] = gn
            g00 = s[c] / rr * (1.0 - u[0] * u[0] / (rr * rr))
            g11 = s[c] / rr * (1.0 - u[1] * u[1] / (rr * rr))
            g01 = -s[c] / rr * (u[0] * u[1] / (rr * rr))
            g22 = -dgn
            for i in range(nv):
                a0 = J[c, 0, i]
                a1 = J[c, 1, i]
                a2 = J[c, 2, i]
                if a0 == 0.0 and a1 == 0.0 and a2 == 0.0:
                    continue
                w0 = g00 * a0 + g01 * a1
                w1 = g01 * a0 + g11 * a1
                w2 = g22 * a2
                for j in range(nv):
                    H[i, j] += w0 * J[c, 0, j] + w1 * J[c, 1, j] + w2 * J[c, 2, j]
    return total


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
    cold = np.array([e for e in (1e-2, 1e-4) if e > 10 * eps] + [eps])
    if initial_velocity is not None:
        v = np.ascontiguousarray(initial_velocity, dtype=np.float64).copy()
        newton, outer, ok = _solve_convex(J, bias, v_star, M, phi0, stiffness, dissipation, mu, dt,
                                          np.array([eps]), v, tol, friction_tolerance, max_iterations)
        if ok:
            gamma = _impulses(J, bias, v, v_star, M, phi0, stiffness, dissipation, mu, dt, eps, v)
            return ConvexStepResult(v, gamma, newton, outer)
    else:
        newton = 0
    v = v0
    n2, outer, ok = _solve_convex(J, bias, v_star, M, phi0, stiffness, dissipation, mu, dt, cold, v, tol,
                                  friction_tolerance, max_iterations)
    gamma = _impulses(J, bias, v, v_star, M, phi0, stiffness, dissipation, mu, dt, eps, v)
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


def _impulses(J, bias, v, v_star, M, phi0, k, chi, mu, dt, eps, at):
    """Contact-frame impulses (n_c, 3) at the solution, with the converged bound s = μ γ_n."""
    gamma = np.zeros((J.shape[0], 3))
    _contact_impulses(J, bias, at, phi0, k, chi, mu, dt, eps, gamma)
    return gamma


@nb.njit(cache=True)
def _solve_convex(J, bias, v_star, M, phi0, k, chi, mu, dt, stages, v, tol, friction_tolerance, max_iterations):
    """Newton with backtracking on the convex objective, ``s`` frozen, inside the fixed point
    ``s = μ γ_n``, for each smoothing ε in ``stages``; ``v`` in place.
    Returns (Newton iterations, fixed-point iterations, converged)."""
    nv = v.shape[0]
    n_c = J.shape[0]
    gamma = np.zeros((n_c, 3))
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
                l0 = _cost(J, bias, v, v_star, M, phi0, k, chi, s, dt, eps, True, gamma, H)
                for j in range(nv):
                    acc = 0.0
                    for i in range(nv):
                        acc += M[j, i] * (v[i] - v_star[i])
                    for c in range(n_c):
                        acc -= J[c, 0, j] * gamma[c, 0] + J[c, 1, j] * gamma[c, 1] + J[c, 2, j] * gamma[c, 2]
                    grad[j] = acc
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
                    if _cost(J, bias, trial, v_star, M, phi0, k, chi, s, dt, eps, False, gamma, H) \
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


# --------------------------------------------------------------------------- stepping

def _dynamic_indices(scene: Scene) -> list[int]:
    return [i for i, b in enumerate(scene.bodies) if b.kind == "dynamic"]


def _scheduled_twist(body, t: float) -> np.ndarray:
    if body.kind == "kinematic":
        return body.motion(t)
    return np.zeros(6)


def _jacobians(scene, states, dyn_index, contacts: PointContacts, frames, t):
    """J (n_c, 3, 6n) and the kinematic bias (n_c, 3) in the contact frames."""
    nb_ = len(scene.bodies)
    column = np.full(nb_, -1, np.int64)
    for b, k in dyn_index.items():
        column[b] = k
    origin = np.array([s.position for s in states], dtype=np.float64).reshape(nb_, 3)
    twist = np.array([_scheduled_twist(body, t) for body in scene.bodies], dtype=np.float64).reshape(nb_, 6)
    return _assemble_jacobians(np.ascontiguousarray(contacts.position, dtype=np.float64), frames,
                               contacts.body_a.astype(np.int64), contacts.body_b.astype(np.int64),
                               origin, column, twist, len(dyn_index))


@nb.njit(cache=True)
def _assemble_jacobians(position, frames, body_a, body_b, origin, column, twist, n):
    """Rows f of each contact frame: J·v = Σ_sides ±(f·v_body + (r × f)·ω_body), r from the
    body's centre of mass; a kinematic side's scheduled twist goes into the bias instead."""
    n_c = position.shape[0]
    J = np.zeros((n_c, 3, 6 * n))
    bias = np.zeros((n_c, 3))
    for c in range(n_c):
        for side in range(2):
            b = body_b[c] if side == 0 else body_a[c]
            sign = 1.0 if side == 0 else -1.0
            rx = position[c, 0] - origin[b, 0]
            ry = position[c, 1] - origin[b, 1]
            rz = position[c, 2] - origin[b, 2]
            k = column[b]
            if k >= 0:
                for r in range(3):
                    fx, fy, fz = frames[c, r, 0], frames[c, r, 1], frames[c, r, 2]
                    J[c, r, 6 * k] += sign * fx
                    J[c, r, 6 * k + 1] += sign * fy
                    J[c, r, 6 * k + 2] += sign * fz
                    J[c, r, 6 * k + 3] += sign * (ry * fz - rz * fy)
                    J[c, r, 6 * k + 4] += sign * (rz * fx - rx * fz)
                    J[c, r, 6 * k + 5] += sign * (rx * fy - ry * fx)
            else:
                wx, wy, wz = twist[b, 3], twist[b, 4], twist[b, 5]
                vx = twist[b, 0] + wy * rz - wz * ry
                vy = twist[b, 1] + wz * rx - wx * rz
                vz = twist[b, 2] + wx * ry - wy * rx
                for r in range(3):
                    bias[c, r] += sign * (frames[c, r, 0] * vx + frames[c, r, 1] * vy + frames[c, r, 2] * vz)
    return J, bias


@dataclass
class StepInfo:
    contacts: int
    rigid_contacts: int
    solver: str
    iterations: int
    impulses: np.ndarray          # (n_c, 3) world impulses on B
    points: PointContacts
    stage_seconds: tuple = (0.0, 0.0, 0.0, 0.0)   # wall time: contact query, assembly, solve, pose update
    attempts: int = 1             # contact searches: more than one when the solution outran a rigid margin


def velocity_step(scene: Scene, states: list[RigidBodyState], t: float, dt: float, *,
                  stiction_velocity: float = DEFAULT_STICTION_VELOCITY, n_directions: int = 8,
                  keep_surfaces: bool = False) -> tuple[list[RigidBodyState], StepInfo]:
    """One velocity-level step (M22 IV) from ``states`` at time ``t``: (new states, info)."""
    clock = time.perf_counter
    dyn = _dynamic_indices(scene)
    dyn_index = {b: k for k, b in enumerate(dyn)}
    n = len(dyn)
    M = np.zeros((6 * n, 6 * n))
    v_star = np.zeros(6 * n)
    for k, b in enumerate(dyn):
        # free motion, block by block: M_i v* = M_i v + δt (m g + f, −ω × I_w ω + τ); M is block
        # diagonal (m I3, I_w), so the linear part is divided by m and the angular one solved 3 × 3
        body, s = scene.bodies[b], states[b]
        m = body.mass.mass
        R = quaternion_to_matrix(s.quaternion)
        I_w = R @ body.mass.inertia @ R.T
        w = s.angular_velocity
        L = I_w @ w
        gyro = np.array([-(w[1] * L[2] - w[2] * L[1]), -(w[2] * L[0] - w[0] * L[2]), -(w[0] * L[1] - w[1] * L[0])])
        force = m * scene.gravity
        torque = gyro
        if body.wrench is not None:
            ext = body.wrench(t)
            force, torque = force + ext[:3], gyro + ext[3:]
        M[6 * k, 6 * k] = M[6 * k + 1, 6 * k + 1] = M[6 * k + 2, 6 * k + 2] = m
        M[6 * k + 3:6 * k + 6, 6 * k + 3:6 * k + 6] = I_w
        v_star[6 * k:6 * k + 3] = (m * s.velocity + dt * force) / m
        v_star[6 * k + 3:6 * k + 6] = np.linalg.solve(I_w, L + dt * torque)
    v_prev = np.concatenate([np.concatenate([states[b].velocity, states[b].angular_velocity]) for b in dyn]) \
        if n else np.zeros(0)
    # Rigid contacts are searched within a margin from the pair's speed at the step's start; if
    # the solved velocities could close a gap wider than that margin, the search is redone at
    # that speed (compliant polygons kept) and the step solved again, so every gap the step
    # can close is a constraint of it, however hard the bodies are pushed.
    speeds, cache = {}, {}
    seconds = np.zeros(3)
    for attempt in range(MAX_MARGIN_ATTEMPTS):
        t0_ = clock()
        contacts = scene_contacts(scene, states, keep_surfaces=keep_surfaces, dt=dt, speeds=speeds, cache=cache)
        t1_ = clock()
        rigid = contacts.rigid
        if np.any(rigid) and not np.any(contacts.core):
            t2_ = clock()
            v, impulses, iterations = _lcp_fallback(scene, states, dyn_index, contacts, dt, t, n_directions)
            solver = "lemke"
        else:
            frames = contact_frames(contacts.normal) if contacts.n else np.zeros((0, 3, 3))
            J, bias = _jacobians(scene, states, dyn_index, contacts, frames, t)
            t2_ = clock()
            solve = solve_compliant_step if not np.any(rigid) else solve_with_rigid_rows   # core reached
            result = solve(M, v_star, J, bias, contacts.phi0, contacts.stiffness,
                           contacts.dissipation, contacts.mu, dt,
                           stiction_velocity=stiction_velocity, initial_velocity=v_prev)
            v = result.velocity
            impulses = np.einsum("ck,ckj->cj", result.impulses, frames) if contacts.n else np.zeros((0, 3))
            iterations = result.newton_iterations
            solver = "newton" if solve is solve_compliant_step else "newton+rigid"
        seconds += (t1_ - t0_, t2_ - t1_, clock() - t2_)
        if not contacts.margins:
            break
        twists = np.array([v[6 * dyn_index[b]:6 * dyn_index[b] + 6] if body.kind == "dynamic"
                           else _scheduled_twist(body, t) for b, body in enumerate(scene.bodies)]).reshape(-1, 6)
        short = margin_shortfalls(contacts, twists, dt)
        if not short:
            break
        speeds.update(short)
    t3 = clock()
    new_states = []
    for b, (body, s) in enumerate(zip(scene.bodies, states)):
        if body.kind == "dynamic":
            k = dyn_index[b]
            moved = RigidBodyState(s.position, s.quaternion, v[6 * k:6 * k + 3], v[6 * k + 3:6 * k + 6])
        elif body.kind == "kinematic":
            tw = _scheduled_twist(body, t)
            moved = RigidBodyState(s.position, s.quaternion, tw[:3], tw[3:])
        else:
            new_states.append(s)
            continue
        new_states.append(integrate_pose(moved, dt))
    return new_states, StepInfo(contacts.n, int(rigid.sum()), solver, iterations, impulses, contacts,
                                (*seconds.tolist(), clock() - t3), attempt + 1)


def _lcp_fallback(scene, states, dyn_index, contacts: PointContacts, dt, t, n_directions):
    """Steps with rigid contacts: Stewart–Trinkle LCP by Lemke (``time_stepping.step``).
    Kinematic bodies are not unknowns there; their scheduled twist at ``t`` enters each contact's
    relative velocity as a prescribed term (a kinematic paddle pushes what it touches)."""
    dyn = list(dyn_index)
    lcp_states = [states[b] for b in dyn]
    masses = [scene.bodies[b].mass for b in dyn]
    point = []
    for c in range(contacts.n):
        a = dyn_index.get(int(contacts.body_a[c]), WORLD)
        b = dyn_index.get(int(contacts.body_b[c]), WORLD)
        prescribed = np.zeros(3)
        for body, sign in ((int(contacts.body_b[c]), 1.0), (int(contacts.body_a[c]), -1.0)):
            if scene.bodies[body].kind == "kinematic":
                tw = _scheduled_twist(scene.bodies[body], t)
                prescribed += sign * (tw[:3] + np.cross(tw[3:], contacts.position[c] - states[body].position))
        point.append(PointContact(a, b, contacts.position[c], contacts.normal[c], contacts.phi0[c],
                                  contacts.stiffness[c], contacts.dissipation[c], contacts.mu[c], prescribed))
    ext = np.array([scene.bodies[b].wrench(t) if scene.bodies[b].wrench is not None else np.zeros(6)
                    for b in dyn]).reshape(len(dyn), 6)
    result = lcp_step(lcp_states, masses, point, dt, scene.gravity, ext, n_directions=n_directions)
    v = np.concatenate([np.concatenate([s.velocity, s.angular_velocity]) for s in result.states]) if dyn else np.zeros(0)
    return v, result.impulses, result.lcp.pivots


# --------------------------------------------------------------------------- results

@dataclass
class SimulationResult:
    """Recorded trajectory: ``times`` (k,), per-body arrays (k, n_bodies, ·) in world frame."""

    body_names: list[str]
    times: np.ndarray
    positions: np.ndarray
    quaternions: np.ndarray
    velocities: np.ndarray
    angular_velocities: np.ndarray
    contacts_per_step: np.ndarray
    steps: int
    wall_seconds: float
    integrator: str
    dt: float
    surfaces: list = field(default_factory=list)      # per record: list of (i, j, ContactSurface)
    final_states: list = field(default_factory=list)
    #: velocity integrator: total wall seconds per stage (contact query, assembly, solve, pose update)
    stage_seconds: dict = field(default_factory=dict)
    #: contact warnings, the first of each (pair, kind): {"pair", "kind", "message", "first_time"}
    warnings: list = field(default_factory=list)
    #: velocity integrator: per step, did a rigid core carry load (D 5.1.2; the core acted as rigid
    #: geometry in that step); per record, did one in the steps from it to the next record
    core_contact_steps: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    core_contact: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    @property
    def simulated_seconds(self) -> float:
        return float(self.times[-1] - self.times[0]) if len(self.times) else 0.0

    @property
    def realtime_factor(self) -> float:
        return self.simulated_seconds / self.wall_seconds if self.wall_seconds > 0 else float("inf")

    def summary(self) -> dict:
        """The ``--json`` summary: steps, wall_seconds, realtime_factor, final body states."""
        cps = self.contacts_per_step
        return {
            "integrator": self.integrator, "dt": self.dt, "steps": int(self.steps),
            "simulated_seconds": self.simulated_seconds, "wall_seconds": self.wall_seconds,
            "realtime_factor": self.realtime_factor,
            "contacts_per_step": {"mean": float(cps.mean()) if cps.size else 0.0,
                                  "max": int(cps.max()) if cps.size else 0},
            "core_contact_steps": int(np.count_nonzero(self.core_contact_steps)),
            "stage_ms_per_step": {k: 1e3 * v / max(self.steps, 1) for k, v in self.stage_seconds.items()},
            "final_states": {name: {"position": s.position.tolist(), "quaternion": s.quaternion.tolist(),
                                    "velocity": s.velocity.tolist(), "angular_velocity": s.angular_velocity.tolist()}
                             for name, s in zip(self.body_names, self.final_states)},
            "warnings": [dict(w) for w in self.warnings],
        }


class _Recorder:
    def __init__(self, scene, record_surfaces):
        self.scene = scene
        self.record_surfaces = record_surfaces
        self.times, self.states, self.surfaces = [], [], []

    def add(self, t, states, surfaces=None):
        self.times.append(float(t))
        self.states.append([replace(s) for s in states])
        if self.record_surfaces:
            self.surfaces.append(surfaces or [])

    def result(self, contacts, steps, wall, integrator, dt, final):
        S = self.states
        arr = lambda attr, k: np.array([[getattr(s, attr) for s in row] for row in S]).reshape(len(S), -1, k)  # noqa: E731
        return SimulationResult([b.name for b in self.scene.bodies], np.array(self.times),
                                arr("position", 3), arr("quaternion", 4), arr("velocity", 3),
                                arr("angular_velocity", 3), np.asarray(contacts, dtype=np.int64), steps, wall,
                                integrator, dt, self.surfaces, final)


def run_settings(friction: str | None = None, integrator: str | None = None, *, path=None) -> tuple[str, str]:
    """The friction model and integrator of a run, defaults filled in: regularised friction
    (D 5.3) unless asked; the continuous integrator for compliant friction (its friction
    springs, D 6, are states of the ODE), the velocity integrator otherwise. OptionError for an
    unknown name or compliant friction with the velocity integrator (naming ``path``, the scene)."""
    friction = friction or "regularised"
    if friction not in FRICTION_MODELS:
        raise OptionError(f"unknown friction model {friction!r}", path=path, fix=f"use one of {FRICTION_MODELS}")
    integrator = integrator or ("continuous" if friction == "compliant" else "velocity")
    if integrator not in INTEGRATORS:
        raise OptionError(f"unknown integrator {integrator!r}", path=path, fix=f"use one of {INTEGRATORS}")
    if friction == "compliant" and integrator != "continuous":
        raise OptionError("compliant friction integrates a friction spring per contact and runs only in the "
                          "continuous integrator", path=path,
                          fix="use --integrator continuous (the default with --friction compliant)")
    return friction, integrator


def check_integrator(scene: Scene, integrator: str, *, path=None) -> None:
    """OptionError unless ``integrator`` can step every contact ``scene`` may contain.

    The continuous integrator integrates pressure-field wrenches (D 5.3): a pair of rigid
    geometries has no pressure field, so it has no force there and would pass through. Such
    a scene is refused before the first step, naming the pair, rather than run with the
    contact dropped; the velocity integrator steps rigid pairs with the LCP."""
    if integrator not in INTEGRATORS:
        raise OptionError(f"unknown integrator {integrator!r}", path=path, fix=f"use one of {INTEGRATORS}")
    if integrator != "continuous":
        return
    for i, b in enumerate(scene.bodies):
        for c in scene.bodies[i + 1:]:
            if isinstance(b.geometry, RigidBody) and isinstance(c.geometry, RigidBody) and \
                    "dynamic" in (b.kind, c.kind):
                raise OptionError(
                    f"the continuous integrator has no contact between two rigid geometries, and bodies "
                    f"{b.name!r} and {c.name!r} are both rigid (one of them dynamic): their contact would be "
                    f"dropped", path=path,
                    fix="use --integrator velocity (rigid contacts by the Stewart–Trinkle LCP), or give one of "
                        "the two a compliant geometry")


def simulate(scene: Scene, duration: float, dt: float = 1e-3, integrator: str | None = None, *,
             record_every: int = 1, record_surfaces: bool = False, progress: Progress | None = None,
             stiction_velocity: float = DEFAULT_STICTION_VELOCITY, rtol: float = 1e-6, atol: float = 1e-9,
             stop=None, friction: str | None = None) -> SimulationResult:
    """Simulate ``scene`` for ``duration`` seconds.

    ``dt``: the fixed step (velocity) or the output interval (continuous). Every
    ``record_every``-th step is recorded (always the first and last). ``stop(t, states)``
    may end the run early by returning True. ``rtol``/``atol`` are Radau's tolerances.
    ``friction="compliant"`` (continuous only): tangentially compliant Coulomb friction (D 6).
    Unset ``integrator``/``friction`` take the defaults of :func:`run_settings`.
    """
    friction, integrator = run_settings(friction, integrator)
    check_integrator(scene, integrator)
    if not (duration > 0 and dt > 0 and np.isfinite(duration) and np.isfinite(dt)):
        raise OptionError(f"duration {duration} s and dt {dt} s must be positive", fix="use e.g. --duration 1 --dt 1e-3")
    n_steps = int(np.ceil(duration / dt - 1e-9))
    progress = progress or Progress(enabled=False)
    with threadpool_limits(1), collecting(ContactWarningLog()) as log:
        if integrator == "velocity":
            result = _run_velocity(scene, n_steps, dt, record_every, record_surfaces, progress, stiction_velocity,
                                   stop)
        elif friction == "compliant":      # tangential compliance (D 6): its own continuous loop
            from fieldgen.runtime.dynamics.compliant_friction import check_pairs, contact_pairs, run_compliant

            try:
                check_pairs(scene, contact_pairs(scene))
            except ValueError as exc:
                raise OptionError(str(exc), fix="set tangential_stiffness and tangential_damping > 0") from None
            result = run_compliant(scene, n_steps, dt, record_every, record_surfaces, progress, rtol, atol, stop)
        else:
            result = _run_continuous(scene, n_steps, dt, record_every, record_surfaces, progress, rtol, atol, stop)
    result.warnings = log.as_list()
    return result


def _run_velocity(scene, n_steps, dt, record_every, record_surfaces, progress, stiction_velocity, stop):
    states = [replace(b.state) for b in scene.bodies]
    rec = _Recorder(scene, record_surfaces)
    contacts, core_steps, record_steps = [], [], []
    stages = np.zeros(4)
    bar = progress.bar(n_steps, "simulate")
    start = time.perf_counter()
    t = 0.0
    steps = 0
    for k in range(n_steps):
        record = k % record_every == 0
        set_time(t)
        new_states, info = velocity_step(scene, states, t, dt, stiction_velocity=stiction_velocity,
                                         keep_surfaces=record and record_surfaces)
        if record:
            rec.add(t, states, info.points.surfaces)
            record_steps.append(k)
        contacts.append(info.contacts)
        core_steps.append(core_loaded(info))
        stages += info.stage_seconds
        states = new_states
        steps += 1
        t = (k + 1) * dt
        if bar.total and (k + 1) % max(1, n_steps // 100) == 0:
            note = f"t={t:.3f} s, {info.contacts} contacts" if (k + 1) % max(1, n_steps // 10) == 0 else ""
            bar.advance(max(1, n_steps // 100), note)
        if stop is not None and stop(t, states):
            break
    wall = time.perf_counter() - start
    set_time(t)
    if rec.times[-1] != t:
        rec.add(t, states, scene_contacts(scene, states, keep_surfaces=True).surfaces if record_surfaces else None)
    result = rec.result(contacts, steps, wall, "velocity", dt, states)
    result.stage_seconds = dict(zip(("contact_query", "assembly", "solve", "pose_update"), stages.tolist()))
    result.core_contact_steps = np.array(core_steps, bool)
    bounds = record_steps + [steps] * (len(result.times) - len(record_steps))
    result.core_contact = np.array([bool(np.any(result.core_contact_steps[a:b]))
                                    for a, b in zip(bounds, bounds[1:] + [steps])], bool)
    return result


def core_loaded(info: "StepInfo") -> bool:
    """Did a rigid core carry load in this step (a core contact with a positive normal impulse)?"""
    core = info.points.core
    if not np.any(core):
        return False
    return bool(np.any(np.einsum("ij,ij->i", info.impulses[core], info.points.normal[core]) > 0.0))


def _pack(scene, states):
    return np.concatenate([np.concatenate([s.position, s.quaternion, s.velocity, s.angular_velocity])
                           for b, s in zip(scene.bodies, states) if b.kind != "fixed"])


def _unpack(scene, y, base_states, t):
    states, k = [], 0
    for b, s in zip(scene.bodies, base_states):
        if b.kind == "fixed":
            states.append(s)
            continue
        chunk = y[13 * k:13 * k + 13]
        q = chunk[3:7] / np.linalg.norm(chunk[3:7])
        if b.kind == "kinematic":
            tw = b.motion(t)
            states.append(RigidBodyState(chunk[:3], q, tw[:3], tw[3:]))
        else:
            states.append(RigidBodyState(chunk[:3], q, chunk[7:10], chunk[10:13]))
        k += 1
    return states


def contact_wrenches(scene: Scene, states: list[RigidBodyState], *, keep_surfaces: bool = False):
    """Net pressure-field wrench [force, torque about the centre of mass] on every body
    (triangle representation, damping and regularised friction; D 5.0.3, 5.2), (n, 6)."""
    out = np.zeros((len(scene.bodies), 6))
    surfaces = []
    poses = [b.pose(s) for b, s in zip(scene.bodies, states)]
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if bi.kind != "dynamic" and bj.kind != "dynamic":
                continue
            if not (isinstance(bi.geometry, CompliantBody) or isinstance(bj.geometry, CompliantBody)):
                continue
            with watched((bi.name, bj.name)):
                surface = compute_contact_surface(bi.geometry, poses[i], bj.geometry, poses[j], "triangle",
                                                  face_rule=scene.face_rule)
            if surface.n_faces == 0:
                continue
            if keep_surfaces:
                surfaces.append((i, j, surface))
            V = []
            for b, s, X in ((bi, states[i], poses[i]), (bj, states[j], poses[j])):
                origin_velocity = s.velocity + np.cross(s.angular_velocity, X[:3, 3] - s.position)
                V.append(SpatialVelocity(linear=origin_velocity, angular=s.angular_velocity))
            w = compute_wrench(surface, bi.geometry, bj.geometry, V_WA=V[0], V_WB=V[1])
            out[j, :3] += w.force
            out[j, 3:] += w.torque - np.cross(states[j].position, w.force)
            out[i, :3] -= w.force
            out[i, 3:] += -w.torque + np.cross(states[i].position, w.force)
    return out, surfaces


def radau_segments(rhs, y, t0: float, t1: float, breaks, *, rtol: float, atol: float, jac=None):
    """Integrate ``y' = rhs(t, y)`` from ``t0`` to ``t1`` with Radau IIA, restarting at every
    schedule break inside (a piecewise-constant load is smooth between breaks): ``(y, segments)``."""
    from scipy.integrate import solve_ivp

    stops = [t0] + [x for x in breaks if t0 < x < t1] + [t1]
    for a, b in zip(stops[:-1], stops[1:]):
        sol = solve_ivp(rhs, (a, b), y, method="Radau", rtol=rtol, atol=atol, jac=jac)
        if not sol.success:
            raise BuildError(f"Radau failed at t = {a:.6g} s: {sol.message}",
                             fix="loosen rtol/atol or check the scene for deep initial overlaps")
        y = sol.y[:, -1].copy()
    return y, len(stops) - 1


def state_rates(scene: Scene, states, wrenches, t: float) -> list[np.ndarray]:
    """Time derivatives ``[ṗ, q̇, v̇, ω̇]`` of every non-fixed body (13 each, scene order): a
    kinematic body follows its twist, a dynamic one Newton–Euler under contact ``wrenches``,
    its external wrench at ``t`` and gravity."""
    out = []
    for b, s, w in zip(scene.bodies, states, wrenches):
        if b.kind == "fixed":
            continue
        if b.kind == "kinematic":
            dq = 0.5 * _qmul(np.concatenate([[0.0], s.angular_velocity]), s.quaternion)
            out.append(np.concatenate([s.velocity, dq, np.zeros(6)]))
        else:
            ext = b.wrench(t) if b.wrench is not None else np.zeros(6)
            force = w[:3] + ext[:3] + b.mass.mass * scene.gravity
            dp, dq, dv, dw = newton_euler_rhs(s, b.mass, force, w[3:] + ext[3:])
            out.append(np.concatenate([dp, dq, dv, dw]))
    return out


def _run_continuous(scene, n_steps, dt, record_every, record_surfaces, progress, rtol, atol, stop):

    states = [replace(b.state) for b in scene.bodies]
    rec = _Recorder(scene, record_surfaces)
    rec.add(0.0, states, contact_wrenches(scene, states, keep_surfaces=True)[1] if record_surfaces else None)
    breaks = sorted({float(x) for b in scene.bodies for sch in (b.wrench, b.motion) if sch is not None
                     for x in sch.breakpoints() if 0 < x < n_steps * dt})
    evaluations = [0]

    def rhs(t, y):
        set_time(t)
        st = _unpack(scene, y, states, t)
        wrench, _ = contact_wrenches(scene, st)
        evaluations[0] += 1
        out = state_rates(scene, st, wrench, t)
        return np.concatenate(out) if out else np.zeros(0)

    contacts = []
    bar = progress.bar(n_steps, "simulate")
    start = time.perf_counter()
    y = _pack(scene, states) if any(b.kind != "fixed" for b in scene.bodies) else np.zeros(0)
    t = 0.0
    steps = 0
    for k in range(n_steps):
        t1 = (k + 1) * dt
        if y.size:
            y, n = radau_segments(rhs, y, t, t1, breaks, rtol=rtol, atol=atol)
            steps += n
        t = t1
        set_time(t)
        states = _unpack(scene, y, states, t)
        y = _pack(scene, states) if y.size else y        # quaternion renormalised
        _refuse_core_contact(scene, states, t)
        wrench_surfaces = None
        keep = record_surfaces and (k + 1) % record_every == 0
        if keep or k == n_steps - 1:
            _, wrench_surfaces = contact_wrenches(scene, states, keep_surfaces=True)
        contacts.append(sum(s.n_faces for _, _, s in wrench_surfaces) if wrench_surfaces is not None else 0)
        if (k + 1) % record_every == 0 or k == n_steps - 1:
            rec.add(t, states, wrench_surfaces)
        if bar.total and (k + 1) % max(1, n_steps // 100) == 0:
            bar.advance(max(1, n_steps // 100), f"t={t:.3f} s")
        if stop is not None and stop(t, states):
            if rec.times[-1] != t:
                rec.add(t, states, wrench_surfaces)
            break
    wall = time.perf_counter() - start
    result = rec.result(contacts, steps, wall, "continuous", dt, states)
    result.rhs_evaluations = evaluations[0]
    return result


def _refuse_core_contact(scene, states, t):
    """BuildError when, at an output time of the continuous integrator, a body has reached the
    rigid core of a compliant one (D 5.1.2): that integrator has no rigid contact, so the
    core's contact would be dropped and the body would pass through it."""
    from fieldgen.runtime.contact.surface import PassThroughWarning

    poses = None
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if "dynamic" not in (bi.kind, bj.kind) or (core_body(bi.geometry) is None and
                                                         core_body(bj.geometry) is None):
                continue
            poses = poses or [b.pose(s) for b, s in zip(scene.bodies, states)]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PassThroughWarning)
                compute_contact_surface(bi.geometry, poses[i], bj.geometry, poses[j], "triangle")
            if any(issubclass(w.category, PassThroughWarning) for w in caught):
                raise BuildError(f"at t = {t:.6g} s body {bi.name!r} and body {bj.name!r} reach a rigid core (the "
                                 f"compliant layer is passed through); the continuous integrator has no rigid "
                                 f"contact, so the core would be passed through too",
                                 fix="use --integrator velocity (the core then acts as rigid geometry), or "
                                     "a smaller load")


def _qmul(p, q):
    from fieldgen.runtime.dynamics.rigid_body import quaternion_multiply

    return quaternion_multiply(p, q)


def body_rotation(result: SimulationResult, record: int, body: int) -> np.ndarray:
    return quaternion_to_matrix(result.quaternions[record, body])
