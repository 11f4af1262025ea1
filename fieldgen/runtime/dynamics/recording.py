"""What a simulation records: :class:`SimulationResult`, and the packing of body states into
the ODE vector of the continuous integrators (docs/model.md §5)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from fieldgen.errors import BuildError
from fieldgen.options import MAX_SPIN, SPEED_OF_LIGHT
from fieldgen.runtime.contact.pose import MAX_POSITION
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState, quaternion_to_matrix


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
    #: continuous integrators: right-hand-side evaluations of the run
    rhs_evaluations: int = 0
    #: friction model of the run: "regularised" (D 5.3) or "compliant" (D 6)
    friction: str = "regularised"
    #: compliant friction: per record, one row per pair (status, spring and friction wrenches, energy)
    tangential: list | None = None
    #: compliant friction: each pair's spring state s in its B frame at the end, by body names
    final_springs: dict | None = None

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


def check_finite(result: SimulationResult, path=None) -> None:
    """Refuse (BuildError, exit 1) a run whose recorded states are not all finite: a mass, a
    gravity, a speed or a force so large that a body's state overflowed, or a step that diverged.
    Its trajectories would be NaN and infinity, a wrong answer that looks like a result. So is a
    run in which a body ends up where no scene may place one (past :data:`MAX_POSITION` from the
    origin, where its coordinates no longer resolve its contacts; a body whose mesh puts its centre
    of mass there from the start, warned about as it is read, is left to it) or moving faster than a
    scene's velocities may be (light's speed, :data:`MAX_SPIN`): finite numbers, none of them physical."""
    if not len(result.times):
        return
    records = [result.positions, result.quaternions, result.velocities, result.angular_velocities]
    far = np.abs(result.positions).max(axis=2) > MAX_POSITION
    diverged = ("the simulation diverged", "check the scene's masses, inertias, gravity, initial velocities and "
                "wrenches (an overflow), or take a smaller dt (an unstable step); nothing was written")
    left = ("the simulation left the range a scene may hold", "check the scene's masses, inertias, gravity, "
            "initial velocities and wrenches, the duration (a free fall of hours) and dt (an unstable step); "
            "nothing was written")
    checks = [(~np.all([np.isfinite(a).all(axis=2) for a in records], axis=0),
               "has a non-finite position, orientation or velocity", diverged),
              (far & ~far[:1], f"is more than {MAX_POSITION:g} m from the origin", left),   # a huge mesh's starts there
              (np.abs(result.velocities).max(axis=2) > SPEED_OF_LIGHT, "moves faster than light", left),
              (np.abs(result.angular_velocities).max(axis=2) > MAX_SPIN, f"spins faster than {MAX_SPIN:g} rad/s", left)]
    for out, what, (headline, fix) in checks:
        if out.any():
            record, body = (int(k) for k in np.argwhere(out)[0])
            raise BuildError(f"{headline}: body {result.body_names[body]!r} {what} at t = "
                             f"{result.times[record]:.6g} s", path=path, fix=fix)


class Recorder:
    """The records of a run: time, body states and (when asked) contact surfaces."""

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


def pack_states(scene: Scene, states: list[RigidBodyState]) -> np.ndarray:
    """The ODE vector of the non-fixed bodies: [p, q, v, ω] (13 each, scene order)."""
    return np.concatenate([np.concatenate([s.position, s.quaternion, s.velocity, s.angular_velocity])
                           for b, s in zip(scene.bodies, states) if b.kind != "fixed"])


def unpack_states(scene: Scene, y: np.ndarray, base_states: list[RigidBodyState], t: float) -> list[RigidBodyState]:
    """Body states of the ODE vector ``y`` (quaternions normalised); fixed bodies keep
    ``base_states``, kinematic ones take their scheduled twist at ``t``."""
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


def body_rotation(result: SimulationResult, record: int, body: int) -> np.ndarray:
    """Rotation matrix of ``body`` at record ``record``."""
    return quaternion_to_matrix(result.quaternions[record, body])
