"""A thin-walled prism of any section (a tee, an I-beam) meshed for its section's own extent and
extruded (fieldgen/sizing/section_field.py), and thin-walled prisms layered whatever the first edge.

Expected values are closed forms — the parabola across a free wall, ``4 s (1 − s)``, whose second
derivative across is ``−8 / t²`` (so ``t / 11`` edges across for 11 cells); the free tube's logarithmic profile — and the input's own
geometry (areas by hand, outline vertices), never the mesher's output."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.meshing.tetmesh import FREE
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.sizing import lengthwise
from fieldgen.errors import MesherCrash
from fieldgen.fe.extent import solve_extent
from fieldgen.sizing import section_field
from fieldgen.sizing.section_field import field_section, layered_field_wall, section_metric, section_slab
from layered_mesh_checks import assert_keeps_a_bonded_face, right_prism
from test_thin_walls import assert_parabola_across, built_layered, rms_error_where, tube_extent

#: (outline counter-clockwise, its triangulation, the section's area by hand, the flange's
#: thickness), mm: a tee (flange 60 x 3 on a 20 x 3 web) and an I-beam (40 x 3 flanges, a 34 x 3 web).
TEE = ([(0, 0), (60, 0), (60, 3), (31.5, 3), (31.5, 23), (28.5, 23), (28.5, 3), (0, 3)],
       [(0, 1, 2), (0, 2, 3), (0, 3, 6), (0, 6, 7), (6, 3, 4), (6, 4, 5)], 60 * 3 + 3 * 20, 3.0)
IBEAM = ([(0, 0), (40, 0), (40, 3), (21.5, 3), (21.5, 37), (40, 37), (40, 40), (0, 40), (0, 37), (18.5, 37),
          (18.5, 3), (0, 3)],
         [(0, 1, 2), (0, 2, 3), (0, 3, 10), (0, 10, 11), (10, 3, 4), (10, 4, 9), (9, 4, 5), (9, 5, 6), (9, 6, 7),
          (9, 7, 8)], 2 * 40 * 3 + 3 * 34, 3.0)


def _section(section, length=80.0):
    part = right_prism(section[0], section[1], length, process=True)
    (points, _, outline, _, _), wall = lengthwise.thin_section(np.asarray(part.vertices), np.asarray(part.faces))
    return part, points, outline, wall


def test_the_sections_metric_asks_for_the_parabolas_cells_across_a_long_strip():
    """A 100 x 4 strip triangulated finely: away from its ends the section's own extent is
    4 s (1 − s) across (the slab it is solved on, free sides and insulated ends), and its
    metric asks for edges t / across across the strip's middle half (|λ| = 8 / t²) and the
    longest edge along it."""
    length, t, across = 100.0, 4.0, 11
    x, y = np.meshgrid(np.linspace(0, length, 201), np.linspace(0, t, 17), indexing="ij")
    points = np.column_stack([x.ravel(), y.ravel()])
    ids = np.arange(points.shape[0]).reshape(x.shape)
    a, b, c, d = ids[:-1, :-1].ravel(), ids[1:, :-1].ravel(), ids[1:, 1:].ravel(), ids[:-1, 1:].ravel()
    triangles = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    slab = section_slab(points, triangles, t)
    u = solve_extent(slab).extent[:len(points)]
    middle = np.abs(points[:, 0] - length / 2) < 10
    s = points[middle, 1] / t
    assert np.abs(u[middle] - 4 * s * (1 - s)).max() < 0.01
    metric = section_metric(points, triangles, across, 0.01, 3 * t, t)
    inner = middle & (points[:, 1] > t / 4) & (points[:, 1] < 3 * t / 4)
    assert 1 / np.sqrt(metric[inner, 2]) == pytest.approx(t / across, rel=0.05)      # across: y
    assert np.allclose(1 / np.sqrt(metric[inner, 0]), 3 * t) and np.abs(metric[inner, 1]).max() < 1e-3


@pytest.mark.parametrize("section", [TEE, IBEAM], ids=["tee", "ibeam"])
def test_the_section_is_filled_keeps_its_outline_and_is_fine_across_its_walls(section):
    _, points, outline, wall = _section(section)
    xy, triangles = field_section(points, outline, wall, lengthwise.EDGE_ALONG * wall)
    corners = xy[triangles]
    twice = ((corners[:, 1, 0] - corners[:, 0, 0]) * (corners[:, 2, 1] - corners[:, 0, 1])
             - (corners[:, 1, 1] - corners[:, 0, 1]) * (corners[:, 2, 0] - corners[:, 0, 0]))
    assert np.all(np.abs(twice) > 0)
    assert 0.5 * np.abs(twice).sum() == pytest.approx(section[2], rel=1e-9)      # no gap, no overlap
    gap = np.linalg.norm(points[np.unique(outline)][:, None, :] - xy[None, :, :], axis=2).min(axis=1)
    assert gap.max() < 1e-9 * np.ptp(xy, axis=0).max()                          # the outline kept
    # Across the bottom flange, a quarter of its width from its tip and from the web, the
    # triangles are at most a quarter of the wall's thickness high and longer than high (the
    # outline's given split, 0.3 walls, bounds them along it).
    centroid = corners.mean(axis=1)
    flange = (np.abs(centroid[:, 0] - 10) < 3) & (centroid[:, 1] < section[3])
    heights = np.ptp(corners[flange, :, 1], axis=1)
    widths = np.ptp(corners[flange, :, 0], axis=1)
    assert flange.sum() > 20 and heights.max() <= section[3] / 4 and np.median(widths / heights) >= 2.5


def test_the_layered_tee_conforms_fills_it_and_keeps_each_condition():
    tee, *_ = _section(TEE)
    assert_keeps_a_bonded_face(layered_field_wall, tee, 1, 0.0)           # the flange's underside


@pytest.mark.slow
@pytest.mark.parametrize("section", [TEE, IBEAM], ids=["tee", "ibeam"])
def test_a_tee_and_an_ibeam_meet_the_accuracy_by_default(tmp_path, section):
    """TetGen's passes stopped at the budget at 1.90 % (tee) and 2.07 % (I-beam). By default now
    within 1 % estimated and the budget, and across the bottom flange, away from its tip, the web
    and the prism's ends, the parabola of a free wall within twice the estimate."""
    length, wall = 80.0, section[3]
    part = right_prism(section[0], section[1], length, process=True)
    asset, metadata = built_layered(tmp_path, part, "part", "layered section")
    inside = lambda c: ((np.abs(c[:, 0] - 10) < 4) & (c[:, 1] < wall)               # noqa: E731
                        & (np.abs(c[:, 2] - length / 2) < length / 4))
    assert_parabola_across(asset, metadata, 1, wall, inside, (0.5, 2.0), 0.01)


