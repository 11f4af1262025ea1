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
from fieldgen.surface.cavities import cavities, cavity_points, cavity_warnings
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


def _overlapping_boxes() -> trimesh.Trimesh:
    """Two boxes that cross (an assembly's solids, not merged): a 20 mm cube and a 10 x 10 x 60 mm
    bar from 5 mm inside it (z from 5 down to -55). The bar's first face's first vertex lies
    inside the cube: a one-vertex probe took the bar for a cavity and reversed it."""
    cube = trimesh.creation.box(extents=(20.0, 20.0, 20.0))
    bar = trimesh.creation.box(extents=(10.0, 10.0, 60.0))
    bar.apply_translation((0.0, 0.0, -25.0))
    return trimesh.util.concatenate([cube, bar])


def test_crossing_solids_are_not_taken_for_a_cavity_and_robust_keeps_their_union(tmp_path):
    """Two crossing solids: the repair keeps both wound outward (a solid only partly inside
    another is no cavity: reversed, fTetWild would subtract it), so the plain build is refused
    for the crossing faces, not for a negative volume, and --robust meshes their union: the cube
    8,000 mm³ and the bar 6,000, of which 10 × 10 × 15 = 1,500 inside the cube: 12,500 mm³."""
    pytest.importorskip("pytetwild")
    mesh = _overlapping_boxes()
    path = tmp_path / "crossing.stl"
    mesh.export(path)
    from fieldgen.surface.repair import repair_surface
    vertices, faces, _, repairs = repair_surface(np.asarray(mesh.vertices), np.asarray(mesh.faces),
                                                 np.full(len(mesh.faces), -1))
    assert not any("reversed" in r for r in repairs), repairs
    refused = CliRunner().invoke(main, ["build", str(path), "--units", "mm", "--modulus", "1e6",
                                        "--dissipation", "1", "-o", str(tmp_path / "a.vtu")])
    assert refused.exit_code == 1 and "intersects itself" in refused.output and "pip install" not in refused.output
    out = tmp_path / "union.vtu"
    result = CliRunner().invoke(main, ["build", str(path), "--units", "mm", "--robust", "--modulus", "1e6",
                                       "--dissipation", "1", "-o", str(out), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["volume"] * 1e9 == pytest.approx(12_500.0, rel=0.01)
    assert "hollow" not in result.stderr


def _two_cubes_overlapping() -> trimesh.Trimesh:
    """Two 20 mm cubes, the second moved (10, 10, 5) mm, merged into one closed mesh that
    intersects itself: just inside either, the other encloses the point too (a count of two)."""
    first = trimesh.creation.box(extents=(20.0, 20.0, 20.0))
    second = trimesh.creation.box(extents=(20.0, 20.0, 20.0)).apply_translation((10.0, 10.0, 5.0))
    mesh = trimesh.util.concatenate([first, second])
    mesh.merge_vertices()
    return mesh


def test_shells_that_cross_bound_no_cavity_and_a_nested_one_still_does():
    """Parity says void only for shells that do not cross: before, the overlap of two crossing
    cubes (inside both, a count of two) was taken for a sealed cavity of 8,000 mm³."""
    crossing = _two_cubes_overlapping()
    assert cavities(crossing.vertices, crossing.faces) == []
    assert cavity_warnings(np.asarray(crossing.vertices) * 1e-3, crossing.faces, "mm") == ()
    nested = _shells(trimesh.creation.box(extents=(20.0, 20.0, 20.0)), trimesh.creation.box(extents=(10.0, 10.0, 10.0)))
    assert len(cavities(nested.vertices, nested.faces)) == 1


def test_robust_warns_of_a_real_cavity_and_not_of_two_crossing_solids(tmp_path):
    """--robust on a closed surface warns of its sealed cavities as the plain build does (before,
    it never did: fTetWild left the cavity empty, unsaid), and not of the overlap of a closed
    surface that intersects itself (its union is meshed, no cavity)."""
    pytest.importorskip("pytetwild")
    hollow = tmp_path / "hollow.stl"
    _shells(trimesh.creation.box(extents=(20.0, 20.0, 20.0)),
            _inverted(trimesh.creation.box(extents=(10.0, 10.0, 10.0)))).export(hollow)
    crossing = tmp_path / "crossing.stl"
    _two_cubes_overlapping().export(crossing)
    flags = ["--units", "mm", "--robust", "--modulus", "1e5", "--dissipation", "1", "--edge-length", "4", "-q"]
    result = CliRunner().invoke(main, ["build", str(hollow), *flags, "-o", str(tmp_path / "hollow.vtu"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["volume"] * 1e9 == pytest.approx(7_000.0, rel=0.01)    # the cavity is empty
    assert "the part is hollow: 1 sealed cavity (1000 mm^3 in all) left empty" in result.stderr
    result = CliRunner().invoke(main, ["build", str(crossing), *flags, "-o", str(tmp_path / "union.vtu"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["volume"] * 1e9 == pytest.approx(2 * 8_000.0 - 10 * 10 * 15, rel=0.01)
    assert "hollow" not in result.stderr and "cavit" not in result.stderr


def test_nesting_counts_a_solid_wholly_inside_another_and_not_one_that_crosses():
    """A sphere in a sphere is nested (a cavity at depth 1); a bar from inside both out through
    them is in neither (a one-vertex probe at its inner end counted it twice)."""
    from fieldgen.surface.repair import nesting_depths
    outer = trimesh.creation.icosphere(subdivisions=2, radius=10.0)
    inner = trimesh.creation.icosphere(subdivisions=2, radius=5.0)
    crossing = trimesh.creation.box(extents=(4.0, 4.0, 20.0))
    crossing.apply_translation((0.0, 0.0, 8.0))
    mesh = trimesh.util.concatenate([outer, inner, crossing])
    n1, n2 = len(outer.faces), len(inner.faces)
    pieces = [mesh.faces[:n1], mesh.faces[n1:n1 + n2], mesh.faces[n1 + n2:]]
    # the inner sphere is in the outer one (depth 1); the box crosses both: in neither
    assert nesting_depths(np.asarray(mesh.vertices), pieces).tolist() == [0, 1, 0]


@pytest.mark.parametrize("name", ["stretch_link_arm_l1.STL", "interbotix_uxarm_left_inner_knuckle.stl"])
def test_public_parts_of_crossing_solids_keep_every_solid_outward(meshes, name):
    """Two robot meshes saved as solids that cross (an arm's tube through its end cap, a
    knuckle's pins through it): no piece is reversed, so each piece's volume counts (trimesh's,
    each body alone) and none is subtracted. Before, a one-vertex probe reversed the tube (the
    enclosed volume came out negative) and the knuckle's body (--robust kept its pins: 2.5 %)."""
    from fieldgen.io.surface_readers import read_triangles
    from fieldgen.surface.repair import repair_surface
    from fieldgen.surface.topology import signed_volume

    vertices, faces, _, repairs = repair_surface(*read_triangles(meshes / name)[:3])
    bodies = trimesh.load(meshes / name, force="mesh").split(only_watertight=False)
    assert signed_volume(vertices, faces) == pytest.approx(sum(abs(b.volume) for b in bodies), rel=1e-6)
    assert not any("reversed" in r for r in repairs), repairs
