"""Faces that cross or overlap: an R-tree over the triangles' boxes, then vectorised
segment-triangle tests. A closed surface that crosses itself bounds no volume (docs/model.md §2.2)."""

from __future__ import annotations

import numpy as np
from rtree import index

#: Distances below this fraction of the bounding-box diagonal count as touching.
CONTACT_TOLERANCE = 1e-10


def _segment_hits_triangle(p, q, t0, t1, t2, eps):
    """Does the closed segment pq meet the closed triangle (t0, t1, t2)? Vectorised.

    Points within ``eps`` of the triangle count as on it. A segment in the triangle's
    plane is clipped against the three edge half-planes (so coplanar overlap counts).
    """
    n = np.cross(t1 - t0, t2 - t0)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    dp = np.einsum("ij,ij->i", n, p - t0)
    dq = np.einsum("ij,ij->i", n, q - t0)
    apart = ((dp > eps) & (dq > eps)) | ((dp < -eps) & (dq < -eps))
    coplanar = (np.abs(dp) <= eps) & (np.abs(dq) <= eps)
    # Parameter range of the segment that lies in the plane (within eps).
    lo = np.zeros(len(p))
    hi = np.ones(len(p))
    crossing = ~apart & ~coplanar
    denom = np.where(crossing, dp - dq, 1.0)
    tc = np.clip(dp / denom, 0.0, 1.0)
    lo = np.where(crossing, tc, lo)
    hi = np.where(crossing, tc, hi)
    for a, b in ((t0, t1), (t1, t2), (t2, t0)):
        e = b - a
        inward = np.cross(n, e)
        inward /= np.maximum(np.linalg.norm(inward, axis=1, keepdims=True), 1e-300)
        sp = np.einsum("ij,ij->i", inward, p - a)
        sq = np.einsum("ij,ij->i", inward, q - a)
        slope = sq - sp
        bound = np.divide(-eps - sp, slope, out=np.zeros_like(sp), where=slope != 0)
        lo = np.where(slope > 0, np.maximum(lo, bound), lo)
        hi = np.where(slope < 0, np.minimum(hi, bound), hi)
        hi = np.where((slope == 0) & (sp < -eps), -1.0, hi)
    return ~apart & (lo <= hi)


def _pairs_intersect(vertices, faces_a, faces_b, eps):
    """For rows of triangles a[i], b[i]: do they meet anywhere but shared vertices/edges?

    Vertices are shared by index. No shared vertex: any edge of one meets the other.
    One shared vertex: the edge opposite it in one meets the other (the meeting set is
    a segment from the shared vertex, so its far end lies on such an edge). Two shared
    vertices: they overlap only if folded flat onto each other.
    """
    shared = (faces_a[:, :, None] == faces_b[:, None, :])  # (k, 3, 3)
    n_shared = shared.any(axis=2).sum(axis=1)
    hit = np.zeros(len(faces_a), dtype=bool)
    A, B = vertices[faces_a], vertices[faces_b]

    zero = np.flatnonzero(n_shared == 0)
    if len(zero):
        a, b = A[zero], B[zero]
        res = np.zeros(len(zero), dtype=bool)
        for i in range(3):
            j = (i + 1) % 3
            res |= _segment_hits_triangle(a[:, i], a[:, j], b[:, 0], b[:, 1], b[:, 2], eps)
            res |= _segment_hits_triangle(b[:, i], b[:, j], a[:, 0], a[:, 1], a[:, 2], eps)
        hit[zero] = res

    one = np.flatnonzero(n_shared == 1)
    if len(one):
        ia = np.argmax(shared[one].any(axis=2), axis=1)  # shared corner in a
        ib = np.argmax(shared[one].any(axis=1), axis=1)  # shared corner in b
        r = np.arange(len(one))
        a, b = A[one], B[one]
        a1, a2 = a[r, (ia + 1) % 3], a[r, (ia + 2) % 3]
        b1, b2 = b[r, (ib + 1) % 3], b[r, (ib + 2) % 3]
        hit[one] = (_segment_hits_triangle(a1, a2, b[:, 0], b[:, 1], b[:, 2], eps)
                    | _segment_hits_triangle(b1, b2, a[:, 0], a[:, 1], a[:, 2], eps))

    two = np.flatnonzero(n_shared == 2)
    if len(two):
        oa = np.argmin(shared[two].any(axis=2), axis=1)  # the unshared corner of a
        ob = np.argmin(shared[two].any(axis=1), axis=1)
        r = np.arange(len(two))
        a, b = A[two], B[two]
        pa, pb = a[r, oa], b[r, ob]
        u, w = a[r, (oa + 1) % 3], a[r, (oa + 2) % 3]
        n = np.cross(w - u, pa - u)
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
        in_plane = np.abs(np.einsum("ij,ij->i", n, pb - u)) <= eps
        side = np.cross(n, w - u)  # in-plane direction away from the edge, towards pa
        same_side = np.einsum("ij,ij->i", side, pb - u) > 0
        hit[two] = in_plane & same_side

    hit[n_shared == 3] = True  # the same triangle twice
    return hit


def _boxes(vertices, faces, pad):
    tri = vertices[faces]
    return tri.min(axis=1) - pad, tri.max(axis=1) + pad


