"""The velocity-level integrator (docs/model.md §5.3-5.4; M22 IV).

Fixed step δt. Each step: the scene's point contacts at the step's start
(:func:`~fieldgen.runtime.dynamics.point_contacts.scene_contacts`), the free motion of every
dynamic body, then the next-step velocities. Compliant contacts, alone or with the rigid
contacts of a reached rigid core (D 5.1.2), are solved by the convex minimisation of
:mod:`fieldgen.runtime.dynamics.convex_step`. Steps that contain rigid point contacts
between two rigid geometries (``rigid_contact.mesh_contacts``) go to ``time_stepping.step``
instead (Stewart–Trinkle LCP by Lemke, exact non-penetration, ray termination reported as an
error rather than a silent tunnel). Poses are then advanced with the new velocities.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numba as nb
import numpy as np

from fieldgen.progress import Progress
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.convex_step import (
    DEFAULT_STICTION_VELOCITY,
    contact_frames,
    solve_compliant_step,
    solve_with_rigid_rows,
)
from fieldgen.runtime.dynamics.fast_motion import extents, warn_fast_motion
from fieldgen.runtime.dynamics.point_contacts import PointContacts, margin_shortfalls, scene_contacts
from fieldgen.runtime.dynamics.recording import Recorder, SimulationResult
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState, integrate_pose, quaternion_to_matrix
from fieldgen.runtime.dynamics.time_stepping import WORLD, PointContact
from fieldgen.runtime.dynamics.time_stepping import step as lcp_step
from fieldgen.runtime.dynamics.warnings import set_time

#: a step's rigid-contact searches: the first at the bodies' speed, more when the solution outran it
MAX_MARGIN_ATTEMPTS = 4


def dynamic_indices(scene: Scene) -> list[int]:
    """Scene indices of the dynamic bodies (the unknowns of a step, in this order)."""
    return [i for i, b in enumerate(scene.bodies) if b.kind == "dynamic"]


def scheduled_twist(body, t: float) -> np.ndarray:
    """The twist [v, ω] a kinematic body follows at ``t`` (zero for other bodies)."""
    if body.kind == "kinematic":
        return body.motion(t)
    return np.zeros(6)


def jacobians(scene, states, dyn_index, contacts: PointContacts, frames, t):
    """J (n_c, 3, 6n) and the kinematic bias (n_c, 3) in the contact frames."""
    nb_ = len(scene.bodies)
    column = np.full(nb_, -1, np.int64)
    for b, k in dyn_index.items():
        column[b] = k
    origin = np.array([s.position for s in states], dtype=np.float64).reshape(nb_, 3)
    twist = np.array([scheduled_twist(body, t) for body in scene.bodies], dtype=np.float64).reshape(nb_, 6)
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


def free_motion(scene: Scene, states: list[RigidBodyState], dyn: list[int], t: float, dt: float):
    """The mass matrix M (6n × 6n, block diagonal) and free-motion velocities v* of the dynamic
    bodies ``dyn``: ``M_i v* = M_i v + δt (m g + f, −ω × I_w ω + τ)`` block by block."""
    n = len(dyn)
    M = np.zeros((6 * n, 6 * n))
    v_star = np.zeros(6 * n)
    for k, b in enumerate(dyn):
        # M is block diagonal (m I3, I_w): the linear part is divided by m, the angular one solved 3 × 3
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
    return M, v_star


@dataclass
class StepSolution:
    """The next-step velocities of one set of point contacts: ``velocity`` (6n,), world
    ``impulses`` on B (n_c, 3), the ``solver`` used and its iteration count."""

    velocity: np.ndarray
    impulses: np.ndarray
    solver: str
    iterations: int


def solve_step(scene: Scene, states, dyn_index: dict, contacts: PointContacts, M, v_star, v_prev, t: float,
               dt: float, stiction_velocity: float, n_directions: int) -> tuple[StepSolution, float]:
    """Next-step velocities with ``contacts``: the LCP when they include rigid contacts between
    rigid geometries, else the convex step (with hard rows for a reached rigid core). Returns
    the solution and the wall time at which assembly ended and the solve began."""
    rigid = contacts.rigid
    if np.any(rigid) and not np.any(contacts.core):
        assembled = time.perf_counter()
        v, impulses, iterations = lcp_fallback(scene, states, dyn_index, contacts, dt, t, n_directions)
        return StepSolution(v, impulses, "lemke", iterations), assembled
    frames = pair_friction_planes(contact_frames(contacts.normal), contacts) if contacts.n else np.zeros((0, 3, 3))
    J, bias = jacobians(scene, states, dyn_index, contacts, frames, t)
    assembled = time.perf_counter()
    solve = solve_compliant_step if not np.any(rigid) else solve_with_rigid_rows   # core reached
    result = solve(M, v_star, J, bias, contacts.phi0, contacts.stiffness,
                   contacts.dissipation, contacts.mu, dt,
                   stiction_velocity=stiction_velocity, initial_velocity=v_prev)
    impulses = np.einsum("ck,ckj->cj", result.impulses, frames) if contacts.n else np.zeros((0, 3))
    solver = "newton" if solve is solve_compliant_step else "newton+rigid"
    return StepSolution(result.velocity, impulses, solver, result.newton_iterations), assembled


#: a pair's compliant contacts share a friction plane when their net normal force is at least this
#: share of the sum of their normal forces (else, e.g. a peg held from opposite sides, each keeps its own)
SHARED_PLANE_SHARE = 0.5


def pair_friction_planes(frames: np.ndarray, contacts: PointContacts) -> np.ndarray:
    """``frames`` (rows t1, t2, n per contact) with the tangent rows of each pair's compliant
    contacts replaced by those of the pair's net normal force direction (docs/model.md §5.3):
    slip is measured in the pair's contact plane, so a body pressed into a curved patch (whose
    polygons are tilted) has no slip from its normal approach, and friction cannot hold it
    off the field's balance. Rigid rows keep their own frames."""
    slot, net, total = _pair_net_normals(contacts.body_a.astype(np.int64), contacts.body_b.astype(np.int64),
                                         np.ascontiguousarray(contacts.stiffness, dtype=np.float64),
                                         np.ascontiguousarray(contacts.phi0, dtype=np.float64),
                                         np.ascontiguousarray(contacts.normal, dtype=np.float64))
    size = np.sqrt(np.einsum("ij,ij->i", net, net))
    shared = size > SHARED_PLANE_SHARE * total
    if not np.any(shared):
        return frames
    planes = contact_frames(np.where(shared[:, None], net, 1.0) / np.where(shared, size, 1.0)[:, None])
    out = frames.copy()
    _set_tangent_rows(out, planes, slot, shared, np.ascontiguousarray(contacts.stiffness, dtype=np.float64))
    return out


