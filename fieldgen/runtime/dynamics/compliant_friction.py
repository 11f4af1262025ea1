"""The continuous (Radau) integrator with tangentially compliant friction (docs/model.md §4.7; D 6.2.4;
``--friction compliant``).

Same dynamics as the continuous integrator (:mod:`fieldgen.runtime.dynamics.continuous_integrator`:
pressure-field normal and damping tractions on the triangle representation, Newton–Euler, Radau
with error control, the same contact query, warnings and refusal of a reached rigid core),
except that friction is the spatial friction spring of :mod:`fieldgen.runtime.contact.tangential`
with exact Coulomb friction instead of the regularised law.

Contact state. Every pair of bodies that can touch (at least one dynamic, at least one
compliant) owns six ODE states ``s`` (D eq. 6.21), stored in the body frame of its second body B
(the pair's order in the scene), so the spring turns with B. The state exists from the start
at zero, so it is "created" at first touch; while the pair is apart the rate is ``−s/τ``
(6.26), so a lost contact's spring decays with τ; it is identified by the two bodies, never
by polygons, so it survives any change of the contact surface's tessellation. Only the pairs
that may touch within an output interval, or whose spring has not decayed, are integrated.

Recorded per output time and pair (``SimulationResult.tangential``): the spring wrench f_Δ,
the friction wrench f_c (both on B, force and torque about the world origin), the share of the
normal force that slides, the status (none, stick, slide) and the spring energy ½ sᵀs.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from fieldgen.progress import Progress
from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.contact_wrenches import contact_pairs, contact_wrenches, pair_tangential
from fieldgen.runtime.dynamics.continuous_integrator import (
    ContinuousRhs,
    RadauCarry,
    advance_bar,
    radau_segments,
    refuse_core_contact,
    schedule_breaks,
)
from fieldgen.runtime.dynamics.fast_motion import extents, warn_fast_motion
from fieldgen.runtime.dynamics.recording import Recorder, SimulationResult, pack_states, unpack_states
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState
from fieldgen.runtime.dynamics.warnings import set_time

#: a spring state below this (in every component) has decayed: its pair is not integrated while apart
DECAYED_SPRING = 1e-15


def check_pairs(scene: Scene, pairs) -> None:
    """ValueError naming the pair whose combined K̄ or C̄ is unusable."""
    for i, j in pairs:
        k, c = pair_tangential(scene.bodies[i].geometry, scene.bodies[j].geometry)
        if not (np.isfinite(k) and k > 0 and np.isfinite(c) and c > 0):
            raise ValueError(f"bodies {scene.bodies[i].name!r} and {scene.bodies[j].name!r} have tangential "
                             f"stiffness {k} 1/m and damping {c} s/m; both must be positive and finite")


def body_box(geometry) -> np.ndarray:
    """(8, 3) corners of the geometry's bounding box in its body frame."""
    pts = geometry.points if isinstance(geometry, CompliantGeometry) else geometry.vertices
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    return np.array([[(lo, hi)[(c >> a) & 1][a] for a in range(3)] for c in range(8)])


def may_touch(scene: Scene, states: list[RigidBodyState], boxes, pair, horizon: float) -> bool:
    """Whether the world bounding boxes of a pair, each grown by how far its corners can travel
    in ``horizon`` seconds at the current speeds plus 1 mm, overlap."""
    lo, hi = [], []
    for b in pair:
        body, s = scene.bodies[b], states[b]
        X = body.pose(s)
        corners = boxes[b] @ X[:3, :3].T + X[:3, 3]
        reach = np.linalg.norm(corners - s.position, axis=1).max()
        grow = (np.linalg.norm(s.velocity) + np.linalg.norm(s.angular_velocity) * reach) * horizon + 1e-3
        lo.append(corners.min(axis=0) - grow)
        hi.append(corners.max(axis=0) + grow)
    return bool(np.all(lo[0] <= hi[1]) and np.all(lo[1] <= hi[0]))


