"""The force model's extent grid (fieldgen/calibrate/forces.py): each depth's quadrature points are
gathered onto a grid of extents as they are made, so a law's force is one product with the law on
the grid. Checked here against the plain sum ``Σ w_i p0(e_i)`` over the points, with the laws
written out in this file (docs/model.md §2.3: ``p0 = M0 e/(1 − K e)``; a table interpolated by
PCHIP), for the laws that bend hardest: a steep hyperbolic law (K 0.995) over contacts that reach
e = 1, and tables whose first knot is below 1e-6 over shallow contacts."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.calibrate.forces import ForceModel
from fieldgen.material.modulus import hyperbolic_law, linear_law, table_law_from_points

#: The largest extent each depth's contact reaches: from a contact a hundredth of a micrometre
#: deep on a 1 mm layer to one that reaches the bonded back (e = 1).
REACHES = (1e-8, 1e-6, 1e-5, 1e-4, 1e-2, 0.3, 0.98, 1.0)
POINTS = 20_000
#: Tables as extent, pressure (Pa) knots; the first knot is tiny.
TABLES = {"first knot 1e-7": ([0.0, 1e-7, 0.1, 1.0], [0.0, 1e3, 3e4, 1e6]),
          "first knot 5e-7": ([0.0, 5e-7, 0.05, 0.2, 1.0], [0.0, 1e4, 2e4, 9e4, 1e6]),
          "first knot 1e-8": ([0.0, 1e-8, 0.02, 0.1, 1.0], [0.0, 100.0, 1e4, 5e4, 1e6]),
          "near step": ([0.0, 1e-7, 1.0], [0.0, 5e5, 1e6])}


def hyperbolic(m0, k):
    return lambda e: m0 * e / (1.0 - k * e)


def pchip_slopes(x, y):
    """The monotone slopes at the knots (Fritsch–Butland: a weighted harmonic mean of the two
    secants inside, 0 where they differ in sign; a three-point end formula kept within the
    secant's sign and three times its size)."""
    h, secant = np.diff(x), np.diff(y) / np.diff(x)
    slope = np.zeros(len(x))
    for k in range(1, len(x) - 1):
        if secant[k - 1] * secant[k] > 0:
            w1, w2 = 2 * h[k] + h[k - 1], h[k] + 2 * h[k - 1]
            slope[k] = (w1 + w2) / (w1 / secant[k - 1] + w2 / secant[k])
    for end, (h0, h1, s0, s1) in ((0, (h[0], h[1], secant[0], secant[1])),
                                  (-1, (h[-1], h[-2], secant[-1], secant[-2]))):
        d = ((2 * h0 + h1) * s0 - h0 * s1) / (h0 + h1)
        if np.sign(d) != np.sign(s0):
            d = 0.0
        elif np.sign(s0) != np.sign(s1) and abs(d) > 3 * abs(s0):
            d = 3 * s0
        slope[end] = d
    return slope


def pchip(x, y):
    """The table's monotone piecewise-cubic Hermite interpolant, as a function of the extent."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    slope = pchip_slopes(x, y)

    def p0(e):
        i = np.clip(np.searchsorted(x, e, side="right") - 1, 0, len(x) - 2)
        h = x[i + 1] - x[i]
        t = (e - x[i]) / h
        return ((2 * t ** 3 - 3 * t ** 2 + 1) * y[i] + (t ** 3 - 2 * t ** 2 + t) * h * slope[i]
                + (3 * t ** 2 - 2 * t ** 3) * y[i + 1] + (t ** 3 - t ** 2) * h * slope[i + 1])
    return p0


@pytest.fixture(scope="module")
def contacts():
    """Per depth, quadrature points with extents spread over [0, reach] and positive weights."""
    rng = np.random.default_rng(11)
    extent = np.concatenate([rng.uniform(0.0, r, POINTS) for r in REACHES])
    weight = rng.uniform(1e-9, 1e-6, len(extent))
    owner = np.repeat(np.arange(len(REACHES)), POINTS)
    depth = np.arange(1, len(REACHES) + 1) * 1e-4
    model = ForceModel.from_points(depth, extent, weight, owner, np.ones(len(REACHES), dtype=np.int64))
    return model, extent, weight, owner


def point_sums(p0, extent, weight, owner):
    return np.bincount(owner, weights=weight * p0(extent), minlength=len(REACHES))


def test_a_steep_hyperbolic_law_is_the_points_sum(contacts):
    """K 0.995 (the stiffest a fit tries) bends most at e = 1: the grid's forces are the points'
    sums to 1e-9 (measured 4e-10 at the contact that reaches e = 1, 1e-12 at e = 0.98; the grid
    (k/K)², each weight split linearly between two nodes, was off by 7.3e-7 and 4.4e-8 there, and
    by 1.2e-9 for K 0.8). K 0.8 likewise, the linear law to round-off."""
    model, extent, weight, owner = contacts
    for m0, k, rtol in ((3e5, 0.995, 1e-9), (3e5, 0.8, 1e-9), (2e5, 0.0, 1e-12)):
        law = hyperbolic_law(m0, k) if k else linear_law(m0)
        exact = point_sums(hyperbolic(m0, k), extent, weight, owner)
        assert np.max(np.abs(model.forces(law) / exact - 1.0)) < rtol, (k, model.forces(law) / exact - 1.0)


@pytest.mark.parametrize("name", TABLES)
def test_a_table_with_a_tiny_first_knot_is_the_points_sum(contacts, name):
    """A table whose first knot is below 1e-6 bends hardest there, where a shallow contact lies
    whole: the grid's forces are the points' sums to 3e-8 at every depth (measured at most 9e-9,
    for the first knot at 1e-8 and the contact below e = 1e-8; 3e-10 below 1e-6; the grid (k/K)²,
    each weight split linearly between two nodes, was off by up to 1.1e-2 below e = 1e-8, 1e-4
    below 1e-6, 1e-6 below 1e-4). The interpolant written here is the law's own (to 1e-12)."""
    extent_knots, pressure_knots = TABLES[name]
    model, extent, weight, owner = contacts
    law = table_law_from_points(extent_knots, pressure_knots)
    p0 = pchip(extent_knots, pressure_knots)
    probe = np.concatenate([np.geomspace(1e-12, 1.0, 2001), np.linspace(0.0, 1.0, 2001)])
    assert np.allclose(p0(probe), law.pressure(probe), rtol=1e-12, atol=0.0)
    exact = point_sums(p0, extent, weight, owner)
    error = model.forces(law) / exact - 1.0
    assert np.max(np.abs(error)) < 3e-8, error