@nb.njit(cache=True)
def _set_tangent_rows(out, planes, slot, shared, stiffness):
    """Rows t1, t2 of each compliant contact whose pair shares a plane: that plane's, in place."""
    for c in range(out.shape[0]):
        q = slot[c]
        if shared[q] and np.isfinite(stiffness[c]):
            for r in range(2):
                for i in range(3):
                    out[c, r, i] = planes[q, r, i]


@nb.njit(cache=True)
def _pair_net_normals(body_a, body_b, stiffness, phi0, normal):
    """Each contact's pair slot, and per slot the net normal force direction Σ k (−φ0)₊ n̂ and
    the sum of k (−φ0)₊ over its compliant contacts (rigid rows count for neither)."""
    n = stiffness.shape[0]
    slot = np.empty(n, np.int64)
    seen_a = np.empty(n, np.int64)
    seen_b = np.empty(n, np.int64)
    net = np.zeros((n, 3))
    total = np.zeros(n)
    m = 0
    last = -1
    for c in range(n):
        if not (last >= 0 and seen_a[last] == body_a[c] and seen_b[last] == body_b[c]):
            last = -1
            for q in range(m):
                if seen_a[q] == body_a[c] and seen_b[q] == body_b[c]:
                    last = q
                    break
            if last < 0:
                seen_a[m], seen_b[m] = body_a[c], body_b[c]
                last = m
                m += 1
        slot[c] = last
        if np.isfinite(stiffness[c]) and phi0[c] < 0.0:
            w = stiffness[c] * -phi0[c]
            total[last] += w
            for i in range(3):
                net[last, i] += w * normal[c, i]
    return slot, net[:m].copy(), total[:m].copy()


