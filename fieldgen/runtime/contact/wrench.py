"""Tractions and the net contact wrench over a contact surface (docs/model.md §4; D 4.4, 5.0.3, 5.2).

Velocities are :class:`~fieldgen.runtime.contact.pose.SpatialVelocity` values (``linear`` v, the
velocity of the body-frame origin, i.e. of the translation of X_WB, and ``angular`` ω, both
expressed in W; as a 6-vector ``[v; ω]``). The velocity of body B's material point at r is
``v_B + ω_B × (r − o_B)``.

At a surface point: ``v = v_B − v_A`` (relative velocity of the material points),
``v_n = v·n̂`` (n̂ from A into B; positive = separating), ``v_t = v − v_n n̂``;
traction on B ``t = p n̂ + t_f`` with ``p = p0·max(1 − χ v_n, 0)`` (D 4.4.2, 5.2.2) and
``t_f = −μ p v_t / max(|v_t|, v_c)`` (D 5.2.3).

Pair parameters: χ = (χ_A c_A² + χ_B c_B²)/(c_A + c_B)², c = L/M0 (D 5.2.2, C.4) for two
compliant bodies, the compliant body's χ against a rigid one; μ = 2 μ_A μ_B/(μ_A + μ_B) of the
dynamic coefficients (a harmonic mean, Drake's combination rule; 0 when both are 0).

Quadrature (D 5.0.3): polygon faces are fanned about their area centroid, triangle faces
are used as they are; each triangle
uses the 3-point edge-midpoint rule, exact for quadratics, so the elastic force and torque
(p0 linear, r·p0 quadratic) are exact. For polygon faces the elastic force is A·p0(centroid)·n̂
(exact, M22 III-B); the elastic torque and the dissipative/friction parts use the fan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.surface import ContactSurface, compute_contact_surface
from fieldgen.runtime.contact.pose import SpatialVelocity, as_matrix, as_spatial_velocity, cross3, rigid_matrix
from fieldgen.surface.components import components
from fieldgen.surface.topology import winding_numbers

DEFAULT_STICTION_VELOCITY = 1e-4


@dataclass(frozen=True)
class ContactWrench:
    """Net wrench of a contact. ``force``/``torque`` act on B; A receives ``force_on_a = −force``
    and the opposite torque about the same point. ``torque`` is about the world origin,
    ``torque_about_centroid`` about ``centroid`` (the surface's area centroid; NaN if empty).
    ``elastic_*`` are the p0 n̂ parts alone; ``dissipated_power`` = ∫ (t − p0 n̂)·(v_B − v_A) dA
    (<= 0: damping and friction never add energy, D A.2)."""

    force: np.ndarray
    torque: np.ndarray
    torque_about_centroid: np.ndarray
    centroid: np.ndarray
    elastic_force: np.ndarray
    elastic_torque: np.ndarray
    dissipated_power: float
    area: float
    n_faces: int
    dissipation: float
    friction: float

    def torque_about(self, point) -> np.ndarray:
        """Torque on B about ``point`` (world frame)."""
        return self.torque - np.cross(np.asarray(point, dtype=np.float64), self.force)

    @property
    def force_on_a(self) -> np.ndarray:
        return -self.force

    @property
    def torque_on_a(self) -> np.ndarray:
        """Torque on A about the world origin."""
        return -self.torque

    @property
    def torque_on_a_about_centroid(self) -> np.ndarray:
        return -self.torque_about_centroid


def combined_dissipation(body_a, body_b) -> float:
    """χ of the pair (D 5.2.2, C.4)."""
    a_soft, b_soft = isinstance(body_a, CompliantGeometry), isinstance(body_b, CompliantGeometry)
    if a_soft and b_soft:
        ca = body_a.characteristic_length / body_a.modulus
        cb = body_b.characteristic_length / body_b.modulus
        if not (np.isfinite(ca) and np.isfinite(cb)) or ca + cb <= 0:
            return 0.5 * (body_a.dissipation + body_b.dissipation)
        if (ca + cb) ** 2 > 0.0:
            return (body_a.dissipation * ca * ca + body_b.dissipation * cb * cb) / (ca + cb) ** 2
        w = 1.0 / (1.0 + cb / ca)            # the same weights where the squares underflow (moduli near 1e308)
        return body_a.dissipation * w * w + body_b.dissipation * (1.0 - w) ** 2
    if a_soft:
        return float(body_a.dissipation)
    if b_soft:
        return float(body_b.dissipation)
    return 0.0


def combined_friction(body_a, body_b) -> float:
    """μ = 2 μ_A μ_B/(μ_A + μ_B) of the dynamic coefficients."""
    ma, mb = float(body_a.mu_dynamic), float(body_b.mu_dynamic)
    return 0.0 if ma + mb <= 0 else 2.0 * ma * mb / (ma + mb)


def friction_lost_to(body_a, body_b) -> str | None:
    """"a" or "b": the body whose coefficient 0 makes the pair's 0 although the other has one
    (the harmonic mean, :func:`combined_friction`; a rigid mesh has none unless given), else None."""
    ma, mb = float(body_a.mu_dynamic), float(body_b.mu_dynamic)
    return "a" if ma == 0 < mb else "b" if mb == 0 < ma else None


def swallowed(body_a, X_WA, body_b, X_WB) -> tuple[str, int, int] | None:
    """``(side, inside, pieces)``: the compliant body ("a" or "b") of which ``inside`` of its
    ``pieces`` (connected through its tets) lie wholly inside the rigid other (a pose or a unit off
    by far), else None. Asked of a pair whose contact surface is empty: no face of the rigid body
    crosses the compliant one, so one point of a piece inside the rigid body puts the whole piece
    there, and the zero force is no answer (the bodies overlap)."""
    for side, body, X_WC, other, X_WR in (("a", body_a, X_WA, body_b, X_WB), ("b", body_b, X_WB, body_a, X_WA)):
        if not (isinstance(body, CompliantGeometry) and isinstance(other, RigidGeometry)) or not len(body.tets):
            continue
        joined = np.column_stack([body.tets[:, [0, 0, 0]].ravel(), body.tets[:, 1:].ravel()])
        labels = components(len(body.points), joined)[1]
        used = np.unique(body.tets)
        _, first = np.unique(labels[used], return_index=True)
        C, R = as_matrix(X_WC), as_matrix(X_WR)
        p_R = (body.points[used[first]] @ C[:3, :3].T + C[:3, 3] - R[:3, 3]) @ R[:3, :3]
        inside = int(np.sum(np.abs(winding_numbers(other.vertices, other.faces, p_R)) > 0.5))
        if inside:
            return side, inside, len(first)
    return None


def compute_wrench(surface: ContactSurface, body_a, body_b, *, V_WA: SpatialVelocity | None = None,
                   V_WB: SpatialVelocity | None = None, X_WA=None, X_WB=None,
                   stiction_velocity: float = DEFAULT_STICTION_VELOCITY, mu: float | None = None) -> ContactWrench:
    """Net wrench on B (and A) from ``surface``; ``V_WA``/``V_WB`` are SpatialVelocity values
    in W (None = at rest). Poses default to the ones the surface was computed at. ``mu``
    overrides the pair's friction coefficient (0: normal and damping tractions only, e.g. when
    friction comes from ``tangential.friction_wrench``)."""
    XA = surface.X_WA if X_WA is None else as_matrix(X_WA)
    XB = surface.X_WB if X_WB is None else as_matrix(X_WB)
    VA = as_spatial_velocity(V_WA, "V_WA").vector   # [v; ω]
    VB = as_spatial_velocity(V_WB, "V_WB").vector
    if not stiction_velocity > 0:
        raise ValueError(f"stiction_velocity must be > 0 m/s, got {stiction_velocity}")
    chi = combined_dissipation(body_a, body_b)
    mu = combined_friction(body_a, body_b) if mu is None else float(mu)
    fan = surface.representation == "polygon"
    out = _integrate(surface.vertices, surface.face_offsets, surface.face_vertices, surface.normals,
                     surface.areas, surface.centroids, surface.vertex_pressure, surface.centroid_pressure,
                     fan, VA, VB, np.ascontiguousarray(XA[:3, 3]), np.ascontiguousarray(XB[:3, 3]),
                     chi, mu, float(stiction_velocity))
    force, torque, eforce, etorque, power = out
    if fan:   # exact centroid rule for the elastic force on polygons (M22 III-B)
        weight = surface.areas * surface.centroid_pressure   # no BLAS: same bits for any thread count
        polygon_force = np.sum(weight[:, None] * surface.normals, axis=0) if surface.n_faces else np.zeros(3)
        force = force - eforce + polygon_force
        eforce = polygon_force
    centroid = surface.centroid
    about_c = torque - cross3(centroid, force) if surface.n_faces else np.zeros(3)
    return ContactWrench(force, torque, about_c, centroid, eforce, etorque, float(power),
                         surface.total_area, surface.n_faces, chi, mu)


def contact(body_a, X_WA, body_b, X_WB, *, V_WA: SpatialVelocity | None = None, V_WB: SpatialVelocity | None = None,
            representation: str = "polygon", stiction_velocity: float = DEFAULT_STICTION_VELOCITY,
            face_rule: str = "all"):
    """Contact surface and wrench in one call: ``(ContactSurface, ContactWrench)``; velocities as
    in :func:`compute_wrench` (keyword only). ``face_rule``: ``"all"`` (every polygon) or
    ``"drake"`` (Drake's 5π/8 filters), see :func:`fieldgen.runtime.contact.surface.compute_contact_surface`."""
    as_spatial_velocity(V_WA, "V_WA"), as_spatial_velocity(V_WB, "V_WB")   # refuse before the query
    X_WA, X_WB = rigid_matrix(X_WA, "X_WA"), rigid_matrix(X_WB, "X_WB")
    surface = compute_contact_surface(body_a, X_WA, body_b, X_WB, representation, face_rule=face_rule)
    return surface, compute_wrench(surface, body_a, body_b, V_WA=V_WA, V_WB=V_WB, stiction_velocity=stiction_velocity)


@nb.njit(cache=True, inline="always")
def _accumulate(qx, qy, qz, p0, w, n, VA, VB, oA, oB, chi, mu, vc, acc):
    """Add the traction at point q (weight w) to acc = [F(3), τ(3), Fe(3), τe(3), power].
    Scalar arithmetic only: no temporary arrays in the innermost loop."""
    ax, ay, az = qx - oA[0], qy - oA[1], qz - oA[2]
    bx, by, bz = qx - oB[0], qy - oB[1], qz - oB[2]
    # V = [v; ω]: material-point velocity v + ω × (q − o), B relative to A
    vx = VB[0] + VB[4] * bz - VB[5] * by - (VA[0] + VA[4] * az - VA[5] * ay)
    vy = VB[1] + VB[5] * bx - VB[3] * bz - (VA[1] + VA[5] * ax - VA[3] * az)
    vz = VB[2] + VB[3] * by - VB[4] * bx - (VA[2] + VA[3] * ay - VA[4] * ax)
    nx, ny, nz = n[0], n[1], n[2]
    vn = vx * nx + vy * ny + vz * nz
    p = p0 * max(1.0 - chi * vn, 0.0)
    tx, ty, tz = vx - vn * nx, vy - vn * ny, vz - vn * nz
    speed = np.sqrt(tx * tx + ty * ty + tz * tz)
    scale = mu * p / max(speed, vc)
    fx, fy, fz = p * nx - scale * tx, p * ny - scale * ty, p * nz - scale * tz
    ex, ey, ez = p0 * nx, p0 * ny, p0 * nz
    acc[0] += w * fx
    acc[1] += w * fy
    acc[2] += w * fz
    acc[6] += w * ex
    acc[7] += w * ey
    acc[8] += w * ez
    acc[3] += w * (qy * fz - qz * fy)
    acc[4] += w * (qz * fx - qx * fz)
    acc[5] += w * (qx * fy - qy * fx)
    acc[9] += w * (qy * ez - qz * ey)
    acc[10] += w * (qz * ex - qx * ez)
    acc[11] += w * (qx * ey - qy * ex)
    acc[12] += w * ((fx - ex) * vx + (fy - ey) * vy + (fz - ez) * vz)


@nb.njit(cache=True)
def _triangle(a, b, c, pa, pb, pc, n, VA, VB, oA, oB, chi, mu, vc, acc):
    """3-point edge-midpoint rule on triangle abc (exact for quadratics)."""
    ux, uy, uz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    vx, vy, vz = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    area = 0.5 * ((uy * vz - uz * vy) * n[0] + (uz * vx - ux * vz) * n[1] + (ux * vy - uy * vx) * n[2])
    w = area / 3.0
    _accumulate(0.5 * (a[0] + b[0]), 0.5 * (a[1] + b[1]), 0.5 * (a[2] + b[2]), 0.5 * (pa + pb), w, n,
                VA, VB, oA, oB, chi, mu, vc, acc)
    _accumulate(0.5 * (b[0] + c[0]), 0.5 * (b[1] + c[1]), 0.5 * (b[2] + c[2]), 0.5 * (pb + pc), w, n,
                VA, VB, oA, oB, chi, mu, vc, acc)
    _accumulate(0.5 * (c[0] + a[0]), 0.5 * (c[1] + a[1]), 0.5 * (c[2] + a[2]), 0.5 * (pc + pa), w, n,
                VA, VB, oA, oB, chi, mu, vc, acc)


@nb.njit(cache=True)
def _integrate(V, offsets, fv, normals, areas, cents, vp, cp, fan, VA, VB, oA, oB, chi, mu, vc):
    acc = np.zeros(13)
    for k in range(offsets.shape[0] - 1):
        s = offsets[k]
        e = offsets[k + 1]
        n = normals[k]
        if fan:
            c = cents[k]
            for i in range(s, e):
                j = i + 1 if i + 1 < e else s
                _triangle(c, V[fv[i]], V[fv[j]], cp[k], vp[fv[i]], vp[fv[j]], n, VA, VB, oA, oB, chi, mu, vc, acc)
        else:
            _triangle(V[fv[s]], V[fv[s + 1]], V[fv[s + 2]], vp[fv[s]], vp[fv[s + 1]], vp[fv[s + 2]],
                      n, VA, VB, oA, oB, chi, mu, vc, acc)
    return acc[0:3].copy(), acc[3:6].copy(), acc[6:9].copy(), acc[9:12].copy(), acc[12]
