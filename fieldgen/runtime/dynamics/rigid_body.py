"""Rigid-body state, mass properties and spatial kinematics (docs/model.md §5.1).

Conventions used by every dynamics module:

- A body's state is its centre-of-mass ``position`` (3,), its orientation as a unit
  ``quaternion`` (4,) in (w, x, y, z) order mapping body to world, and its
  ``velocity`` / ``angular_velocity`` (3,) both expressed in the **world** frame.
- Generalised velocities of a body are stacked as ``[velocity, angular_velocity]``
  (6,), so a system of n bodies has 6n velocities (T07 Stewart-Trinkle size).
- Inertia in ``MassProperties`` is about the centre of mass, in the body frame;
  ``world_inertia`` rotates it: ``I_w = R I R^T``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from fieldgen.errors import InputError
from fieldgen.runtime.contact.pose import cross3
from fieldgen.surface.topology import edge_use


@dataclass
class RigidBodyState:
    """Pose and twist of one rigid body (world frame, quaternion w,x,y,z)."""

    position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    quaternion: np.ndarray = field(default_factory=lambda: np.array([1.0, 0.0, 0.0, 0.0]))
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular_velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self):
        self.position = np.asarray(self.position, dtype=np.float64).reshape(3)
        self.quaternion = np.asarray(self.quaternion, dtype=np.float64).reshape(4)
        self.velocity = np.asarray(self.velocity, dtype=np.float64).reshape(3)
        self.angular_velocity = np.asarray(self.angular_velocity, dtype=np.float64).reshape(3)

    @property
    def rotation(self) -> np.ndarray:
        """Body-to-world rotation matrix (3, 3)."""
        return quaternion_to_matrix(self.quaternion)

    @property
    def twist(self) -> np.ndarray:
        """Generalised velocity ``[velocity, angular_velocity]`` (6,)."""
        return np.concatenate([self.velocity, self.angular_velocity])


@dataclass
class MassProperties:
    """Mass (kg) and inertia (kg m^2, body frame, about the centre of mass).

    ``centre_of_mass`` is where the centre of mass lies in the frame the geometry
    was given in (mesh coordinates); bodies are simulated about it.
    """

    mass: float
    inertia: np.ndarray
    centre_of_mass: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self):
        self.mass = float(self.mass)
        self.inertia = np.asarray(self.inertia, dtype=np.float64).reshape(3, 3)
        self.centre_of_mass = np.asarray(self.centre_of_mass, dtype=np.float64).reshape(3)


# --------------------------------------------------------------------------- quaternions

def quaternion_multiply(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton product ``p ⊗ q`` of (w, x, y, z) quaternions (scalar arithmetic: called
    every step on 4-vectors, where np.cross/np.concatenate overhead dominates)."""
    pw, px, py, pz = (float(c) for c in p)
    qw, qx, qy, qz = (float(c) for c in q)
    return np.array([pw * qw - (px * qx + py * qy + pz * qz),
                     pw * qx + qw * px + (py * qz - pz * qy),
                     pw * qy + qw * py + (pz * qx - px * qz),
                     pw * qz + qw * pz + (px * qy - py * qx)])


def quaternion_to_matrix(q: np.ndarray) -> np.ndarray:
    """Rotation matrix of a (w, x, y, z) quaternion (normalised first)."""
    w, x, y, z = (float(c) for c in q)
    r = math.sqrt(w * w + x * x + y * y + z * z)
    w, x, y, z = w / r, x / r, y / r, z / r
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def quaternion_from_rotation_vector(rotation_vector: np.ndarray) -> np.ndarray:
    """Unit quaternion of a rotation by ``|r|`` radians about ``r/|r|`` (exponential map)."""
    rx, ry, rz = (float(c) for c in rotation_vector)
    angle = math.sqrt(rx * rx + ry * ry + rz * rz)
    if angle < 1e-12:
        # second-order series keeps the map smooth through zero
        w, x, y, z = 1.0 - angle * angle / 8.0, 0.5 * rx, 0.5 * ry, 0.5 * rz
        norm = math.sqrt(w * w + x * x + y * y + z * z)
        return np.array([w / norm, x / norm, y / norm, z / norm])
    s = math.sin(angle / 2) / angle
    return np.array([math.cos(angle / 2), s * rx, s * ry, s * rz])


def skew(v: np.ndarray) -> np.ndarray:
    """Cross-product matrix: ``skew(a) @ b == cross(a, b)``."""
    x, y, z = v
    return np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])


# --------------------------------------------------------------------------- spatial helpers

