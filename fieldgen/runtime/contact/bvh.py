"""Bounding volume hierarchy of a mesh's elements, and the two-tree broad phase (D 5.0.2).

The tree is built once in the body frame from each element's axis-aligned box. A query
between two trees takes the pose of B in A's frame and tests A's boxes against B's boxes
mapped into A's frame (centre rotated and translated, half-size through ``|R|``): a
conservative box for the rotated one, so no overlapping pair is ever missed.
Traversal is a depth-first stack in a numba kernel; its output order depends only on the
inputs, never on threads.

Temporal coherence (:func:`sorted_candidate_pairs` with a :class:`PairCache`): a simulation
queries the same two trees at poses that differ little from step to step. The cache keeps the
pairs found with B's boxes grown by a margin δ; while no box of B can have moved more than δ
since then (a bound from the change of pose, :func:`motion_bound`), the pairs of the current
pose are exactly the cached pairs whose element boxes overlap now, one box test per pair
instead of a traversal. Both ways return the pairs sorted (A's element, then B's), so the
cached and the direct query give the same array, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numba as nb
import numpy as np

LEAF_SIZE = 4


@dataclass(frozen=True)
class BVH:
    """Flat AABB tree. Node ``k`` covers ``order[start[k]:start[k] + count[k]]`` when it is a
    leaf (``left[k] < 0``); otherwise its children are ``left[k]`` and ``right[k]``."""

    lower: np.ndarray      # (nodes, 3) node box minimum
    upper: np.ndarray      # (nodes, 3) node box maximum
    left: np.ndarray       # (nodes,) int64, -1 for a leaf
    right: np.ndarray      # (nodes,) int64
    start: np.ndarray      # (nodes,) int64 into order
    count: np.ndarray      # (nodes,) int64
    order: np.ndarray      # (elements,) int64 element ids in leaf order
    element_lower: np.ndarray  # (elements, 3)
    element_upper: np.ndarray  # (elements, 3)

    @property
    def n_nodes(self) -> int:
        return int(self.left.shape[0])


def build_bvh(points: np.ndarray, elements: np.ndarray, leaf_size: int = LEAF_SIZE) -> BVH:
    """Build the tree over elements (tets (t, 4) or triangles (f, 3)) of ``points``."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    elements = np.ascontiguousarray(elements, dtype=np.int64)
    corners = points[elements]
    lo = np.ascontiguousarray(corners.min(axis=1))
    hi = np.ascontiguousarray(corners.max(axis=1))
    arrays = _build(lo, hi, int(leaf_size))
    return BVH(*arrays, lo, hi)


@nb.njit(cache=True)
def _build(lo, hi, leaf_size):
    n = lo.shape[0]
    cap = max(2 * n, 1)
    lower = np.zeros((cap, 3))
    upper = np.zeros((cap, 3))
    left = np.full(cap, -1, np.int64)
    right = np.full(cap, -1, np.int64)
    start = np.zeros(cap, np.int64)
    count = np.zeros(cap, np.int64)
    order = np.arange(n)
    centre = 0.5 * (lo + hi)
    stack = np.empty((cap, 3), np.int64)   # node, start, end
    top = 0
    n_nodes = 1
    stack[0, 0] = 0
    stack[0, 1] = 0
    stack[0, 2] = n
    top = 1
    while top > 0:
        top -= 1
        node = stack[top, 0]
        s = stack[top, 1]
        e = stack[top, 2]
        cmin = np.full(3, np.inf)
        cmax = np.full(3, -np.inf)
        for k in range(3):
            lower[node, k] = np.inf
            upper[node, k] = -np.inf
        for i in range(s, e):
            el = order[i]
            for k in range(3):
                lower[node, k] = min(lower[node, k], lo[el, k])
                upper[node, k] = max(upper[node, k], hi[el, k])
                cmin[k] = min(cmin[k], centre[el, k])
                cmax[k] = max(cmax[k], centre[el, k])
        start[node] = s
        count[node] = e - s
        if e - s <= leaf_size:
            continue
        axis = 0
        for k in range(1, 3):
            if cmax[k] - cmin[k] > cmax[axis] - cmin[axis]:
                axis = k
        keys = np.empty(e - s)
        for i in range(s, e):
            keys[i - s] = centre[order[i], axis]
        perm = np.argsort(keys, kind="mergesort")
        segment = order[s:e].copy()
        for i in range(e - s):
            order[s + i] = segment[perm[i]]
        mid = (s + e) // 2
        left[node] = n_nodes
        right[node] = n_nodes + 1
        stack[top, 0] = n_nodes + 1
        stack[top, 1] = mid
        stack[top, 2] = e
        top += 1
        stack[top, 0] = n_nodes
        stack[top, 1] = s
        stack[top, 2] = mid
        top += 1
        n_nodes += 2
    return (lower[:n_nodes].copy(), upper[:n_nodes].copy(), left[:n_nodes].copy(),
            right[:n_nodes].copy(), start[:n_nodes].copy(), count[:n_nodes].copy(), order)


