"""The corner block of a sharp fold in a sheet (docs/model.md §2.10, "Sheets of one thickness").

A sheet folded sharp (no bend radius) has on its inner side a crease, where two flat panels
meet at more than ``FOLD`` degrees. Columns run from each panel along its own normal (a crease
vertex is taken once per panel), so at the crease they leave a wedge between them. Across the
crease the wedge is the quadrilateral

    c,   a = c + d_A u_A,   o,   b = c + d_B u_B

with ``c`` the inner crease, ``u_A``, ``u_B`` the two panels' column directions, ``d_A``, ``d_B``
their depths, and ``o`` the outer crease, where the two outer faces meet:

    o = c + α u_A + β u_B,   α = (d_A − g d_B) / (1 − g²),   β = (d_B − g d_A) / (1 − g²),   g = u_A·u_B

so that ``(o − c)·u_A = d_A`` and ``(o − c)·u_B = d_B``. The block fills it with the bilinear grid
``G(k, m)``, ``k, m = 0..L`` (``L`` the layers), whose edges ``G(k, 0)`` and ``G(0, m)`` are the
two panels' column points themselves, so the block shares their faces. Along the crease, each
crease edge sweeps the grid's cells (two triangles each) from its lower-numbered vertex to the
other as prisms of three tets, the diagonals by the prism rule
(:func:`fieldgen.sizing.extrusion.prism_tets`) with the grid numbered ``k (L + 1) + m``: a face
the block shares with a panel's prism is then split alike, because both rules take the diagonal
from the lower-numbered crease vertex at the lower layer. Panel B's crease vertices are copies
numbered in the order of the originals, so that order is the same in both panels. Last, the copies
at the inner crease are merged back into the originals.

Only a crease the side meets from inside the fold (concave: each panel's far vertex lies outside
the other panel's plane) can take a block: on the outside of a fold the panels' columns would
meet rather than part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fieldgen.meshing.tetmesh import orient_positive, tet_volumes
from fieldgen.sizing.extrusion import prism_tets
from fieldgen.surface.components import components
from fieldgen.surface.topology import face_pairs_across_edges, shared_edges, shared_mask, unit_normals

#: Two triangles of one side meeting at more than this many degrees meet at a crease.
FOLD = 40.0


@dataclass(frozen=True)
class Creases:
    """A side split at its creases: each point's panel, and per crease node (a crease vertex and
    the two panels of a crease through it) its point in panel A (the lower-labelled) and in panel
    B; the crease edges as pairs of node numbers, the lower-numbered vertex first; the points
    merged back at the inner crease (``merged_from`` into ``merged_to``; None: each ``copy`` into
    its ``inner``); each corner where three panels meet as its three nodes (AB, AC, BC); and each
    point's input point (None: the input's points, then the copies of ``inner``)."""

    panel: np.ndarray
    inner: np.ndarray
    copy: np.ndarray
    edges: np.ndarray
    merged_from: np.ndarray | None = None
    merged_to: np.ndarray | None = None
    corners: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), dtype=np.int64))
    origin: np.ndarray | None = None

    def input_point(self, count: int) -> np.ndarray:
        """Each of the ``count`` points' input point."""
        return np.concatenate([np.arange(count - len(self.inner)), self.inner]) if self.origin is None else self.origin


def crease_pairs(points: np.ndarray, triangles: np.ndarray, angle: float = FOLD):
    """The pairs of triangles meeting across an edge at more than ``angle`` degrees (a fold's
    ``FOLD``), and across the other edges: ((f, g) at creases, (f, g) elsewhere), with the
    triangles' unit normals."""
    normals = unit_normals(points, triangles)
    f, g, _ = face_pairs_across_edges(triangles)
    sharp = np.einsum("ij,ij->i", normals[f], normals[g]) < np.cos(np.radians(angle))
    return np.stack([f[sharp], g[sharp]], axis=1), np.stack([f[~sharp], g[~sharp]], axis=1), normals


def concave(points: np.ndarray, triangles: np.ndarray, pairs: np.ndarray, normals: np.ndarray) -> bool:
    """Whether every crease pair (f, g) is met from inside the fold: the vertex of each not on
    the shared edge lies outside the other's plane (on its normal's side)."""
    for this, other in ((0, 1), (1, 0)):
        f, g = pairs[:, this], pairs[:, other]
        far = triangles[g][~shared_mask(triangles[g], triangles[f])]
        if np.any(np.einsum("ij,ij->i", points[far] - points[triangles[f, 0]], normals[f]) <= 0.0):
            return False
    return True


