"""The continuous (Radau) integrator with tangentially compliant friction (D 6.2.4; ``--friction compliant``).

Same dynamics as ``simulate``'s continuous integrator (pressure-field normal and damping
tractions on the triangle representation, Newton–Euler, Radau with error control), except
that friction is the spatial friction spring of :mod:`fieldgen.runtime.contact.tangential` with
exact Coulomb friction instead of the regularised law.

Contact state. Every pair of bodies that can touch (at least one dynamic, at least one
compliant) owns six ODE states ``s`` (D eq. 6.21), stored in the body frame of its second body B
(the pair's order in the scene), so the spring turns with B. The state exists from the start
at zero, so it is "created" at first touch; while the pair is apart the rate is ``−s/τ``
(6.26), so a lost contact's spring decays with τ; it is identified by the two bodies, never
by polygons, so it survives any change of the contact surface's tessellation.

Recorded per output time and pair (``SimulationResult.tangential``): the spring wrench f_Δ,
the friction wrench f_c (both on B, force and torque about the world origin), the share of the
normal force that slides, the status (none, stick, slide) and the spring energy ½ sᵀs.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np

from fieldgen.runtime.contact.geometries import CompliantBody, RigidBody
from fieldgen.runtime.contact.surface import compute_contact_surface
from fieldgen.runtime.contact.pose import SpatialVelocity
from fieldgen.runtime.contact.tangential import combined_tangential, friction_wrench
from fieldgen.runtime.contact.wrench import combined_friction, compute_wrench


def pair_tangential(body_a, body_b) -> tuple[float, float]:
    """(K̄, C̄) of two contact geometries (springs and dampers in series; rigid = infinite)."""
    inf = float("inf")
    return combined_tangential(getattr(body_a, "tangential_stiffness", inf), getattr(body_a, "tangential_damping", inf),
                               getattr(body_b, "tangential_stiffness", inf), getattr(body_b, "tangential_damping", inf))


def contact_pairs(scene) -> list[tuple[int, int]]:
    """Pairs (i < j) that get a friction spring: one body dynamic, one geometry compliant."""
    out = []
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if bi.kind != "dynamic" and bj.kind != "dynamic":
                continue
            if isinstance(bi.geometry, CompliantBody) or isinstance(bj.geometry, CompliantBody):
                out.append((i, j))
    return out


def check_pairs(scene, pairs) -> None:
    """ValueError naming the pair whose combined K̄ or C̄ is unusable."""
    for i, j in pairs:
        k, c = pair_tangential(scene.bodies[i].geometry, scene.bodies[j].geometry)
        if not (np.isfinite(k) and k > 0 and np.isfinite(c) and c > 0):
            raise ValueError(f"bodies {scene.bodies[i].name!r} and {scene.bodies[j].name!r} have tangential "
                             f"stiffness {k} 1/m and damping {c} s/m; both must be positive and finite")


def _block_rotate(R: np.ndarray, s: np.ndarray) -> np.ndarray:
    return (R @ s.reshape(2, 3).T).T.reshape(6)


def _cross(a, b) -> np.ndarray:
    """a × b of two 3-vectors (np.cross costs ~10x more at this size)."""
    return np.array([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def compliant_wrenches(scene, states, springs, pairs, *, keep_surfaces=False, records=None):
    """Contact wrenches [force, torque about the centre of mass] on every body (n, 6) with
    compliant friction, and the rates of the pairs' states (n_pairs, 6) in their B frames.
    ``springs`` (n_pairs, 6): each pair's s in its B frame. Fills ``records`` (a list) with one
    dict per pair when given."""
    out = np.zeros((len(scene.bodies), 6))
    rates = np.zeros((len(pairs), 6))
    surfaces = []
    poses = [b.pose(s) for b, s in zip(scene.bodies, states)]
    for k, (i, j) in enumerate(pairs):
        bi, bj = scene.bodies[i], scene.bodies[j]
        gi, gj = bi.geometry, bj.geometry
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            surface = compute_contact_surface(gi, poses[i], gj, poses[j], "triangle",
                                              face_rule=getattr(scene, "face_rule", "all"))
        si, sj = states[i], states[j]
        Rj = poses[j][:3, :3]
        s_world = _block_rotate(Rj, springs[k])
        k_bar, c_bar = pair_tangential(gi, gj)
        mu = combined_friction(gi, gj)
        # relative velocity of B's and A's material points at the world origin, and ω_B − ω_A
        v_rel = (sj.velocity - _cross(sj.angular_velocity, sj.position)) \
            - (si.velocity - _cross(si.angular_velocity, si.position))
        res = friction_wrench(surface, s_world, linear_velocity=v_rel,
                              angular_velocity=sj.angular_velocity - si.angular_velocity,
                              mu=mu, stiffness=k_bar, damping=c_bar)
        rates[k] = _block_rotate(Rj.T, res.rate)
        force, torque = res.force.copy(), res.torque.copy()
        if surface.n_faces:
            if keep_surfaces:
                surfaces.append((i, j, surface))
            V = []
            for s, X in ((si, poses[i]), (sj, poses[j])):
                origin_velocity = s.velocity + _cross(s.angular_velocity, X[:3, 3] - s.position)
                V.append(SpatialVelocity(linear=origin_velocity, angular=s.angular_velocity))
            w = compute_wrench(surface, gi, gj, V_WA=V[0], V_WB=V[1], mu=0.0)
            force += w.force
            torque += w.torque
        out[j, :3] += force
        out[j, 3:] += torque - _cross(sj.position, force)
        out[i, :3] -= force
        out[i, 3:] += -torque + _cross(si.position, force)
        if records is not None:
            centre = res.centre if surface.n_faces else np.zeros(3)
            records.append({
                "body_a": bi.name, "body_b": bj.name, "status": res.status,
                "sliding_fraction": res.sliding_fraction, "energy": res.energy,
                "spring_force": res.spring_force, "spring_torque": res.spring_torque + _cross(centre, res.spring_force),
                "friction_force": res.force, "friction_torque": res.torque,
            })
    return out, rates, surfaces


def _body_box(geometry) -> np.ndarray:
    """(8, 3) corners of the geometry's bounding box in its body frame."""
    pts = geometry.points if isinstance(geometry, CompliantBody) else geometry.vertices
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    return np.array([[(lo, hi)[(c >> a) & 1][a] for a in range(3)] for c in range(8)])