#: The self-join's grid (:func:`_grid_pairs`): cells of this many times the median box's longest
#: side, doubled while the boxes would fill more than ``GRID_ENTRIES`` cells per box; the R-tree
#: instead when the boxes sharing cells make more than ``GRID_PAIRS`` candidate pairs per box.
GRID_CELL = 2.0
GRID_ENTRIES = 16
GRID_PAIRS = 64


def _grid_pairs(lo, hi):
    """Index pairs (i < j) whose boxes overlap, sorted, or None when the grid would test too many:
    the boxes are hashed into a uniform grid and the pairs sharing a cell are tested (on a CAD
    part's remeshed surface of 40k triangles 0.3 s, where the R-tree took 1.1 s)."""
    k = len(lo)
    origin = lo.min(axis=0)
    cell = max(GRID_CELL * float(np.median((hi - lo).max(axis=1))), float(np.ptp(hi - origin, axis=0).max()) * 2.0**-20,
               1e-300)
    while True:   # (cells at least 2^-20 of the extent: the keys below fit in int64)
        first = np.floor((lo - origin) / cell).astype(np.int64)
        span = np.floor((hi - origin) / cell).astype(np.int64) - first + 1
        count = span.prod(axis=1)
        if count.sum() <= GRID_ENTRIES * k:
            break
        cell *= 2.0
    dims = first.max(axis=0) + span.max(axis=0) + 1
    box = np.repeat(np.arange(k), count)
    local = np.arange(len(box)) - np.repeat(np.cumsum(count) - count, count)
    sx, sy = span[box, 0], span[box, 1]
    ix, iy, iz = first[box, 0] + local % sx, first[box, 1] + (local // sx) % sy, first[box, 2] + local // (sx * sy)
    key = (ix * dims[1] + iy) * dims[2] + iz
    order = np.argsort(key, kind="stable")
    key, box = key[order], box[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    ends = np.repeat(np.r_[starts[1:], len(key)], np.diff(np.r_[starts, len(key)]))
    later = ends - np.arange(len(key)) - 1           # the entries after each one in its cell
    if later.sum() > GRID_PAIRS * k:
        return None
    e = np.repeat(np.arange(len(key)), later)
    a, b = box[e], box[e + 1 + np.arange(len(e)) - np.repeat(np.cumsum(later) - later, later)]
    keep = np.all((lo[a] <= hi[b]) & (lo[b] <= hi[a]), axis=1) & (a != b)
    pair = np.unique(np.minimum(a[keep], b[keep]) * k + np.maximum(a[keep], b[keep]))
    return np.stack([pair // k, pair % k], axis=1)


def _candidate_pairs(lo_a, hi_a, lo_b=None, hi_b=None):
    """Index pairs (i, j) whose boxes overlap: within one set (i < j; by :func:`_grid_pairs`
    where it applies) or across two sets, by an R-tree."""
    target_lo, target_hi = (lo_a, hi_a) if lo_b is None else (lo_b, hi_b)
    if len(target_lo) == 0 or len(lo_a) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if lo_b is None:
        pairs = _grid_pairs(lo_a, hi_a)
        if pairs is not None:
            return pairs
    props = index.Property()
    props.dimension = 3
    tree = index.Index((np.arange(len(target_lo), dtype=np.int64),
                        np.ascontiguousarray(target_lo), np.ascontiguousarray(target_hi)),
                       properties=props)
    ids, counts = tree.intersection_v(np.ascontiguousarray(lo_a), np.ascontiguousarray(hi_a))
    i = np.repeat(np.arange(len(lo_a), dtype=np.int64), np.asarray(counts, dtype=np.int64))
    j = np.asarray(ids, dtype=np.int64)
    if lo_b is None:
        keep = i < j
        i, j = i[keep], j[keep]
    pairs = np.stack([i, j], axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def intersecting_face_pairs(vertices: np.ndarray, faces: np.ndarray,
                            other_faces: np.ndarray | None = None,
                            chunk: int = 200_000, tolerance: float = CONTACT_TOLERANCE) -> np.ndarray:
    """(k, 2) pairs of faces that cross or overlap (sorted, deterministic).

    With ``other_faces`` (indices into the same ``vertices``) the pairs are
    (face of ``faces``, face of ``other_faces``); otherwise pairs within ``faces``,
    ignoring contact at shared vertices and edges. Faces closer than ``tolerance`` × the
    bounding-box diagonal meet. Broad phase: an R-tree over the triangles' boxes; narrow phase:
    vectorised segment-triangle tests.
    """
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    used = faces if other_faces is None else np.r_[faces, other_faces]
    span = vertices[np.unique(used)]
    eps = tolerance * float(np.linalg.norm(span.max(axis=0) - span.min(axis=0)))
    lo_a, hi_a = _boxes(vertices, faces, eps)
    if other_faces is None:
        pairs = _candidate_pairs(lo_a, hi_a)
        faces_b = faces
    else:
        faces_b = np.asarray(other_faces, dtype=np.int64)
        pairs = _candidate_pairs(lo_a, hi_a, *_boxes(vertices, faces_b, eps))
    hits = []
    for start in range(0, len(pairs), chunk):
        p = pairs[start:start + chunk]
        hits.append(p[_pairs_intersect(vertices, faces[p[:, 0]], faces_b[p[:, 1]], eps)])
    return np.concatenate(hits) if hits else np.zeros((0, 2), dtype=np.int64)