def split_at_creases(points: np.ndarray, triangles: np.ndarray):
    """The side with each crease vertex taken once per panel: (points, triangles, Creases); the
    side as it is (one panel, no creases) when it has no crease; None if a crease cannot take a
    block (a panel meeting itself across a crease, a crease vertex in more than two panels, or
    a crease met from outside the fold)."""
    sharp, smooth, normals = crease_pairs(points, triangles)
    _, panel = components(len(triangles), smooth)
    if not len(sharp):
        point_panel = np.zeros(len(points), dtype=np.int64)
        empty = np.zeros(0, dtype=np.int64)
        return points, triangles, Creases(point_panel, empty, empty, np.zeros((0, 2), dtype=np.int64))
    if np.any(panel[sharp[:, 0]] == panel[sharp[:, 1]]) or not concave(points, triangles, sharp, normals):
        return None
    edge_points = np.sort(shared_edges(triangles, sharp[:, 0], sharp[:, 1]), axis=1)
    inner = np.unique(edge_points)
    pairs = np.unique(np.stack([triangles.reshape(-1), np.repeat(panel, 3)], axis=1), axis=0)
    at_crease = pairs[np.isin(pairs[:, 0], inner)]
    if len(at_crease) != 2 * len(inner):
        return split_at_corners(points, triangles, panel, sharp, at_crease)
    panel_b = at_crease[1::2, 1]                  # sorted by point, then panel: the higher second
    copy = len(points) + np.arange(len(inner))
    number = np.full(len(points), -1, dtype=np.int64)
    number[inner] = np.arange(len(inner))
    corner = number[triangles]
    moved = (corner >= 0) & (panel[:, None] == panel_b[np.maximum(corner, 0)])
    split = np.where(moved, copy[np.maximum(corner, 0)], triangles)
    point_panel = np.zeros(len(points) + len(inner), dtype=np.int64)
    point_panel[split.reshape(-1)] = np.repeat(panel, 3)
    return (np.concatenate([points, points[inner]]), split,
            Creases(point_panel, inner, copy, number[edge_points]))


def corner_blocks(xyz: np.ndarray, tets: np.ndarray, count: int, creases: Creases, layers: int):
    """The layered columns (``xyz``, numbered layer by layer, ``count`` points a layer; their
    ``tets``) with a block in each crease's wedge (module docstring) and the panel B copies at
    the inner crease merged back: (points, tets), the tets positive and only the points they use;
    None if a block's tet would be flat or inverted."""
    if not len(creases.edges):
        return xyz, tets
    side = layers + 1
    grid = _grid_points(xyz, count, creases, layers)
    table = _grid_numbers(len(xyz), count, creases, layers)
    cells = np.arange(side * side).reshape(side, side)[:-1, :-1].reshape(-1)
    triangles = np.concatenate([np.stack([cells, cells + side, cells + side + 1], axis=1),
                                np.stack([cells, cells + side + 1, cells + 1], axis=1)])
    local = prism_tets(triangles, side * side, 1)
    sweep = np.concatenate([table[creases.edges[:, 0]], table[creases.edges[:, 1]]], axis=1)
    block = sweep[:, local]                                   # (edges, 3 tets a triangle, 4)
    points = np.concatenate([xyz, grid])
    if not _swept_positively(points, block, sweep, triangles):
        return None
    cubes = corner_cubes(points, table.reshape(-1, side, side), count, creases, layers)
    if cubes is None:
        return None
    points, cube_tets = cubes
    merged = np.arange(len(points))
    if creases.merged_from is None:
        merged[creases.copy] = creases.inner
    else:
        merged[creases.merged_from] = creases.merged_to
    every = merged[np.concatenate([tets, orient_positive(points, block.reshape(-1, 4)), cube_tets])]
    used, renumbered = np.unique(every, return_inverse=True)
    return points[used], renumbered.reshape(-1, 4)


#: The six tets of a unit cube around its diagonal (0, 0, 0)-(1, 1, 1) (Kuhn's), as steps along the
#: axes in each order, with the sign of that order: every face is split through its corner
#: nearest (0, 0, 0), as the wedges' grid cells are.
KUHN_ORDERS = ((0, 1, 2), (1, 2, 0), (2, 0, 1), (0, 2, 1), (2, 1, 0), (1, 0, 2))
KUHN_SIGNS = (1, 1, 1, -1, -1, -1)


