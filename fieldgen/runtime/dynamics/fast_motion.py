"""Motion too fast for the step: contact that a step can jump over.

Both integrators find contact only where the bodies overlap at the poses they evaluate: the
velocity integrator once per step ``dt``, the continuous one at Radau's stage points, whose steps
grow to the output interval ``dt`` while no force acts. A body that moves further in one such
step than the thinner of itself and another body can be on one side of that body before the
step and on the other after it, and no overlap is ever seen: the bodies pass through each other
with no force and no word (tunnelling). A body's thinness is the smallest side of its
geometry's bounding box in its own frame (a slab's thickness, a coin's), ``n`` that side's axis
in the world. Only motion along ``n`` crosses the thinner body of a pair (a coin sliding and
spinning on a plane does not): in one step the two move against each other along it by at most
``dt (|(v_a - v_b)·n| + |ω_a × n| r_a + |ω_b × n| r_b)``, with ``r`` the largest distance of a
body's geometry from its origin. When that passes ``SHARE`` of the thinner body's thinness, the
pair gets a ``fast_motion`` warning (:mod:`fieldgen.runtime.dynamics.warnings`) once, with the
largest ``dt`` that would keep it within.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.contact.surface import ContactWarning
from fieldgen.runtime.dynamics.rigid_body import quaternion_to_matrix
from fieldgen.runtime.dynamics.warnings import watched

#: The share of the thinner body's thinness a body may move in one step.
SHARE = 0.5


class FastMotionWarning(ContactWarning):
    """A body moves further in one step than a body it may meet is thin (module docstring)."""


@dataclass(frozen=True)
class Extents:
    """Per body of a scene: its thinness (m), the axis of it in the body's frame (unit) and its
    reach ``r`` from its origin (m)."""

    thinness: np.ndarray
    axis: np.ndarray
    reach: np.ndarray


def extents(scene) -> Extents:
    """Each body's thinness, its axis and reach (module docstring), in scene order."""
    thin, axis, reach = [], [], []
    for body in scene.bodies:
        g = body.geometry
        points = g.points if isinstance(g, CompliantGeometry) else g.vertices
        sides = np.ptp(points, axis=0) if len(points) else np.full(3, np.inf)
        thin.append(float(sides.min()))
        axis.append(np.eye(3)[int(np.argmin(sides))])
        reach.append(float(np.linalg.norm(points, axis=1).max()) if len(points) else 0.0)
    return Extents(np.array(thin), np.array(axis), np.array(reach))


def closing_speed(states, sizes: Extents, a: int, b: int, thinner: int) -> float:
    """The bound on how fast bodies ``a`` and ``b`` move against each other along the thinner
    one's axis (module docstring), m/s."""
    n = quaternion_to_matrix(states[thinner].quaternion) @ sizes.axis[thinner]
    sa, sb = states[a], states[b]
    return (abs(float(np.dot(sa.velocity - sb.velocity, n)))
            + float(np.linalg.norm(np.cross(sa.angular_velocity, n))) * sizes.reach[a]
            + float(np.linalg.norm(np.cross(sb.angular_velocity, n))) * sizes.reach[b])


def warn_fast_motion(scene, states, dt: float, sizes: Extents) -> None:
    """Warn (:class:`FastMotionWarning`, through the active warning log) for each pair of bodies,
    one of them moving, that move against each other in one step ``dt`` by more than ``SHARE``
    of the thinner one's thinness (module docstring)."""
    for i, body in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            other = scene.bodies[j]
            if body.kind == "fixed" and other.kind == "fixed":
                continue
            thinner = i if sizes.thinness[i] <= sizes.thinness[j] else j
            thin = sizes.thinness[thinner]
            speed = closing_speed(states, sizes, i, j, thinner)
            if not speed * dt > SHARE * thin:
                continue
            with watched((body.name, other.name)):
                warnings.warn(f"{body.name!r} and {other.name!r} move up to {speed * dt:.3g} m against each other "
                              f"in one step ({speed:.3g} m/s over dt = {dt:g} s) across the thinner one, "
                              f"{scene.bodies[thinner].name!r}, {thin:.3g} m thick: more than half of it, so their "
                              f"contact can be stepped over and the bodies pass through each other unseen; a dt of "
                              f"at most {SHARE * thin / speed:.2g} s keeps each step within it",
                              FastMotionWarning, stacklevel=2)
