"""Rigid poses X_WB (frame B in the world W) as 4x4 homogeneous transforms.

Every runtime function accepts either a :class:`Pose` or a (4, 4) array; :func:`as_matrix`
normalises both. Roll-pitch-yaw are fixed (extrinsic) X-Y-Z axes in degrees:
``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

#: The farthest a body may be placed from the origin, m (a scene's positions, ``contact``'s poses):
#: doubles there are 1.2e-7 m apart, finer than any contact needs; at 1e17 m they are 16 m apart, and
#: two bodies a centimetre apart would be placed metres off, their force wrong without a word.
MAX_POSITION = 1e9


def rotation_from_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """R = Rz(yaw)·Ry(pitch)·Rx(roll), angles in degrees (fixed X-Y-Z axes)."""
    r, p, y = np.radians([roll, pitch, yaw])
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    rx = np.array([[1.0, 0.0, 0.0], [0.0, cr, -sr], [0.0, sr, cr]])
    ry = np.array([[cp, 0.0, sp], [0.0, 1.0, 0.0], [-sp, 0.0, cp]])
    rz = np.array([[cy, -sy, 0.0], [sy, cy, 0.0], [0.0, 0.0, 1.0]])
    return rz @ ry @ rx


@dataclass(frozen=True)
class Pose:
    """A rigid transform: ``x_W = rotation @ x_B + translation``."""

    rotation: np.ndarray = field(default_factory=lambda: np.eye(3))
    translation: np.ndarray = field(default_factory=lambda: np.zeros(3))

    @classmethod
    def from_xyz_rpy(cls, x: float = 0.0, y: float = 0.0, z: float = 0.0,
                     roll: float = 0.0, pitch: float = 0.0, yaw: float = 0.0) -> "Pose":
        """Translation in m, roll/pitch/yaw in degrees about fixed X, Y, Z."""
        return cls(rotation_from_rpy(roll, pitch, yaw), np.array([x, y, z], dtype=np.float64))

    @classmethod
    def from_matrix(cls, matrix) -> "Pose":
        m = as_matrix(matrix)
        return cls(m[:3, :3].copy(), m[:3, 3].copy())

    @property
    def matrix(self) -> np.ndarray:
        m = np.eye(4)
        m[:3, :3] = self.rotation
        m[:3, 3] = self.translation
        return m

    def inverse(self) -> "Pose":
        rt = np.asarray(self.rotation).T
        return Pose(rt, -rt @ np.asarray(self.translation))

    def __matmul__(self, other: "Pose") -> "Pose":
        return Pose.from_matrix(self.matrix @ as_matrix(other))


def cross3(a, b) -> np.ndarray:
    """a × b of two 3-vectors: the products and differences of ``np.cross`` (bit-identical)
    without its overhead for a single pair."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


@nb.njit(cache=True)
def cross_rows(a, b):
    """Row-wise a × b of two (n, 3) arrays: the products and differences of ``np.cross``
    (bit-identical; numba does not contract them into fused multiply-adds) without its per-call
    overhead, which dominated on the few rows of a contact surface."""
    n = a.shape[0]
    out = np.empty((n, 3))
    for i in range(n):
        out[i, 0] = a[i, 1] * b[i, 2] - a[i, 2] * b[i, 1]
        out[i, 1] = a[i, 2] * b[i, 0] - a[i, 0] * b[i, 2]
        out[i, 2] = a[i, 0] * b[i, 1] - a[i, 1] * b[i, 0]
    return out


def as_matrix(pose) -> np.ndarray:
    """A (4, 4) float64 copy of ``pose`` (a Pose, a 4x4 array, or None for the identity)."""
    if pose is None:
        return np.eye(4)
    if isinstance(pose, Pose):
        return pose.matrix
    m = np.array(pose, dtype=np.float64)
    if m.shape != (4, 4):
        raise ValueError(f"a pose must be a Pose or a 4x4 homogeneous matrix, got shape {m.shape}")
    return m


#: How far a pose's 3×3 block may be from a rotation (max |RᵀR − I|): a matrix printed to five
#: significant digits is within it; what passes is projected onto the nearest rotation.
ROTATION_TOLERANCE = 1e-4
#: Below this a rotation is taken as given (an exact one keeps its bits).
ROUNDED = 1e-12


