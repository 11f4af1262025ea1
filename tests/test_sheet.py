"""A sheet of one thickness, bent (fieldgen/sizing/sheet.py): found from its surface, meshed in
layers across it, and by default within the accuracy where TetGen's passes stopped at 3.95 %.

Expected values come from the part made in the test (its thickness, its volume and area from
trimesh, the faces at its end) and, for the default build, the parabola across a free sheet far
from its rim and its bend (docs/model.md §2.10, "Thin walls"), never from the mesher's output."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.meshing.tetmesh import FREE, RIGID, tet_volumes
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.sizing import sheet
from fieldgen.surface.remesh import default_tolerance
from fieldgen.surface.topology import edge_use
from layered_mesh_checks import right_prism
from sheet_parts import bent_sheet
from test_thin_walls import rms_error_where

THICKNESS = 2.0       # mm, bent_sheet's default


def _in_metres(part: trimesh.Trimesh):
    return np.asarray(part.vertices, dtype=np.float64) * 1e-3, np.asarray(part.faces, dtype=np.int64)


def test_a_bent_sheet_is_found_with_its_thickness_and_the_inside_of_the_bend_first():
    vertices, faces = _in_metres(bent_sheet())
    t, side = sheet.sheet_sides(vertices, faces)
    assert t == pytest.approx(THICKNESS * 1e-3, rel=1e-9)
    normals = trimesh.Trimesh(vertices, faces, process=False).face_normals
    areas = trimesh.Trimesh(vertices, faces, process=False).area_faces
    # on the flat first leg (x < 25 mm) side 0 is the face at z = t, facing up, into the bend
    flat = vertices[faces].mean(axis=1)[:, 0] < 0.025
    assert np.all(normals[flat & (side == 0), 2] > 0.999) and np.all(normals[flat & (side == 1), 2] < -0.999)
    # the inside of the bend is shorter by t x the angle, across the bend's width
    assert areas[side == 0].sum() < areas[side == 1].sum()
    # the rim: the cut faces (normals across the sheet), one thickness wide
    assert np.all(side[np.abs(normals[:, 1]) > 0.9] == -1)


def test_a_block_a_sharp_fold_and_a_step_are_not_sheets():
    block = trimesh.creation.box(extents=(0.03, 0.02, 0.01))
    fold = right_prism([(0, 0), (40, 0), (40, 2), (2, 2), (2, 40), (0, 40)],
                       [(3, 4, 5), (3, 5, 0), (3, 0, 1), (3, 1, 2)], 60.0)         # an angle, no bend radius
    step = right_prism([(0, 0), (60, 0), (60, 2), (30, 2), (30, 4), (0, 4)],
                       [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5)], 60.0)         # 2 and 4 mm
    for part in (block, fold, step):
        assert sheet.sheet_sides(np.asarray(part.vertices) * (1 if part is block else 1e-3),
                                 np.asarray(part.faces)) is None


def test_the_layered_sheet_fills_the_part_conforms_and_keeps_a_bonded_end():
    part = bent_sheet()
    vertices, faces = _in_metres(part)
    centroids = vertices[faces].mean(axis=1)
    markers = np.where(np.abs(centroids[:, 0]) < 1e-9, RIGID, FREE)               # the end at x = 0
    made = sheet.layered_sheet(vertices, faces, markers, 300_000)
    assert made is not None
    mesh, record = made
    again, _ = sheet.layered_sheet(vertices, faces, markers, 300_000)
    assert np.array_equal(mesh.points, again.points) and np.array_equal(mesh.tets, again.tets)
    tolerance = default_tolerance(vertices)
    volumes = tet_volumes(mesh.points, mesh.tets)
    assert volumes.min() > 0
    assert abs(volumes.sum() - part.volume * 1e-9) <= tolerance * part.area * 1e-6
    assert edge_use(mesh.boundary_faces).closed_and_wound          # conforms: no inner face left on the boundary
    assert record["layers"] == sheet.LAYERS and len(mesh.points) % (sheet.LAYERS + 1) == 0
    assert record["distance_apart"] <= tolerance and record["thickness"] == pytest.approx(2e-3, rel=1e-9)
    ends = np.abs(mesh.points[mesh.boundary_faces][:, :, 0]).max(axis=1) < 1e-6
    assert ends.any()
    assert np.all(mesh.boundary_markers[ends] == RIGID) and np.all(mesh.boundary_markers[~ends] == FREE)


def test_a_sheet_past_its_budget_is_left_to_tetgen():
    vertices, faces = _in_metres(bent_sheet())
    assert sheet.layered_sheet(vertices, faces, np.full(len(faces), FREE), 1_000) is None


@pytest.mark.slow
def test_a_bent_sheet_meets_the_accuracy_by_default(tmp_path):
    """TetGen's passes stopped at the budget at 3.95 % (e) and 3.97 % (L) on this part; by default
    now within 1 %, and across the first leg, away from its end, its cut sides and the bend, the
    parabola of a free sheet within twice the estimate. With the surface kept exactly
    (``--surface-tolerance 0``) the sheet is not layered."""
    path, out = tmp_path / "sheet.stl", tmp_path / "sheet.vtu"
    bent_sheet().export(path)
    result = build(path, out, BuildOptions(units="mm", modulus=1e5, dissipation=1.0))
    metadata, asset = read_metadata(out), read_asset(out)
    assert metadata["mesher"]["mesher"].startswith("layered sheet") and not metadata["warnings"]
    estimate = metadata["error_estimate"]
    assert max(estimate["extent"], estimate["pressure"], estimate["characteristic_length"]) <= 0.01
    assert result.tets <= 300_000
    points = asset.points * 1e3
    exact = lambda x: 1.0 - (2.0 * (x[:, 2] - THICKNESS / 2) / THICKNESS) ** 2          # noqa: E731
    inside = lambda c: (c[:, 0] > 8.0) & (c[:, 0] < 22.0) & (np.abs(c[:, 1]) < 8.0)    # noqa: E731
    keep = inside(points)
    scale = float(asset.extent[keep] @ exact(points[keep]) / (asset.extent[keep] @ asset.extent[keep]))
    true, share = rms_error_where(points, asset.tets, scale * asset.extent, exact, inside)
    assert 0.9 < scale < 1.1 and share > 0.05 and true <= 2.0 * estimate["extent"]
    kept = tmp_path / "kept.vtu"
    build(path, kept, BuildOptions(units="mm", modulus=1e5, dissipation=1.0, surface_tolerance=0.0))
    assert not read_metadata(kept)["mesher"]["mesher"].startswith("layered sheet")


def test_a_thin_spherical_shell_is_a_sheet_with_no_rim():
    """Two spheres, the inner one a cavity: a sheet whose sides have no rim. Its side gets the
    metric's edge along everywhere, and the layered mesh (if MMGS's count for the curvature fits
    the budget) fills the shell; it is never an error."""
    outer = trimesh.creation.icosphere(subdivisions=4, radius=0.02)
    inner = trimesh.creation.icosphere(subdivisions=4, radius=0.018)
    vertices = np.vstack([outer.vertices, inner.vertices])
    faces = np.vstack([outer.faces, inner.faces[:, ::-1] + len(outer.vertices)])      # the cavity wound inwards
    t, side = sheet.sheet_sides(vertices, faces)
    assert t == pytest.approx(0.002, rel=0.01) and np.all(side >= 0)
    assert np.all(side[len(outer.faces):] == 0)                                     # the inside first
    samples, across = sheet.rim_directions(inner.vertices, inner.faces, 1e-4)
    assert len(samples) == 0 and len(across) == 0
    metric = sheet.rim_metric(inner.vertices, samples, across, t)
    np.testing.assert_allclose(metric, np.tile([1, 0, 0, 1, 0, 1], (len(inner.vertices), 1)) / (sheet.EDGE_ALONG * t) ** 2)
    made = sheet.layered_sheet(vertices, faces, np.full(len(faces), FREE), 2_000_000)
    assert made is not None
    facets = trimesh.Trimesh(vertices, faces, process=False).volume
    assert tet_volumes(made[0].points, made[0].tets).sum() == pytest.approx(facets, rel=1e-2)
