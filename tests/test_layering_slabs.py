"""Slicing by every level at once (:func:`fieldgen.material.slabs.slice_into_slabs`): the slabs between
consecutive levels of each tet, tetrahedralised by the pulling rule. Checked against closed forms
(a linear extent on a structured slab), the mesh invariants (volume, conformity, boundary), the
one-level case of the one-level-at-a-time slicing (the same polytopes and rule: the same tets),
and its growth (linear in the levels, where one level at a time grows geometrically)."""

from __future__ import annotations

import numpy as np

from fieldgen.material.levels import extent_levels, snap_to_levels
from fieldgen.material.slabs import slice_into_slabs
from fieldgen.material.slicing import slice_by_levels
from fieldgen.meshing.tetmesh import boundary_faces_of, tet_volumes
from fieldgen.material.modulus import hyperbolic_law
from test_layering import SLAB, face_use_counts, oriented_face_set, slab_mesh


def check_invariants(mesh, out, out_extent, levels):
    volumes = tet_volumes(out.points, out.tets)
    assert np.all(volumes > 0)
    total = tet_volumes(mesh.points, mesh.tets).sum()
    assert abs(volumes.sum() - total) <= 1e-12 * total
    assert set(face_use_counts(out.tets).tolist()) <= {1, 2}                  # conforming
    assert oriented_face_set(boundary_faces_of(out.tets)) == oriented_face_set(out.boundary_faces)
    for marker in np.unique(mesh.boundary_markers):                            # area per marker kept
        def area(m, f):
            p = m.points[f[m.boundary_markers == marker]]
            return 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1).sum()
        assert abs(area(out, out.boundary_faces) - area(mesh, mesh.boundary_faces)) <= 1e-12 * total ** (2 / 3)
    e = out_extent[out.tets]                                                   # one interval per tet
    inside = (levels[None, :] > e.min(axis=1)[:, None] + 1e-10) & (levels[None, :] < e.max(axis=1)[:, None] - 1e-10)
    assert not inside.any()


def test_linear_extent_on_a_slab_matches_the_closed_form():
    mesh = slab_mesh()
    law = hyperbolic_law(1e5, 0.8)
    levels = extent_levels(law, 0.01 * law.max_pressure)
    # Any field linear in position: its P1 interpolant is itself, so the new vertices' extent is
    # the field at their position.
    field = lambda p: 0.05 + 0.2 * p[:, 0] + 0.1 * p[:, 1] + 0.6 * p[:, 2] / SLAB[2]      # noqa: E731
    extent = snap_to_levels(field(mesh.points), levels)
    out, out_extent, _ = slice_into_slabs(mesh, extent, levels)
    check_invariants(mesh, out, out_extent, levels)
    moved = np.abs(extent - field(mesh.points)) > 0
    # New vertices interpolate the snapped field: off the linear one by at most the largest snap.
    snap = float(np.abs(extent - field(mesh.points)).max())
    assert snap < 0.01
    np.testing.assert_allclose(out_extent[mesh.n_points:], field(out.points[mesh.n_points:]), atol=snap + 1e-12)
    assert np.array_equal(out_extent[:mesh.n_points][~moved], field(mesh.points)[~moved])
    again, again_extent, _ = slice_into_slabs(mesh, extent, levels)               # deterministic
    for name in ("points", "tets", "boundary_faces", "boundary_markers"):
        assert np.array_equal(getattr(again, name), getattr(out, name))


def test_one_level_gives_the_same_tets_as_slicing_one_level_at_a_time():
    mesh = slab_mesh()
    rng = np.random.default_rng(3)
    extent = np.clip(0.5 + 0.4 * np.sin(4 * mesh.points[:, 0] + 7 * mesh.points[:, 1]) + 0.05 * rng.random(mesh.n_points), 0, 1)
    level = np.array([0.5])
    extent = snap_to_levels(extent, level)
    out, out_extent, _ = slice_into_slabs(mesh, extent, level)
    ref, ref_extent = slice_by_levels(mesh, extent, level)
    assert np.array_equal(out.points, ref.points) and np.array_equal(out_extent, ref_extent)
    assert {tuple(sorted(t)) for t in out.tets.tolist()} == {tuple(sorted(t)) for t in ref.tets.tolist()}
    assert oriented_face_set(out.boundary_faces) == oriented_face_set(ref.boundary_faces)


def test_growth_is_linear_in_the_levels():
    mesh = slab_mesh(nx=4, ny=2, nz=1)               # every tet spans the whole thickness
    extent = mesh.points[:, 2] / SLAB[2]
    previous = None
    for count in (4, 8, 16):
        levels = (np.arange(count) + 0.5) / count
        out, out_extent, _ = slice_into_slabs(mesh, snap_to_levels(extent, levels), levels)
        check_invariants(mesh, out, out_extent, levels)
        # A Kuhn tet of the slab crosses every level; each slab (at most 8 corners: two quad
        # sections) is coned from one corner over at most 6 faces: at most 6 (count + 1) tets.
        assert out.n_tets <= 6 * (count + 1) * mesh.n_tets
        if previous is not None:
            assert out.n_tets <= 2.2 * previous                 # doubling the levels ~doubles it
        previous = out.n_tets
    sequential, _ = slice_by_levels(mesh, extent, levels)
    assert out.n_tets < sequential.n_tets
