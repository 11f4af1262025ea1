"""Hollow parts: a sealed cavity stays empty and its wall is a free surface (fieldgen/surface/cavities.py).

Expected values: which region is void is known from how the test builds the shells; volumes
and areas from trimesh; the extent of a free hollow ball from the spherical shell's closed form
(−Δu = 1 between radii a and b, u = 0 on both)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
from fieldgen.meshing.tetmesh import FREE, boundary_faces_of
from fieldgen.surface.cavities import cavity_points
from layered_mesh_checks import assert_fills_and_conforms
from test_thin_walls import rms_error_where


def _shells(*meshes: trimesh.Trimesh) -> trimesh.Trimesh:
    return trimesh.util.concatenate(list(meshes))


def _inverted(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    mesh = mesh.copy()
    mesh.invert()
    return mesh


def test_a_part_of_one_shell_or_of_shells_side_by_side_has_no_cavity():
    box = trimesh.creation.box((2.0, 2.0, 2.0))
    assert cavity_points(box.vertices, box.faces).shape == (0, 3)
    apart = _shells(box, box.copy().apply_translation((5.0, 0.0, 0.0)))
    assert cavity_points(apart.vertices, apart.faces).shape == (0, 3)


@pytest.mark.parametrize("cavity_winding", ["inward", "outward"])
def test_a_sealed_cavity_gets_one_point_inside_it_whichever_way_its_wall_is_wound(cavity_winding):
    outer, inner = trimesh.creation.box((6.0, 4.0, 2.5)), trimesh.creation.box((5.6, 3.6, 2.1))
    hollow = _shells(outer, _inverted(inner) if cavity_winding == "inward" else inner)
    points = cavity_points(hollow.vertices, hollow.faces)
    assert len(points) == 1 and inner.contains(points).all()


def test_a_solid_inside_a_cavity_is_material_and_the_gap_around_it_is_void():
    outer, wall = trimesh.creation.icosphere(3, radius=10.0), _inverted(trimesh.creation.icosphere(3, radius=8.0))
    island = trimesh.creation.icosphere(3, radius=5.0)
    nested = _shells(outer, wall, island)
    points = cavity_points(nested.vertices, nested.faces)
    cavity = trimesh.creation.icosphere(3, radius=8.0)
    assert len(points) == 1 and cavity.contains(points).all() and not island.contains(points).any()


def test_tetgen_leaves_the_cavity_empty_and_its_wall_on_the_boundary():
    """Before: the cavity was filled (TetGen fills all a surface encloses) and the build refused
    the part: "closed pieces inside one another (a hollow part)"."""
    outer, inner = trimesh.creation.box((0.06, 0.04, 0.025)), trimesh.creation.box((0.056, 0.036, 0.021))
    hollow = _shells(outer, _inverted(inner))
    mesh = tetrahedralize(hollow.vertices, hollow.faces, np.full(len(hollow.faces), FREE),
                          options=MeshingOptions(max_volume=2e-8))
    assert_fills_and_conforms(mesh, outer.volume - inner.volume, outer.area + inner.area)
    assert np.all(mesh.boundary_markers == FREE)


def _shell_extent(r: np.ndarray, a: float, b: float) -> np.ndarray:
    """−Δu = 1 for a ≤ r ≤ b, u(a) = u(b) = 0 (u = −r²/6 + c/r + d), normalised to a maximum of 1."""
    c = (b * b - a * a) / 6.0 / (1.0 / b - 1.0 / a)          # negative
    d = a * a / 6.0 - c / a
    u = lambda x: -x * x / 6.0 + c / x + d          # noqa: E731
    return u(np.asarray(r)) / u((-3.0 * c) ** (1.0 / 3.0))    # u'(r) = 0 at r³ = −3c


@pytest.mark.slow
def test_a_hollow_ball_builds_by_default_with_the_shells_field(tmp_path):
    """A ball 20 mm across with a sealed cavity 10 mm across, free inside and out: built from the
    command line with no flags, within the accuracy, its extent the spherical shell's closed form
    within twice the estimate."""
    a, b = 5.0, 10.0
    hollow = _shells(trimesh.creation.icosphere(4, radius=b), _inverted(trimesh.creation.icosphere(4, radius=a)))
    path, out = tmp_path / "hollow_ball.stl", tmp_path / "hollow_ball.vtu"
    hollow.export(path)
    result = CliRunner().invoke(main, ["build", str(path), "--units", "mm", "--modulus", "1e5", "--dissipation", "1",
                                       "-o", str(out), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report, metadata, asset = json.loads(result.stdout), read_metadata(out), read_asset(out)
    cavity = trimesh.creation.icosphere(4, radius=a).volume
    assert report["warnings"] == [f"the part is hollow: 1 sealed cavity ({cavity:.4g} mm^3 in all) left empty, its "
                                  "wall free (e = 0); to make an inner shell a rigid core instead, give it in its "
                                  "own file as --core"]
    points = asset.points * 1e3
    written = trimesh.load(path)
    in_mm = SimpleNamespace(points=points, tets=asset.tets, boundary_faces=boundary_faces_of(asset.tets))
    assert_fills_and_conforms(in_mm, written.volume, written.area, rel=1e-6)     # STL: float32
    exact = lambda x: _shell_extent(np.linalg.norm(x, axis=1), a, b)     # noqa: E731
    true, share = rms_error_where(points, asset.tets, asset.extent, exact, lambda c: np.ones(len(c), bool))
    estimate = metadata["error_estimate"]
    assert max(estimate["extent"], estimate["pressure"], estimate["characteristic_length"]) <= 0.01
    assert share == pytest.approx(1.0) and true <= 2.0 * estimate["extent"]


def test_the_shells_closed_form_solves_the_poisson_problem():
    a, b = 5.0, 10.0
    r = np.linspace(a, b, 20001)
    e = _shell_extent(r, a, b)
    assert abs(e[0]) < 1e-12 and abs(e[-1]) < 1e-12 and abs(e.max() - 1.0) < 1e-6
    # −(1/r²)(r² e')' is the same constant everywhere (the normalised source)
    h = r[1] - r[0]
    source = -np.gradient(r * r * np.gradient(e, h), h) / (r * r)
    assert np.ptp(source[10:-10]) < 1e-5 * source[10:-10].mean()


def test_two_cavities_are_counted_and_a_part_without_one_is_not_warned(tmp_path):
    """The build's warning names the cavities and their volume in the part's units; before, such a
    part was refused ("closed pieces inside one another (a hollow part), and the cavity was filled")."""
    outer = trimesh.creation.box((40.0, 20.0, 10.0))
    left = _inverted(trimesh.creation.box((10.0, 10.0, 5.0)).apply_translation((-10.0, 0.0, 0.0)))
    right = _inverted(trimesh.creation.box((10.0, 10.0, 5.0)).apply_translation((10.0, 0.0, 0.0)))
    path, out = tmp_path / "two.stl", tmp_path / "two.vtu"
    _shells(outer, left, right).export(path)
    result = CliRunner().invoke(main, ["build", str(path), "--units", "mm", "--modulus", "1e5", "--dissipation", "1",
                                       "--edge-length", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "the part is hollow: 2 sealed cavities (1000 mm^3 in all) left empty" in result.stderr
    assert read_metadata(out)["warnings"][0].startswith("the part is hollow: 2 sealed cavities")
    outer.export(tmp_path / "solid.stl")
    result = CliRunner().invoke(main, ["build", str(tmp_path / "solid.stl"), "--units", "mm", "--modulus", "1e5",
                                       "--dissipation", "1", "--edge-length", "2", "-o", str(tmp_path / "solid.vtu")])
    assert result.exit_code == 0 and "hollow" not in result.stderr
