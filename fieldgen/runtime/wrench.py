"""Tractions and the net contact wrench over a contact surface (MODEL 3; D 4.4, 5.0.3, 5.2).

Spatial velocities are ``V = [ω; v]`` (6,), world frame: ω the angular velocity, v the
velocity of the body-frame origin (the translation of X_WB), both expressed in W. The
velocity of body B's material point at r is ``v_B + ω_B × (r − o_B)``.

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

from fieldgen.runtime.bodies import CompliantBody
from fieldgen.runtime.contact_surface import ContactSurface, compute_contact_surface
from fieldgen.runtime.pose import as_matrix

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
    a_soft, b_soft = isinstance(body_a, CompliantBody), isinstance(body_b, CompliantBody)
    if a_soft and b_soft:
        ca = body_a.characteristic_length / body_a.modulus
        cb = body_b.characteristic_length / body_b.modulus
        if not (np.isfinite(ca) and np.isfinite(cb)) or ca + cb <= 0:
            return 0.5 * (body_a.dissipation + body_b.dissipation)
        return (body_a.dissipation * ca * ca + body_b.dissipation * cb * cb) / (ca + cb) ** 2
    if a_soft:
        return float(body_a.dissipation)
    if b_soft:
        return float(body_b.dissipation)
    return 0.0


def combined_friction(body_a, body_b) -> float:
    """μ = 2 μ_A μ_B/(μ_A + μ_B) of the dynamic coefficients."""
    ma, mb = float(body_a.mu_dynamic), float(body_b.mu_dynamic)
    return 0.0 if ma + mb <= 0 else 2.0 * ma * mb / (ma + mb)


def compute_wrench(surface: ContactSurface, body_a, body_b, V_WA=None, V_WB=None, *, X_WA=None, X_WB=None,
                   stiction_velocity: float = DEFAULT_STICTION_VELOCITY) -> ContactWrench:
    """Net wrench on B (and A) from ``surface``; velocities ``[ω; v]`` in W (None = at rest).
    Poses default to the ones the surface was computed at."""
    XA = surface.X_WA if X_WA is None else as_matrix(X_WA)
    XB = surface.X_WB if X_WB is None else as_matrix(X_WB)
    VA = np.zeros(6) if V_WA is None else np.asarray(V_WA, dtype=np.float64).reshape(6)
    VB = np.zeros(6) if V_WB is None else np.asarray(V_WB, dtype=np.float64).reshape(6)
    if not stiction_velocity > 0:
        raise ValueError(f"stiction_velocity must be > 0 m/s, got {stiction_velocity}")
    chi = combined_dissipation(body_a, body_b)
    mu = combined_friction(body_a, body_b)
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
    about_c = torque - np.cross(centroid, force) if surface.n_faces else np.zeros(3)
    return ContactWrench(force, torque, about_c, centroid, eforce, etorque, float(power),
                         surface.total_area, surface.n_faces, chi, mu)


def contact(body_a, X_WA, body_b, X_WB, V_WA=None, V_WB=None, representation: str = "polygon",
            *, stiction_velocity: float = DEFAULT_STICTION_VELOCITY):
    """Contact surface and wrench in one call: ``(ContactSurface, ContactWrench)``."""
    surface = compute_contact_surface(body_a, X_WA, body_b, X_WB, representation)
    return surface, compute_wrench(surface, body_a, body_b, V_WA, V_WB, stiction_velocity=stiction_velocity)


@nb.njit(cache=True)
def _accumulate(q, p0, w, n, VA, VB, oA, oB, chi, mu, vc, acc):
    """Add the traction at point q (weight w) to acc = [F(3), τ(3), Fe(3), τe(3), power]."""
    rA = q - oA
    rB = q - oB
    v = np.empty(3)
    v[0] = VB[3] + VB[1] * rB[2] - VB[2] * rB[1] - (VA[3] + VA[1] * rA[2] - VA[2] * rA[1])
    v[1] = VB[4] + VB[2] * rB[0] - VB[0] * rB[2] - (VA[4] + VA[2] * rA[0] - VA[0] * rA[2])
    v[2] = VB[5] + VB[0] * rB[1] - VB[1] * rB[0] - (VA[5] + VA[0] * rA[1] - VA[1] * rA[0])
    vn = v[0] * n[0] + v[1] * n[1] + v[2] * n[2]
    p = p0 * max(1.0 - chi * vn, 0.0)
    vt = v - vn * n
    speed = np.sqrt(vt[0] ** 2 + vt[1] ** 2 + vt[2] ** 2)
    scale = mu * p / max(speed, vc)
    t = p * n - scale * vt
    te = p0 * n
    for i in range(3):
        acc[i] += w * t[i]
        acc[6 + i] += w * te[i]
    acc[3] += w * (q[1] * t[2] - q[2] * t[1])
    acc[4] += w * (q[2] * t[0] - q[0] * t[2])
    acc[5] += w * (q[0] * t[1] - q[1] * t[0])
    acc[9] += w * (q[1] * te[2] - q[2] * te[1])
    acc[10] += w * (q[2] * te[0] - q[0] * te[2])
    acc[11] += w * (q[0] * te[1] - q[1] * te[0])
    acc[12] += w * ((t[0] - te[0]) * v[0] + (t[1] - te[1]) * v[1] + (t[2] - te[2]) * v[2])


@nb.njit(cache=True)
def _triangle(a, b, c, pa, pb, pc, n, VA, VB, oA, oB, chi, mu, vc, acc):
    """3-point edge-midpoint rule on triangle abc (exact for quadratics)."""
    u = b - a
    v = c - a
    area = 0.5 * ((u[1] * v[2] - u[2] * v[1]) * n[0] + (u[2] * v[0] - u[0] * v[2]) * n[1]
                  + (u[0] * v[1] - u[1] * v[0]) * n[2])
    w = area / 3.0
    _accumulate(0.5 * (a + b), 0.5 * (pa + pb), w, n, VA, VB, oA, oB, chi, mu, vc, acc)
    _accumulate(0.5 * (b + c), 0.5 * (pb + pc), w, n, VA, VB, oA, oB, chi, mu, vc, acc)
    _accumulate(0.5 * (c + a), 0.5 * (pc + pa), w, n, VA, VB, oA, oB, chi, mu, vc, acc)


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
