"""Selective layering: split only the edges whose extent range the modulus law cannot take
linearly, by bisection at the levels (docs/model.md §2.4; D 5.1.2).

An edge needs splitting when its extent range contains a level strictly inside and the chord
oscillation of ``p0`` over that range exceeds the tolerance at the range's smallest pressure
``p0(lo)`` (times TOLERANCE_MARGIN; :class:`fieldgen.material.levels.LayerTolerance`). A tet's
interpolation error is bounded by the oscillation over its own range, which is the range of its
edge joining its lowest and highest extents, so once no edge needs splitting every tet is within
the tolerance; tets whose edges all pass are kept exactly as they were.

Each round splits an independent set of the edges that need it (no two in one tet: the edge of
largest oscillation in every tet containing it, ties broken by edge order), each at the median
level strictly inside its range: every tet around the edge becomes two, and so does every
boundary triangle on it (same marker, same winding). Bisection is conforming by construction and
touches only the tets around the edge, all of which need the split too (their range contains the
edge's). New vertices carry exactly a level, and an edge with no level strictly inside lies
between two consecutive levels, where the oscillation is within the tolerance
(:func:`fieldgen.material.levels.extent_levels`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.errors import BuildError
from fieldgen.material.levels import ON_LEVEL, TOLERANCE_MARGIN, LayerTolerance, check_tolerance
from fieldgen.material.modulus import ModulusLaw
from fieldgen.meshing.tetmesh import TET_EDGES, TetMesh, mesh_edges

#: Samples per edge when measuring the chord oscillation of the law over the edge's extent range
#: (the sampled oscillation underestimates by about 1/(EDGE_SAMPLES - 1)^2 relative, which the
#: TOLERANCE_MARGIN covers).
EDGE_SAMPLES = 33
#: Safety stop on the rounds of edge splitting (each splits an independent set of edges).
MAX_ROUNDS = 400


def edge_oscillation(law: ModulusLaw, lo: np.ndarray, hi: np.ndarray, *, samples: int = EDGE_SAMPLES) -> np.ndarray:
    """Chord oscillation of ``p0`` over each extent range ``[lo, hi]`` (vectorised
    :func:`fieldgen.material.levels.chord_oscillation`): a bound on the interpolation error of any
    tet whose vertex extents lie in the range, and for a convex or concave law exactly the error
    along an edge."""
    if law.kind == "table":   # piecewise cubic: its curvature jumps at the knots, so sample finer
        samples = 4 * (samples - 1) + 1
    t = np.linspace(0.0, 1.0, samples)
    out = np.zeros(len(lo))
    chunk = max(1, 4_000_000 // samples)
    for start in range(0, len(lo), chunk):
        a, b = lo[start:start + chunk, None], hi[start:start + chunk, None]
        p = law.pressure(a + (b - a) * t)
        g = p - (p[:, :1] + (p[:, -1:] - p[:, :1]) * t)
        out[start:start + len(a)] = g.max(axis=1) - g.min(axis=1)
    return out


@dataclass(frozen=True)
class EdgeSplits:
    """The edges of one round and which of them the law needs split."""

    edges: np.ndarray        #: (e, 2) sorted vertex pairs
    tet_edges: np.ndarray    #: (t, 6) edge of each local edge of the round's tets
    needs: np.ndarray        #: edges that need a split
    oscillation: np.ndarray  #: their chord oscillation
    first: np.ndarray        #: per edge, the first level strictly inside its range
    last: np.ndarray         #: per edge, the last level strictly inside its range


def _edges_to_split(tets, n, extent, law, levels, tolerance: LayerTolerance) -> EdgeSplits:
    """The edges of ``tets`` (over ``n`` vertices) with a level strictly inside whose oscillation
    exceeds TOLERANCE_MARGIN x the tolerance at ``p0(lo)``, the smallest pressure on the edge."""
    edges, tet_edges = mesh_edges(tets, n)
    lo = np.minimum(extent[edges[:, 0]], extent[edges[:, 1]])
    hi = np.maximum(extent[edges[:, 0]], extent[edges[:, 1]])
    first = np.searchsorted(levels, lo + ON_LEVEL, side="right")          # levels strictly inside
    last = np.searchsorted(levels, hi - ON_LEVEL, side="left") - 1
    needs = np.flatnonzero(last >= first)
    osc = edge_oscillation(law, lo[needs], hi[needs])
    target = TOLERANCE_MARGIN * tolerance.at(law.pressure(lo[needs]))
    return EdgeSplits(edges, tet_edges, needs[osc > target], osc[osc > target], first, last)


def _independent_edges(splits: EdgeSplits, flagged: np.ndarray) -> np.ndarray:
    """The edges that rank highest (oscillation, then edge order) in every tet containing them.

    Largest oscillation first is longest-edge bisection in the law's metric: a split never
    lengthens an edge of the tet (the new vertex's extent lies between its edge's ends), which is
    why the rounds end; a ranking by anything else (such as a hash of the edge) can refine
    forever."""
    needs, tet_edges = splits.needs, splits.tet_edges
    priority = np.full(len(splits.edges), -1, dtype=np.int64)
    priority[needs[np.lexsort((needs, splits.oscillation))]] = np.arange(len(needs))
    tet_best = priority[tet_edges].max(axis=1)                               # (t,)
    loses = np.zeros(len(splits.edges), dtype=bool)
    mismatch = (priority[tet_edges] >= 0) & (priority[tet_edges] != tet_best[:, None])
    loses[tet_edges[mismatch]] = True
    return np.flatnonzero(flagged & ~loses)


def _bisect_tets(tets, candidates, tet_edges, split_of_edge):
    """Rows of ``tets`` (among ``candidates``) holding a chosen edge, and their two children: the
    first keeps the edge's first end, the second its other end (each holds at most one)."""
    local = split_of_edge[tet_edges]                                         # (t, 6)
    which = np.argmax(local >= 0, axis=1)
    split = local[np.arange(len(local)), which] >= 0
    rows = candidates[split]
    i, j = TET_EDGES[which[split], 0], TET_EDGES[which[split], 1]
    m = local[split, which[split]]
    child_a, child_b = tets[rows].copy(), tets[rows].copy()
    child_a[np.arange(len(rows)), j] = m        # keeps vertex i's end
    child_b[np.arange(len(rows)), i] = m        # keeps vertex j's end
    return rows, child_a, child_b