def candidate_pairs(bvh_a: BVH, bvh_b: BVH, X_AB: np.ndarray) -> np.ndarray:
    """(m, 2) int64 pairs (element of A, element of B) whose boxes overlap, B posed at X_AB in A's frame.

    The smaller tree is the one whose boxes are mapped (once per query, all of them) into the
    other's frame, so the larger tree is traversed as built: a fine mesh against a box of a few
    triangles maps the box's few boxes and nodes, not one per visited node pair. The pair set is a superset of
    the truly overlapping pairs either way; its order depends only on the inputs."""
    X_AB = np.ascontiguousarray(X_AB, dtype=np.float64)
    if bvh_a.n_nodes == 0 or bvh_b.n_nodes == 0 or bvh_a.order.size == 0 or bvh_b.order.size == 0:
        return np.zeros((0, 2), np.int64)
    if bvh_b.order.size <= bvh_a.order.size:
        return _query(bvh_a, bvh_b, X_AB)
    R = X_AB[:3, :3]
    X_BA = np.zeros((4, 4))
    X_BA[:3, :3] = R.T
    X_BA[:3, 3] = -(R.T @ X_AB[:3, 3])
    X_BA[3, 3] = 1.0
    return np.ascontiguousarray(_query(bvh_b, bvh_a, X_BA)[:, ::-1])


def roots_within(bvh_a: BVH, bvh_b: BVH, X_AB: np.ndarray, margin: float) -> bool:
    """Does B's root box, posed at X_AB in A's frame (conservatively, as the traversal maps
    boxes), come within ``margin`` of A's root box? False means no pair of elements can: a
    cheap first test before a query with boxes grown by ``margin``."""
    if bvh_a.n_nodes == 0 or bvh_b.n_nodes == 0:
        return False
    return bool(_roots_within(bvh_a.lower, bvh_a.upper, bvh_b.lower, bvh_b.upper,
                              np.ascontiguousarray(X_AB, dtype=np.float64), float(margin)))


@nb.njit(cache=True)
def _roots_within(alo, ahi, blo, bhi, X, margin):
    pad = _pad(alo, ahi) + margin * (1.0 + 1e-9)   # at least the slack of the grown-box traversal
    for i in range(3):
        c = X[i, 3]
        h = 0.0
        for j in range(3):
            c += X[i, j] * 0.5 * (blo[0, j] + bhi[0, j])
            h += abs(X[i, j]) * 0.5 * (bhi[0, j] - blo[0, j])
        if c - h > ahi[0, i] + pad or c + h < alo[0, i] - pad:
            return False
    return True


def _query(big: BVH, small: BVH, X, grow: float = 0.0):
    """(big's element, small's element) pairs, small posed at X in big's frame, its boxes grown
    by ``grow`` on every side."""
    node_c, node_h = mapped_boxes(small.lower, small.upper, X)
    elem_c, elem_h = mapped_boxes(small.element_lower, small.element_upper, X)
    if grow > 0.0:
        node_h += grow
        elem_h += grow
    return _traverse(big.lower, big.upper, big.left, big.right, big.start, big.count, big.order,
                     big.element_lower, big.element_upper,
                     node_c, node_h, small.left, small.right, small.start, small.count, small.order,
                     elem_c, elem_h)


@nb.njit(cache=True)
def mapped_boxes(lo, hi, X):
    """Centre and half-size, in the other frame, of boxes (lo, hi) mapped by X (conservative
    box of the rotated box: half-size through |R|)."""
    n = lo.shape[0]
    c = np.empty((n, 3))
    h = np.empty((n, 3))
    for e in range(n):
        for i in range(3):
            ci = X[i, 3]
            hi_ = 0.0
            for j in range(3):
                cj = 0.5 * (lo[e, j] + hi[e, j])
                hj = 0.5 * (hi[e, j] - lo[e, j])
                ci += X[i, j] * cj
                hi_ += abs(X[i, j]) * hj
            c[e, i] = ci
            h[e, i] = hi_
    return c, h


