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
edge's). An edge with no level strictly inside lies between two consecutive levels, where the
oscillation is within the tolerance (:func:`fieldgen.material.levels.extent_levels`).

The ranges are those of the solved extent, whose interpolation error is the one bounded; the
split points come from the snapped extent (``cuts``), on which new vertices carry exactly a
level, so no split lands a hair from a vertex. An edge whose solved range crosses a level only
because a snapped end moved off it has no level inside its snapped range and is split at its
middle (docs/model.md §2.4).
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
    first: np.ndarray        #: per edge, the first level strictly inside its range of cuts
    last: np.ndarray         #: per edge, the last level strictly inside its range of cuts


def _levels_inside(extent, edges, levels) -> tuple[np.ndarray, np.ndarray]:
    """Per edge, the first and last level strictly inside its extent range (last < first: none)."""
    lo = np.minimum(extent[edges[:, 0]], extent[edges[:, 1]])
    hi = np.maximum(extent[edges[:, 0]], extent[edges[:, 1]])
    return (np.searchsorted(levels, lo + ON_LEVEL, side="right"),
            np.searchsorted(levels, hi - ON_LEVEL, side="left") - 1)


def _edges_to_split(tets, n, extent, cuts, law, levels, tolerance: LayerTolerance) -> EdgeSplits:
    """The edges of ``tets`` (over ``n`` vertices) with a level strictly inside their range of
    ``extent`` whose oscillation there exceeds TOLERANCE_MARGIN x the tolerance at ``p0(lo)``, the
    smallest pressure on the edge; an edge with no level inside lies between two consecutive
    levels, within the tolerance. The levels inside each edge's range of ``cuts`` (the snapped
    extent) are where it is split."""
    edges, tet_edges = mesh_edges(tets, n)
    lo = np.minimum(extent[edges[:, 0]], extent[edges[:, 1]])
    hi = np.maximum(extent[edges[:, 0]], extent[edges[:, 1]])
    first, last = _levels_inside(extent, edges, levels)
    needs = np.flatnonzero(last >= first)
    if cuts is not extent:
        first, last = _levels_inside(cuts, edges, levels)
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


def _split_points(splits: EdgeSplits, chosen, extent, cuts, levels):
    """Where each chosen edge is split, as the fraction ``t`` along it from its first end, and the
    extent and cuts there: at the median level strictly inside its range of ``cuts``, or, with
    none (its range of ``extent`` crosses a level only because a snapped end moved off it), at
    its middle, which halves that range (docs/model.md §2.4)."""
    a, b = splits.edges[chosen, 0], splits.edges[chosen, 1]
    first, last = splits.first[chosen], splits.last[chosen]
    has = last >= first
    level = levels[np.clip((first + last) // 2, 0, len(levels) - 1)]
    span = np.where(has, cuts[b] - cuts[a], 1.0)
    t = np.where(has, (level - cuts[a]) / span, 0.5)
    new_cuts = np.where(has, level, cuts[a] + 0.5 * (cuts[b] - cuts[a]))
    return a, b, t, extent[a] + t * (extent[b] - extent[a]), new_cuts


def refine_for_law(mesh: TetMesh, extent: np.ndarray, law: ModulusLaw, levels: np.ndarray,
                   tolerance, *, stop_above: int | None = None,
                   cuts: np.ndarray | None = None) -> tuple[TetMesh, np.ndarray, int] | None:
    """Split only the edges whose extent range the law cannot take linearly (module docstring;
    D 5.1.2). ``cuts``: the snapped extent (:func:`fieldgen.material.levels.snap_to_levels`;
    default ``extent``), whose levels place the splits; ``extent``, the solved field, is the one
    whose interpolation error is bounded, interpolated linearly at every new vertex
    (docs/model.md §2.4). Returns (mesh, extent, rounds). Deterministic: children follow their parent.
    ``stop_above``: give up and return None as soon as the mesh has more tets than this (every
    round adds tets, so the result would have more too)."""
    tolerance = check_tolerance(tolerance, law)      # a float of Pa: absolute
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    markers = np.asarray(mesh.boundary_markers, dtype=np.int64)
    extent = np.asarray(extent, dtype=np.float64)
    same = cuts is None                              # the cuts are the extent itself
    cuts = extent if same else np.asarray(cuts, dtype=np.float64)
    rounds = 0
    if not len(levels):
        return TetMesh(points, tets, faces, markers), extent, rounds
    # Tets that may still hold an edge to split: at first those with a level strictly inside
    # their extent range (an edge needs a level inside its own range, which is within its tet's).
    et = extent[tets]
    active = (np.searchsorted(levels, et.max(axis=1) - ON_LEVEL, side="left")
              > np.searchsorted(levels, et.min(axis=1) + ON_LEVEL, side="right"))
    tets = tets.copy()
    origin = np.arange(len(tets))                   # the input tet each tet comes from
    face_origin = np.arange(len(faces))
    while True:
        n = len(points)
        candidates = np.flatnonzero(active)
        if not len(candidates):
            break
        splits = _edges_to_split(tets[candidates], n, extent, cuts, law, levels, tolerance)
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
        a, b, t, new_extent, new_cuts = _split_points(splits, chosen, extent, cuts, levels)
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
        extent = np.concatenate([extent, new_cuts if same else new_extent])
        cuts = extent if same else np.concatenate([cuts, new_cuts])
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
