"""A layered sheet's far side (docs/model.md §2.10, "Sheets of one thickness"): the near side
meshed again so that its columns end on the far side's corners.

Columns run from the remeshed near side across the sheet (:mod:`fieldgen.sizing.sheet`) and end
where a ray meets the other side. Where the rest of the surface turns sharply — a chamfer or a
step at the rim, the edge between a wall's facets and a chamfer, a dimple — the columns' ends fall
either side of its corners and the mesh cuts them off, by about half the columns' spacing there.
When a layered mesh misses the input so, one side is meshed again (``fitted`` in
:mod:`fieldgen.sizing.sheet`):

1. the far corners: the vertices of the rest of the surface on its creases (faces meeting at more
   than ``CREASE`` degrees) and those the missing mesh lies farther than the surface tolerance
   from (:func:`far_corners`), and their shadows, their nearest points on the input near side
   between 0.1 and 2 thicknesses away (:func:`shadows`);
2. after MMGS's first pass, each shadow inside the side made a vertex (:func:`inserted`; one per
   triangle of that pass) that the graded pass keeps where it is, under the rim's metric
   intersected with edges of ``EDGE`` t round every shadow (:func:`refined`), every edge of the
   side's faces at more than ``RIDGE`` degrees kept as a ridge (MMGS otherwise keeps a faceted
   side within its Hausdorff bound of a smooth surface through its vertices, not of its facets);
3. the rim vertex nearest each shadow on the rim moved onto it, when within ``REACH`` of the
   distance to its nearest neighbour (:func:`placed`); the column of a vertex at a shadow runs
   straight to its corner.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from fieldgen.io.vtk_data import closest_points_on_triangles, distance_to_triangles
from fieldgen.meshing.mmg import unit_scale
from fieldgen.sizing.adapt import matrices_of, symmetric
from fieldgen.sizing.fold import crease_pairs
from fieldgen.sizing.segments import nearest_on_segments
from fieldgen.surface.topology import boundary_edges, shared_edges

#: MMGS's ridges on the near side: faces meeting at more than this (degrees).
RIDGE = 5.0
#: A crease of the far side: faces meeting at more than this (degrees).
CREASE = 20.0
#: The edge round a shadow (thicknesses).
EDGE = 0.15
#: A shadow within this many thicknesses of the near side's rim lies on it.
ON_RIM = 1e-3
#: A shadow within this barycentric share of a triangle's edge is put on the edge.
ON_EDGE = 0.05
#: A vertex is moved onto a shadow within this share of the distance to its nearest neighbour.
REACH = 0.5


def far_corners(vertices: np.ndarray, faces: np.ndarray, missed: np.ndarray, tolerance: float) -> np.ndarray:
    """The points of the surface (``vertices``, ``faces``: the rest of it, past the near side) on
    a crease, and those farther than ``tolerance`` from the ``missed`` triangles (a layered
    mesh's boundary, as (points, faces))."""
    sharp = crease_pairs(vertices, faces, CREASE)[0]
    chosen = np.zeros(len(vertices), dtype=bool)
    chosen[shared_edges(faces, sharp[:, 0], sharp[:, 1])] = True
    chosen |= distance_to_triangles(vertices, *missed) > tolerance
    return vertices[chosen]


def shadows(corners: np.ndarray, points: np.ndarray, triangles: np.ndarray, t: float, shortest: float):
    """The corners between ``shortest`` and twice ``t`` from the near side (``points``,
    ``triangles``; nearer, the side's own rim; farther, another part of the sheet), each one's
    nearest point on it, and whether that lies on the side's rim: (corners, shadows, on_rim)."""
    nearest, distance = closest_points_on_triangles(corners, points, triangles)
    kept = (distance >= shortest) & (distance < 2.0 * t)
    corners, nearest = corners[kept], nearest[kept]
    rim = boundary_edges(triangles)[0]
    if not len(rim) or not len(nearest):
        return corners, nearest, np.zeros(len(nearest), dtype=bool)
    a, b = points[rim[:, 0]], points[rim[:, 1]]
    segment, share = nearest_on_segments(nearest, a, b)
    on_rim = a[segment] + share[:, None] * (b - a)[segment]
    return corners, nearest, np.linalg.norm(on_rim - nearest, axis=1) < ON_RIM * t


def refined(metric: np.ndarray, points: np.ndarray, targets: np.ndarray, edge: float, grading: float,
            largest: float) -> np.ndarray:
    """MMG's (n, 6) ``metric`` at ``points`` intersected with an isotropic one of ``edge`` at the
    ``targets``, growing by ``grading`` per unit distance up to ``largest``: each eigenvalue
    raised to at least the isotropic one."""
    if not len(targets):
        return metric
    size = np.minimum(largest, edge + grading * cKDTree(targets).query(points)[0])
    values, vectors = np.linalg.eigh(matrices_of(metric))
    values = np.maximum(values, 1.0 / size[:, None] ** 2)
    return symmetric(np.einsum("nij,nj,nkj->nik", vectors, values, vectors))


def placed(points: np.ndarray, triangles: np.ndarray, targets: np.ndarray,
           on_rim: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The remeshed near side's ``points`` moved onto the ``targets`` (shadows; ``on_rim`` each
    one's kind: a rim vertex for a shadow on the rim, an inner one otherwise; module docstring,
    3): (points, the index of each point's target, -1 for the others)."""
    points = points.copy()
    moved = np.full(len(points), -1, dtype=np.int64)
    rim = np.zeros(len(points), dtype=bool)
    rim[np.unique(boundary_edges(triangles)[0])] = True
    spacing = cKDTree(points).query(points, k=2)[0][:, 1]
    for kind in (True, False):
        candidates = np.flatnonzero(rim == kind)
        wanted = np.flatnonzero(on_rim == kind)
        if not len(candidates) or not len(wanted):
            continue
        distance, nearest = cKDTree(points[candidates]).query(targets[wanted])
        vertex = candidates[nearest]
        for k in np.argsort(distance, kind="stable"):        # the nearest shadow takes a vertex first
            if moved[vertex[k]] < 0 and distance[k] < REACH * spacing[vertex[k]]:
                moved[vertex[k]] = wanted[k]
    taken = moved >= 0
    points[taken] = targets[moved[taken]]
    return points, moved


def inserted(points: np.ndarray, triangles: np.ndarray,
             targets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``points`` and ``triangles`` (a surface the ``targets`` lie on) with the targets made
    vertices, at most one per triangle and per vertex (a target whose triangles another has
    split, or whose vertex another has taken, is left out): the triangle split in three at it;
    within ``ON_EDGE`` (barycentric) of an edge, that edge split with the triangles on it (one on
    the rim); near a corner, that vertex moved onto it. (points, triangles, each target's vertex,
    -1 for one left out)."""
    import trimesh  # lazy: heavy, and only a sheet fitted to its far side inserts points

    vertex = np.full(len(targets), -1, dtype=np.int64)
    if not len(targets):
        return points, triangles, vertex
    centre, size = unit_scale(points)          # trimesh's closest point misses small triangles in metres
    unit = trimesh.Trimesh((points - centre) / size, triangles, process=False)
    scaled = (targets - centre) / size
    _, _, face = trimesh.proximity.closest_point(unit, scaled)
    weights = trimesh.triangles.points_to_barycentric(np.asarray(unit.vertices)[triangles[face]], scaled)
    points, rows = points.copy(), [tuple(row) for row in triangles.tolist()]
    on_edge = {}
    for number, row in enumerate(rows):
        for i in range(3):
            on_edge.setdefault(frozenset((row[i], row[(i + 1) % 3])), []).append(number)
    touched, taken = np.zeros(len(rows), dtype=bool), set()
    for k in range(len(targets)):
        if touched[face[k]]:
            continue
        row, near = rows[face[k]], weights[k] < ON_EDGE
        if near.sum() >= 2:                                   # at a corner: that vertex moved
            corner = row[int(np.argmax(weights[k]))]
            if corner not in taken:
                vertex[k] = corner
                points[corner] = targets[k]
                taken.add(corner)
            continue
        edge = frozenset(v for v, n in zip(row, near) if not n) if near.any() else None
        owners = [face[k]] if edge is None else on_edge[edge]
        if touched[owners].any():
            continue
        vertex[k] = len(points)
        points = np.vstack([points, targets[k][None]])
        for owner in owners:
            pieces = _split(rows[owner], vertex[k], edge)
            rows[owner] = pieces[0]
            rows.extend(pieces[1:])
        touched = np.concatenate([touched, np.ones(len(rows) - len(touched), dtype=bool)])
        touched[owners] = True
    return points, np.asarray(rows, dtype=np.int64), vertex


def _split(row: tuple, point: int, edge: frozenset | None) -> list[tuple]:
    """Triangle ``row`` split at ``point``: in three, or in two across ``edge``, the order of its
    vertices (its orientation) kept."""
    if edge is None:
        a, b, c = row
        return [(a, b, point), (b, c, point), (c, a, point)]
    for i in range(3):
        x, y, w = row[i], row[(i + 1) % 3], row[(i + 2) % 3]
        if frozenset((x, y)) == edge:
            return [(x, point, w), (point, y, w)]
    raise ValueError("the edge is not the triangle's")