@nb.njit(cache=True, inline="always")
def _overlap(alo, ahi, c, h):
    """AABB (alo, ahi) against the mapped box with centre ``c`` and half-size ``h``."""
    for i in range(3):
        if c[i] - h[i] > ahi[i] or c[i] + h[i] < alo[i]:
            return False
    return True


@nb.njit(cache=True)
def _pad(alow, aupp):
    """Slack added to A's boxes (1e-12 of the root box's coordinates): touching boxes overlap."""
    return 1e-12 * (np.max(np.abs(aupp[0])) + np.max(np.abs(alow[0])) + 1e-300)


@nb.njit(cache=True)
def _traverse(alow, aupp, aleft, aright, astart, acount, aorder, aelo, aehi,
              bc, bh, bleft, bright, bstart, bcount, border, bec, beh):
    pad = _pad(alow, aupp)
    cap = 1024
    out = np.empty((cap, 2), np.int64)
    m = 0
    stack = np.empty((1024, 2), np.int64)
    stack[0, 0] = 0
    stack[0, 1] = 0
    top = 1
    alo = np.empty(3)
    ahi = np.empty(3)
    elo = np.empty(3)
    ehi = np.empty(3)
    while top > 0:
        top -= 1
        na = stack[top, 0]
        nb_ = stack[top, 1]
        for k in range(3):
            alo[k] = alow[na, k] - pad
            ahi[k] = aupp[na, k] + pad
        if not _overlap(alo, ahi, bc[nb_], bh[nb_]):
            continue
        a_leaf = aleft[na] < 0
        b_leaf = bleft[nb_] < 0
        if a_leaf and b_leaf:
            # B's elements against A's leaf box first (a B leaf's box can be far looser than its
            # elements', e.g. triangles of different faces of a cube), then the survivors
            # against A's elements, each against its own box.
            for j in range(bstart[nb_], bstart[nb_] + bcount[nb_]):
                eb = border[j]
                if not _overlap(alo, ahi, bec[eb], beh[eb]):
                    continue
                for i in range(astart[na], astart[na] + acount[na]):
                    ea = aorder[i]
                    for k in range(3):
                        elo[k] = aelo[ea, k] - pad
                        ehi[k] = aehi[ea, k] + pad
                    if _overlap(elo, ehi, bec[eb], beh[eb]):
                        if m == cap:
                            bigger = np.empty((2 * cap, 2), np.int64)
                            bigger[:m] = out[:m]
                            out = bigger
                            cap *= 2
                        out[m, 0] = ea
                        out[m, 1] = eb
                        m += 1
            continue
        if top + 4 > stack.shape[0]:
            bigger_s = np.empty((2 * stack.shape[0], 2), np.int64)
            bigger_s[:top] = stack[:top]
            stack = bigger_s
        # Descend the larger (by box diagonal) of the two internal nodes.
        descend_a = not a_leaf
        if not a_leaf and not b_leaf:
            da = 0.0
            db = 0.0
            for k in range(3):
                da += (aupp[na, k] - alow[na, k]) ** 2
                db += (2.0 * bh[nb_, k]) ** 2
            descend_a = da >= db
        if descend_a:
            stack[top, 0] = aright[na]
            stack[top, 1] = nb_
            stack[top + 1, 0] = aleft[na]
            stack[top + 1, 1] = nb_
        else:
            stack[top, 0] = na
            stack[top, 1] = bright[nb_]
            stack[top + 1, 0] = na
            stack[top + 1, 1] = bleft[nb_]
        top += 2
    return out[:m].copy()


# --------------------------------------------------------------------------- temporal coherence

@dataclass(eq=False)
class PairCache:
    """Candidate pairs of one (big tree, small tree) couple kept between queries (module doc).

    ``margin`` is δ (m, in the big tree's frame); NaN picks a quarter of the big tree's median
    element size on first use. ``pose`` is the small tree's pose in the big one's frame when
    ``pairs`` (sorted, big's element first) were found with the small tree's boxes grown by δ.
    ``traversals``/``reuses`` count the two kinds of query (for benchmarks and tests)."""

    margin: float = float("nan")
    pose: np.ndarray | None = None
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    big: object = None
    small: object = None
    traversals: int = 0
    reuses: int = 0