def selected_pairs(scene: Scene, states, all_pairs, stored: dict, boxes, horizon: float) -> list:
    """The pairs to integrate over the next interval: those whose bounding boxes may meet
    within ``horizon``, or whose spring has not decayed."""
    return [p for p in all_pairs if np.any(np.abs(stored[p]) > DECAYED_SPRING)
            or may_touch(scene, states, boxes, p, horizon)]


def spring_records(scene: Scene, t: float, states, stored: dict, pairs, want_surfaces: bool):
    """The records of ``pairs`` at time ``t`` (rows with their time) and, when asked, the
    contact surfaces."""
    springs = np.array([stored[p] for p in pairs]).reshape(len(pairs), 6)
    contact = contact_wrenches(scene, states, pairs, springs, keep_surfaces=want_surfaces, records=True)
    return [dict(row, time=float(t)) for row in contact.records], contact.surfaces


def run_compliant(scene: Scene, n_steps: int, dt: float, record_every: int, record_surfaces: bool,
                  progress: Progress, rtol: float, atol: float, stop) -> SimulationResult:
    """``simulate(..., integrator="continuous", friction="compliant")``: see the module doc."""
    all_pairs = contact_pairs(scene)
    states = [replace(b.state) for b in scene.bodies]
    stored = {pair: np.zeros(6) for pair in all_pairs}     # each pair's s in its B frame
    boxes = [body_box(b.geometry) for b in scene.bodies]
    rhs = ContinuousRhs(scene, states, selected_pairs(scene, states, all_pairs, stored, boxes, 2.0 * dt),
                        springs=True)
    rec = Recorder(scene, record_surfaces)
    rows, surfaces = spring_records(scene, 0.0, states, stored, rhs.pairs, record_surfaces)
    tangential = [rows]
    rec.add(0.0, states, surfaces)
    breaks = schedule_breaks(scene, n_steps * dt)
    n_body = rhs.n_body
    carry = RadauCarry()
    contacts = []
    sizes = extents(scene)
    bar = progress.bar(n_steps, "simulate")
    start = time.perf_counter()
    t = 0.0
    steps = 0
    for k in range(n_steps):
        t1 = (k + 1) * dt
        pairs = selected_pairs(scene, states, all_pairs, stored, boxes, 2.0 * dt)
        if pairs != rhs.pairs:
            carry.J = None                    # another state vector: its Jacobian is computed afresh
        rhs.pairs = pairs
        y = np.concatenate([pack_states(scene, states) if n_body else np.zeros(0)] + [stored[p] for p in rhs.pairs])
        if n_body:
            y, n = radau_segments(rhs, y, t, t1, breaks, rtol=rtol, atol=atol, jac=rhs.jacobian, carry=carry)
            steps += n
        t = t1
        set_time(t)
        states = unpack_states(scene, y[:n_body], states, t)
        for m, p in enumerate(rhs.pairs):
            stored[p] = y[n_body + 6 * m:n_body + 6 * m + 6].copy()
        refuse_core_contact(scene, states, t)
        warn_fast_motion(scene, states, dt, sizes)
        if (k + 1) % record_every == 0 or k == n_steps - 1:
            rows, surfaces = spring_records(scene, t, states, stored, rhs.pairs, record_surfaces)
            tangential.append(rows)
            contacts.append(sum(s.n_faces for _, _, s in surfaces) if record_surfaces else 0)
            rec.add(t, states, surfaces)
        else:
            contacts.append(0)
        advance_bar(bar, k, n_steps, t)
        if stop is not None and stop(t, states):
            if rec.times[-1] != t:
                rows, surfaces = spring_records(scene, t, states, stored, rhs.pairs, record_surfaces)
                tangential.append(rows)
                rec.add(t, states, surfaces)
            break
    result = rec.result(contacts, steps, time.perf_counter() - start, "continuous", dt, states)
    result.rhs_evaluations = rhs.evaluations
    result.tangential = tangential
    result.final_springs = {(scene.bodies[i].name, scene.bodies[j].name): s.copy() for (i, j), s in stored.items()}
    result.friction = "compliant"
    return result