def advance(scene: Scene, states: list[RigidBodyState], dyn_index: dict, v: np.ndarray, t: float,
            dt: float) -> list[RigidBodyState]:
    """The states after the step: dynamic bodies with velocities ``v``, kinematic ones with
    their scheduled twist at ``t``, poses integrated over ``dt``; fixed bodies unchanged."""
    new_states = []
    for b, (body, s) in enumerate(zip(scene.bodies, states)):
        if body.kind == "dynamic":
            k = dyn_index[b]
            moved = RigidBodyState(s.position, s.quaternion, v[6 * k:6 * k + 3], v[6 * k + 3:6 * k + 6])
        elif body.kind == "kinematic":
            tw = scheduled_twist(body, t)
            moved = RigidBodyState(s.position, s.quaternion, tw[:3], tw[3:])
        else:
            new_states.append(s)
            continue
        new_states.append(integrate_pose(moved, dt))
    return new_states


def velocity_step(scene: Scene, states: list[RigidBodyState], t: float, dt: float, *,
                  stiction_velocity: float = DEFAULT_STICTION_VELOCITY, n_directions: int = 8,
                  keep_surfaces: bool = False) -> tuple[list[RigidBodyState], StepInfo]:
    """One velocity-level step (M22 IV) from ``states`` at time ``t``: (new states, info)."""
    clock = time.perf_counter
    dyn = dynamic_indices(scene)
    dyn_index = {b: k for k, b in enumerate(dyn)}
    M, v_star = free_motion(scene, states, dyn, t, dt)
    v_prev = np.concatenate([np.concatenate([states[b].velocity, states[b].angular_velocity]) for b in dyn]) \
        if dyn else np.zeros(0)
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
        solution, t2_ = solve_step(scene, states, dyn_index, contacts, M, v_star, v_prev, t, dt, stiction_velocity,
                                   n_directions)
        v = solution.velocity
        seconds += (t1_ - t0_, t2_ - t1_, clock() - t2_)
        if not contacts.margins:
            break
        twists = np.array([v[6 * dyn_index[b]:6 * dyn_index[b] + 6] if body.kind == "dynamic"
                           else scheduled_twist(body, t) for b, body in enumerate(scene.bodies)]).reshape(-1, 6)
        short = margin_shortfalls(contacts, twists, dt)
        if not short:
            break
        speeds.update(short)
    t3 = clock()
    new_states = advance(scene, states, dyn_index, v, t, dt)
    return new_states, StepInfo(contacts.n, int(contacts.rigid.sum()), solution.solver, solution.iterations,
                                solution.impulses, contacts, (*seconds.tolist(), clock() - t3), attempt + 1)


def lcp_fallback(scene, states, dyn_index, contacts: PointContacts, dt, t, n_directions):
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
                tw = scheduled_twist(scene.bodies[body], t)
                prescribed += sign * (tw[:3] + np.cross(tw[3:], contacts.position[c] - states[body].position))
        point.append(PointContact(a, b, contacts.position[c], contacts.normal[c], contacts.phi0[c],
                                  contacts.stiffness[c], contacts.dissipation[c], contacts.mu[c], prescribed))
    ext = np.array([scene.bodies[b].wrench(t) if scene.bodies[b].wrench is not None else np.zeros(6)
                    for b in dyn]).reshape(len(dyn), 6)
    result = lcp_step(lcp_states, masses, point, dt, scene.gravity, ext, n_directions=n_directions)
    v = np.concatenate([np.concatenate([s.velocity, s.angular_velocity]) for s in result.states]) if dyn else np.zeros(0)
    return v, result.impulses, result.lcp.pivots


def run_velocity(scene: Scene, n_steps: int, dt: float, record_every: int, record_surfaces: bool,
                 progress: Progress, stiction_velocity: float, stop) -> SimulationResult:
    """``simulate(..., integrator="velocity")``: ``n_steps`` steps of :func:`velocity_step`, every
    ``record_every``-th recorded (and the last), with the steps and records where a rigid core
    carried load (D 5.1.2)."""
    states = [replace(b.state) for b in scene.bodies]
    rec = Recorder(scene, record_surfaces)
    contacts, core_steps, record_steps = [], [], []
    stages = np.zeros(4)
    sizes = extents(scene)
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
        warn_fast_motion(scene, states, dt, sizes)
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
