"""The refinement's row counting and candidate selection agree with the plain numpy forms."""

from __future__ import annotations

import numpy as np

from fieldgen.mesh import box_grid
from fieldgen.tetmesh import _TET_EDGES, _row_counts, _tets_touching


def test_row_counts_equal_count_nonzero():
    flags = np.random.default_rng(3).random((10_001, 4)) < 0.5
    np.testing.assert_array_equal(_row_counts(flags), np.count_nonzero(flags, axis=1))
    np.testing.assert_array_equal(_row_counts(np.ones((5, 4), bool)), [4] * 5)
    np.testing.assert_array_equal(_row_counts(np.zeros((5, 4), bool)), [0] * 5)


def test_tets_touching_holds_every_tet_containing_an_edge():
    points, tets = box_grid(*(np.linspace(0, 1, 6),) * 3)
    rng = np.random.default_rng(7)
    edges = np.sort(tets[rng.integers(0, len(tets), 12)][:, _TET_EDGES[rng.integers(0, 6)]], axis=1)
    chosen = set(map(tuple, edges.tolist()))
    holding = [t for t, tet in enumerate(tets)
               if any(tuple(sorted((tet[a], tet[b]))) in chosen for a, b in _TET_EDGES)]
    candidates = _tets_touching(tets, edges, len(points))
    assert set(holding) <= set(candidates.tolist()) and len(holding) > 0
    assert np.all(np.diff(candidates) > 0)
