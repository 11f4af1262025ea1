"""The bodies a simulation integrates: a :class:`Scene` of :class:`SceneBody` and gravity.

A :class:`Scene` is plain data: a list of :class:`SceneBody` and the gravity vector. Each
body has a contact ``geometry`` (a runtime :class:`CompliantGeometry` or :class:`RigidGeometry`, in
its own mesh frame), a ``kind``:

- ``"dynamic"``: moves under gravity, contact and external wrenches; needs ``mass``;
- ``"fixed"``: never moves (the world);
- ``"kinematic"``: moves with a prescribed twist ``motion`` (a :class:`Schedule` of
  ``[v, ω]``), unaffected by forces (a gripper finger driven by a position controller).

States follow ``rigid_body``: ``position`` is the centre of mass in the world (for fixed
and kinematic bodies the mesh origin), the quaternion maps body to world, velocities are
world-frame. ``wrench`` is an external ``[force, torque about the centre of mass]``
schedule (world) on a dynamic body. Scene files are read into these by
:mod:`fieldgen.runtime.scene.load`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from fieldgen.errors import InputError, OptionError
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.surface import FACE_RULES
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState

KINDS = ("dynamic", "fixed", "kinematic")


@dataclass
class Schedule:
    """A piecewise-constant 6-vector of time: ``values[i]`` holds from ``times[i]`` on
    (before ``times[0]``: zero)."""

    times: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        self.times = np.asarray(self.times, dtype=np.float64).reshape(-1)
        self.values = np.asarray(self.values, dtype=np.float64).reshape(len(self.times), 6)
        if len(self.times) and np.any(np.diff(self.times) < 0):
            raise OptionError(f"schedule times must increase, got {self.times.tolist()}",
                              fix="sort the rows of the schedule by time")

    @classmethod
    def constant(cls, value) -> "Schedule":
        return cls(np.zeros(1), np.asarray(value, dtype=np.float64).reshape(1, 6))

    @classmethod
    def from_rows(cls, rows, *, path=None, what="schedule") -> "Schedule":
        table = np.asarray(rows, dtype=np.float64)
        if table.ndim == 1 and table.size == 6:
            return cls.constant(table)
        if table.ndim != 2 or table.shape[1] != 7:
            raise InputError(f"{what} must be 6 numbers or rows [t, x, y, z, rx, ry, rz]; got shape "
                             f"{table.shape}", path=path, fix="write e.g. [[0, 0, 0, 1, 0, 0, 0]]")
        return cls(table[:, 0], table[:, 1:])

    def __call__(self, t: float) -> np.ndarray:
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return np.zeros(6) if i < 0 else self.values[i].copy()

    def breakpoints(self) -> np.ndarray:
        return self.times.copy()


@dataclass
class SceneBody:
    """One body of a scene (see the module docstring for the fields)."""

    name: str
    geometry: CompliantGeometry | RigidGeometry
    kind: str = "dynamic"
    mass: MassProperties | None = None
    state: RigidBodyState = field(default_factory=RigidBodyState)
    wrench: Schedule | None = None
    motion: Schedule | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise OptionError(f"body {self.name!r} has kind {self.kind!r}", fix=f"use one of {KINDS}")
        if self.kind == "dynamic":
            if self.mass is None or not self.mass.mass > 0:
                raise OptionError(f"dynamic body {self.name!r} has no positive mass",
                                  fix="give mass (and inertia) or a density")
        else:
            self.mass = None
        if self.kind == "kinematic" and self.motion is None:
            self.motion = Schedule.constant(np.concatenate([self.state.velocity, self.state.angular_velocity]))

    @property
    def centre_of_mass(self) -> np.ndarray:
        """Centre of mass in the mesh frame (the mesh origin for fixed/kinematic bodies)."""
        return np.zeros(3) if self.mass is None else self.mass.centre_of_mass

    def pose(self, state: RigidBodyState | None = None) -> np.ndarray:
        """X_WB (4, 4) of the mesh frame: ``x_W = R x_B + (p − R c)``."""
        s = self.state if state is None else state
        R = s.rotation
        X = np.empty((4, 4))
        X[:3, :3] = R
        X[:3, 3] = s.position if self.mass is None else s.position - R @ self.mass.centre_of_mass
        X[3] = (0.0, 0.0, 0.0, 1.0)
        return X


@dataclass
class Scene:
    """Bodies and gravity; ``name`` labels outputs. ``face_rule`` is the contact surfaces'
    face rule: ``"all"`` (every polygon, the default) or ``"drake"`` (Drake's 5π/8 filters; see
    :func:`fieldgen.runtime.contact.surface.compute_contact_surface`)."""

    bodies: list[SceneBody]
    gravity: np.ndarray = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    name: str = "scene"
    face_rule: str = "all"

    def __post_init__(self):
        if self.face_rule not in FACE_RULES:
            raise OptionError(f"face_rule {self.face_rule!r} is not one of {FACE_RULES}",
                              fix='use face_rule = "all" (every polygon) or "drake" (Drake\'s rule)')
        self.gravity = np.asarray(self.gravity, dtype=np.float64).reshape(3)
        names = [b.name for b in self.bodies]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise OptionError(f"body names must be unique; repeated: {duplicated}", fix="rename the bodies")

    def body(self, name: str) -> SceneBody:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(name)


def replace_state(body: SceneBody, **changes) -> SceneBody:
    """A copy of ``body`` with its state fields replaced (``velocity=...`` etc.)."""
    return dataclasses.replace(body, state=dataclasses.replace(body.state, **changes))
