"""Motion too fast for the step: contact that a step can jump over.

Both integrators find contact only where the bodies overlap at the poses they evaluate: the
velocity integrator once per step ``dt``, the continuous one at Radau's stage points, whose steps
grow to the output interval ``dt`` while no force acts. Two bodies that move against each other
in one step further than one of them is wide in that direction can be on either side of it
before and after the step, and no overlap is ever seen: they pass through each other with no
force and no word (tunnelling).

The check, for each pair that can carry a pressure-field contact
(:func:`~fieldgen.runtime.dynamics.contact_wrenches.contact_pairs`; rigid pairs have the velocity
step's own margin, grown with their speed): each body's geometry has a bounding box in its own
frame, sides ``w_k`` along its axes ``n_k`` (in the world, the body's rotation times them). Along
``n_k`` the two bodies' points move against each other by at most
``dt (|(v_a - v_b)·n_k| + |ω_a × n_k| r_a + |ω_b × n_k| r_b)`` in one step, ``v`` the centres of
mass' velocities and ``r`` the farthest point of a body's geometry from its centre of mass. When
that passes ``SHARE`` of ``w_k`` for any axis of either body, the pair gets a ``fast_motion``
warning (:mod:`fieldgen.runtime.dynamics.warnings`) once, with the largest ``dt`` that keeps every
axis within. A coin sliding and spinning on a plane moves along its wide axes only: no warning.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numba as nb
import numpy as np

from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.contact.surface import ContactWarning
from fieldgen.runtime.dynamics.contact_wrenches import contact_pairs
from fieldgen.runtime.dynamics.warnings import watched

#: The share of a body's width along an axis that the pair may close along it in one step.
SHARE = 0.5


class FastMotionWarning(ContactWarning):
    """Two bodies can step over each other (module docstring); a contact warning so that the
    simulation's warning log reports it once per pair."""


@dataclass(frozen=True)
class Extents:
    """Per body of a scene: the sides of its geometry's bounding box along its own axes (m, (3,))
    and its reach ``r`` from its centre of mass (m)."""

    sides: np.ndarray
    reach: np.ndarray


def extents(scene) -> Extents:
    """Each body's bounding-box sides and reach (module docstring), in scene order."""
    sides, reach = [], []
    for body in scene.bodies:
        g = body.geometry
        points = g.points if isinstance(g, CompliantGeometry) else g.vertices
        sides.append(np.ptp(points, axis=0) if len(points) else np.full(3, np.inf))
        reach.append(float(np.linalg.norm(points - body.centre_of_mass, axis=1).max()) if len(points) else 0.0)
    return Extents(np.array(sides), np.array(reach))


def step_ratio(states, sizes: Extents, a: int, b: int, dt: float) -> tuple[float, int, float]:
    """The largest ratio, over the axes of bodies ``a`` and ``b``, of how far the pair closes
    along an axis in one step ``dt`` to the body's side along it: (ratio, that body, its side).
    One numba call a pair and step (it runs every step for every pair: numpy's per-call overhead
    on 3-vectors cost more than the arithmetic)."""
    sa, sb = states[a], states[b]
    ratio, which, side = _closing_ratio(sa.rotation, sb.rotation, sa.velocity - sb.velocity,
                                        sa.angular_velocity, sb.angular_velocity,
                                        float(sizes.reach[a]), float(sizes.reach[b]),
                                        sizes.sides[a], sizes.sides[b], float(dt))
    return (ratio, a if which == 0 else b, side) if ratio > 0.0 else (0.0, a, float("inf"))


@nb.njit(cache=True)
def _closing_ratio(Ra, Rb, dv, wa, wb, reach_a, reach_b, sides_a, sides_b, dt):
    """(ratio, 0 for body a or 1 for b, side) of :func:`step_ratio`: for each axis ``n`` (a
    column of the body's rotation) ``|dv·n| + |wa × n| reach_a + |wb × n| reach_b`` times ``dt``
    over the side; the first largest, body a's axes before b's, ratio 0 when nothing closes."""
    best = 0.0
    which = 0
    side = np.inf
    for m in range(2):
        R = Ra if m == 0 else Rb
        sides = sides_a if m == 0 else sides_b
        for k in range(3):
            n0, n1, n2 = R[0, k], R[1, k], R[2, k]
            along = abs(n0 * dv[0] + n1 * dv[1] + n2 * dv[2])
            ca = _cross_norm(wa, n0, n1, n2)
            cb = _cross_norm(wb, n0, n1, n2)
            closing = along + ca * reach_a + cb * reach_b
            if closing > 0.0:
                r = closing * dt / sides[k] if sides[k] > 0.0 else np.inf   # numpy's x/0 (a flat body)
                if r > best:
                    best = r
                    which = m
                    side = sides[k]
    return best, which, side


@nb.njit(cache=True, inline="always")
def _cross_norm(w, n0, n1, n2):
    """|w × n| (w a 3-vector, n = (n0, n1, n2))."""
    c0 = w[1] * n2 - w[2] * n1
    c1 = w[2] * n0 - w[0] * n2
    c2 = w[0] * n1 - w[1] * n0
    return np.sqrt(c0 * c0 + c1 * c1 + c2 * c2)


def warn_fast_motion(scene, states, dt: float, sizes: Extents) -> None:
    """Warn (:class:`FastMotionWarning`, through the active warning log) for each pair that can
    touch and closes along an axis of one of them by more than ``SHARE`` of its side in one step
    ``dt`` (module docstring)."""
    for i, j in contact_pairs(scene):
        ratio, m, side = step_ratio(states, sizes, i, j, dt)
        if not ratio > SHARE:
            continue
        a, b = scene.bodies[i].name, scene.bodies[j].name
        with watched((a, b)):
            warnings.warn(f"{a!r} and {b!r} close by up to {ratio * side:.3g} m in one step (dt = {dt:g} s) "
                          f"across {scene.bodies[m].name!r}, which is {side:.3g} m wide that way: more than half "
                          f"of it, so their contact can be stepped over and the bodies pass through each other "
                          f"unseen; a dt of at most {dt * SHARE / ratio:.2g} s keeps each step within it",
                          FastMotionWarning, stacklevel=2)