@pytest.mark.slow
def test_a_tube_not_thin_against_the_first_edge_is_layered_and_meets_the_accuracy(tmp_path):
    """A tube 20 mm across with a 2.5 mm wall, 100 mm long: its wall is thicker than 0.75 of the
    first edge, so it was meshed by TetGen's passes (8.1 % at the budget). Thin by its section's
    own measure, it is layered now: within 1 %, and the free tube's closed form across its wall
    (half-way along) within twice the estimate."""
    a, b, length = 7.5, 10.0, 100.0
    path, out = tmp_path / "tube.stl", tmp_path / "tube.vtu"
    trimesh.creation.annulus(r_min=a, r_max=b, height=length, sections=96).export(path)
    build(path, out, BuildOptions(units="mm", modulus=1e5, dissipation=1.0))
    metadata, asset = read_metadata(out), read_asset(out)
    assert metadata["mesher"]["mesher"].startswith("layered wall") and not metadata["warnings"]
    estimate = metadata["error_estimate"]
    assert max(estimate["extent"], estimate["pressure"], estimate["characteristic_length"]) <= 0.01
    points = asset.points * 1e3
    # the 96-gon's faces lie within R (1 − cos(π/96)) of the circle: a mean radius for each side
    radius = lambda x: np.hypot(x[:, 0], x[:, 1])                                   # noqa: E731
    exact = lambda x: tube_extent(np.clip(radius(x), a, b), a, b)                   # noqa: E731
    inside = lambda c: np.abs(c[:, 2]) < length / 4                                 # noqa: E731
    true, share = rms_error_where(points, asset.tets, asset.extent, exact, inside)
    assert share > 0.3 and true <= 2.0 * estimate["extent"] + 0.002


def test_a_section_mmg2d_fails_on_is_left_to_tetgen(monkeypatch):
    def fails(*args, **kwargs):
        raise MesherCrash("MMG2D could not mesh the plate's section (made to fail)")

    monkeypatch.setattr(section_field, "mmg2d", fails)
    tee, *_ = _section(TEE)
    assert layered_field_wall(tee.vertices, tee.faces, np.full(len(tee.faces), FREE)) is None


def test_a_section_with_no_interior_is_refused_not_sized_by_nans():
    """Two triangles whose every vertex is on the outline: the section's extent is 0 everywhere."""
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    with pytest.raises(MesherCrash):
        section_metric(square, np.array([[0, 1, 2], [0, 2, 3]]), 11, 0.01, 1.0, 0.3)
