"""Sheets folded sharp (no bend radius) are layered with a block in each fold's corner
(fieldgen/sizing/fold.py; docs/model.md §2.10). The parts are right prisms of their sections,
so the volume, the surface and the corner are known exactly; the parabola across a free panel is
the closed form (docs/model.md §2.10, "Thin walls")."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.io.vtk_data import distance_to_triangles
from fieldgen.meshing.tetmesh import FREE, boundary_faces_of, tet_volumes
from fieldgen.sizing import fold, sheet
from fieldgen.surface.topology import compacted, edge_use, face_areas
from layered_mesh_checks import right_prism
from test_thin_walls import assert_parabola_across, built_layered

T = 2.0          # mm, every part's thickness


def angle(opening: float = 90.0, a: float = 40.0, b: float = 30.0, width: float = 30.0):
    """Two panels ``a`` and ``b`` long meeting at ``opening`` degrees, no bend radius (the outer
    corner at the origin, panel A along x and T thick in y, ``width`` wide in z)."""
    th = np.radians(opening)
    u, n = np.array([np.cos(th), np.sin(th)]), np.array([np.sin(th), -np.cos(th)])
    inner = ((T - T * n[1]) / n[0], T)                 # on z = T and T from panel B's outer face
    outline = [(0, 0), (a, 0), (a, T), inner, tuple(b * u + T * n), tuple(b * u)]
    caps = [(0, 1, 2), (0, 2, 3), (0, 3, 4), (0, 4, 5)]
    return right_prism(outline, caps, width)


def channel():
    """A U channel 40 mm wide and 20 mm high, two sharp folds."""
    outline = [(0, 0), (40, 0), (40, 20), (38, 20), (38, 2), (2, 2), (2, 20), (0, 20)]
    caps = [(0, 1, 4), (0, 4, 5), (1, 2, 3), (1, 3, 4), (0, 5, 6), (0, 6, 7)]
    return right_prism(outline, caps, 30.0)


def zee():
    """A Z: one fold up, one down, so each side meets one fold from outside."""
    outline = [(0, 0), (30, 0), (30, 2), (2, 2), (2, 20), (-28, 20), (-28, 18), (0, 18)]
    caps = [(0, 1, 2), (0, 2, 3), (0, 3, 7), (3, 4, 7), (4, 6, 7), (4, 5, 6)]
    return right_prism(outline, caps, 30.0)


def tapered(part, taper: float = 0.3):
    """``part`` with panel A (x > T) shortened linearly along z by ``taper`` of its length at its
    far end in z, so it is no prism (a prism's section is layered as a wall, not as a sheet); every
    face stays flat and the thickness T."""
    v = np.array(part.vertices)
    beyond = v[:, 0] > T
    v[beyond, 0] = T + (v[beyond, 0] - T) * (1.0 - taper * v[beyond, 2] / v[:, 2].max())
    out = trimesh.Trimesh(v, np.asarray(part.faces), process=False)
    assert out.is_watertight and out.volume > 0
    return out


def _metres(part):
    return np.asarray(part.vertices) * 1e-3, np.asarray(part.faces)


@pytest.mark.parametrize("make", [lambda: angle(90.0), lambda: angle(120.0), lambda: angle(60.0), channel],
                         ids=["right angle", "obtuse", "acute", "channel"])
def test_a_sharp_fold_is_filled_by_a_corner_block_that_conforms(make):
    """The mesh fills the part exactly (its volume and its surface), every face used once is on
    the part's surface (nothing left open between the block and the panels), and tets lie in the
    corner, the T x T wedge no panel's columns reach."""
    part = make()
    vertices, faces = _metres(part)
    made = sheet.layered_sheet(vertices, faces, np.full(len(faces), FREE), 300_000)
    assert made is not None
    mesh, record = made
    volumes = tet_volumes(mesh.points, mesh.tets)
    assert volumes.min() > 0 and volumes.sum() == pytest.approx(part.volume * 1e-9, rel=1e-9)
    once = boundary_faces_of(mesh.tets)
    assert edge_use(once).closed_and_wound
    assert face_areas(mesh.points, once).sum() == pytest.approx(part.area * 1e-6, rel=1e-9)
    assert distance_to_triangles(mesh.points[once].mean(axis=1), vertices, faces).max() < 1e-12
    assert record["distance_apart"] < 1e-12 and record["thickness"] == pytest.approx(T * 1e-3, rel=1e-9)
    centroids = mesh.points[mesh.tets].mean(axis=1) * 1e3
    corner = (centroids[:, 0] > 0) & (centroids[:, 0] < T * 0.5) & (centroids[:, 1] > 0) & (centroids[:, 1] < T * 0.5)
    assert corner.any()                 # next to the outer crease at the origin, which no column reaches


def test_a_fold_met_from_outside_on_both_sides_is_refused_before_remeshing(monkeypatch):
    """A Z has one fold inward on each side: from either side, the columns of one fold would
    meet, so it is left to TetGen, and MMGS never runs."""
    vertices, faces = _metres(zee())
    assert sheet.sheet_sides(vertices, faces) is not None
    monkeypatch.setattr(sheet, "started_side", lambda *a, **k: pytest.fail("remeshed a side that folds outward"))
    assert sheet.layered_sheet(vertices, faces, np.full(len(faces), FREE), 300_000) is None


def test_only_a_fold_met_from_inside_splits_the_side():
    """The right angle's inner side splits at its crease into two panels (the crease's points
    taken twice, once a panel); its outer side, where the fold is met from outside, does not."""
    vertices, faces = _metres(angle(90.0))
    _, side = sheet.sheet_sides(vertices, faces)
    inner = compacted(vertices, faces[side == 0])
    points, triangles, creases = fold.split_at_creases(*inner)
    assert len(creases.inner) == 2 and len(points) == len(inner[0]) + 2
    assert np.allclose(points[creases.inner][:, :2], [[T * 1e-3, T * 1e-3]] * 2)
    assert set(creases.panel[creases.inner]) != set(creases.panel[creases.copy])
    assert fold.split_at_creases(*compacted(vertices, faces[side == 1])) is None


@pytest.mark.slow
def test_a_right_angle_meets_the_accuracy_by_default_with_the_parabola_across_its_panel(tmp_path):
    """Built with no flags, the angle (80 x 60 x 60 mm, tapered, so no prism: a part a few
    thicknesses across is meshed by TetGen's passes as any) is layered within 1 % and the
    budget; across panel A, away from its ends, its cut sides and the fold, the extent is the
    parabola of a free sheet."""
    asset, metadata = built_layered(tmp_path, tapered(angle(90.0, 80.0, 60.0, 60.0)), "angle", "layered sheet")
    inside = lambda c: (c[:, 0] > 20.0) & (c[:, 0] < 50.0) & (c[:, 2] > 15.0) & (c[:, 2] < 45.0)    # noqa: E731
    # The extent's maximum lies in the fold's corner, thicker than a panel: 1.18 times the panel's peak.
    assert_parabola_across(asset, metadata, 1, T, inside, (1.0, 1.5), 0.05)