def refine_for_law(mesh: TetMesh, extent: np.ndarray, law: ModulusLaw, levels: np.ndarray,
                   tolerance, *, stop_above: int | None = None) -> tuple[TetMesh, np.ndarray, int] | None:
    """Split only the edges whose extent range the law cannot take linearly (module docstring;
    D 5.1.2). Returns (mesh, extent, rounds). Deterministic: children follow their parent.
    ``stop_above``: give up and return None as soon as the mesh has more tets than this (every
    round adds tets, so the result would have more too)."""
    tolerance = check_tolerance(tolerance, law)      # a float of Pa: absolute
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    markers = np.asarray(mesh.boundary_markers, dtype=np.int64)
    extent = np.asarray(extent, dtype=np.float64)
    rounds = 0
    if not len(levels):
        return TetMesh(points, tets, faces, markers), extent, rounds
    active = np.ones(len(tets), dtype=bool)         # tets that may still hold an edge to split
    tets = tets.copy()
    origin = np.arange(len(tets))                   # the input tet each tet comes from
    face_origin = np.arange(len(faces))
    while True:
        n = len(points)
        candidates = np.flatnonzero(active)
        if not len(candidates):
            break
        splits = _edges_to_split(tets[candidates], n, extent, law, levels, tolerance)
        # Tets with no edge that needs splitting stay as they are from now on (their edges only
        # ever shrink in range when a neighbour splits them).
        flagged = np.zeros(len(splits.edges), dtype=bool)
        flagged[splits.needs] = True
        holds = flagged[splits.tet_edges].any(axis=1)
        if not np.any(holds):
            break
        rounds += 1
        if rounds > MAX_ROUNDS:
            raise BuildError(f"layering did not settle after {MAX_ROUNDS} rounds of edge splits",
                             fix="raise --layer-tolerance; this is a fieldgen bug if it persists")
        chosen = _independent_edges(splits, flagged)
        # Split points: the median level strictly inside each chosen edge's range.
        level = levels[(splits.first[chosen] + splits.last[chosen]) // 2]
        a, b = splits.edges[chosen, 0], splits.edges[chosen, 1]
        t = (level - extent[a]) / (extent[b] - extent[a])
        new_points = points[a] + t[:, None] * (points[b] - points[a])
        new_ids = n + np.arange(len(chosen))
        split_of_edge = np.full(len(splits.edges), -1, dtype=np.int64)
        split_of_edge[chosen] = new_ids
        rows, child_a, child_b = _bisect_tets(tets, candidates, splits.tet_edges, split_of_edge)
        active[candidates[~holds]] = False
        tets[rows] = child_a                        # in place; the other child is appended
        tets = np.concatenate([tets, child_b])
        if stop_above is not None and len(tets) > stop_above:
            return None
        origin = np.concatenate([origin, origin[rows]])
        active = np.concatenate([active, active[rows]])
        # Boundary triangles on a chosen edge (at most one per triangle).
        faces, markers, face_origin = _split_faces(faces, markers, face_origin, splits.edges[chosen], new_ids, n)
        points = np.concatenate([points, new_points])
        extent = np.concatenate([extent, level])
    # Children follow their input tet (face), in the order they were made.
    tets = tets[np.argsort(origin, kind="stable")]
    order = np.argsort(face_origin, kind="stable")
    return TetMesh(points, tets, faces[order], markers[order]), extent, rounds


def _split_faces(faces, markers, origin, edges, new_ids, n):
    """Bisect the boundary triangles that contain one of ``edges`` at its new vertex."""
    keys = edges[:, 0] * n + edges[:, 1]
    order = np.argsort(keys)
    keys, new_ids = keys[order], new_ids[order]
    rows, children_a, children_b = [], [], []
    for i, j in ((0, 1), (1, 2), (2, 0)):
        u, v = faces[:, i], faces[:, j]
        key = np.minimum(u, v) * n + np.maximum(u, v)
        pos = np.clip(np.searchsorted(keys, key), 0, max(len(keys) - 1, 0))
        hit = np.flatnonzero(keys[pos] == key) if len(keys) else np.zeros(0, dtype=np.int64)
        if not len(hit):
            continue
        m = new_ids[pos[hit]]
        ca, cb = faces[hit].copy(), faces[hit].copy()
        ca[:, j] = m
        cb[:, i] = m
        rows.append(hit)
        children_a.append(ca)
        children_b.append(cb)
    if not rows:
        return faces, markers, origin
    rows = np.concatenate(rows)
    faces = faces.copy()
    faces[rows] = np.concatenate(children_a)
    return (np.concatenate([faces, np.concatenate(children_b)]), np.concatenate([markers, markers[rows]]),
            np.concatenate([origin, origin[rows]]))
