"""Motion too fast for the step: contact that a step can jump over.

Both integrators find contact only where the bodies overlap at the poses they evaluate: the
velocity integrator once per step ``dt``, the continuous one at Radau's stage points, whose steps
grow to the output interval ``dt`` while no force acts. A body that moves further in one such
step than the thinner of itself and another body can be on one side of that body before the
step and on the other after it, and no overlap is ever seen: the bodies pass through each other
with no force and no word (tunnelling). A body's motion in one step is bounded by
``dt (|v| + |ω| r)``, with ``r`` the largest distance of its geometry from its origin; a body's
thinness is the smallest side of its geometry's bounding box in its own frame (a slab's
thickness, a plate's). When the bound passes ``SHARE`` of the thinner body's thinness, the pair
gets a ``fast_motion`` warning (:mod:`fieldgen.runtime.dynamics.warnings`) once, with the
largest ``dt`` that would keep it within.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from fieldgen.runtime.contact.geometries import CompliantGeometry
from fieldgen.runtime.contact.surface import ContactWarning
from fieldgen.runtime.dynamics.warnings import watched

#: The share of the thinner body's thinness a body may move in one step.
SHARE = 0.5


class FastMotionWarning(ContactWarning):
    """A body moves further in one step than a body it may meet is thin (module docstring)."""


@dataclass(frozen=True)
class Extents:
    """Per body of a scene: its thinness (m) and its reach ``r`` from its origin (m)."""

    thinness: np.ndarray
    reach: np.ndarray


def extents(scene) -> Extents:
    """Each body's thinness and reach (module docstring), in scene order."""
    thin, reach = [], []
    for body in scene.bodies:
        g = body.geometry
        points = g.points if isinstance(g, CompliantGeometry) else g.vertices
        thin.append(float(np.ptp(points, axis=0).min()) if len(points) else np.inf)
        reach.append(float(np.linalg.norm(points, axis=1).max()) if len(points) else 0.0)
    return Extents(np.array(thin), np.array(reach))


def warn_fast_motion(scene, states, dt: float, sizes: Extents) -> None:
    """Warn (:class:`FastMotionWarning`, through the active warning log) for each pair of bodies,
    one of them moving, whose motions in one step ``dt`` add up to more than ``SHARE`` of the
    thinner one's thinness."""
    speeds = [0.0 if b.kind == "fixed" else
              float(np.linalg.norm(s.velocity)) + float(np.linalg.norm(s.angular_velocity)) * r
              for b, s, r in zip(scene.bodies, states, sizes.reach)]
    for i, body in enumerate(scene.bodies):
        for j in range(i + 1, len(scene.bodies)):
            speed, thin = speeds[i] + speeds[j], min(sizes.thinness[i], sizes.thinness[j])
            if not speed * dt > SHARE * thin:
                continue
            other = scene.bodies[j]
            with watched((body.name, other.name)):
                warnings.warn(f"{body.name!r} and {other.name!r} move up to {speed * dt:.3g} m against each other "
                              f"in one step ({speed:.3g} m/s over dt = {dt:g} s), more than half the thinner one's "
                              f"{thin:.3g} m: their contact can be stepped over and the bodies pass through each "
                              f"other unseen; a dt of at most {SHARE * thin / speed:.2g} s keeps each step within "
                              f"it", FastMotionWarning, stacklevel=2)