def world_inertia(mass_properties: MassProperties, quaternion: np.ndarray) -> np.ndarray:
    """Inertia about the centre of mass expressed in world: ``R I R^T``."""
    R = quaternion_to_matrix(quaternion)
    return R @ mass_properties.inertia @ R.T


def spatial_mass_matrix(mass_properties: MassProperties, quaternion: np.ndarray) -> np.ndarray:
    """6x6 block ``diag(m I3, I_world)`` acting on ``[velocity, angular_velocity]``."""
    M = np.zeros((6, 6))
    M[:3, :3] = mass_properties.mass * np.eye(3)
    M[3:, 3:] = world_inertia(mass_properties, quaternion)
    return M


def body_to_world(state: RigidBodyState, points_body: np.ndarray) -> np.ndarray:
    """Map points given relative to the centre of mass in the body frame to world."""
    return np.asarray(points_body, dtype=np.float64) @ state.rotation.T + state.position


def point_velocity(state: RigidBodyState, points_world: np.ndarray) -> np.ndarray:
    """World velocity of material points of the body at world positions: ``v + ω × r``."""
    r = np.asarray(points_world, dtype=np.float64) - state.position
    return state.velocity + np.cross(state.angular_velocity, r)


def wrench_about_centre(state: RigidBodyState, points_world: np.ndarray,
                        forces_world: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Net (force, torque about the centre of mass) of point forces on the body."""
    points = np.atleast_2d(points_world)
    forces = np.atleast_2d(forces_world)
    torque = np.cross(points - state.position, forces).sum(axis=0)
    return forces.sum(axis=0), torque


def point_jacobian(state: RigidBodyState, point_world: np.ndarray,
                   direction: np.ndarray) -> np.ndarray:
    """Row (6,) ``J`` with ``J @ [v, ω] = direction · (v + ω × r)`` at a world point."""
    r = np.asarray(point_world, dtype=np.float64) - state.position
    d = np.asarray(direction, dtype=np.float64)
    return np.concatenate([d, np.cross(r, d)])


# --------------------------------------------------------------------------- dynamics

def newton_euler_rhs(state: RigidBodyState, mass_properties: MassProperties,
                     force: np.ndarray | None = None, torque: np.ndarray | None = None):
    """Time derivative of the state under a force and a torque about the centre (world).

    Returns ``(dposition, dquaternion, dvelocity, dangular_velocity)`` with
    ``dq = ½ [0, ω] ⊗ q`` and Euler's equation ``I_w ω̇ = τ − ω × I_w ω``.
    """
    force = np.zeros(3) if force is None else np.asarray(force, dtype=np.float64)
    torque = np.zeros(3) if torque is None else np.asarray(torque, dtype=np.float64)
    I_w = world_inertia(mass_properties, state.quaternion)
    w = state.angular_velocity
    dv = force / mass_properties.mass
    dw = np.linalg.solve(I_w, torque - cross3(w, I_w @ w))
    dq = 0.5 * quaternion_multiply(np.concatenate([[0.0], w]), state.quaternion)
    return state.velocity.copy(), dq, dv, dw


def gyroscopic_torque(state: RigidBodyState, mass_properties: MassProperties) -> np.ndarray:
    """The bias torque ``−ω × I_w ω`` (world), kept explicit in time stepping."""
    I_w = world_inertia(mass_properties, state.quaternion)
    w = state.angular_velocity
    wx, wy, wz = float(w[0]), float(w[1]), float(w[2])
    lx, ly, lz = (float(c) for c in I_w @ w)
    return np.array([-(wy * lz - wz * ly), -(wz * lx - wx * lz), -(wx * ly - wy * lx)])


def integrate_pose(state: RigidBodyState, dt: float) -> RigidBodyState:
    """Advance the pose with the state's (next-step) twist held over ``dt``.

    Position by ``x + dt v``; orientation by the exact rotation ``exp(dt ω) ⊗ q``
    (world-frame ω), then renormalised so it stays a unit quaternion.
    """
    position, q = _integrate_pose(state.position, state.quaternion, state.velocity, state.angular_velocity,
                                  float(dt))
    return RigidBodyState(position, q, state.velocity.copy(), state.angular_velocity.copy())


@nb.njit(cache=True)
def _integrate_pose(position, quaternion, velocity, angular_velocity, dt):
    """Kernel of :func:`integrate_pose` (the same arithmetic as quaternion_from_rotation_vector
    and quaternion_multiply, in one call: it runs for every moving body every step)."""
    rx, ry, rz = dt * angular_velocity[0], dt * angular_velocity[1], dt * angular_velocity[2]
    angle = math.sqrt(rx * rx + ry * ry + rz * rz)
    if angle < 1e-12:
        pw, px, py, pz = 1.0 - angle * angle / 8.0, 0.5 * rx, 0.5 * ry, 0.5 * rz
        norm = math.sqrt(pw * pw + px * px + py * py + pz * pz)
        pw, px, py, pz = pw / norm, px / norm, py / norm, pz / norm
    else:
        sa = math.sin(angle / 2) / angle
        pw, px, py, pz = math.cos(angle / 2), sa * rx, sa * ry, sa * rz
    qw, qx, qy, qz = quaternion[0], quaternion[1], quaternion[2], quaternion[3]
    q = np.empty(4)
    q[0] = pw * qw - (px * qx + py * qy + pz * qz)
    q[1] = pw * qx + qw * px + (py * qz - pz * qy)
    q[2] = pw * qy + qw * py + (pz * qx - px * qz)
    q[3] = pw * qz + qw * pz + (px * qy - py * qx)
    r = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    sign = -1.0 if q[0] / r < 0 else 1.0    # keep a canonical hemisphere so states compare bit-for-bit
    for i in range(4):
        q[i] = sign * (q[i] / r)
    p = np.empty(3)
    for i in range(3):
        p[i] = position[i] + dt * velocity[i]
    return p, q


# --------------------------------------------------------------------------- mass properties

def _check_closed(faces: np.ndarray, path: str | None) -> None:
    """Every directed edge must be matched by its reverse (closed, consistently wound)."""
    use = edge_use(faces)
    unmatched, duplicated = use.unmatched, use.duplicates
    if unmatched or duplicated:
        raise InputError(
            f"surface is not closed and consistently wound: {unmatched} edges without a "
            f"reversed partner, {duplicated} repeated directed edges",
            path=path, fix="repair the surface into a watertight, outward-wound triangle mesh "
            "(e.g. trimesh.repair) before computing mass properties")


def mass_properties_from_mesh(vertices: np.ndarray, faces: np.ndarray, density: float, *,
                              path: str | None = None) -> MassProperties:
    """Mass, centre of mass and inertia of a solid bounded by a closed triangle surface.

    Sums signed tetrahedra from the origin to each outward-wound face (divergence
    theorem); exact for any closed polyhedron. Inertia is returned about the centre
    of mass in the mesh frame.
    """
    V = np.asarray(vertices, dtype=np.float64)
    F = np.asarray(faces, dtype=np.int64)
    if not np.isfinite(density) or density <= 0:
        raise InputError(f"density must be positive, got {density}", path=path,
                         fix="give the material density in kg/m^3")
    if F.ndim != 2 or F.shape[1] != 3 or len(F) < 4:
        raise InputError(f"need at least 4 triangles, got faces of shape {F.shape}",
                         path=path, fix="pass a closed triangle surface")
    _check_closed(F, path)
    origin = V.mean(axis=0)                 # sum tets from a nearby point: less cancellation
    W = V - origin
    a, b, c = W[F[:, 0]], W[F[:, 1]], W[F[:, 2]]
    det = np.einsum("ij,ij->i", a, np.cross(b, c))          # 6 × signed tet volume
    volume = det.sum() / 6.0
    scale = max(np.ptp(V, axis=0).max(), 1e-300)
    if not volume > 1e-12 * scale ** 3:
        raise InputError(
            f"enclosed volume is {volume:.3g} (not positive)", path=path,
            fix="wind faces so normals point outward and make sure the surface encloses a solid")
    centroid = (det[:, None] * (a + b + c)).sum(axis=0) / (24.0 * volume)
    # second moment ∫ x x^T dV of each tet (origin, a, b, c): det/120 (Σ v v^T + s s^T)
    s = a + b + c
    second = (np.einsum("i,ij,ik->jk", det, a, a) + np.einsum("i,ij,ik->jk", det, b, b)
              + np.einsum("i,ij,ik->jk", det, c, c) + np.einsum("i,ij,ik->jk", det, s, s)) / 120.0
    mass = density * volume
    covariance = density * second - mass * np.outer(centroid, centroid)
    inertia = np.trace(covariance) * np.eye(3) - covariance
    inertia = 0.5 * (inertia + inertia.T)
    return MassProperties(mass=mass, inertia=inertia, centre_of_mass=centroid + origin)


def box_mass_properties(mass: float, size: np.ndarray) -> MassProperties:
    """Closed form for a solid box of full edge lengths ``size`` (body axes)."""
    x, y, z = np.asarray(size, dtype=np.float64)
    inertia = mass / 12.0 * np.diag([y * y + z * z, x * x + z * z, x * x + y * y])
    return MassProperties(mass=mass, inertia=inertia)
