"""Halfspace fields that reproduce elasticity, and the closed forms they are checked against
(D App. B; docs/model.md 2.8).

A rigid object pressed a depth ``d`` into an elastic halfspace (modulus ``E* = E/(1 − ν²)``):

- flat cylinder (punch) of radius ``a``: ``F = 2E*·a·d`` (B.1), reproduced by the linear field
  ``p0 = 2E*·h/(π a)`` (B.2), ``h`` the depth below the surface;
- paraboloid ``z = r²/(2R)`` (Hertz): ``F = (4/3)E*·R^½·d^{3/2}`` (B.3), reproduced by
  ``p0 = (E*/π)·sqrt(h/R)`` (B.4).

On a slab of thickness ``H`` bonded at the bottom with insulated sides the extent is exactly
``e = h/H``, so these fields are modulus laws of the extent: the punch's is ``linear`` with
``M0 = 2E*·H/(π a)`` and Hertz's is the ``table`` law ``p0(e) = (E*/π)·sqrt(H·e/R)``.

Integrating the Hertz field over a true sphere instead of the paraboloid: the area of the
contact at depth ``h`` grows as ``2π(R − d + h)`` rather than ``2πR``, which gives
``F = (4/3)E*·R^½·d^{3/2}·(1 − 2d/(5R))``.
"""

from __future__ import annotations

import math

import numpy as np


def hertz_force(e_star: float, radius: float, depth) -> np.ndarray:
    """``(4/3)E*·R^½·d^{3/2}``: a rigid paraboloid of tip radius R on a halfspace (D App. B), N."""
    d = np.asarray(depth, dtype=np.float64)
    return 4.0 / 3.0 * e_star * math.sqrt(radius) * d ** 1.5


def sphere_force(e_star: float, radius: float, depth) -> np.ndarray:
    """The Hertz field (B.4) integrated over a true spherical cap: Hertz × (1 − 2d/(5R)), N."""
    d = np.asarray(depth, dtype=np.float64)
    return hertz_force(e_star, radius, d) * (1.0 - 0.4 * d / radius)


def flat_punch_force(e_star: float, radius: float, depth) -> np.ndarray:
    """``2E*·a·d``: a rigid flat cylinder of radius a on a halfspace (D App. B), N."""
    return 2.0 * e_star * radius * np.asarray(depth, dtype=np.float64)


def flat_punch_modulus(e_star: float, thickness: float, radius: float) -> float:
    """M0 of the linear law ``p0 = M0·e`` that is the punch field (B.2) on a slab of thickness H:
    ``2E*·h/(π a)`` with ``h = H·e`` gives ``M0 = 2E*·H/(π a)``, Pa."""
    return 2.0 * e_star * thickness / (math.pi * radius)


def hertz_pressure(e_star: float, radius: float, thickness: float, extent) -> np.ndarray:
    """The Hertz field (B.4) on a slab: ``p0(e) = (E*/π)·sqrt(H·e/R)``, Pa."""
    e = np.clip(np.asarray(extent, dtype=np.float64), 0.0, None)
    return e_star / math.pi * np.sqrt(thickness * e / radius)


def hertz_table(e_star: float, radius: float, thickness: float, points: int = 97) -> tuple[np.ndarray, np.ndarray]:
    """Extent and pressure of a ``table`` law for the Hertz field (B.4) on a slab of thickness H.

    The sqrt has an infinite slope at e = 0, so the points are crowded there: ``e = t⁴`` on an
    even grid in t (the field is then ``t²``, which the monotone cubic interpolation of the table
    follows to about 1e-4 relative), with the first point past zero at ``(1/(points-1))⁴``.
    """
    t = np.linspace(0.0, 1.0, int(points))
    extent = t ** 4
    extent[-1] = 1.0
    return extent, hertz_pressure(e_star, radius, thickness, extent)
