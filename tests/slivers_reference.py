"""The sliver moves as plain Python loops: the reference the numba kernels of
``fieldgen/surface/slivers.py`` must match bit for bit (tests/test_slivers_fast.py).

This is the implementation the surface stage used before the kernels, kept verbatim (only this
docstring is new): the same rule (docs/model.md §2.11), the same order of moves and tie-breaks.
"""
from __future__ import annotations

import math

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
    A needle's collapse also moves the surface less than ``needle_deviation`` × ``width``."""
    faces = np.array(faces, dtype=np.int64)
    labels = np.array(labels, dtype=np.int64)
    vertices = np.array(vertices, dtype=np.float64)
    for _ in range(ROUNDS):
        flipped = _flip_caps(vertices, faces, labels, width)
        faces, labels, collapsed = _collapse_needles(vertices, faces, labels, width, needle_deviation)
        if not flipped and not collapsed:
            break
    used, faces = np.unique(faces, return_inverse=True)
    return vertices[used], faces.reshape(-1, 3), labels


def _shapes(vertices, faces):
    """Each face's edge lengths (edge ``i`` from corner ``i`` to ``i + 1``) and smallest height."""
    tri = vertices[faces]
    lengths = np.stack([np.linalg.norm(tri[:, (i + 1) % 3] - tri[:, i], axis=1) for i in range(3)], axis=1)
    area2 = np.linalg.norm(cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    return lengths, area2 / np.maximum(lengths.max(axis=1), 1e-300)


def _edge_faces(faces) -> dict:
    """Directed edge (a, b) -> the face that has it."""
    return {(int(a), int(b)): f for f, row in enumerate(faces.tolist())
            for a, b in ((row[0], row[1]), (row[1], row[2]), (row[2], row[0]))}


def _flip_caps(vertices, faces, labels, width) -> int:
    """Flip the longest edge of each cap narrower than ``width`` (in place); how many."""
    lengths, height = _shapes(vertices, faces)
    caps = np.flatnonzero((height < width) & (lengths.min(axis=1) >= width))
    if not len(caps):
        return 0
    owner = _edge_faces(faces)
    neighbours = _vertex_neighbours(faces)
    normals = unit_normals(vertices, faces)
    touched = np.zeros(len(faces), dtype=bool)
    done = 0
    for t in caps.tolist():
        i = int(np.argmax(lengths[t]))
        a, b, p = int(faces[t, i]), int(faces[t, (i + 1) % 3]), int(faces[t, (i + 2) % 3])
        u = owner.get((b, a))
        if u is None or touched[t] or touched[u] or labels[t] != labels[u]:
            continue
        q = int(next(x for x in faces[u].tolist() if x not in (a, b)))
        if q == p or q in neighbours[p]:
            continue
        new = np.array([[a, q, p], [q, b, p]], dtype=np.int64)
        if (unit_normals(vertices, new) @ normals[u] <= 0.0).any():
            continue
        if _shapes(vertices, new)[1].min() <= min(height[t], height[u]):
            continue        # the pair would be no better: no flip (nor flipping back)
        faces[t], faces[u] = new
        neighbours[p].add(q)
        neighbours[q].add(p)
        touched[[t, u]] = True
        done += 1
    return done


def _vertex_neighbours(faces) -> dict:
    """Vertex -> the set of vertices it shares an edge with."""
    out: dict = {}
    for row in faces.tolist():
        for a, b in ((row[0], row[1]), (row[1], row[2]), (row[2], row[0])):
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
    return out


def _collapse_needles(vertices, faces, labels, width, needle_deviation):
    """Collapse each edge shorter than ``width`` (one end onto the other), and each cap's corner
    onto an end of its opposite edge (:func:`_collapses`), where the surface stays a 2-manifold,
    the faces around keep their side, the end that moves has no label the other lacks and (for a
    cap) the surface moves less than ``DEVIATION`` × ``width``; the faces and labels left, and how
    many edges were collapsed."""
    candidates = _collapses(vertices, faces, width)
    if not candidates:
        return faces, labels, 0
    neighbours = _vertex_neighbours(faces)
    incident: dict = {}
    for f, row in enumerate(faces.tolist()):
        for v in row:
            incident.setdefault(v, []).append(f)
    normals = unit_normals(vertices, faces)
    alive = np.ones(len(faces), dtype=bool)
    touched = np.zeros(len(vertices), dtype=bool)
    done = 0
    for f, a, b, corner in candidates:
        if not alive[f] or touched[a] or touched[b]:
            continue
        if len(neighbours[a] & neighbours[b]) != 2:
            continue
        # The end that moves has no label the other lacks: a border between labels moves only
        # along itself, by less than ``width``.
        names = {v: set(labels[incident[v]].tolist()) for v in (a, b)}
        ends = [v for v in ((a,) if corner else (max(a, b), min(a, b))) if names[v] <= names[a + b - v]]
        if not ends:
            continue
        drop = min(ends, key=lambda v: (len(names[v]), -v))
        keep = a + b - drop
        moved = [g for g in incident[drop] if keep not in faces[g]]
        dying = [g for g in incident[drop] if keep in faces[g]]
        trial = faces[moved].copy()
        trial[trial == drop] = keep
        if (np.einsum("ij,ij->i", unit_normals(vertices, trial), normals[moved]) <= 0.0).any():
            continue
        bound = (DEVIATION if corner else needle_deviation) * width
        if bound < math.inf and not _within(vertices, drop, keep, trial, faces[incident[drop]], bound):
            continue
        faces[moved] = trial
        alive[dying] = False
        touched[list(neighbours[a] | neighbours[b] | {a, b})] = True
        done += 1
    return faces[alive], labels[alive], done


def _collapses(vertices, faces, width) -> list:
    """The collapses to try, as (face, a, b, corner): each edge (a, b) shorter than ``width``
    (corner False: either end may move), then each cap's corner ``a`` onto the nearer, then the
    farther, end ``b`` of its opposite edge (corner True: ``a`` moves)."""
    lengths, height = _shapes(vertices, faces)
    out = [(f, int(faces[f, i]), int(faces[f, (i + 1) % 3]), False)
           for f, i in np.argwhere(lengths < width).tolist()]
    for t in np.flatnonzero((height < width) & (lengths.min(axis=1) >= width)).tolist():
        i = int(np.argmax(lengths[t]))        # the longest edge, from corner i to i + 1
        p = int(faces[t, (i + 2) % 3])
        near, far = (i, (i + 1) % 3) if lengths[t, (i + 2) % 3] < lengths[t, (i + 1) % 3] else ((i + 1) % 3, i)
        out += [(t, p, int(faces[t, near]), True), (t, p, int(faces[t, far]), True)]
    return out


def _within(vertices, drop, keep, new_faces, old_faces, bound: float) -> bool:
    """Whether moving vertex ``drop`` onto ``keep`` moves the surface less than ``bound``: ``drop``
    within it of the plane of each new face, and ``keep`` of each old face around ``drop`` (the
    two stars share their outer edges)."""
    for point, around in ((vertices[drop], new_faces), (vertices[keep], old_faces)):
        normals = unit_normals(vertices, around)
        if np.abs(np.einsum("ij,ij->i", normals, point - vertices[around[:, 0]])).max(initial=0.0) >= bound:
            return False
    return True