def corner_cubes(points: np.ndarray, tables: np.ndarray, count: int, creases: Creases, layers: int):
    """A block at each corner where three panels A, B, C meet (a box's corner seen from inside):
    the cube ``C(k, m, n)``, ``k, m, n = 0..L``, whose faces ``n = 0``, ``m = 0``, ``k = 0`` are the
    wedges' grids of the creases AB, AC, BC at the corner (``tables``: each node's grid point
    numbers, (nodes, L + 1, L + 1)), its inside trilinear between the corner ``c``, the three
    columns' ends and the outer corners: of each pair of panels (the wedges' ``o``) and of the
    three, ``o_ABC = c + U^{-T} d`` (U the columns' unit directions, d their depths), which lies on
    the three outer faces' planes. Each cell is cut in Kuhn's six tets. (points with the new ones
    appended, the cubes' tets, positive); the input when there is no corner; None if a tet is flat
    or inverted."""
    corners = creases.corners
    if not len(corners):
        return points, np.zeros((0, 4), dtype=np.int64)
    side = layers + 1
    ab, ac, bc = tables[corners[:, 0]], tables[corners[:, 1]], tables[corners[:, 2]]
    cube = np.full((len(corners), side, side, side), -1, dtype=np.int64)
    cube[:, :, :, 0], cube[:, :, 0, :], cube[:, 0, :, :] = ab, ac, bc
    inside = cube < 0
    cube[inside] = len(points) + np.arange(int(inside.sum()))
    c = points[ab[:, 0, 0]]
    ends = np.stack([points[ab[:, -1, 0]], points[ab[:, 0, -1]], points[ac[:, 0, -1]]], axis=1) - c[:, None]
    depth = np.linalg.norm(ends, axis=2)
    outer = c + np.einsum("nij,nj->ni", np.linalg.inv(ends / depth[:, :, None]), depth)     # rows u_A, u_B, u_C
    s = np.arange(side) / layers
    u, v, w = (x[None, :, :, :, None] for x in np.meshgrid(s, s, s, indexing="ij"))
    at = lambda q: q[:, None, None, None, :]   # noqa: E731
    trilinear = ((1 - u) * (1 - v) * (1 - w) * at(c) + u * (1 - v) * (1 - w) * at(c + ends[:, 0])
                 + (1 - u) * v * (1 - w) * at(c + ends[:, 1]) + (1 - u) * (1 - v) * w * at(c + ends[:, 2])
                 + u * v * (1 - w) * at(points[ab[:, -1, -1]]) + u * (1 - v) * w * at(points[ac[:, -1, -1]])
                 + (1 - u) * v * w * at(points[bc[:, -1, -1]]) + u * v * w * at(outer))
    points = np.concatenate([points, trilinear[inside]])
    cells = np.stack(np.meshgrid(*(np.arange(layers),) * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    tets, expected = [], []
    handed = np.sign(np.linalg.det(ends))
    for order, sign in zip(KUHN_ORDERS, KUHN_SIGNS):
        path = [cells]
        for axis in order:
            path.append(path[-1] + np.eye(3, dtype=np.int64)[axis])
        corner_ids = [cube[:, p[:, 0], p[:, 1], p[:, 2]] for p in path]        # each (corners, cells)
        tets.append(np.stack(corner_ids, axis=-1).reshape(-1, 4))
        expected.append(np.repeat(sign * handed, len(cells)))
    tets, expected = np.concatenate(tets), np.concatenate(expected)
    if np.any(np.sign(tet_volumes(points, tets)) != expected) or np.any(expected == 0):
        return None
    return points, orient_positive(points, tets)


def split_at_corners(points: np.ndarray, triangles: np.ndarray, panel: np.ndarray, sharp: np.ndarray,
                     at_crease: np.ndarray):
    """:func:`split_at_creases` where some crease vertices lie in three panels (a box's corner seen
    from inside): every crease vertex is taken once per panel, the copies numbered by vertex, then
    panel, after the other points, so that along every crease both panels list its vertices in one
    order (the wedges' prisms split their shared faces alike); each crease is a node of its two
    panels at either end, each three-panel vertex a corner of three nodes. ``at_crease``: the
    (vertex, panel) pairs at the creases, sorted. None if a vertex lies in more than three panels,
    or three panels meet at a vertex where not each pair of them meets along a crease."""
    vertex, first, counts = np.unique(at_crease[:, 0], return_index=True, return_counts=True)
    if np.any(counts > 3):
        return None
    crease = np.zeros(len(points), dtype=bool)
    crease[vertex] = True
    kept = np.flatnonzero(~crease)
    number = np.full(len(points), -1, dtype=np.int64)
    number[kept] = np.arange(len(kept))
    width = int(panel.max()) + 1
    keys = at_crease[:, 0] * width + at_crease[:, 1]            # sorted: at_crease is
    instance = lambda v, p: len(kept) + np.searchsorted(keys, v * width + p)   # noqa: E731
    corner_panel = np.repeat(panel, 3).reshape(-1, 3)
    split = np.where(crease[triangles], instance(triangles, corner_panel), number[triangles])
    ends = np.sort(shared_edges(triangles, sharp[:, 0], sharp[:, 1]), axis=1)
    low = np.minimum(panel[sharp[:, 0]], panel[sharp[:, 1]])
    high = np.maximum(panel[sharp[:, 0]], panel[sharp[:, 1]])
    rows = np.stack([ends.T.reshape(-1), np.tile(low, 2), np.tile(high, 2)], axis=1)
    nodes, node_of = np.unique(rows, axis=0, return_inverse=True)
    node_of = node_of.reshape(2, -1).T
    three = vertex[counts == 3]
    corners = []
    for v in three:                                        # a few corners a part
        a, b, c = at_crease[at_crease[:, 0] == v, 1]
        wanted = [(v, a, b), (v, a, c), (v, b, c)]
        found = [np.flatnonzero(np.all(nodes == row, axis=1)) for row in wanted]
        if any(len(f) != 1 for f in found):
            return None
        corners.append([int(f[0]) for f in found])
    lowest = np.repeat(first, counts)
    others = np.flatnonzero(np.arange(len(at_crease)) != lowest)
    point_panel = np.zeros(len(kept) + len(at_crease), dtype=np.int64)
    point_panel[split.reshape(-1)] = np.repeat(panel, 3)
    creases = Creases(point_panel, instance(nodes[:, 0], nodes[:, 1]), instance(nodes[:, 0], nodes[:, 2]), node_of,
                      merged_from=len(kept) + others, merged_to=len(kept) + lowest[others],
                      corners=np.asarray(corners, dtype=np.int64).reshape(-1, 3),
                      origin=np.concatenate([kept, at_crease[:, 0]]))
    return np.concatenate([points[kept], points[at_crease[:, 0]]]), split, creases


def _grid_points(xyz: np.ndarray, count: int, creases: Creases, layers: int) -> np.ndarray:
    """Each crease vertex's new grid points ``G(k, m)``, ``k, m = 1..L``, k slowest."""
    c = xyz[creases.inner]
    a, b = xyz[layers * count + creases.inner], xyz[layers * count + creases.copy]
    d_a, d_b = a - c, b - c
    g = np.einsum("ij,ij->i", d_a, d_b) / (np.linalg.norm(d_a, axis=1) * np.linalg.norm(d_b, axis=1))
    depth_a, depth_b = np.linalg.norm(d_a, axis=1), np.linalg.norm(d_b, axis=1)
    alpha = (depth_a - g * depth_b) / (1.0 - g * g)
    beta = (depth_b - g * depth_a) / (1.0 - g * g)
    o = c + alpha[:, None] * d_a / depth_a[:, None] + beta[:, None] * d_b / depth_b[:, None]
    s = np.arange(1, layers + 1) / layers
    u, v = np.meshgrid(s, s, indexing="ij")
    u, v = u.reshape(1, -1, 1), v.reshape(1, -1, 1)
    G = (1 - u) * (1 - v) * c[:, None] + u * (1 - v) * a[:, None] + (1 - u) * v * b[:, None] + u * v * o[:, None]
    return G.reshape(-1, 3)


def _grid_numbers(start: int, count: int, creases: Creases, layers: int) -> np.ndarray:
    """Each crease vertex's grid point numbers (rows; ``k (L + 1) + m``): the panels' column
    points on ``k = 0`` and ``m = 0``, the new points (from ``start``) inside."""
    side = layers + 1
    n = len(creases.inner)
    table = np.empty((n, side, side), dtype=np.int64)
    steps = np.arange(side)[None, :] * count
    table[:, :, 0] = steps + creases.inner[:, None]
    table[:, 0, 1:] = steps[:, 1:] + creases.copy[:, None]
    table[:, 1:, 1:] = start + np.arange(n * layers * layers).reshape(n, layers, layers)
    return table.reshape(n, -1)


def _swept_positively(points: np.ndarray, block: np.ndarray, sweep: np.ndarray, triangles: np.ndarray) -> bool:
    """Whether every tet of the blocks has the sign its prism's rule gives it (+, −, + times the
    sign of the grid triangle, in increasing number, against the sweep): none flat or inverted."""
    half = sweep.shape[1] // 2
    ordered = np.sort(triangles, axis=1)
    bottom = points[sweep[:, ordered]]                       # (edges, triangles, 3, 3)
    top_a = points[sweep[:, half + ordered[:, 0]]]
    normal = np.cross(bottom[:, :, 1] - bottom[:, :, 0], bottom[:, :, 2] - bottom[:, :, 0])
    sign = np.sign(np.einsum("ijk,ijk->ij", normal, top_a - bottom[:, :, 0]))
    expected = np.concatenate([sign, -sign, sign], axis=1)
    volume = tet_volumes(points, block.reshape(-1, 4)).reshape(len(block), -1)
    return bool(np.all(np.sign(volume) == expected) and np.all(expected != 0))
