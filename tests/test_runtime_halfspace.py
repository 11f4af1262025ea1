"""Halfspace fields that reproduce elasticity (D App. B, docs/model.md §2.8): Hertz and the flat punch."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.pose import Pose
from fieldgen.runtime.contact.wrench import contact
from test_runtime_meshes import box_grid, cylinder_surface

E_STAR = 1e6     # Pa
DEPTH = 0.01     # slab thickness, m (surface at z = DEPTH)


def halfspace_slab(half_width, cells, law, layers=30, grading=2.5):
    """Slab [-w, w]² × [0, DEPTH] whose z-layers crowd towards the surface (h = (k/layers)^grading),
    with p0 = law(h) at each vertex, h the depth below the surface. The field depends on z only
    and every tet spans two adjacent layers, so the P1 field is the law interpolated between layers."""
    levels = np.sort(DEPTH - DEPTH * np.linspace(0, 1, layers + 1) ** grading)
    xy = np.linspace(-half_width, half_width, cells + 1)
    points, tets = box_grid(xy, xy, levels)
    return CompliantGeometry.from_arrays(points, tets, law(DEPTH - points[:, 2]), name="halfspace")


@pytest.fixture(scope="module")
def hertz_slab():
    return halfspace_slab(0.02, 16, lambda h: (E_STAR / np.pi) * np.sqrt(np.maximum(h, 0) / 0.05))


@pytest.fixture(scope="module")
def sphere():
    ico = trimesh.creation.icosphere(subdivisions=6, radius=0.05)
    return RigidGeometry(ico.vertices, ico.faces, name="sphere")


@pytest.mark.slow
@pytest.mark.parametrize("depth", [0.0005, 0.001, 0.0015])
def test_hertz_sphere(hertz_slab, sphere, depth):
    """p0 = (E*/π)·sqrt(h/R) under a rigid sphere R = 5 cm gives Hertz F = (4/3)E*R^½d^{3/2}
    (D B). Integrating the same field exactly over a true sphere (not the paraboloid) gives
    F·(1 − 2d/(5R)); we require 3% of Hertz (the issue's bound) and 1.2% of the exact-sphere
    value (what is left: the inscribed icosphere, 81920 faces, sits up to 4e-5·R inside the
    sphere, and the sqrt field is interpolated linearly between layers)."""
    R = 0.05
    _, wrench = contact(hertz_slab, np.eye(4), sphere, Pose.from_xyz_rpy(0.0003, 0.0002, DEPTH + R - depth))
    hertz = 4 / 3 * E_STAR * np.sqrt(R) * depth ** 1.5
    assert wrench.force[2] == pytest.approx(hertz, rel=0.03)
    assert wrench.force[2] == pytest.approx(hertz * (1 - 0.4 * depth / R), rel=0.012)
    assert np.hypot(*wrench.force[:2]) < 1e-3 * wrench.force[2]


@pytest.mark.parametrize("depth", [0.0002, 0.001, 0.003])
def test_flat_punch(depth):
    """p0 = 2E*·h/(πR) under a flat rigid cylinder of radius R gives F = 2E*·d·R (D B). The
    punch is a 128-gon prism whose area is πR²·sinc(2π/128) of the disc's; corrected for that,
    the field is linear so the force is exact to rounding, and the 1% bound of the issue holds
    uncorrected."""
    R = 0.01
    body = halfspace_slab(0.02, 8, lambda h: 2 * E_STAR * h / (np.pi * R), layers=4, grading=1.0)
    punch = RigidGeometry(*cylinder_surface(R, 0.02, 128), name="punch")
    _, wrench = contact(body, np.eye(4), punch, Pose.from_xyz_rpy(0.0011, -0.0007, DEPTH - depth, 0, 0, 7.0))
    exact = 2 * E_STAR * depth * R
    polygon = 128 / 2 * np.sin(2 * np.pi / 128) / np.pi
    assert wrench.force[2] == pytest.approx(exact, rel=0.01)
    assert wrench.force[2] == pytest.approx(exact * polygon, rel=1e-9)
    assert np.hypot(*wrench.force[:2]) < 1e-9 * exact
