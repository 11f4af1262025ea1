"""The continuous integrator (docs/model.md §5.2; D 5.3, E19 VIII).

The pressure-field wrench (triangle representation, damping, regularised friction;
:func:`~fieldgen.runtime.dynamics.contact_wrenches.contact_wrenches`) is a force in the
Newton–Euler equations (gyroscopic term included), integrated by scipy's Radau with error
control between output times; quaternions are renormalised at every output time. With
compliant friction (:mod:`fieldgen.runtime.dynamics.compliant_friction`) the pairs' friction
springs are states of the same ODE (:class:`ContinuousRhs`).

This integrator has no rigid contact: a scene with two rigid geometries is refused before the
first step (``simulate.check_integrator``), and a body reaching a rigid core (D 5.1.2) ends
the run at the output time it is seen (:func:`refuse_core_contact`).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, replace

import numpy as np
from scipy.integrate import Radau

from fieldgen.errors import BuildError
from fieldgen.progress import Progress
from fieldgen.runtime.contact.surface import PassThroughWarning, compute_contact_surface
from fieldgen.runtime.dynamics.bodies import Scene
from fieldgen.runtime.dynamics.contact_wrenches import contact_pairs, contact_wrenches
from fieldgen.runtime.dynamics.fast_motion import extents, warn_fast_motion
from fieldgen.runtime.dynamics.recording import Recorder, SimulationResult, pack_states, unpack_states
from fieldgen.runtime.dynamics.rigid_body import RigidBodyState, newton_euler_rhs, quaternion_multiply
from fieldgen.runtime.dynamics.rigid_contact import core_body
from fieldgen.runtime.dynamics.warnings import set_time


@dataclass
class RadauCarry:
    """What one output interval's Radau hands the next (docs/model.md §5.2): the step size its
    error control proposed last (``h``) and its Jacobian (``J``, reused while the state keeps its
    size; Radau recomputes it as soon as a Newton iteration fails to converge with it)."""

    h: float | None = None
    J: np.ndarray | None = None


#: The most Radau steps one output interval may take: ``MAX_STEPS_PER_INTERVAL`` and
#: ``MAX_STEPS_PER_SECOND`` per simulated second of it. Measured: a resting box takes 595 steps in
#: a 0.1 s interval and 2,058 in a 2 s one, the compliant incline 112 in 0.05 s; a body driven
#: into a compliant layer at tens of metres per second can need steps of nanoseconds and would run
#: for hours unseen (docs/design/limits.md).
MAX_STEPS_PER_INTERVAL = 5_000
MAX_STEPS_PER_SECOND = 5_000


def radau_failed(t: float, message: str) -> BuildError:
    return BuildError(f"Radau failed at t = {t:.6g} s: {message}",
                      fix="loosen rtol/atol or check the scene for deep initial overlaps")


def too_many_steps(a: float, b: float, t: float, steps: int) -> BuildError:
    return BuildError(f"the continuous integrator took {steps:,} steps between the outputs at "
                      f"t = {a:.6g} s and {b:.6g} s and reached only t = {t:.6g} s: the "
                      f"contact is too stiff to integrate in a reasonable time (a body driven into a compliant one "
                      f"at high speed, or a very large dissipation)",
                      fix="use --integrator velocity, or lower the speeds, loads or dissipation")


def radau_stepped(rhs, y, a: float, b: float, *, rtol: float, atol: float, jac, carry: RadauCarry | None,
                  budget: int):
    """Radau IIA from ``a`` to ``b`` as scipy's ``solve_ivp(method="Radau")`` steps it, in at most
    ``budget`` steps: (the state at ``b``, the steps taken, ``b``), or (None, ``budget``, the time
    reached) when the budget ran out first. With ``carry``, started with its step size and
    Jacobian instead of an initial-step search and a fresh Jacobian, and leaving its own in
    ``carry``."""
    reuse = carry is not None and carry.J is not None and carry.J.shape == (len(y), len(y)) and jac is not None
    start = {"J": carry.J if reuse else None}

    def first_jacobian(t, yy):
        J, start["J"] = start["J"], None
        return J if J is not None else jac(t, yy)

    first = min(carry.h, b - a) if carry is not None and carry.h else None
    solver = Radau(rhs, a, y, b, rtol=rtol, atol=atol, first_step=first,
                   jac=first_jacobian if carry is not None and jac is not None else jac)
    if carry is not None:
        solver.current_jac = not reuse          # a carried Jacobian is refreshed on a failed Newton iteration
    h = solver.h_abs
    taken = 0
    while solver.status == "running":
        if taken == budget:
            return None, taken, float(solver.t)
        h = solver.h_abs
        message = solver.step()
        taken += 1
        if solver.status == "failed":
            raise radau_failed(solver.t, message)
    if carry is not None:
        carry.h, carry.J = h, solver.J
    return solver.y.copy(), taken, b


def radau_segments(rhs, y, t0: float, t1: float, breaks, *, rtol: float, atol: float, jac=None,
                   carry: RadauCarry | None = None):
    """Integrate ``y' = rhs(t, y)`` over one output interval, ``t0`` to ``t1``, with Radau IIA
    (:func:`radau_stepped`), restarting at every schedule break inside (a piecewise-constant load
    is smooth between breaks), in at most ``MAX_STEPS_PER_INTERVAL`` + ``MAX_STEPS_PER_SECOND``
    (t1 - t0) steps in all (BuildError past them): ``(y, segments)``. With ``carry``, each segment starts from the previous one's
    step size and Jacobian."""
    stops = [t0] + [x for x in breaks if t0 < x < t1] + [t1]
    budget = left = int(MAX_STEPS_PER_INTERVAL + MAX_STEPS_PER_SECOND * (t1 - t0))
    for a, b in zip(stops[:-1], stops[1:]):
        reached, taken, t = radau_stepped(rhs, y, a, b, rtol=rtol, atol=atol, jac=jac, carry=carry, budget=left)
        if reached is None:
            raise too_many_steps(t0, t1, t, budget)
        y, left = reached, left - taken
    return y, len(stops) - 1


def schedule_breaks(scene: Scene, end: float) -> list[float]:
    """The times in (0, ``end``) where a body's wrench or motion schedule changes, sorted."""
    return sorted({float(x) for b in scene.bodies for sch in (b.wrench, b.motion) if sch is not None
                   for x in sch.breakpoints() if 0 < x < end})


