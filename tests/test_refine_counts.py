"""The refinement's row counting and candidate selection agree with the plain numpy forms."""

from __future__ import annotations

import numpy as np

from fieldgen.meshing.tetmesh import TET_EDGES, box_grid
from fieldgen.meshing.refine import _tets_touching
from fieldgen.meshing.tetmesh import row_counts as _row_counts


def test_row_counts_equal_count_nonzero():
    flags = np.random.default_rng(3).random((10_001, 4)) < 0.5
    np.testing.assert_array_equal(_row_counts(flags), np.count_nonzero(flags, axis=1))
    np.testing.assert_array_equal(_row_counts(np.ones((5, 4), bool)), [4] * 5)
    np.testing.assert_array_equal(_row_counts(np.zeros((5, 4), bool)), [0] * 5)


def test_tets_touching_holds_every_tet_containing_an_edge():
    points, tets = box_grid(*(np.linspace(0, 1, 6),) * 3)
    rng = np.random.default_rng(7)
    edges = np.sort(tets[rng.integers(0, len(tets), 12)][:, TET_EDGES[rng.integers(0, 6)]], axis=1)
    chosen = set(map(tuple, edges.tolist()))
    holding = [t for t, tet in enumerate(tets)
               if any(tuple(sorted((tet[a], tet[b]))) in chosen for a, b in TET_EDGES)]
    candidates = _tets_touching(tets, edges, len(points))
    assert set(holding) <= set(candidates.tolist()) and len(holding) > 0
    assert np.all(np.diff(candidates) > 0)


def test_zero_flags_carried_across_splits_equal_a_fresh_search():
    """refine_zero_tets carries "joined to a RIGID vertex" from round to round (splitting edges or
    faces keeps every old edge, whole or split): the flags it gets must equal a search of the whole
    new mesh, also when a split joins a cut-off region to the rigid side."""
    from fieldgen.meshing.refine import _at_zero, _split_edges, _split_faces

    points, tets = box_grid(*(np.linspace(0, 1, 6),) * 3)
    x, y, z = points.T
    side = (x == 0) | (x == 1) | (y == 0) | (y == 1)
    # FREE: the sides, the top and the layer z = 0.6, which cuts the upper interior off the rigid base.
    on_free = side | (z == 1) | np.isclose(z, 0.6)
    on_rigid = (z == 0) & ~side
    flags = _at_zero(len(points), tets, on_free, on_rigid)
    cut_off = int(np.count_nonzero(flags & ~on_free))
    assert cut_off > 0
    rng = np.random.default_rng(11)
    for _ in range(6):
        pairs = np.unique(np.sort(tets[:, TET_EDGES].reshape(-1, 2), axis=1), axis=0)
        # Independent edges (no two in one tet) as the refinement takes them; prefer edges in the
        # free layer, whose midpoints join the two sides.
        layer = np.flatnonzero(np.isclose(points[pairs, 2], 0.6).all(axis=1))
        candidates = np.concatenate([rng.permutation(layer)[:3], rng.permutation(len(pairs))[:20]])
        taken, used = [], set()
        for a, b in pairs[candidates]:
            held = {tuple(t) for t in tets[(tets == a).any(axis=1) & (tets == b).any(axis=1)].tolist()}
            if not (held & used):
                taken.append((a, b))
                used |= held
        points, tets = _split_edges(points, tets, np.array(taken))
        carried = _at_zero(len(points), tets, on_free, on_rigid, reaching=~flags)
        fresh = _at_zero(len(points), tets, on_free, on_rigid)
        np.testing.assert_array_equal(carried, fresh)
        flags = fresh
        # The corner-tet rule splits faces at their centroids (each owner tet into three): the
        # carried flags must hold for that too.
        faces = np.sort(tets[:, [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]].reshape(-1, 3), axis=1)
        faces = np.unique(faces, axis=0)[rng.permutation(len(np.unique(faces, axis=0)))[:15]]
        chosen, used = [], set()
        for face in faces:
            owners = np.flatnonzero(np.isin(tets, face).sum(axis=1) == 3)
            if len(owners) == 2 and not (set(owners.tolist()) & used):
                chosen.append(face)
                used |= set(owners.tolist())
        assert chosen
        points, tets = _split_faces(points, tets, np.array(chosen))
        carried = _at_zero(len(points), tets, on_free, on_rigid, reaching=~flags)
        fresh = _at_zero(len(points), tets, on_free, on_rigid)
        np.testing.assert_array_equal(carried, fresh)
        flags = fresh
    assert np.count_nonzero(flags[:len(on_free)] & ~on_free) < cut_off    # some were joined by a split


