"""Extent levels for layering: where a nonlinear modulus law needs the mesh cut so the runtime's
linear interpolation of ``p0`` stays within the layer tolerance (docs/model.md §2.4; D 5.1.2).

The error of linear interpolation of ``p0`` over a tet spanning ``Δe`` is about ``p0''·Δe²/8``.
:func:`extent_levels` picks levels ``0 < e_1 < ... < e_K < 1`` greedily so that on each interval
``[a, b]`` the oscillation of ``g = p0 − chord`` (``max g − min g``, sampled) is within the
tolerance. For any tet whose vertex extents lie in ``[a, b]`` the linear interpolant differs from
the law by ``Σλ_i g(e_i) − g(e)``, so the oscillation bounds the interpolation error; for a convex
or concave law it equals the chord error.

The default tolerance has its one home here (:func:`default_layer_tolerance`): relative to the
local pressure, 1% of ``p0(a)`` on an interval starting at ``a`` (the law is non-decreasing, so
``p0(a)`` is the interval's smallest pressure), with a floor of 1% of ``RELATIVE_DOWN_TO`` x the
largest pressure, so the layered law is within 1% of the law wherever ``p0 >= 2% max p0``
(docs/model.md §2.4). A tolerance given in Pa is absolute, the same on every interval.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from fieldgen.errors import BuildError, OptionError
from fieldgen.material.modulus import ModulusLaw, is_linear
from fieldgen.meshing.tetmesh import TetMesh

#: The default layer tolerance relative to the local pressure; also the largest error it allows,
#: as a fraction of the law's largest pressure ``p0(1)``.
DEFAULT_TOLERANCE_FRACTION = 0.01
#: The default's relative bound holds where ``p0`` is at least this fraction of ``p0(1)``; below,
#: the bound is the floor ``DEFAULT_TOLERANCE_FRACTION x RELATIVE_DOWN_TO x p0(1)`` (a relative
#: bound cannot hold down to ``p0 = 0``: docs/model.md §2.4).
RELATIVE_DOWN_TO = 0.02
#: Vertices closer than this to a level (in extent, which spans [0, 1]) count as on it.
ON_LEVEL = 1e-10
#: Vertices within this fraction of the local level spacing of a level count as on it when the
#: cuts are placed, so no cut point lands a hair's breadth from an existing vertex (such cuts make
#: tiny, near-zero-volume tets); the asset keeps the solved extent, and a larger fraction leaves
#: more tets crossing a level by more, for bisection to mend (docs/model.md §2.4).
SNAP_FRACTION = 1e-2
#: Samples per interval when measuring the chord oscillation of a law.
CHORD_SAMPLES = 257
#: Levels aim at this fraction of the tolerance: the sampled oscillation underestimates the true
#: one by about 1/(CHORD_SAMPLES - 1)^2 relative, so this margin keeps the bound strict.
TOLERANCE_MARGIN = 0.995
#: Refuse tolerances that would need more levels than this (the mesh would explode).
MAX_LEVELS = 2000


@dataclass(frozen=True)
class LayerTolerance:
    """A layer tolerance (docs/model.md §2.4): ``largest`` is the most interpolation error it
    allows anywhere (Pa; what the asset records as ``layer_tolerance``); on an extent interval
    whose smallest pressure is ``p`` it allows ``min(largest, max(relative·p, floor))``.
    ``relative`` 0 is an absolute tolerance (a given one); ``default`` marks the default rule
    (:func:`default_layer_tolerance`), which options record as "not given" rather than as Pa.

    Not a number: arithmetic on it is an error rather than a silent loss of the relative rule;
    ``float()`` gives ``largest``."""

    largest: float
    relative: float = 0.0
    floor: float | None = None       #: None: ``largest`` (an absolute tolerance)
    default: bool = False

    def __post_init__(self):
        object.__setattr__(self, "largest", float(self.largest))
        object.__setattr__(self, "relative", float(self.relative))
        object.__setattr__(self, "floor", self.largest if self.floor is None else float(self.floor))

    def __float__(self) -> float:
        return self.largest

    def at(self, pressure):
        """The error allowed where the smallest pressure is ``pressure`` (Pa; array or scalar)."""
        return np.minimum(self.largest, np.maximum(self.relative * np.abs(pressure), self.floor))

    def scaled(self, factor: float) -> "LayerTolerance":
        """Every bound (largest, relative, floor) times ``factor``."""
        return LayerTolerance(factor * self.largest, factor * self.relative, factor * self.floor, self.default)


def default_layer_tolerance(law: ModulusLaw) -> LayerTolerance:
    """The layer tolerance when none is given: 1% of the local pressure, not below 1% of
    ``RELATIVE_DOWN_TO`` x the largest pressure; at most 1% of the largest pressure, its
    ``largest`` (Pa; docs/model.md §2.4)."""
    largest = DEFAULT_TOLERANCE_FRACTION * law.max_pressure
    return LayerTolerance(largest, DEFAULT_TOLERANCE_FRACTION, RELATIVE_DOWN_TO * largest, default=True)


def relative_down_to(tolerance: LayerTolerance, pressure: float) -> LayerTolerance:
    """The default rule with its relative bound held down to ``pressure`` (Pa): the floor lowered
    to 1% of it where that is below the default's floor. For calibration, whose shallowest contact
    has its largest pressure known (docs/model.md §2.4): a sphere's contact integrates the layered
    law from 0 up to that pressure, so the layers are kept within 1% of the law over the range the
    data press. A tolerance that is not the default is returned as it is."""
    if not tolerance.default or not pressure > 0:
        return tolerance
    floor = min(tolerance.floor, tolerance.relative * float(pressure))
    return LayerTolerance(tolerance.largest, tolerance.relative, floor, default=True)


def check_tolerance(tolerance, law: ModulusLaw) -> LayerTolerance:
    """``tolerance`` as a LayerTolerance (a positive finite float of Pa is absolute); OptionError
    otherwise."""
    if isinstance(tolerance, LayerTolerance):
        return tolerance
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        tol = float("nan")
    if not (math.isfinite(tol) and tol > 0):
        raise OptionError(f"layer_tolerance is {tolerance!r}; it must be a positive number of Pa",
                          fix=f"give e.g. {float(default_layer_tolerance(law)):g} (1% of max p0)")
    return LayerTolerance(tol)


def chord_oscillation(law: ModulusLaw, a: float, b: float, *, samples: int = CHORD_SAMPLES) -> float:
    """``max g − min g`` over ``[a, b]`` with ``g = p0 − chord of p0``: a bound on the linear
    interpolation error of any tet whose vertex extents lie in ``[a, b]`` (docs/model.md §2.4)."""
    t = np.linspace(0.0, 1.0, samples)
    e = a + (b - a) * t
    if law.kind == "table":   # include the table's own points, where the curvature can jump
        knots = np.asarray(law.table_extent)
        e = np.union1d(e, knots[(knots > a) & (knots < b)])
        t = (e - a) / (b - a)
    p = law_pressure(law, e)
    g = p - (p[0] + (p[-1] - p[0]) * t)
    return float(g.max() - g.min())


@functools.lru_cache(maxsize=8)
def _table_interpolator(law: ModulusLaw):
    return law.interpolator()


def law_pressure(law: ModulusLaw, extent) -> np.ndarray:
    """``law.pressure(extent)``, with a table law's interpolant built once per law rather than per
    call (the levels evaluate the law thousands of times on short arrays)."""
    if law.kind != "table":
        return law.pressure(extent)
    return _table_interpolator(law)(np.clip(np.asarray(extent, dtype=np.float64), 0.0, 1.0))


def _next_level(law: ModulusLaw, a: float, target: float) -> float:
    """The largest ``b`` (by bisection) with the chord oscillation over ``[a, b]`` within ``target``
    (Pa: the tolerance at ``p0(a)``, the smallest pressure on ``[a, b]``)."""
    lo, hi = a, 1.0          # invariant: [a, lo] within tolerance, [a, hi] not
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if chord_oscillation(law, a, mid) <= target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * (hi - a):
            break
    return lo


def extent_levels(law: ModulusLaw, tolerance) -> np.ndarray:
    """Levels ``0 < e_1 < ... < e_K < 1`` with the chord oscillation of ``p0`` on every interval
    ``[a, b]`` at most the tolerance at ``p0(a)`` (Pa; :class:`LayerTolerance`; D 5.1.2). Empty
    for a linear law. Deterministic."""
    tol = check_tolerance(tolerance, law)
    if is_linear(law):
        return np.zeros(0)
    levels: list[float] = []
    a = 0.0
    while chord_oscillation(law, a, 1.0) > (target := TOLERANCE_MARGIN * float(tol.at(law_pressure(law, a)))):
        lo = _next_level(law, a, target)
        if lo - a <= 16 * ON_LEVEL:
            raise OptionError(
                f"layer_tolerance {tol.largest:g} Pa needs layers thinner than {lo - a:.1e} in extent "
                f"near e = {a:.6g} (the law bends too sharply there)",
                fix="raise layer_tolerance or smooth the modulus law")
        levels.append(lo)
        if len(levels) > MAX_LEVELS:
            raise OptionError(
                f"layer_tolerance {tol.largest:g} Pa needs more than {MAX_LEVELS} extent layers",
                fix=f"raise layer_tolerance (at most 0.01 x max p0 = {float(default_layer_tolerance(law)):g} Pa)")
        a = lo
    return np.array(levels)


def balanced_levels(law: ModulusLaw, tolerance, *, steps: int = 20) -> np.ndarray:
    """As many levels as :func:`extent_levels` needs, placed so every interval has about the same
    chord oscillation (the smallest bound that still needs no more levels; found by bisection).

    The greedy levels leave the last interval with little oscillation and the others at the
    bound, so nearly every edge crossing a level needs a split; balanced, each interval keeps
    slack, and more edges that cross a level stay within the tolerance (docs/model.md §2.4)."""
    tol = check_tolerance(tolerance, law)
    greedy = extent_levels(law, tol)
    if not len(greedy):
        return greedy
    lo, hi = 0.0, 1.0                  # invariant: tol scaled by hi needs no more levels than tol
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        try:
            fits = len(extent_levels(law, tol.scaled(mid))) <= len(greedy)
        except OptionError:            # too tight to layer at all
            fits = False
        lo, hi = (lo, mid) if fits else (mid, hi)
    return extent_levels(law, tol.scaled(hi))


def snap_to_levels(extent: np.ndarray, levels: np.ndarray, fraction: float = SNAP_FRACTION) -> np.ndarray:
    """Move extents within ``fraction`` x the local level spacing of a level onto it.

    The spacing of level k is the smaller of its gaps to its neighbours (0 and 1 at the ends),
    so the boundary values e = 0 and e = 1 never move. The extent changes by at most
    ``fraction`` of a layer; layering uses the snapped extent only to place its cuts and keeps
    the solved one, since moving ``p0`` by that much can take the layered law past the
    tolerance (docs/model.md §2.4).
    """
    extent = np.array(extent, dtype=np.float64, copy=True)
    if not len(levels):
        return extent
    bounds = np.concatenate([[0.0], levels, [1.0]])
    spacing = np.minimum(np.diff(bounds)[:-1], np.diff(bounds)[1:])
    nearest = np.clip(np.searchsorted(levels, extent), 1, len(levels)) - 1
    for candidate in (nearest, np.minimum(nearest + 1, len(levels) - 1)):
        near = np.abs(extent - levels[candidate]) <= fraction * spacing[candidate]
        extent[near] = levels[candidate[near]]
    return extent


def check_extent(mesh: TetMesh, extent) -> np.ndarray:
    """``extent`` as one float per mesh vertex within [0, 1] (docs/model.md §2.2); BuildError otherwise."""
    extent = np.asarray(extent, dtype=np.float64).ravel()
    if extent.shape != (mesh.n_points,):
        raise BuildError(f"the extent has {extent.size} values for {mesh.n_points} mesh points",
                         fix="give one extent value per mesh vertex (P1, docs/model.md §2.1)")
    bad = ~np.isfinite(extent) | (extent < -1e-9) | (extent > 1 + 1e-9)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        raise BuildError(f"{int(bad.sum())} extent values lie outside [0, 1] (e.g. vertex {i}: "
                         f"{extent[i]!r})", fix="normalise the extent to [0, 1] (docs/model.md §2.2)")
    return extent
