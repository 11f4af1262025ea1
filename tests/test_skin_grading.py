"""A skin on a mount is bisected where the worst of its errors is (fieldgen/sizing/skin_grading.py,
docs/model.md §2.10): the per-tet shares of L's error, and the marking by the worst term."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from fieldgen.fe.estimate import RICHARDSON, ErrorEstimate, estimate_error
from fieldgen.fe.extent import solve_extent
from fieldgen.fe.refinement import red_refine
from fieldgen.material.modulus import linear_law
from fieldgen.meshing.tetmesh import FREE
from fieldgen.sizing.skin_grading import bisected_within, marked_by_worst


def _bonded_block(tmp_path):
    """A 1 x 1 x 0.3 block's TetGen mesh, bonded underneath: a rim along the bottom edges."""
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.surface.stage import load_surface

    box = trimesh.creation.box(extents=(1.0, 1.0, 0.3))
    box.apply_translation((0.5, 0.5, 0.15))
    box.export(tmp_path / "block.stl")
    surface = load_surface(tmp_path / "block.stl")
    markers = assign_conditions(surface, [parse_selector("normal:0,0,-1")], [])
    assert np.any(markers == FREE)
    return tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=0.12))


def _slope_volume(points, tets, values):
    """∫|∇e| over each tet of a P1 field, from the corners directly (no hat-gradient helper)."""
    corners = points[tets]
    edges = corners[:, 1:] - corners[:, :1]                       # (t, 3, 3)
    rises = values[tets][:, 1:] - values[tets][:, :1]            # (t, 3)
    gradient = np.linalg.solve(edges, rises[:, :, None])[:, :, 0]
    return np.linalg.norm(gradient, axis=1) * np.abs(np.linalg.det(edges)) / 6.0


def test_the_tets_shares_of_the_length_error_are_its_two_meshes_difference_tet_by_tet(tmp_path):
    """On a bonded block (a rim), each coarse tet's share of L's error is RICHARDSON x (its ∫|∇e|
    on the coarse mesh - the fine solution's over the fine tets inside it) / the fine ∫|∇e|, the
    fine tets found by where their centroids lie; the shares sum to RICHARDSON (L_fine - L_h) / L_h,
    and their magnitude to the recorded L term (independently solved, located and integrated)."""
    mesh = _bonded_block(tmp_path)
    extent = solve_extent(mesh).extent
    estimate = estimate_error(mesh, extent, linear_law(1e5))
    fine_mesh = red_refine(mesh).mesh
    assert fine_mesh.n_points <= 20_000        # the estimate's fine solve is solve_extent's, as here
    fine = solve_extent(fine_mesh).extent
    points, tets = np.asarray(mesh.points), np.asarray(mesh.tets)
    fine_points, fine_tets = np.asarray(fine_mesh.points), np.asarray(fine_mesh.tets)
    # Each fine tet's parent: the coarse tet whose barycentric coordinates of its centroid are >= 0.
    centroids = fine_points[fine_tets].mean(axis=1)
    parent = np.full(len(fine_tets), -1)
    corners = points[tets]
    inverse = np.linalg.inv(np.transpose(corners[:, 1:] - corners[:, :1], (0, 2, 1)))
    for t in range(len(tets)):
        lam = (centroids - corners[t, 0]) @ inverse[t].T
        inside = (lam >= -1e-9).all(axis=1) & (lam.sum(axis=1) <= 1 + 1e-9)
        parent[inside] = t
    assert (parent >= 0).all() and np.all(np.bincount(parent, minlength=len(tets)) == 8)
    coarse_part = _slope_volume(points, tets, extent)
    fine_part = np.bincount(parent, weights=_slope_volume(fine_points, fine_tets, fine), minlength=len(tets))
    expected = RICHARDSON * (coarse_part - fine_part) / fine_part.sum()
    assert np.allclose(estimate.tet_length, expected, rtol=1e-8, atol=1e-12 * np.abs(expected).max())
    volume = float(np.abs(np.linalg.det(corners[:, 1:] - corners[:, :1])).sum() / 6.0)
    length_h, length_f = volume / coarse_part.sum(), volume / fine_part.sum()
    assert estimate.tet_length.sum() == pytest.approx(RICHARDSON * (length_f - length_h) / length_h, rel=1e-8)
    assert abs(estimate.tet_length.sum()) == pytest.approx(estimate.characteristic_length, rel=0.05)
    assert estimate.characteristic_length > 1e-3     # the rim: L's error is not negligible here


