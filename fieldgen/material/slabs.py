"""Slicing a tet mesh by every extent level at once: each cut tet becomes the convex slabs between
consecutive levels (docs/model.md §2.4; D 5.1.2).

Each slab is tetrahedralised by the pulling rule (a cone from its minimum-global-index vertex over
its faces, each face fanned from its own minimum-index vertex). Neighbours see the same face
pieces with the same vertex ids, so they agree; the result is conforming, carries the boundary
markers (winding kept), preserves volume and the piecewise-linear extent, and every tet's vertex
extents lie between two consecutive levels. For one level these are the polytopes of
:func:`fieldgen.material.slicing.slice_by_levels`, but cutting one level at a time re-cuts the
pieces of the previous cuts (a prism's three tets all cross the next level), so a tet crossing m
levels grows geometrically; slabs grow linearly (about 3 tets per slab).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.material.levels import ON_LEVEL
from fieldgen.meshing.tetmesh import TET_EDGES, TetMesh, hat_gradients, orient_positive, tet_volumes

#: The four faces of a tet (local vertex triples).
_TET_FACES = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])


@dataclass(frozen=True)
class Crossings:
    """Where the levels cross the edges of the cut tets: one point per (edge, level strictly
    inside the edge's extent range), numbered from ``n`` by edge key (``u·n + v``, ``u < v``),
    then level."""

    keys: np.ndarray         #: sorted edge keys
    n: int                   #: vertices before the crossings
    first: np.ndarray        #: per edge, the first level strictly inside its range
    count: np.ndarray        #: per edge, how many levels lie strictly inside
    offset: np.ndarray       #: per edge, its first crossing's number (cumulative counts)
    n_levels: int

    def at(self, u: np.ndarray, v: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Global id of the crossing of level k on edge (u, v), -1 where k is not strictly inside."""
        keys, n, m = self.keys, self.n, self.n_levels
        u, v = np.minimum(u, v), np.maximum(u, v)
        idx = np.clip(np.searchsorted(keys, u * n + v), 0, len(keys) - 1)
        found = keys[idx] == u * n + v
        j = k - self.first[idx]
        ok = found & (k >= 0) & (k < m) & (j >= 0) & (j < self.count[idx])
        return np.where(ok, n + self.offset[idx] + np.where(ok, j, 0), -1)


def _crossings(points, extent, levels, cut_tets, carried) -> tuple[Crossings, np.ndarray, np.ndarray, np.ndarray]:
    """The crossings on the edges of ``cut_tets``, their points, their extents (the levels) and
    the ``carried`` field there (linear along each edge, as the points are)."""
    n = len(points)
    pairs = np.sort(cut_tets[:, TET_EDGES], axis=2).reshape(-1, 2)
    keys = np.unique(pairs[:, 0] * n + pairs[:, 1])
    eu, ev = keys // n, keys % n
    lo, hi = np.minimum(extent[eu], extent[ev]), np.maximum(extent[eu], extent[ev])
    e_first = np.searchsorted(levels, lo + ON_LEVEL, side="right")
    e_count = np.maximum(np.searchsorted(levels, hi - ON_LEVEL, side="left") - e_first, 0)
    offset = np.concatenate([[0], np.cumsum(e_count)])
    edge_of = np.repeat(np.arange(len(keys)), e_count)
    level_of = e_first[edge_of] + (np.arange(offset[-1]) - offset[edge_of])
    a, b = eu[edge_of], ev[edge_of]
    t = (levels[level_of] - extent[a]) / (extent[b] - extent[a])
    new_points = points[a] + t[:, None] * (points[b] - points[a])
    crossings = Crossings(keys, n, e_first, e_count, offset, len(levels))
    return crossings, new_points, levels[level_of], carried[a] + t * (carried[b] - carried[a])


def _between(tri, lk, uk, extent, levels, crossings: Crossings) -> np.ndarray:
    """Polygon (r, 9) of each triangle ``tri`` (r, 3) between levels lk and uk (indices; -1
    and m mean no bound), vertices in the triangle's winding, -1 padded at the end."""
    m = len(levels)
    lo_v = np.where(lk >= 0, levels[np.clip(lk, 0, m - 1)], -np.inf)
    hi_v = np.where(uk < m, levels[np.clip(uk, 0, m - 1)], np.inf)
    cols = []
    for i, j in ((0, 1), (1, 2), (2, 0)):
        s, q = tri[:, i], tri[:, j]
        es = extent[s]
        inside = (es >= lo_v - ON_LEVEL) & (es <= hi_v + ON_LEVEL)
        cols.append(np.where(inside, s, -1))
        xl, xu = crossings.at(s, q, lk), crossings.at(s, q, uk)
        up = extent[q] > es
        cols.append(np.where(up, xl, xu))
        cols.append(np.where(up, xu, xl))
    poly = np.stack(cols, axis=1)
    order = np.argsort(poly < 0, axis=1, kind="stable")
    return np.take_along_axis(poly, order, axis=1)


def _slab_bounds(first, count, m) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per slab: its row's index, and the level indices below and above it (-1 and ``m`` for
    none). Slab j of a row lies between levels first + j - 1 and first + j, for the ``count``
    slabs of each row (``first``: the row's first level strictly inside)."""
    row = np.repeat(np.arange(len(count)), count)
    j = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    lk = np.where(j == 0, -1, first[row] + j - 1)
    uk = np.where(j == count[row] - 1, m, first[row] + j)
    return row, lk, uk


def _slab_tets(points, extent, levels, cut_tets, first, last, crossings: Crossings):
    """The tets of the slabs of each cut tet, and the cut tet (row) each comes from."""
    m = len(levels)
    slab_tet, lk, uk = _slab_bounds(first, last - first + 2, m)
    st = cut_tets[slab_tet]                                                  # (s, 4)
    lateral = [_between(st[:, f], lk, uk, extent, levels, crossings)[:, :5] for f in _TET_FACES]
    sections = [_section(points, extent, levels, st, k, crossings) for k in (lk, uk)]
    polys = np.stack(lateral + sections, axis=1)                             # (s, 6, 5)
    big = np.iinfo(np.int64).max
    apex = np.where(polys >= 0, polys, big).reshape(len(st), -1).min(axis=1)
    tris = _fan(polys)                                                       # (s, 6, 3, 3)
    valid = np.all(tris >= 0, axis=3) & ~np.any(polys == apex[:, None, None], axis=2)[:, :, None]
    sub = np.concatenate([np.broadcast_to(apex[:, None, None, None], tris.shape[:3] + (1,)), tris], axis=3)
    return sub[valid], np.broadcast_to(slab_tet[:, None, None], valid.shape)[valid]


def _slab_faces(faces, markers, extent, levels, crossings: Crossings):
    """Boundary triangles cut into the same pieces, fanned the same way, winding and marker kept;
    children follow their parent's order."""
    m = len(levels)
    ef = extent[faces]
    f_first = np.searchsorted(levels, ef.min(axis=1) + ON_LEVEL, side="right")
    f_last = np.searchsorted(levels, ef.max(axis=1) - ON_LEVEL, side="left") - 1
    fcut = f_last >= f_first
    row, flk, fuk = _slab_bounds(f_first[fcut], f_last[fcut] - f_first[fcut] + 2, m)
    f_of = np.flatnonzero(fcut)[row]
    fpoly = _between(faces[f_of], flk, fuk, extent, levels, crossings)[:, :5]
    ftris = _fan(fpoly[:, None])[:, 0]                                         # (r, 3, 3)
    fvalid = np.all(ftris >= 0, axis=2)
    out_faces = np.concatenate([faces[~fcut], ftris[fvalid]])
    out_markers = np.concatenate([markers[~fcut], np.broadcast_to(markers[f_of][:, None], fvalid.shape)[fvalid]])
    face_parent = np.concatenate([np.flatnonzero(~fcut), np.broadcast_to(f_of[:, None], fvalid.shape)[fvalid]])
    order = np.argsort(face_parent, kind="stable")
    return out_faces[order], out_markers[order]


def slice_into_slabs(mesh: TetMesh, extent: np.ndarray, levels: np.ndarray, *,
                     cuts: np.ndarray | None = None) -> tuple[TetMesh, np.ndarray, np.ndarray]:
    """Cut ``mesh`` along every level at once into the slabs between consecutive levels (module
    docstring). The cuts follow ``cuts`` (default ``extent``), which should be snapped
    (:func:`fieldgen.material.levels.snap_to_levels`); ``extent`` (the solved field) is
    interpolated linearly at the new vertices, as is ``cuts``, which carries exactly a level there
    (docs/model.md §2.4). Returns (mesh, extent, cuts) on the sliced mesh. Deterministic: sub-tets
    follow their parent tet's order."""
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    markers = np.asarray(mesh.boundary_markers, dtype=np.int64)
    solved = np.asarray(extent, dtype=np.float64)
    extent = solved if cuts is None else np.asarray(cuts, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64).ravel()
    if not len(levels) or not len(tets):
        return TetMesh(points, tets, faces, markers), solved, extent
    et = extent[tets]
    first = np.searchsorted(levels, et.min(axis=1) + ON_LEVEL, side="right")   # levels strictly inside
    last = np.searchsorted(levels, et.max(axis=1) - ON_LEVEL, side="left") - 1
    cut = last >= first
    if not np.any(cut):
        return TetMesh(points, tets, faces, markers), solved, extent
    ct = tets[cut]
    crossings, new_points, new_cuts, new_solved = _crossings(points, extent, levels, ct, solved)
    sub, slab_of = _slab_tets(points, extent, levels, ct, first[cut], last[cut], crossings)
    all_points = np.concatenate([points, new_points])
    new_tets = np.concatenate([tets[~cut], sub])
    new_parent = np.concatenate([np.flatnonzero(~cut), np.flatnonzero(cut)[slab_of]])
    new_tets = new_tets[np.argsort(new_parent, kind="stable")]
    volumes = tet_volumes(all_points, new_tets)
    new_tets = orient_positive(all_points, new_tets[volumes != 0.0])
    out_faces, out_markers = _slab_faces(faces, markers, extent, levels, crossings)
    return (TetMesh(all_points, new_tets, out_faces, out_markers),
            np.concatenate([solved, new_cuts if cuts is None else new_solved]), np.concatenate([extent, new_cuts]))


def _section(points, extent, levels, st, k, crossings: Crossings) -> np.ndarray:
    """Cross-section (s, 5) of each tet ``st`` at level index ``k`` (none where k is -1 or m):
    its crossing points and the vertices on the level, in cyclic order, -1 padded."""
    m = len(levels)
    has = (k >= 0) & (k < m)
    value = levels[np.clip(k, 0, m - 1)]
    cols = [np.where(has & (np.abs(extent[st[:, i]] - value) <= ON_LEVEL), st[:, i], -1) for i in range(4)]
    cols += [np.where(has, crossings.at(st[:, i], st[:, j], k), -1) for i, j in TET_EDGES]
    ids = np.stack(cols, axis=1)                                              # (s, 10)
    valid = ids >= 0
    # Coordinates of the crossing points (not in ``points`` yet), from the edge ends.
    pos = np.zeros(ids.shape + (3,))
    for c in range(4):
        pos[:, c] = points[st[:, c]]
    for c, (i, j) in enumerate(TET_EDGES):
        ei, ej = extent[st[:, i]], extent[st[:, j]]
        d = ej - ei
        tt = np.where(d != 0, (value - ei) / np.where(d != 0, d, 1.0), 0.0)
        pos[:, 4 + c] = points[st[:, i]] + tt[:, None] * (points[st[:, j]] - points[st[:, i]])
    w = valid.astype(np.float64)
    centre = (pos * w[:, :, None]).sum(axis=1) / np.maximum(w.sum(axis=1), 1.0)[:, None]
    # A frame in the level plane: the normal is the tet's extent gradient.
    g = np.einsum("tk,tkj->tj", extent[st], hat_gradients(points, st)[0]) if len(st) else np.zeros((0, 3))
    normal = g / np.maximum(np.linalg.norm(g, axis=1), 1e-300)[:, None]
    helper = np.where((np.abs(normal[:, 0]) < 0.9)[:, None], [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    u = np.cross(normal, helper)
    u /= np.maximum(np.linalg.norm(u, axis=1), 1e-300)[:, None]
    v = np.cross(normal, u)
    rel = pos - centre[:, None]
    angle = np.arctan2(np.einsum("tcj,tj->tc", rel, v), np.einsum("tcj,tj->tc", rel, u))
    angle = np.where(valid, angle, np.inf)
    order = np.argsort(angle, axis=1, kind="stable")
    return np.take_along_axis(np.where(valid, ids, -1), order, axis=1)[:, :5]


def _fan(polys: np.ndarray) -> np.ndarray:
    """Fan each polygon (..., 5) (-1 padded, cyclic order) from its minimum-index vertex:
    (..., 3, 3) triangles, -1 rows where the polygon has fewer corners."""
    big = np.iinfo(np.int64).max
    cnt = (polys >= 0).sum(axis=-1)
    start = np.argmin(np.where(polys >= 0, polys, big), axis=-1)
    out = []
    for i in range(1, 4):
        c = np.maximum(cnt, 1)
        ia, ib = (start + i) % c, (start + i + 1) % c
        ok = i + 1 <= cnt - 1
        tri = np.stack([np.take_along_axis(polys, start[..., None], -1)[..., 0],
                        np.take_along_axis(polys, ia[..., None], -1)[..., 0],
                        np.take_along_axis(polys, ib[..., None], -1)[..., 0]], axis=-1)
        out.append(np.where(ok[..., None], tri, -1))
    return np.stack(out, axis=-2)