def _may_touch(scene, states, boxes, pair, horizon: float) -> bool:
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


def run_compliant(scene, n_steps, dt, record_every, record_surfaces, progress, rtol, atol, stop):
    """``simulate(..., integrator="continuous", friction="compliant")``: see the module doc."""

    from fieldgen.runtime.dynamics.simulate import _pack, _Recorder, _unpack, radau_segments, state_rates

    if any(isinstance(b.geometry, RigidBody) and isinstance(c.geometry, RigidBody) and
           (b.kind == "dynamic" or c.kind == "dynamic")
           for i, b in enumerate(scene.bodies) for c in scene.bodies[i + 1:]):
        warnings.warn("the continuous integrator models pressure-field contact only: contacts between two "
                      "rigid geometries are ignored", stacklevel=3)
    all_pairs = contact_pairs(scene)
    check_pairs(scene, all_pairs)
    states = [replace(b.state) for b in scene.bodies]
    stored = {pair: np.zeros(6) for pair in all_pairs}     # each pair's s in its B frame
    boxes = [_body_box(b.geometry) for b in scene.bodies]
    pairs: list = []                                       # the pairs integrated this interval
    rec = _Recorder(scene, record_surfaces)
    tangential = []

    def record(t, st, want_surfaces):
        rows = []
        sp = np.array([stored[p] for p in pairs]).reshape(len(pairs), 6)
        _, _, surfaces = compliant_wrenches(scene, st, sp, pairs, keep_surfaces=want_surfaces, records=rows)
        for row in rows:
            row["time"] = float(t)
        tangential.append(rows)
        return surfaces

    def select_pairs(st):
        """Pairs whose bounding boxes may meet within this interval, or whose spring has not decayed."""
        pairs[:] = [p for p in all_pairs if np.any(np.abs(stored[p]) > 1e-15)
                    or _may_touch(scene, st, boxes, p, 2.0 * dt)]

    select_pairs(states)
    rec.add(0.0, states, record(0.0, states, record_surfaces))
    breaks = sorted({float(x) for b in scene.bodies for sch in (b.wrench, b.motion) if sch is not None
                     for x in sch.breakpoints() if 0 < x < n_steps * dt})
    evaluations = [0]
    n_body = 13 * sum(b.kind != "fixed" for b in scene.bodies)

    def rhs(t, y):
        st = _unpack(scene, y[:n_body], states, t)
        wrench, rates = compliant_wrenches(scene, st, y[n_body:].reshape(len(pairs), 6), pairs)[:2]
        evaluations[0] += 1
        out = state_rates(scene, st, wrench, t)
        out.append(rates.ravel())
        return np.concatenate(out)

    def jacobian(t, y):
        """Central differences, increments 1e-7 of max(|y_i|, 1e-3): scipy's default forward
        differences pick increments at which the clipped contact surface's round-off shows,
        and Radau then refactors every step (measured: 1100 vs 23 evaluations per 0.1 s at rest)."""
        J = np.empty((len(y), len(y)))
        for i in range(len(y)):
            h = 1e-7 * max(abs(y[i]), 1e-3)
            e = np.zeros(len(y))
            e[i] = h
            J[:, i] = (rhs(t, y + e) - rhs(t, y - e)) / (2 * h)
        return J

    contacts = []
    bar = progress.bar(n_steps, "simulate")
    start = time.perf_counter()
    t = 0.0
    steps = 0
    for k in range(n_steps):
        t1 = (k + 1) * dt
        select_pairs(states)
        y = np.concatenate([_pack(scene, states) if n_body else np.zeros(0)] + [stored[p] for p in pairs])
        if n_body:
            y, n = radau_segments(rhs, y, t, t1, breaks, rtol=rtol, atol=atol, jac=jacobian)
            steps += n
        t = t1
        states = _unpack(scene, y[:n_body], states, t)
        for m, p in enumerate(pairs):
            stored[p] = y[n_body + 6 * m:n_body + 6 * m + 6].copy()
        last = k == n_steps - 1
        if (k + 1) % record_every == 0 or last:
            surfaces = record(t, states, record_surfaces)
            contacts.append(sum(s.n_faces for _, _, s in surfaces) if record_surfaces else 0)
            rec.add(t, states, surfaces)
        else:
            contacts.append(0)
        if bar.total and (k + 1) % max(1, n_steps // 100) == 0:
            bar.advance(max(1, n_steps // 100), f"t={t:.3f} s")
        if stop is not None and stop(t, states):
            if rec.times[-1] != t:
                rec.add(t, states, record(t, states, record_surfaces))
            break
    wall = time.perf_counter() - start
    result = rec.result(contacts, steps, wall, "continuous", dt, states)
    result.rhs_evaluations = evaluations[0]
    result.tangential = tangential
    result.final_springs = {(scene.bodies[i].name, scene.bodies[j].name): s.copy() for (i, j), s in stored.items()}
    result.friction = "compliant"
    return result