def test_star_pairs_give_the_components_of_all_edges_among_kept_vertices():
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from fieldgen.meshing.refine import _star_pairs

    points, tets = box_grid(*(np.linspace(0, 1, 7),) * 3)
    rng = np.random.default_rng(5)
    n = len(points)

    def components(pairs):
        graph = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
        label = connected_components(graph, directed=False)[1]
        return np.unique(label, return_inverse=True)[1]     # canonical: first-seen numbering

    for keep in (None, rng.random(n) < 0.45, rng.random(n) < 0.7):
        every = tets[:, TET_EDGES].reshape(-1, 2)
        if keep is not None:
            every = every[keep[every].all(axis=1)]
        star = _star_pairs(tets, keep)
        assert len(star) <= 3 * len(tets)
        if keep is not None:
            assert keep[star].all()
        a, b = components(every), components(star)
        # Same partition: a bijection between the labels.
        assert len(set(zip(a.tolist(), b.tolist()))) == len(np.unique(a)) == len(np.unique(b))


def _two_pieces(second_points, second_tets):
    """A 4 x 4 x 4-cell grid bonded at z = 0 (every other face free) and a second piece."""
    from fieldgen.meshing.tetmesh import FREE, RIGID, TetMesh, boundary_faces_of

    points, tets = box_grid(*(np.linspace(0, 1, 5),) * 3)
    points = np.vstack([points, second_points])
    tets = np.vstack([tets, second_tets + len(points) - len(second_points)])
    faces = boundary_faces_of(tets)
    markers = np.where(np.all(points[faces][:, :, 2] == 0.0, axis=1) & (faces < 125).all(axis=1), RIGID, FREE)
    return TetMesh(points=points, tets=tets, boundary_faces=faces, boundary_markers=markers)


def test_a_piece_without_a_rigid_face_is_lifted_as_a_poisson_part_whatever_its_shape():
    """A piece without a RIGID face gets a Poisson field of its own (docs/model.md §2.2), so its
    zero tets are lifted as a Poisson part's are. A piece with interior vertices, and a single
    tet with all four faces free (none until its first split): both end with no zero tet, the
    bonded piece lifted as before."""
    from fieldgen.fe.extent import unreached_tets
    from fieldgen.meshing.refine import refine_zero_tets
    from fieldgen.meshing.tetmesh import zero_tets

    lone = np.array([[3.0, 0, 0], [4, 0, 0], [3, 1, 0], [3, 0, 1]])
    grid_points, grid_tets = box_grid(*(np.linspace(3, 4, 4),) * 3)     # has interior vertices
    for second_points, second_tets in ((lone, np.array([[0, 1, 2, 3]])), (grid_points, grid_tets)):
        mesh = _two_pieces(second_points, second_tets)
        refined, found = refine_zero_tets(mesh, path="two.stl")
        assert found > 0 and len(zero_tets(refined)) == 0
        assert unreached_tets(refined).any() and not np.all(unreached_tets(refined))
    mesh = _two_pieces(np.zeros((0, 3)), np.zeros((0, 4), dtype=np.int64))
    refined, found = refine_zero_tets(mesh)
    assert found > 0 and len(zero_tets(refined)) == 0