def _estimate(e, p, length, rms_e, tet_length):
    return ErrorEstimate(extent=e, pressure=p, characteristic_length=length, tet_rms_extent=np.asarray(rms_e, float),
                         tet_rms_pressure=np.zeros(len(rms_e)), tet_length=np.asarray(tet_length, float))


def test_the_marking_takes_each_term_past_the_aim_worst_first():
    """Six unit tets, accuracy 1% (aim 0.85%). e's squared errors 16, 9, 1, 1, 0, 0: at 1.2% or
    more the share is SKIN_DORFLER, 0.5, held by tet 0 alone (16 of 27). L's shares 0.2, -0.2,
    0.5, 0.4, 0, 0.6 (%) sum to 1.5%: what brings it to 0.85%, over LENGTH_REMOVED 0.75, is
    0.867%, held by the positive shares 0.6 + 0.5 (tets 5, 2); negated, the same tets. Both past
    the aim: the union, and under a limit the worse term's set first."""
    volume = np.ones(6)
    rms_e = np.sqrt([16.0, 9.0, 1.0, 1.0, 0.0, 0.0])
    shares = np.array([0.2, -0.2, 0.5, 0.4, 0.0, 0.6]) / 100
    law = linear_law(1.0)

    def marked(e, length, tet_length=shares, limit=None):
        return list(marked_by_worst(_estimate(e, 0.0, length, rms_e, tet_length), volume, law, 0.01, limit))

    assert marked(0.02, 0.008) == [0]                      # L within the aim: e's set only
    assert marked(0.008, 0.015) == [2, 5]                  # e within the aim: L's set only
    assert marked(0.008, 0.015, -shares) == [2, 5]         # the sum's sign chooses the shares
    assert marked(0.02, 0.015) == [0, 2, 5]
    assert marked(0.02, 0.015, limit=2) == [0, 5]          # e the worse: its set first
    assert marked(0.012, 0.015, limit=2) == [2, 5]         # L the worse
    assert marked(0.008, 0.008) == []
    by_p = ErrorEstimate(extent=0.0, pressure=0.02, characteristic_length=0.0, tet_rms_extent=np.zeros(6),
                         tet_rms_pressure=2.0 * rms_e, tet_length=shares)
    assert list(marked_by_worst(by_p, volume, linear_law(2.0), 0.01)) == [0]   # p0's errors over p0(1)


def test_a_pass_whose_closure_passes_the_cap_is_bisected_again_with_fewer_tets(tmp_path):
    """A bonded block's 0.1 skin, every tet's e error equal: a pass bisecting 40 tets (the first by
    index, on the tie) makes some number of tets; with the cap 10 tets below that, the pass is
    bisected again with fewer of them marked and ends within the cap; with no cap, as marked."""
    from fieldgen.skin.cut import cut_skin

    skin = cut_skin(_bonded_block(tmp_path), 0.1)
    t = skin.mesh.n_tets
    estimate = _estimate(0.02, 0.0, 0.0, np.full(t, 0.1), np.zeros(t))
    volume = np.ones(t)
    free = (skin.mesh.points, skin.mesh.boundary_faces[skin.mesh.boundary_markers == FREE])
    law = linear_law(1.0)
    full, _, marked = bisected_within(skin, estimate, volume, law, 0.01, 40, None, free)
    assert len(marked) == 40 and full.mesh.n_tets > t + 40
    cap = full.mesh.n_tets - 10
    capped, _, fewer = bisected_within(skin, estimate, volume, law, 0.01, 40, cap, free)
    assert capped.mesh.n_tets <= cap < full.mesh.n_tets and 1 <= len(fewer) < 40
    assert set(fewer) <= set(marked)
