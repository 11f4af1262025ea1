"""Slicing a tet mesh by the level sets of its extent, one level at a time (docs/model.md §2.4;
D 5.1.2: "I mesh objects so that they have layers").

:func:`slice_by_levels` cuts the mesh by each level set in turn: one new vertex per cut edge
(extent exactly the level, position by linear interpolation), each cut tet splits into convex
pieces (tet + prism, two prisms, tet + pyramid, two tets), and each piece is tetrahedralised by
the pulling rule (cone from its minimum-global-index vertex; a quad face split by the diagonal
through its own minimum-index vertex), so neighbours agree on shared faces (Dompierre et al.,
"How to subdivide pyramids, prisms and hexahedra into tetrahedra"). Boundary triangles are cut by
the same rule and keep their marker and winding. The skin's cut uses it; the layering stage cuts
by every level at once instead (:mod:`fieldgen.material.slabs`), which grows linearly in the
number of levels where cutting one level at a time re-cuts the pieces of earlier cuts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.errors import OptionError
from fieldgen.material.levels import ON_LEVEL, check_extent, snap_to_levels
from fieldgen.meshing.tetmesh import TetMesh, orient_positive, tet_volumes

# A cut tet is canonicalised by a stable sort of its vertices by side (below, on, above), so the
# case is fixed by the counts (n_below, n_on, n_above). Local indices 0..3 are the sorted
# vertices, 4.. the cut points of the listed local edges. Each piece lists its vertices and its
# faces (a quad in cyclic order).

_CASES = {
    # one below, three above: tet + prism
    (1, 0, 3): ([(0, 1), (0, 2), (0, 3)],
                [((0, 4, 5, 6), None),
                 ((1, 2, 3, 4, 5, 6), [(4, 5, 6), (1, 2, 3), (1, 2, 5, 4), (2, 3, 6, 5), (3, 1, 4, 6)])]),
    # three below, one above: prism + tet
    (3, 0, 1): ([(0, 3), (1, 3), (2, 3)],
                [((3, 4, 5, 6), None),
                 ((0, 1, 2, 4, 5, 6), [(4, 5, 6), (0, 1, 2), (0, 1, 5, 4), (1, 2, 6, 5), (2, 0, 4, 6)])]),
    # two below, two above: two prisms sharing the cut quad (4, 6, 7, 5)
    (2, 0, 2): ([(0, 2), (0, 3), (1, 2), (1, 3)],
                [((0, 1, 4, 5, 6, 7), [(0, 4, 5), (1, 6, 7), (0, 1, 6, 4), (0, 1, 7, 5), (4, 6, 7, 5)]),
                 ((2, 3, 4, 5, 6, 7), [(2, 4, 6), (3, 5, 7), (2, 3, 5, 4), (2, 3, 7, 6), (4, 6, 7, 5)])]),
    # one below, one on, two above: tet + pyramid (apex = the on vertex)
    (1, 1, 2): ([(0, 2), (0, 3)],
                [((0, 1, 4, 5), None),
                 ((1, 2, 3, 4, 5), [(2, 3, 5, 4), (1, 2, 3), (1, 3, 5), (1, 5, 4), (1, 4, 2)])]),
    # two below, one on, one above: pyramid + tet
    (2, 1, 1): ([(0, 3), (1, 3)],
                [((2, 3, 4, 5), None),
                 ((0, 1, 2, 4, 5), [(0, 1, 5, 4), (2, 0, 1), (2, 1, 5), (2, 5, 4), (2, 4, 0)])]),
    # one below, two on, one above: two tets
    (1, 2, 1): ([(0, 3)],
                [((0, 1, 2, 4), None),
                 ((3, 1, 2, 4), None)]),
}


def _pull(global_ids: np.ndarray, piece: tuple, faces: list | None) -> np.ndarray:
    """Tetrahedralise one convex piece per row by the pulling rule; returns (m, 4) global ids."""
    if faces is None:
        return global_ids[:, list(piece)]
    ids = global_ids[:, list(piece)]                      # (r, m)
    pos = {local: j for j, local in enumerate(piece)}
    apex_col = np.argmin(ids, axis=1)
    apex = ids[np.arange(len(ids)), apex_col]
    out = []
    for face in faces:
        cols = [pos[v] for v in face]
        fid = ids[:, cols]                                # (r, 3|4)
        keep = ~np.any(fid == apex[:, None], axis=1)
        if not np.any(keep):
            continue
        fid, ap = fid[keep], apex[keep]
        if len(face) == 3:
            out.append(np.column_stack([ap, fid]))
            continue
        through_02 = np.isin(np.argmin(fid, axis=1), (0, 2))
        t1 = np.where(through_02[:, None], fid[:, [0, 1, 2]], fid[:, [0, 1, 3]])
        t2 = np.where(through_02[:, None], fid[:, [0, 2, 3]], fid[:, [1, 2, 3]])
        out.append(np.column_stack([ap, t1]))
        out.append(np.column_stack([ap, t2]))
    return np.concatenate(out) if out else np.zeros((0, 4), dtype=np.int64)


@dataclass(frozen=True)
class CutEdges:
    """The edges cut by a level (sorted keys ``u·n + v``, ``u < v``); the cut point of the edge
    ``k``-th in key order is vertex ``n + k``."""

    keys: np.ndarray
    n: int

    def index(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Vertex id of the cut point of each edge (u, v)."""
        key = np.minimum(u, v) * self.n + np.maximum(u, v)
        return self.n + np.searchsorted(self.keys, key)