def default_margin(bvh: BVH) -> float:
    """A quarter of the median element size (largest box side) of ``bvh``."""
    if bvh.element_lower.shape[0] == 0:
        return 0.0
    return 0.25 * float(np.median(np.max(bvh.element_upper - bvh.element_lower, axis=1)))


def motion_bound(X_old: np.ndarray, X_new: np.ndarray, reach: float) -> float:
    """How far (per axis) any box of a tree whose boxes lie within ``reach`` of its origin on
    every axis (max |coordinate|) can move, centre and conservative half-size together, when
    its pose changes from ``X_old`` to ``X_new``: |Δt|∞ + ‖ΔR‖∞·reach (``mapped_boxes`` maps a
    box to centre R c + t and half-size |R| h, and |c_j| + h_j ≤ reach)."""
    dR = np.abs(X_new[:3, :3] - X_old[:3, :3]).sum(axis=1).max()
    return float(np.abs(X_new[:3, 3] - X_old[:3, 3]).max() + dR * reach)


def sorted_candidate_pairs(bvh_a: BVH, bvh_b: BVH, X_AB: np.ndarray, cache: PairCache | None = None) -> np.ndarray:
    """The pairs of :func:`candidate_pairs` sorted by (element of A, element of B) — the
    larger tree's element first when B is the larger — found through ``cache`` when given and
    still valid (module doc), else by a traversal (which refills the cache). Same result either
    way: a pair is returned when its element boxes overlap (A's grown by the traversal's 1e-12
    slack), whatever the cache's state."""
    X_AB = np.ascontiguousarray(X_AB, dtype=np.float64)
    if bvh_a.n_nodes == 0 or bvh_b.n_nodes == 0 or bvh_a.order.size == 0 or bvh_b.order.size == 0:
        return np.zeros((0, 2), np.int64)
    swap = bvh_b.order.size > bvh_a.order.size
    if swap:
        big, small = bvh_b, bvh_a
        R = X_AB[:3, :3]
        X = np.zeros((4, 4))
        X[:3, :3] = R.T
        X[:3, 3] = -(R.T @ X_AB[:3, 3])
        X[3, 3] = 1.0
    else:
        big, small, X = bvh_a, bvh_b, X_AB
    if cache is None:
        pairs = _sorted(_query(big, small, X), small.order.size)
    else:
        if cache.big is not big or cache.small is not small:
            cache.big, cache.small, cache.pose = big, small, None
            if not np.isfinite(cache.margin):
                cache.margin = default_margin(big)
        reach = float(max(np.abs(small.lower[0]).max(), np.abs(small.upper[0]).max()))
        slack = 1e-9 * (reach + float(np.abs(X[:3, 3]).max()))   # round-off of the mapped boxes
        if cache.pose is None or motion_bound(cache.pose, X, reach) + slack > cache.margin:
            cache.pairs = _sorted(_query(big, small, X, cache.margin), small.order.size)
            cache.pose = X.copy()
            cache.traversals += 1
        else:
            cache.reuses += 1
        elem_c, elem_h = mapped_boxes(small.element_lower, small.element_upper, X)
        pairs = _overlapping(cache.pairs, big.lower, big.upper, big.element_lower, big.element_upper,
                             elem_c, elem_h)
    return np.ascontiguousarray(pairs[:, ::-1]) if swap else pairs


def _sorted(pairs: np.ndarray, n_small: int) -> np.ndarray:
    """Rows sorted by (first, second) column, through one int64 key."""
    if len(pairs) < 2:
        return pairs
    key = np.sort(pairs[:, 0] * np.int64(n_small) + pairs[:, 1])
    out = np.empty_like(pairs)
    out[:, 0] = key // n_small
    out[:, 1] = key % n_small
    return out


@nb.njit(cache=True)
def _overlapping(pairs, alow, aupp, aelo, aehi, bec, beh):
    """The rows of ``pairs`` whose element boxes overlap: A's (grown by the traversal's slack)
    against B's mapped box — the traversal's own element test (``_overlap``), in the rows' order."""
    pad = _pad(alow, aupp)
    out = np.empty_like(pairs)
    m = 0
    for r in range(pairs.shape[0]):
        ea = pairs[r, 0]
        eb = pairs[r, 1]
        hit = True
        for i in range(3):
            if bec[eb, i] - beh[eb, i] > aehi[ea, i] + pad or bec[eb, i] + beh[eb, i] < aelo[ea, i] - pad:
                hit = False
                break
        if hit:
            out[m, 0] = ea
            out[m, 1] = eb
            m += 1
    return out[:m].copy()