def state_rates(scene: Scene, states, wrenches, t: float) -> list[np.ndarray]:
    """Time derivatives ``[ṗ, q̇, v̇, ω̇]`` of every non-fixed body (13 each, scene order): a
    kinematic body follows its twist, a dynamic one Newton–Euler under contact ``wrenches``,
    its external wrench at ``t`` and gravity."""
    out = []
    for b, s, w in zip(scene.bodies, states, wrenches):
        if b.kind == "fixed":
            continue
        if b.kind == "kinematic":
            dq = 0.5 * quaternion_multiply(np.concatenate([[0.0], s.angular_velocity]), s.quaternion)
            out.append(np.concatenate([s.velocity, dq, np.zeros(6)]))
        else:
            ext = b.wrench(t) if b.wrench is not None else np.zeros(6)
            force = w[:3] + ext[:3] + b.mass.mass * scene.gravity
            dp, dq, dv, dw = newton_euler_rhs(s, b.mass, force, w[3:] + ext[3:])
            out.append(np.concatenate([dp, dq, dv, dw]))
    return out


class ContinuousRhs:
    """``y' = f(t, y)`` of the continuous integrators: ``y`` holds the non-fixed bodies' states
    (``recording.pack_states``) and, with ``springs``, then each of ``pairs``' friction-spring
    state (6 each, in its B frame, D 6.2.4). ``evaluations`` counts the calls. ``pairs`` may be
    set between integrations (compliant friction integrates only the pairs that may touch)."""

    def __init__(self, scene: Scene, base_states: list[RigidBodyState], pairs, *, springs: bool = False):
        self.scene = scene
        self.base_states = base_states
        self.pairs = pairs
        self.springs = springs
        self.n_body = 13 * sum(b.kind != "fixed" for b in scene.bodies)
        self.evaluations = 0
        self.last = None            # (t, y, f, pairs) of the latest evaluation, for the Jacobian's base point
        self.cache = {}             # each pair's latest surface at its poses (contact_wrenches' cache)

    def __call__(self, t, y):
        out = self.rates(t, y)
        self.last = (t, y.copy(), out.copy(), list(self.pairs))
        return out

    def rates(self, t, y):
        """``f(t, y)`` (see the class doc)."""
        set_time(t)
        st = unpack_states(self.scene, y[:self.n_body], self.base_states, t)
        springs = y[self.n_body:].reshape(len(self.pairs), 6) if self.springs else None
        contact = contact_wrenches(self.scene, st, self.pairs, springs, cache=self.cache)
        self.evaluations += 1
        out = state_rates(self.scene, st, contact.wrenches, t)
        if self.springs:
            out.append(contact.spring_rates.ravel())
        return np.concatenate(out) if out else np.zeros(0)

    def jacobian(self, t, y):
        """Forward differences with increments 1e-7 of max(|y_i|, 1e-3) from ``f(t, y)`` (reused
        when it was the latest evaluation, as it is when Radau asks after a step): scipy's
        default increments are ones at which the clipped contact surface's round-off shows, and
        Radau then refactors every step (docs/design/runtime.md); with these increments forward
        differences do as well as central ones at half the evaluations (benchmarks/README.md)."""
        last = self.last
        same = last is not None and last[0] == t and last[3] == list(self.pairs) and np.array_equal(last[1], y)
        f = last[2] if same else self(t, y)
        J = np.empty((len(y), len(y)))
        for i in range(len(y)):
            h = 1e-7 * max(abs(y[i]), 1e-3)
            e = np.zeros(len(y))
            e[i] = h
            J[:, i] = (self.rates(t, y + e) - f) / h
        return J


