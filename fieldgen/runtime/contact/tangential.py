"""Tangential compliance for pressure-field contact: a spatial friction spring (D 6.1, 6.2, App. D).

Point model (D 6.1). A massless shell is tied to body B by a spring ``k`` and a damper ``c``
in parallel and rubs on body A with Coulomb friction. With ``δ`` the stretch (B relative to
the shell) and ``v_T`` the tangential velocity of B relative to A (D eqs. 6.3–6.6)::

    t_s = −k δ − c v_T                       traction if the shell sticks
    t_f = t_s            if |t_s| <= μ p     (stick)
    t_f = t̂_s μ p        otherwise           (slide)
    δ̇ = −τ⁻¹ (t_f / k + δ) = v_T − (t_f − t_s)/c,   τ = c / k        (D eq. 6.4)

``t_f`` is the friction traction on B (A receives the opposite). The second form of δ̇ is the
same equation written so that a sticking point never divides by ``c``.

Distributed model (D 6.2). One spatial deformation ``Δ = [Δ_θ; Δ_r]`` per contact surface,
about the pressure-weighted centre ``c = ∫ r p dS / ∫ p dS`` (6.9); at a surface point
``r`` (relative to c) the stretch is ``δ = N (Δ_θ × r + Δ_r)`` with ``N = I − n̂ n̂ᵀ`` (6.10,
D.5), i.e. ``δ = B(r) Δ`` with ``B = N [−r×, I]``. The spring wrench is ``f_Δ = −K Δ`` with
``K = ∫ k Bᵀ B dS`` (D.6); the friction wrench ``f_c = ∫ [r × t_f; t_f] dS`` (6.14) comes from
the pointwise law above. Adaptive stiffness (6.17, 6.18): ``k = K̄ p`` and ``c = C̄ p`` with
material constants ``K̄`` (1/m) and ``C̄`` (s/m), so ``τ = C̄ / K̄`` is one number per contact and
the stretch at which a point starts to slide, ``μ / K̄``, does not depend on the pressure.

Integration (D 6.2.4). ``K = S K̄ S`` with ``S = diag(a I₃, b I₃)`` chosen so that both diagonal
blocks of the unitless ``K̄`` have trace 3 (``a² = tr K_θθ / 3``, ``b² = tr K_rr / 3``). The state
is ``s = K̄^{1/2} S Δ`` (6.21), so the spring energy is ``U = ½ sᵀ s`` (6.19) whatever the
units, and its rate is (6.26)::

    ṡ = −τ⁻¹ (K̄^{−1/2} S⁻¹ f_c + s)        (contact)
    ṡ = −τ⁻¹ s                              (no contact: K = 0)

Substituting ``f_c = f_Δ − τ K V + e`` (``V`` the relative twist about c, ``e`` the part of
``f_c`` that sliding removes from the sticking wrench) gives the algebraically equal form used
here, ``ṡ = K̄^{1/2} S V − τ⁻¹ K̄^{−1/2} S⁻¹ e − τ⁻¹ (I − P) s``, which does not subtract two
nearly equal wrenches when τ is small and needs no τ⁻¹ while the whole surface sticks (so
``C̄ = 0`` is allowed then). ``P`` projects on the range of ``K̄``; ``K̄^{−1/2}`` is the
pseudo-inverse square root: a flat contact has no stiffness against rotations about in-plane
axes or normal translation (rank 3), and whatever part of ``s`` lies in that null space
produces no force and decays with τ, as after a loss of contact.

Frames. Every vector here is in world components. The rate is the rate of the state's
components in a frame aligned with body B (D 6.2.1's frame C); a simulator stores ``s`` in
B's body frame (``s_B = blockdiag(Rᵀ, Rᵀ) s``) and integrates ``ṡ_B = blockdiag(Rᵀ, Rᵀ) ṡ``, so
the spring turns with B. The stacked order of ``s`` follows the dissertation, rotational
block first: ``s = [s_θ; s_r]``; velocities in and wrenches out are named.

Pair rule (two bodies in contact): the two shells' springs act in series, and so do the two
dampers, so ``K̄ = K̄_A K̄_B / (K̄_A + K̄_B)`` and ``C̄ = C̄_A C̄_B / (C̄_A + C̄_B)`` (a rigid body
is infinitely stiff: the pair takes the compliant body's constants). Equal materials keep
τ = C̄ / K̄.

Quadrature: the contact surface's faces are fanned about their centroids (polygon
representation) or used as they are (triangle representation) and each triangle uses the
3-point edge-midpoint rule, as ``wrench.compute_wrench`` does (D 5.0.3); K, c, f_c and f_Δ are
all sums over the same points, so the energy identities below hold to round-off.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from fieldgen.runtime.contact.pose import cross3, cross_rows
from fieldgen.runtime.contact.surface import ContactSurface
#: eigenvalues of K̄ below this fraction of its largest are its null space
NULL_SPACE_TOLERANCE = 1e-12


# --------------------------------------------------------------------------- point model (D 6.1)

def point_friction(stretch, *, tangential_velocity, pressure, mu: float, stiffness, damping):
    """Coulomb friction through a Kelvin–Voigt shell at one or many points (D eqs. 6.3–6.6).

    ``stretch`` δ and ``tangential_velocity`` v_T: (3,) or (m, 3); ``pressure`` p, ``stiffness`` k
    and ``damping`` c: scalars or (m,) (per unit area, or force units for a point contact with
    p the normal force). Returns ``(t_f, stretch_rate, sliding, t_s)``: the friction traction
    on B, δ̇ (6.4), whether each point slides, and the sticking traction t_s.
    """
    delta = np.asarray(stretch, dtype=np.float64)
    v_t = np.asarray(tangential_velocity, dtype=np.float64)
    p = np.asarray(pressure, dtype=np.float64)
    k = np.asarray(stiffness, dtype=np.float64)
    c = np.asarray(damping, dtype=np.float64)
    t_s = -k[..., None] * delta - c[..., None] * v_t
    size = np.linalg.norm(t_s, axis=-1)
    limit = mu * p
    sliding = size > limit
    scale = np.where(sliding, limit / np.where(sliding, size, 1.0), 1.0)
    t_f = t_s * scale[..., None]
    excess = t_f - t_s                     # zero where sticking
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = v_t - np.where(sliding[..., None], excess / c[..., None], 0.0)
    return t_f, rate, sliding, t_s


# --------------------------------------------------------------------------- quadrature

@dataclass(frozen=True)
class Quadrature:
    """Points of a contact surface with their weights (m²), pressures p0 (Pa) and unit normals."""

    points: np.ndarray
    weights: np.ndarray
    pressures: np.ndarray
    normals: np.ndarray


def surface_quadrature(surface: ContactSurface) -> Quadrature:
    """The 3-point edge-midpoint rule on every triangle of ``surface`` (polygons fanned about
    their area centroids), as ``wrench.compute_wrench`` integrates tractions (D 5.0.3)."""
    V, fv, off = surface.vertices, surface.face_vertices, surface.face_offsets
    vp = surface.vertex_pressure
    nf = surface.n_faces
    if nf == 0:
        z = np.zeros((0, 3))
        return Quadrature(z, np.zeros(0), np.zeros(0), z.copy())
    counts = np.diff(off)
    if surface.representation == "polygon":
        owner = np.repeat(np.arange(nf), counts)
        idx = np.arange(len(fv))
        nxt = idx + 1
        last = off[1:] - 1
        nxt[last] = off[:-1]
        a, pa = surface.centroids[owner], surface.centroid_pressure[owner]
        b, pb = V[fv[idx]], vp[fv[idx]]
        c, pc = V[fv[nxt]], vp[fv[nxt]]
        n = surface.normals[owner]
    else:
        tri = fv.reshape(-1, 3)
        a, b, c = V[tri[:, 0]], V[tri[:, 1]], V[tri[:, 2]]
        pa, pb, pc = vp[tri[:, 0]], vp[tri[:, 1]], vp[tri[:, 2]]
        n = surface.normals
    area = 0.5 * np.einsum("ij,ij->i", cross_rows(b - a, c - a), n)
    w = np.repeat(area / 3.0, 3)
    pts = np.stack([0.5 * (a + b), 0.5 * (b + c), 0.5 * (c + a)], axis=1).reshape(-1, 3)
    prs = np.stack([0.5 * (pa + pb), 0.5 * (pb + pc), 0.5 * (pc + pa)], axis=1).reshape(-1)
    return Quadrature(pts, w, prs, np.repeat(n, 3, axis=0))


# --------------------------------------------------------------------------- distributed model (D 6.2)

@dataclass(frozen=True)
class StiffnessScaling:
    """K = S K̄ S (6.20) and the square roots of K̄ the state needs (6.21)."""

    K: np.ndarray
    scale: np.ndarray          # (6,) diagonal of S
    sqrt_bar: np.ndarray       # K̄^{1/2}
    inv_sqrt_bar: np.ndarray   # pseudo-inverse of K̄^{1/2}
    projector: np.ndarray      # onto the range of K̄

    @property
    def K_bar(self) -> np.ndarray:
        return self.K / np.outer(self.scale, self.scale)


def stiffness_scaling(K: np.ndarray) -> StiffnessScaling | None:
    """S and K̄ of a stiffness matrix (None when K = 0): both diagonal blocks of K̄ get trace 3."""
    rot, lin = np.trace(K[:3, :3]) / 3.0, np.trace(K[3:, 3:]) / 3.0
    if not lin > 0:
        return None
    rot = max(rot, lin * 1e-24)        # a contact that is a single point: no rotational stiffness
    scale = np.array([np.sqrt(rot)] * 3 + [np.sqrt(lin)] * 3)
    K_bar = K / np.outer(scale, scale)
    K_bar = 0.5 * (K_bar + K_bar.T)
    lam, Q = np.linalg.eigh(K_bar)
    keep = lam > NULL_SPACE_TOLERANCE * lam.max()
    root = np.where(keep, np.sqrt(np.where(keep, lam, 0.0)), 0.0)
    inv_root = np.where(keep, 1.0 / np.where(keep, root, 1.0), 0.0)
    return StiffnessScaling(K, scale, (Q * root) @ Q.T, (Q * inv_root) @ Q.T, (Q * keep) @ Q.T)


@dataclass(frozen=True)
class TangentialResult:
    """What :func:`friction_wrench` returns. Wrenches act on B (A receives the opposite);
    ``torque`` is about the world origin, ``torque_about_centre`` about ``centre`` (c, 6.9).
    ``spring_force``/``spring_torque`` are f_Δ = −K Δ (about c). ``rate`` is ṡ (6.26), in the
    frame of B (module doc); ``energy`` U = ½ sᵀs (J); ``sliding_fraction`` the share of the
    normal force carried by sliding points; ``status`` "none" (no contact), "stick" or "slide"
    (at least one point slides). ``deformation`` is Δ = [Δ_θ; Δ_r] (rad, m)."""

    force: np.ndarray
    torque: np.ndarray
    torque_about_centre: np.ndarray
    centre: np.ndarray
    spring_force: np.ndarray
    spring_torque: np.ndarray
    rate: np.ndarray
    energy: float
    sliding_fraction: float
    status: str
    deformation: np.ndarray
    stiffness: np.ndarray
    time_constant: float
    energy_rate: float = 0.0        #: sᵀṡ = dU/dt (W)

    @property
    def damping_force(self) -> np.ndarray:
        """Friction force minus the spring's: the dampers' share (with sliding, the shell's)."""
        return self.force - self.spring_force



def combined_tangential(stiffness_a: float, damping_a: float, stiffness_b: float, damping_b: float):
    """(K̄, C̄) of a pair: springs in series and dampers in series (inf = rigid, see module doc)."""
    def series(x, y):
        if np.isinf(x):
            return float(y)
        if np.isinf(y):
            return float(x)
        return 0.0 if x + y <= 0 else float(x * y / (x + y))
    return series(float(stiffness_a), float(stiffness_b)), series(float(damping_a), float(damping_b))


@dataclass(frozen=True)
class SpringGeometry:
    """What the friction spring takes from the contact surface alone (its pose, not the
    velocities or the state): the quadrature arrays, the centre c (6.9), K (D.6), ∫ p dS and the
    scaling of K (None without contact). Built once per surface by :func:`spring_geometry`,
    so evaluations at the same poses (a finite-difference Jacobian's velocity and state
    columns) reuse it; the arithmetic is the same as computing it in :func:`friction_wrench`."""

    points: np.ndarray
    weights: np.ndarray
    pressures: np.ndarray
    normals: np.ndarray
    centre: np.ndarray
    K: np.ndarray
    total: float
    scaling: StiffnessScaling | None
    stiffness: float


def spring_geometry(surface: ContactSurface | Quadrature, stiffness: float) -> SpringGeometry:
    """The :class:`SpringGeometry` of ``surface`` for the pair's K̄ ``stiffness`` (1/m)."""
    quad = surface if isinstance(surface, Quadrature) else surface_quadrature(surface)
    points = np.ascontiguousarray(quad.points, dtype=np.float64)
    weights = np.ascontiguousarray(quad.weights, dtype=np.float64)
    pressures = np.maximum(np.ascontiguousarray(quad.pressures, dtype=np.float64), 0.0)   # round-off below 0
    normals = np.ascontiguousarray(quad.normals, dtype=np.float64)
    centre, K, total = _centre_and_stiffness(points, weights, pressures, normals, float(stiffness))
    scaling = stiffness_scaling(K) if total > 0 else None
    return SpringGeometry(points, weights, pressures, normals, centre, K, total, scaling, float(stiffness))


def friction_wrench(surface: ContactSurface | Quadrature | SpringGeometry, state=None, *, linear_velocity,
                    angular_velocity, mu: float, stiffness: float, damping: float,
                    reference_point=None) -> TangentialResult:
    """Friction wrench and state rate of one contact surface with a spatial friction spring (D 6.2).

    ``surface``: the runtime's :class:`ContactSurface` (normals from A into B), its
    :class:`Quadrature`, or its :class:`SpringGeometry` for this ``stiffness``.
    ``state``: s (6,) = [s_θ; s_r] in world components (None: zero).
    ``linear_velocity``: velocity of B's material point relative to A's at ``reference_point``
    (world, default the origin); ``angular_velocity``: ω_B − ω_A. ``mu``: the pair's friction
    coefficient; ``stiffness`` K̄ (1/m) and ``damping`` C̄ (s/m): k = K̄ p, c = C̄ p (6.17, 6.18).
    """
    if not (np.isfinite(stiffness) and stiffness > 0):
        raise ValueError(f"tangential stiffness must be a positive number of 1/m, got {stiffness}")
    if not (np.isfinite(damping) and damping >= 0):
        raise ValueError(f"tangential damping must be >= 0 s/m, got {damping}")
    tau = damping / stiffness
    s = np.zeros(6) if state is None else np.asarray(state, dtype=np.float64).reshape(6)
    omega = np.asarray(angular_velocity, dtype=np.float64).reshape(3)
    v_ref = np.asarray(linear_velocity, dtype=np.float64).reshape(3)
    ref = np.zeros(3) if reference_point is None else np.asarray(reference_point, dtype=np.float64).reshape(3)
    geometry = surface if isinstance(surface, SpringGeometry) and surface.stiffness == float(stiffness) \
        else spring_geometry(surface, stiffness)
    points, weights, pressures, normals = geometry.points, geometry.weights, geometry.pressures, geometry.normals
    centre, K, total, scaling = geometry.centre, geometry.K, geometry.total, geometry.scaling
    if scaling is None:                    # no contact: the spring relaxes (6.26, second case)
        z = np.zeros(3)
        if tau > 0:
            rate = -s / tau
        elif np.any(s):
            raise ValueError("with zero tangential damping (τ = 0) a lost contact's spring would relax "
                             "instantly; give a positive damping")
        else:
            rate = np.zeros(6)
        energy = 0.5 * float(s @ s)
        return TangentialResult(z, z.copy(), z.copy(), np.full(3, np.nan), z.copy(), z.copy(), rate, energy, 0.0,
                                "none", np.zeros(6), np.zeros((6, 6)), tau, energy_rate=float(s @ rate))
    S = scaling.scale
    deformation = (scaling.inv_sqrt_bar @ s) / S                       # Δ = S⁻¹ K̄^{−1/2} s
    spring = -S * (scaling.sqrt_bar @ s)                               # f_Δ = −K Δ
    V = np.concatenate([omega, v_ref + cross3(omega, centre - ref)])  # twist about c
    out = _tractions(points, weights, pressures, normals, centre, deformation, V, float(mu), float(stiffness),
                     float(damping))
    force, torque_c, e, slide_weight, n_sliding = out[0:3], out[3:6], out[6:12], out[12], int(out[13])
    rate = scaling.sqrt_bar @ (S * V)
    if n_sliding:
        if tau > 0:
            rate = rate - (scaling.inv_sqrt_bar @ (e / S)) / tau
        else:
            raise ValueError("with zero tangential damping (τ = 0) sliding is infinitely stiff; "
                             "give a positive damping")
    null = s - scaling.projector @ s
    if tau > 0:
        rate = rate - null / tau
    elif np.linalg.norm(null) > max(1e-6 * np.linalg.norm(s), 1e-12):   # beyond round-off (U < 1e-24 J)
        raise ValueError("with zero tangential damping (τ = 0) the unloaded part of the spring would relax "
                         "instantly; give a positive damping")
    energy = 0.5 * float(s @ s)
    return TangentialResult(force, torque_c + cross3(centre, force), torque_c, centre, spring[3:], spring[:3],
                            rate, energy, float(slide_weight / total), "slide" if n_sliding else "stick",
                            deformation, K, tau, energy_rate=float(s @ rate))


@nb.njit(cache=True)
def _centre_and_stiffness(q, w, p, n, kbar):
    """c (6.9), K = ∫ k̄ p Bᵀ B dS (D.6) and ∫ p dS over the quadrature points."""
    total = 0.0
    c = np.zeros(3)
    for i in range(q.shape[0]):
        wp = w[i] * p[i]
        total += wp
        for a in range(3):
            c[a] += wp * q[i, a]
    K = np.zeros((6, 6))
    if not total > 0.0:
        return c, K, 0.0
    for a in range(3):
        c[a] /= total
    b = np.empty((3, 6))
    for i in range(q.shape[0]):
        wk = kbar * w[i] * p[i]
        if wk == 0.0:
            continue
        _stretch_matrix(q[i, 0] - c[0], q[i, 1] - c[1], q[i, 2] - c[2], n[i, 0], n[i, 1], n[i, 2], b)
        for x in range(6):
            for y in range(x, 6):
                K[x, y] += wk * (b[0, x] * b[0, y] + b[1, x] * b[1, y] + b[2, x] * b[2, y])
    for x in range(6):
        for y in range(x):
            K[x, y] = K[y, x]
    return c, K, total


@nb.njit(cache=True, inline="always")
def _stretch_matrix(rx, ry, rz, nx, ny, nz, b):
    """b = N [−r×, I] (D.5): column j of −r× is e_j × r."""
    N00, N01, N02 = 1.0 - nx * nx, -nx * ny, -nx * nz
    N11, N12, N22 = 1.0 - ny * ny, -ny * nz, 1.0 - nz * nz
    # e_x × r = (0, −rz, ry); e_y × r = (rz, 0, −rx); e_z × r = (−ry, rx, 0)
    b[0, 0] = -N01 * rz + N02 * ry
    b[1, 0] = -N11 * rz + N12 * ry
    b[2, 0] = -N12 * rz + N22 * ry
    b[0, 1] = N00 * rz - N02 * rx
    b[1, 1] = N01 * rz - N12 * rx
    b[2, 1] = N02 * rz - N22 * rx
    b[0, 2] = -N00 * ry + N01 * rx
    b[1, 2] = -N01 * ry + N11 * rx
    b[2, 2] = -N02 * ry + N12 * rx
    b[0, 3], b[0, 4], b[0, 5] = N00, N01, N02
    b[1, 3], b[1, 4], b[1, 5] = N01, N11, N12
    b[2, 3], b[2, 4], b[2, 5] = N02, N12, N22


@nb.njit(cache=True)
def _tractions(q, w, p, n, c, D, V, mu, kbar, cbar):
    """Pointwise law (6.5, 6.6) with k = k̄ p, c = c̄ p at δ = B Δ, v_T = B V; returns
    [force (3), torque about c (3), e = ∫ [r × (t_f − t_s); t_f − t_s] (6), sliding ∫ p, count]."""
    out = np.zeros(14)
    b = np.empty((3, 6))
    d = np.empty(3)
    v = np.empty(3)
    t = np.empty(3)
    for i in range(q.shape[0]):
        if not (p[i] > 0.0) or w[i] == 0.0:
            continue
        rx, ry, rz = q[i, 0] - c[0], q[i, 1] - c[1], q[i, 2] - c[2]
        _stretch_matrix(rx, ry, rz, n[i, 0], n[i, 1], n[i, 2], b)
        for a in range(3):
            da = 0.0
            va = 0.0
            for j in range(6):
                da += b[a, j] * D[j]
                va += b[a, j] * V[j]
            d[a] = da
            v[a] = va
        size = 0.0
        for a in range(3):
            t[a] = -p[i] * (kbar * d[a] + cbar * v[a])
            size += t[a] * t[a]
        size = np.sqrt(size)
        limit = mu * p[i]
        wi = w[i]
        if size > limit:
            f = limit / size
            ex, ey, ez = (f - 1.0) * t[0] * wi, (f - 1.0) * t[1] * wi, (f - 1.0) * t[2] * wi
            out[6] += ry * ez - rz * ey
            out[7] += rz * ex - rx * ez
            out[8] += rx * ey - ry * ex
            out[9] += ex
            out[10] += ey
            out[11] += ez
            out[12] += wi * p[i]
            out[13] += 1.0
            for a in range(3):
                t[a] *= f
        fx, fy, fz = wi * t[0], wi * t[1], wi * t[2]
        out[0] += fx
        out[1] += fy
        out[2] += fz
        out[3] += ry * fz - rz * fy
        out[4] += rz * fx - rx * fz
        out[5] += rx * fy - ry * fx
    return out


def literal_rate(surface: ContactSurface | Quadrature, state, result: TangentialResult, *, mu: float,
                 stiffness: float, damping: float) -> np.ndarray:
    """ṡ by (6.26) as printed, ``−τ⁻¹ (K̄^{−1/2} S⁻¹ f_c + s)``, from a computed result: a check
    on the rearranged form :func:`friction_wrench` uses (needs τ > 0)."""
    s = np.asarray(state, dtype=np.float64).reshape(6)
    tau = damping / stiffness
    scaling = stiffness_scaling(result.stiffness) if np.any(result.stiffness) else None
    if scaling is None:
        return -s / tau
    f_c = np.concatenate([result.torque_about_centre, result.force])
    return -(scaling.inv_sqrt_bar @ (f_c / scaling.scale) + s) / tau


def state_from_deformation(K: np.ndarray, deformation) -> np.ndarray:
    """s = K̄^{1/2} S Δ (6.21) for a stiffness matrix K and a deformation Δ = [Δ_θ; Δ_r]."""
    scaling = stiffness_scaling(np.asarray(K, dtype=np.float64))
    if scaling is None:
        return np.zeros(6)
    return scaling.sqrt_bar @ (scaling.scale * np.asarray(deformation, dtype=np.float64).reshape(6))
