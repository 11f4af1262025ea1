"""Sliver triangles out of a closed surface, within a tolerance (docs/model.md §2.11).

A CAD export leaves *caps* (a corner within micrometres of the opposite edge) and *needles* (an
edge micrometres long). Their normals are noise, so an angle test (MMGS's ridge detection) takes
their edges for sharp ones and keeps them, and TetGen's quality bound fills the part with tets of
their size. :func:`without_slivers` removes them by the two local moves that change the surface by
less than the sliver's own width: a cap's longest edge is flipped (the corner near it becomes a
vertex of the flipped pair), a needle's short edge is collapsed. A move is made only between faces
of the same label (each face's condition and group), and a collapse moves a vertex only onto one
with all its labels, so a selection's border moves only along itself; and only if the surface
stays a closed 2-manifold with no face turned over.

The moves of a round are made one after another in a fixed order (each sees the surface the
earlier ones left), so they run as numba kernels over numpy arrays (the edges' owners, each
vertex's neighbours and faces, in compressed rows); each computes a triangle's lengths, normal
and dot products in numpy's own order of operations, so the result is the same, bit for bit,
as the plain Python loops it replaced (tests/slivers_reference.py; docs/design/meshing.md).
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from fieldgen.surface.topology import cross, unit_normals

#: Rounds of moves (each face takes part in one move a round).
ROUNDS = 20
#: A cap's corner is collapsed only if the surface moves less than this fraction of the width.
DEVIATION = 0.1


def without_slivers(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray, width: float,
                    needle_deviation: float = math.inf) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``faces`` (and their ``labels``) with every cap narrower than ``width`` flipped and every
    edge shorter than ``width`` collapsed where the moves are allowed; unused vertices dropped.
    A needle's collapse is bounded against the surface of the moment, so collapses in successive
    rounds can add up past ``width``; with ``needle_deviation`` (a fraction of ``width``) a
    needle is collapsed only if the surface moves less than that, as a cap's corner is."""
    faces = np.array(faces, dtype=np.int64).reshape(-1, 3)
    labels = np.array(labels, dtype=np.int64)
    vertices = np.array(vertices, dtype=np.float64)
    width = float(width)
    for _ in range(ROUNDS):
        flipped = flip_caps(vertices, faces, labels, width)
        faces, labels, collapsed = collapse_needles(vertices, faces, labels, width, needle_deviation)
        if not flipped and not collapsed:
            break
    used, faces = np.unique(faces, return_inverse=True)
    return vertices[used], faces.reshape(-1, 3), labels