def _cut_points(points, extent, edges, level):
    """Unique cut edges (sorted pairs, lexicographic) -> new points with extent exactly ``level``."""
    a, b = edges[:, 0], edges[:, 1]
    t = (level - extent[a]) / (extent[b] - extent[a])
    new_points = points[a] + t[:, None] * (points[b] - points[a])
    return new_points


def _slice_once(mesh: TetMesh, extent: np.ndarray, level: float):
    """Cut ``mesh`` by the iso-surface ``e = level``; returns (mesh, extent)."""
    points, tets = mesh.points, mesh.tets
    n = len(points)
    side = np.where(extent < level - ON_LEVEL, -1, np.where(extent > level + ON_LEVEL, 1, 0))
    ts = side[tets]
    cut = np.any(ts == -1, axis=1) & np.any(ts == 1, axis=1)
    if not np.any(cut):
        return mesh, extent

    # New vertices: one per edge with endpoints on opposite sides, numbered by sorted edge.
    ct = tets[cut]
    pairs = np.concatenate([ct[:, [i, j]] for i in range(4) for j in range(i + 1, 4)])
    pairs.sort(axis=1)
    crossing = side[pairs[:, 0]] * side[pairs[:, 1]] == -1
    keys = np.unique(pairs[crossing, 0] * n + pairs[crossing, 1])
    edges = np.column_stack([keys // n, keys % n])
    new_points = _cut_points(points, extent, edges, level)
    cut_edges = CutEdges(keys, n)

    # Tets.
    order = np.argsort(ts[cut], axis=1, kind="stable")
    canon = np.take_along_axis(ct, order, axis=1)          # below, on, above
    cs = np.take_along_axis(ts[cut], order, axis=1)
    counts = np.column_stack([(cs == s).sum(axis=1) for s in (-1, 0, 1)])
    parent = np.flatnonzero(cut)
    pieces, parents = [mesh.tets[~cut]], [np.flatnonzero(~cut)]
    for case, (case_edges, case_pieces) in _CASES.items():
        rows = np.all(counts == case, axis=1)
        if not np.any(rows):
            continue
        g = canon[rows]
        ext = [g] + [cut_edges.index(g[:, i], g[:, j])[:, None] for i, j in case_edges]
        g = np.concatenate(ext, axis=1)
        for piece, faces in case_pieces:
            sub = _pull(g, piece, faces)
            pieces.append(sub)
            parents.append(_repeat_parent(g, piece, faces, parent[rows]))
    new_tets = np.concatenate(pieces)
    new_parent = np.concatenate(parents)
    all_points = np.concatenate([points, new_points])
    new_tets = new_tets[np.argsort(new_parent, kind="stable")]
    volumes = tet_volumes(all_points, new_tets)
    new_tets = orient_positive(all_points, new_tets[volumes != 0.0])

    faces, markers = _slice_boundary(mesh.boundary_faces, mesh.boundary_markers, side, cut_edges)
    new_extent = np.concatenate([extent, np.full(len(new_points), float(level))])
    return TetMesh(all_points, new_tets, faces, markers), new_extent


def _repeat_parent(g, piece, faces, parent):
    """Parent tet of each sub-tet that :func:`_pull` emits (face-major, then row order)."""
    if faces is None:
        return parent
    ids = g[:, list(piece)]
    apex = ids.min(axis=1)
    pos = {local: j for j, local in enumerate(piece)}
    out = []
    for face in faces:
        keep = ~np.any(ids[:, [pos[v] for v in face]] == apex[:, None], axis=1)
        reps = 1 if len(face) == 3 else 2
        for _ in range(reps):
            out.append(parent[keep])
    return np.concatenate(out)


def _slice_boundary(faces, markers, side, cut_edges: CutEdges):
    """Cut boundary triangles by the level, keeping winding and marker (same diagonal rule)."""
    fs = side[faces]
    cut = np.any(fs == -1, axis=1) & np.any(fs == 1, axis=1)
    keep_faces, keep_markers = [faces[~cut]], [markers[~cut]]
    f, m, s = faces[cut], markers[cut], fs[cut]
    parent_rows = [np.flatnonzero(~cut)]
    idx = np.flatnonzero(cut)
    if len(f):
        has_on = np.any(s == 0, axis=1)
        # Odd vertex: the on vertex, or the vertex alone on its side.
        lone = np.where(has_on[:, None], s == 0, s == -np.sign(s.sum(axis=1, keepdims=True)))
        first = np.argmax(lone, axis=1)
        roll = (first[:, None] + np.arange(3)) % 3
        r = np.take_along_axis(f, roll, axis=1)           # r0 odd, winding preserved
        # (1, 1, 1): on vertex o = r0, p = r1, q = r2 on opposite sides.
        o = has_on
        if np.any(o):
            x = cut_edges.index(r[o, 1], r[o, 2])
            for tri in (np.column_stack([r[o, 0], r[o, 1], x]), np.column_stack([r[o, 0], x, r[o, 2]])):
                keep_faces.append(tri)
                keep_markers.append(m[o])
                parent_rows.append(idx[o])
        t = ~has_on
        if np.any(t):
            s0, p, q = r[t, 0], r[t, 1], r[t, 2]
            xp, xq = cut_edges.index(s0, p), cut_edges.index(s0, q)
            quad = np.column_stack([xp, p, q, xq])
            through_02 = np.isin(np.argmin(quad, axis=1), (0, 2))
            t1 = np.where(through_02[:, None], quad[:, [0, 1, 2]], quad[:, [0, 1, 3]])
            t2 = np.where(through_02[:, None], quad[:, [0, 2, 3]], quad[:, [1, 2, 3]])
            for tri in (np.column_stack([s0, xp, xq]), t1, t2):
                keep_faces.append(tri)
                keep_markers.append(m[t])
                parent_rows.append(idx[t])
    order = np.argsort(np.concatenate(parent_rows), kind="stable")
    return np.concatenate(keep_faces)[order], np.concatenate(keep_markers)[order]


def slice_by_levels(mesh: TetMesh, extent: np.ndarray, levels: np.ndarray) -> tuple[TetMesh, np.ndarray]:
    """Cut ``mesh`` along the iso-surfaces ``e = level`` of its P1 extent (D 5.1.2).

    The result is conforming, carries the boundary markers, preserves volume, and has the same
    piecewise-linear extent as a function; every tet's vertex extents lie between two
    consecutive levels. Deterministic: sub-tets follow their parent tet's order.
    """
    extent = check_extent(mesh, extent)
    levels = np.asarray(levels, dtype=np.float64).ravel()
    if levels.size and (np.any(np.diff(levels) <= 0) or not np.all(np.isfinite(levels))):
        raise OptionError("extent levels must be finite and strictly increasing",
                          fix="sort the levels and remove duplicates")
    out = TetMesh(np.asarray(mesh.points, dtype=np.float64), np.asarray(mesh.tets, dtype=np.int64),
                  np.asarray(mesh.boundary_faces, dtype=np.int64),
                  np.asarray(mesh.boundary_markers, dtype=np.int64))
    extent = snap_to_levels(extent, levels)
    for level in levels:
        out, extent = _slice_once(out, extent, float(level))
    return out, extent