def rigid_problem(X: np.ndarray) -> str | None:
    """What keeps the 4×4 ``X`` from placing a body (numbers not finite; a translation past
    :data:`MAX_POSITION`; a 3×3 block more than :data:`ROTATION_TOLERANCE` from orthonormal, or
    mirroring; a last row not 0 0 0 1), else None."""
    if not np.all(np.isfinite(X)):
        return "has numbers that are not finite"
    far = float(np.abs(X[:3, 3]).max())
    if far > MAX_POSITION:
        return (f"places the body {far:g} m from the origin, past {MAX_POSITION:g} m: there its coordinates are "
                "rounded to more than its size and the force would be wrong (only the relative pose matters)")
    R = X[:3, :3]
    off = float(np.abs(R.T @ R - np.eye(3)).max())
    if off <= ROTATION_TOLERANCE and np.linalg.det(R) > 0 and np.array_equal(X[3], [0.0, 0.0, 0.0, 1.0]):
        return None
    return (f"is not a rigid transform (its 3×3 block is {off:.2g} from orthonormal, more than "
            f"{ROTATION_TOLERANCE:g}, or mirrors, or its last row is not 0 0 0 1): it would stretch or mirror the mesh")


def nearest_rigid(X: np.ndarray) -> np.ndarray:
    """``X`` (passed by :func:`rigid_problem`) with a rounded rotation replaced by the nearest one;
    an exact one (within :data:`ROUNDED`) keeps its bits."""
    R = X[:3, :3]
    if float(np.abs(R.T @ R - np.eye(3)).max()) <= ROUNDED:
        return X
    u, _, vt = np.linalg.svd(R)
    X = X.copy()
    X[:3, :3] = u @ vt
    return X


def rigid_matrix(pose, what: str) -> np.ndarray:
    """:func:`as_matrix` of a pose a query is given, ValueError naming ``what`` unless it places a
    body (:func:`rigid_problem`): a NaN or a scaled matrix would place it nowhere, or stretch it,
    and the query would answer zero force without a word."""
    X = as_matrix(pose)
    problem = rigid_problem(X)
    if problem is not None:
        raise ValueError(f"{what} {problem}; give a Pose (Pose.from_xyz_rpy(x, y, z, roll, pitch, yaw)) or a 4x4 "
                         "rigid transform")
    return nearest_rigid(X)


def transform_points(pose, points: np.ndarray) -> np.ndarray:
    """Apply ``pose`` to (n, 3) points with an explicit per-row sum (bit-identical for any thread count)."""
    m = as_matrix(pose)
    p = np.asarray(points, dtype=np.float64)
    out = np.empty_like(p)
    for i in range(3):
        out[:, i] = p[:, 0] * m[i, 0] + p[:, 1] * m[i, 1] + p[:, 2] * m[i, 2] + m[i, 3]
    return out


def rotate_vectors(pose, vectors: np.ndarray) -> np.ndarray:
    """Apply only the rotation of ``pose`` to (n, 3) vectors."""
    m = as_matrix(pose)
    v = np.asarray(vectors, dtype=np.float64)
    out = np.empty_like(v)
    for i in range(3):
        out[:, i] = v[:, 0] * m[i, 0] + v[:, 1] * m[i, 1] + v[:, 2] * m[i, 2]
    return out


@dataclass(frozen=True)
class SpatialVelocity:
    """Velocity of a body frame, world frame: ``linear`` (m/s, of the frame's origin) and
    ``angular`` (rad/s). As a 6-vector it is always ``[linear; angular]`` (:attr:`vector`), the
    order of every public surface of fieldgen (CLI ``vx,vy,vz,wx,wy,wz``, scene files, CSV)."""

    linear: np.ndarray = field(default_factory=lambda: np.zeros(3))
    angular: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def __post_init__(self):
        for name in ("linear", "angular"):
            value = np.array(getattr(self, name), dtype=np.float64)
            if value.shape != (3,) or not np.all(np.isfinite(value)):
                raise ValueError(f"SpatialVelocity.{name} must be 3 finite numbers, got {getattr(self, name)!r}")
            object.__setattr__(self, name, value)

    @property
    def vector(self) -> np.ndarray:
        """``[vx, vy, vz, wx, wy, wz]`` (linear first)."""
        return np.concatenate([self.linear, self.angular])


def as_spatial_velocity(value, name: str = "velocity") -> SpatialVelocity:
    """``value`` as a :class:`SpatialVelocity` (None = at rest). A bare 6-vector is refused: it
    could be read as ``[v; ω]`` or ``[ω; v]``; name the parts instead."""
    if value is None:
        return SpatialVelocity()
    if isinstance(value, SpatialVelocity):
        return value
    raise TypeError(f"{name} must be a SpatialVelocity(linear=[vx, vy, vz], angular=[wx, wy, wz]) or None, "
                    f"got {type(value).__name__}; a bare 6-vector is ambiguous ([v; w] or [w; v])")