def face_shapes(vertices, faces):
    """Each face's edge lengths (edge ``i`` from corner ``i`` to ``i + 1``) and smallest height."""
    tri = vertices[faces]
    lengths = np.stack([np.linalg.norm(tri[:, (i + 1) % 3] - tri[:, i], axis=1) for i in range(3)], axis=1)
    area2 = np.linalg.norm(cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    return lengths, area2 / np.maximum(lengths.max(axis=1), 1e-300)


def _caps(lengths, height, width) -> np.ndarray:
    """The faces narrower than ``width`` whose edges are all at least ``width`` long."""
    return np.flatnonzero((height < width) & (lengths.min(axis=1) >= width))


def _directed_owners(faces, n):
    """Each directed edge ``a → b`` as the key ``a n + b`` (sorted) and the face that has it (the
    last such face, if several do)."""
    keys = (faces * n + faces[:, [1, 2, 0]]).ravel()
    owner = np.repeat(np.arange(len(faces), dtype=np.int64), 3)
    order = np.lexsort((owner, keys))
    keys, owner = keys[order], owner[order]
    last = np.r_[keys[1:] != keys[:-1], True]
    return keys[last], owner[last]


def _neighbours(faces, n):
    """Each vertex's neighbours (the vertices it shares an edge with), sorted, as compressed rows:
    vertex ``v``'s are ``adjacent[start[v]:start[v + 1]]``."""
    a, b = faces.ravel(), faces[:, [1, 2, 0]].ravel()
    pairs = np.sort(np.concatenate([a * n + b, b * n + a]))
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
    return np.searchsorted(pairs // n, np.arange(n + 1)), pairs % n


def _incident(faces, n):
    """Each vertex's faces in face order (a face once per corner it has there), as compressed rows."""
    flat = faces.ravel()
    order = np.argsort(flat, kind="stable")
    return np.searchsorted(flat[order], np.arange(n + 1)), order // 3


def flip_caps(vertices, faces, labels, width) -> int:
    """Flip the longest edge of each cap narrower than ``width`` (in place); how many."""
    lengths, height = face_shapes(vertices, faces)
    caps = _caps(lengths, height, width)
    if not len(caps):
        return 0
    n = len(vertices)
    keys, owner = _directed_owners(faces, n)
    start, adjacent = _neighbours(faces, n)
    return int(_flip_kernel(vertices, faces, labels, lengths, height, caps, keys, owner, start, adjacent,
                            unit_normals(vertices, faces), n))


def collapse_needles(vertices, faces, labels, width, needle_deviation: float = math.inf):
    """Collapse each edge shorter than ``width`` (one end onto the other), and each cap's corner
    onto an end of its opposite edge (:func:`collapses`), where the surface stays a 2-manifold,
    the faces around keep their side, the end that moves has no label the other lacks and the
    surface moves less than ``DEVIATION`` × ``width`` (a cap) or ``needle_deviation`` × ``width``
    (a short edge); the faces and labels left, and how many edges were collapsed."""
    candidates = collapses(vertices, faces, width)
    if not len(candidates):
        return faces, labels, 0
    n = len(vertices)
    start, adjacent = _neighbours(faces, n)
    first, incident = _incident(faces, n)
    alive, done = _collapse_kernel(vertices, faces, labels, candidates, start, adjacent, first, incident,
                                   unit_normals(vertices, faces), DEVIATION * width, needle_deviation * width)
    return faces[alive], labels[alive], int(done)


def collapses(vertices, faces, width) -> np.ndarray:
    """The collapses to try, rows (face, a, b, corner): each edge (a, b) shorter than ``width``
    (corner 0: either end may move), then each cap's corner ``a`` onto the nearer, then the
    farther, end ``b`` of its opposite edge (corner 1: ``a`` moves)."""
    lengths, height = face_shapes(vertices, faces)
    f, i = np.nonzero(lengths < width)
    edges = np.column_stack([f, faces[f, i], faces[f, (i + 1) % 3], np.zeros_like(f)])
    t = _caps(lengths, height, width)
    i = np.argmax(lengths[t], axis=1)         # the longest edge, from corner i to i + 1
    p = faces[t, (i + 2) % 3]
    nearer_first = lengths[t, (i + 2) % 3] < lengths[t, (i + 1) % 3]
    near = np.where(nearer_first, i, (i + 1) % 3)
    far = np.where(nearer_first, (i + 1) % 3, i)
    ones = np.ones_like(t)
    corners = np.stack([np.column_stack([t, p, faces[t, near], ones]),
                        np.column_stack([t, p, faces[t, far], ones])], axis=1).reshape(-1, 4)
    return np.concatenate([edges, corners]).astype(np.int64)


# ------------------------------------------------------------------ kernels
# Each follows numpy's order of operations: a norm sums its squares left to right, einsum's
# three-term dot product adds the first and last products before the middle one.

@nb.njit(cache=True)
def _norm(x, y, z):
    return np.sqrt((x * x + y * y) + z * z)


@nb.njit(cache=True)
def _normal(vertices, a, b, c):
    """The unit normal of triangle (a, b, c) (zero if its area is), as unit_normals gives it."""
    ux, uy, uz = vertices[b, 0] - vertices[a, 0], vertices[b, 1] - vertices[a, 1], vertices[b, 2] - vertices[a, 2]
    wx, wy, wz = vertices[c, 0] - vertices[a, 0], vertices[c, 1] - vertices[a, 1], vertices[c, 2] - vertices[a, 2]
    nx, ny, nz = uy * wz - uz * wy, uz * wx - ux * wz, ux * wy - uy * wx
    length = _norm(nx, ny, nz)
    if length > 0.0:
        return nx / length, ny / length, nz / length
    return 0.0, 0.0, 0.0


@nb.njit(cache=True)
def _height(vertices, a, b, c):
    """The smallest height of triangle (a, b, c), as face_shapes gives it."""
    longest = 0.0
    corners = (a, b, c)
    for i in range(3):
        p, q = corners[i], corners[(i + 1) % 3]
        dx, dy, dz = vertices[q, 0] - vertices[p, 0], vertices[q, 1] - vertices[p, 1], vertices[q, 2] - vertices[p, 2]
        length = _norm(dx, dy, dz)
        longest = length if i == 0 or length > longest else longest
    ux, uy, uz = vertices[b, 0] - vertices[a, 0], vertices[b, 1] - vertices[a, 1], vertices[b, 2] - vertices[a, 2]
    wx, wy, wz = vertices[c, 0] - vertices[a, 0], vertices[c, 1] - vertices[a, 1], vertices[c, 2] - vertices[a, 2]
    area2 = _norm(uy * wz - uz * wy, uz * wx - ux * wz, ux * wy - uy * wx)
    return area2 / max(longest, 1e-300)


@nb.njit(cache=True)
def _is_neighbour(start, adjacent, added, p, q, n):
    """Whether ``q`` is among ``p``'s neighbours or an edge ``p q`` was made since."""
    row = adjacent[start[p]:start[p + 1]]
    k = np.searchsorted(row, q)
    return (k < len(row) and row[k] == q) or (p * n + q) in added


@nb.njit(cache=True)
def _flip_kernel(vertices, faces, labels, lengths, height, caps, keys, owner, start, adjacent, normals, n):
    touched = np.zeros(len(faces), dtype=np.bool_)
    added = {np.int64(-1)}              # edges made by flips, as keys p n + q (-1: none)
    done = 0
    for t in caps:
        i = np.argmax(lengths[t])
        a, b, p = faces[t, i], faces[t, (i + 1) % 3], faces[t, (i + 2) % 3]
        k = np.searchsorted(keys, b * n + a)
        if k == len(keys) or keys[k] != b * n + a:
            continue
        u = owner[k]
        if touched[t] or touched[u] or labels[t] != labels[u]:
            continue
        q = -1
        for x in faces[u]:
            if x != a and x != b:
                q = x
                break
        if q == -1:
            raise ValueError("a face with no corner off its edge")
        if q == p or _is_neighbour(start, adjacent, added, p, q, n):
            continue
        turned = False
        for r, s, c in ((a, q, p), (q, b, p)):
            nx, ny, nz = _normal(vertices, r, s, c)
            turned |= (nx * normals[u, 0] + ny * normals[u, 1]) + nz * normals[u, 2] <= 0.0
        if turned:
            continue
        if min(_height(vertices, a, q, p), _height(vertices, q, b, p)) <= min(height[t], height[u]):
            continue        # the pair would be no better: no flip (nor flipping back)
        faces[t, 0], faces[t, 1], faces[t, 2] = a, q, p
        faces[u, 0], faces[u, 1], faces[u, 2] = q, b, p
        added.add(p * n + q)
        added.add(q * n + p)
        touched[t] = touched[u] = True
        done += 1
    return done


@nb.njit(cache=True)
def _common(start, adjacent, a, b):
    """How many neighbours ``a`` and ``b`` share (both rows sorted)."""
    i, j, count = start[a], start[b], 0
    while i < start[a + 1] and j < start[b + 1]:
        if adjacent[i] == adjacent[j]:
            count += 1
            i += 1
            j += 1
        elif adjacent[i] < adjacent[j]:
            i += 1
        else:
            j += 1
    return count


@nb.njit(cache=True)
def _subset(small, big):
    """Whether every value of sorted ``small`` is in sorted ``big``."""
    for x in small:
        k = np.searchsorted(big, x)
        if k == len(big) or big[k] != x:
            return False
    return True


@nb.njit(cache=True)
def _farthest(vertices, point, rows):
    """The largest distance of ``point`` from the planes of the triangles ``rows`` (0 for none;
    NaN if any is, as numpy's max gives it)."""
    worst = 0.0
    for r in range(len(rows)):
        nx, ny, nz = _normal(vertices, rows[r, 0], rows[r, 1], rows[r, 2])
        o = rows[r, 0]
        dx, dy, dz = point[0] - vertices[o, 0], point[1] - vertices[o, 1], point[2] - vertices[o, 2]
        d = abs((nx * dx + nz * dz) + ny * dy)
        if np.isnan(d):
            return d
        worst = max(worst, d)
    return worst


@nb.njit(cache=True)
def _end_to_drop(labels, first, incident, a, b, corner):
    """The end of edge (a, b) that moves, or -1: one with no label the other lacks (only ``a``
    for a corner), the one with fewer labels, else the larger index."""
    names_a = np.unique(labels[incident[first[a]:first[a + 1]]])
    names_b = np.unique(labels[incident[first[b]:first[b + 1]]])
    a_may = _subset(names_a, names_b)
    if corner:
        return a if a_may else -1
    high, low = max(a, b), min(a, b)
    names_high, names_low = (names_a, names_b) if high == a else (names_b, names_a)
    high_may, low_may = (a_may, _subset(names_b, names_a)) if high == a else (_subset(names_b, names_a), a_may)
    if low_may and (not high_may or len(names_low) < len(names_high)):
        return low
    return high if high_may else -1


@nb.njit(cache=True)
def _collapse_kernel(vertices, faces, labels, candidates, start, adjacent, first, incident, normals, bound,
                     needle_bound):
    alive = np.ones(len(faces), dtype=np.bool_)
    touched = np.zeros(len(vertices), dtype=np.bool_)
    done = 0
    for c in range(len(candidates)):
        f, a, b, corner = candidates[c, 0], candidates[c, 1], candidates[c, 2], candidates[c, 3] != 0
        if not alive[f] or touched[a] or touched[b] or _common(start, adjacent, a, b) != 2:
            continue
        drop = _end_to_drop(labels, first, incident, a, b, corner)
        if drop < 0:
            continue
        keep = a + b - drop
        around = incident[first[drop]:first[drop + 1]]
        dying = np.array([keep == faces[g, 0] or keep == faces[g, 1] or keep == faces[g, 2] for g in around])
        moving = around[~dying]
        trial = faces[moving]
        for r in range(len(trial)):
            for s in range(3):
                if trial[r, s] == drop:
                    trial[r, s] = keep
        turned = False
        for r in range(len(trial)):
            nx, ny, nz = _normal(vertices, trial[r, 0], trial[r, 1], trial[r, 2])
            g = moving[r]
            turned |= (nx * normals[g, 0] + nz * normals[g, 2]) + ny * normals[g, 1] <= 0.0
        if turned:
            continue
        limit = bound if corner else needle_bound
        if limit < np.inf and (_farthest(vertices, vertices[drop], trial) >= limit
                               or _farthest(vertices, vertices[keep], faces[around]) >= limit):
            continue
        for r in range(len(trial)):
            faces[moving[r]] = trial[r]
        alive[around[dying]] = False
        for v in (a, b):
            touched[adjacent[start[v]:start[v + 1]]] = True
            touched[v] = True
        done += 1
    return alive, done
