"""Characteristic thickness L = V / ∫|∇e| dV and dissipation χ = 1/(L τ) (D 5.2.1, C.3)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import Delaunay

from fieldgen.material.damping import characteristic_length, dissipation_from_expansion_rate
from fieldgen.errors import BuildError, OptionError
from fieldgen.meshing.tetmesh import orient_positive, tet_volumes


def random_block(seed, n=400, size=(0.1, 0.07, 0.03)):
    """A Delaunay tet mesh of a random point cloud in a box (corners included), positive tets."""
    rng = np.random.default_rng(seed)
    corners = np.array([[x, y, z] for x in (0, 1) for y in (0, 1) for z in (0, 1)], float)
    points = np.vstack([corners, rng.random((n, 3))]) * np.array(size)
    tets = orient_positive(points, Delaunay(points).simplices)
    keep = np.abs(tet_volumes(points, tets)) > 1e-15
    return points, tets[keep]


@pytest.mark.parametrize("seed", [0, 1])
def test_linear_field_gives_inverse_gradient_on_any_mesh(seed):
    points, tets = random_block(seed)
    h = 0.03
    extent = 1 - points[:, 2] / h                    # flat layer bonded at z = 0
    assert characteristic_length(points, tets, extent) == pytest.approx(h, rel=1e-12)
    g = np.array([3.0, -4.0, 12.0])                  # |g| = 13
    assert characteristic_length(points, tets, points @ g) == pytest.approx(1 / 13, rel=1e-12)


def test_weighted_mean_of_tet_thickness():
    # Two layers with different slopes: L = V_total / Σ |∇e| V_i (the |∇e| V-weighted mean of 1/|∇e|).
    points = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, -1]], float)
    tets = orient_positive(points, np.array([[0, 1, 2, 3], [0, 1, 2, 4]]))
    extent = np.array([0.0, 0.0, 0.0, 0.5, 0.2])     # slope 0.5 above, 0.2 below, each V = 1/6
    expected = (2 / 6) / (0.5 / 6 + 0.2 / 6)
    assert characteristic_length(points, tets, extent) == pytest.approx(expected, rel=1e-14)


def test_constant_field_and_bad_shape_are_refused():
    points, tets = random_block(0, n=50)
    with pytest.raises(BuildError, match="undefined"):
        characteristic_length(points, tets, np.zeros(len(points)))
    with pytest.raises(OptionError, match="one extent value per vertex"):
        characteristic_length(points, tets, np.zeros(len(points) - 1))


def test_dissipation_from_expansion_rate():
    assert dissipation_from_expansion_rate(0.01, 50.0) == pytest.approx(2.0)   # 1/(0.01 m * 50 /s) = 2 s/m
    assert dissipation_from_expansion_rate(0.5, 0.1) == pytest.approx(20.0)
    for length, rate in [(0.0, 1.0), (-1.0, 1.0), (1.0, 0.0), (1.0, np.inf), (np.nan, 1.0)]:
        with pytest.raises(OptionError):
            dissipation_from_expansion_rate(length, rate)