def advance_bar(bar, k: int, n_steps: int, t: float) -> None:
    """Move the progress bar of an output-interval loop by its hundredths."""
    if bar.total and (k + 1) % max(1, n_steps // 100) == 0:
        bar.advance(max(1, n_steps // 100), f"t={t:.3f} s")


def run_continuous(scene: Scene, n_steps: int, dt: float, record_every: int, record_surfaces: bool,
                   progress: Progress, rtol: float, atol: float, stop) -> SimulationResult:
    """``simulate(..., integrator="continuous")`` with regularised friction: see the module doc."""
    states = [replace(b.state) for b in scene.bodies]
    pairs = contact_pairs(scene)
    rec = Recorder(scene, record_surfaces)
    rec.add(0.0, states, contact_wrenches(scene, states, pairs, keep_surfaces=True).surfaces if record_surfaces
            else None)
    breaks = schedule_breaks(scene, n_steps * dt)
    rhs = ContinuousRhs(scene, states, pairs)
    contacts = []
    sizes = extents(scene)
    bar = progress.bar(n_steps, "simulate")
    start = time.perf_counter()
    y = pack_states(scene, states) if any(b.kind != "fixed" for b in scene.bodies) else np.zeros(0)
    t = 0.0
    steps = 0
    for k in range(n_steps):
        t1 = (k + 1) * dt
        if y.size:
            y, n = radau_segments(rhs, y, t, t1, breaks, rtol=rtol, atol=atol)
            steps += n
        t = t1
        set_time(t)
        states = unpack_states(scene, y, states, t)
        y = pack_states(scene, states) if y.size else y        # quaternion renormalised
        refuse_core_contact(scene, states, t)
        warn_fast_motion(scene, states, dt, sizes)
        wrench_surfaces = None
        keep = record_surfaces and (k + 1) % record_every == 0
        if keep or k == n_steps - 1:
            wrench_surfaces = contact_wrenches(scene, states, pairs, keep_surfaces=True).surfaces
        contacts.append(sum(s.n_faces for _, _, s in wrench_surfaces) if wrench_surfaces is not None else 0)
        if (k + 1) % record_every == 0 or k == n_steps - 1:
            rec.add(t, states, wrench_surfaces)
        advance_bar(bar, k, n_steps, t)
        if stop is not None and stop(t, states):
            if rec.times[-1] != t:
                rec.add(t, states, wrench_surfaces)
            break
    result = rec.result(contacts, steps, time.perf_counter() - start, "continuous", dt, states)
    result.rhs_evaluations = rhs.evaluations
    return result


def refuse_core_contact(scene: Scene, states: list[RigidBodyState], t: float) -> None:
    """BuildError when, at an output time of a continuous integrator, a body has reached the
    rigid core of a compliant one (D 5.1.2): that integrator has no rigid contact, so the
    core's contact would be dropped and the body would pass through it."""
    poses = None
    for i, bi in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            bj = scene.bodies[j]
            if "dynamic" not in (bi.kind, bj.kind) or (core_body(bi.geometry) is None and
                                                         core_body(bj.geometry) is None):
                continue
            poses = poses or [b.pose(s) for b, s in zip(scene.bodies, states)]
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", PassThroughWarning)
                compute_contact_surface(bi.geometry, poses[i], bj.geometry, poses[j], "triangle")
            if any(issubclass(w.category, PassThroughWarning) for w in caught):
                raise BuildError(f"at t = {t:.6g} s body {bi.name!r} and body {bj.name!r} reach a rigid core (the "
                                 f"compliant layer is passed through); the continuous integrator has no rigid "
                                 f"contact, so the core would be passed through too",
                                 fix="use --integrator velocity (the core then acts as rigid geometry), or "
                                     "a smaller load")
