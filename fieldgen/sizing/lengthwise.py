"""A thin-walled tube meshed in layers along its length (docs/model.md §2.10, "Thin walls").

A tube, round or not: the surface is a right prism along an ``axis`` (every face on one of the
two end planes or parallel to the axis; side faces may be split at any level) whose section is
a wall between two loops, of thickness ``t = 2A/P`` (the section's area over half its
perimeter). Across the wall the extent is a parabola (about ten P1 elements across for 1 %);
along the wall and along the axis it is flat except within about ``t/π`` of the ends. So:

- the section is a structured strip (:func:`matched_wall`): each vertex of one side is paired
  with its nearest point on the other, pairs nearer than ``MERGE`` t on both sides become one,
  pairs more than ``EDGE_ALONG`` t apart are filled in, and each gap between two pairs is cut
  into ``LAYERS_ACROSS`` cells across, each split into two triangles with the diagonals in a
  checkerboard; both sides are kept exactly (their vertices are pair ends);
- the strip is extruded (:func:`fieldgen.sizing.extrusion.extruded`, three tets a prism, the
  diagonals by vertex number, the points numbered pair by pair) through layers ``EDGE_AT_END`` t
  long at the end planes, growing by ``GRADING`` per unit distance up to ``EDGE_ALONG_AXIS`` t
  (longer when the budget asks: the middle is flat along the axis).

Why structured, checkerboard and numbered pair by pair: MMG2D with the outline required did not
honour a metric of t/11 across (docs/design/sizing.md, "Thin walls"); with one diagonal
direction, or points numbered by coordinate, the graded layers at the ends made the extent
overshoot there by 0.6–1.3 %, which the normalisation by the maximum spreads over the whole
part.
"""

from __future__ import annotations

import numpy as np

from fieldgen.meshing.tetmesh import TetMesh
from fieldgen.sizing.extrusion import CORNER, extruded, filled_prism, graded_spots, prism_section
from fieldgen.sizing.segments import nearest_on_segments
from fieldgen.surface.topology import compacted, face_areas, unit_normals

#: Elements across the wall, the edge along it and at the end planes (in wall thicknesses), and
#: the growth of the layers per unit distance from an end (docs/design/sizing.md, "Thin walls").
LAYERS_ACROSS = 11
#: Fewer cells across, tried in turn when the section is too fine for the budget with more.
FEWER_ACROSS = (9, 8)
EDGE_ALONG = 3.0
EDGE_AT_END = 0.15
#: The strip's pairs at a corner of the section (in wall thicknesses), growing by
#: :data:`fieldgen.sizing.extrusion.GRADING` per unit distance from it.
EDGE_AT_CORNER = 0.05
EDGE_ALONG_AXIS = 6.0
GRADING = 1.0
#: The share of the tet budget the first mesh may take; a wall is thin when its section is at
#: least ``THIN_RATIO`` wall thicknesses across and the prism that many long.
BUDGET_SHARE = 0.9
#: Two pairs closer than this (in wall thicknesses) on both sides are merged (:func:`matched_wall`).
MERGE = 0.25
THIN_RATIO = 8.0


def candidate_axes(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """The eigenvectors of the area-weighted tensor of the face normals, the least first (rows):
    a right prism's side normals are all across its axis and its end normals along it, so the
    axis is one of them."""
    normals = unit_normals(vertices, faces)
    tensor = np.einsum("i,ij,ik->jk", face_areas(vertices, faces), normals, normals)
    _, vectors = np.linalg.eigh(tensor)
    return vectors.T


def thin_section(vertices: np.ndarray, faces: np.ndarray):
    """(section, wall thickness) for the first candidate axis along which the surface is a right
    prism with a thin-walled section (module docstring); None if there is none."""
    for axis in candidate_axes(vertices, faces):
        section = prism_section(vertices, faces, axis, split_sides=True)
        if section is None:
            continue
        points, triangles, outline, levels, _ = section
        area = float(face_areas(np.column_stack([points, np.zeros(len(points))]), triangles).sum())
        perimeter = float(np.linalg.norm(points[outline[:, 1]] - points[outline[:, 0]], axis=1).sum())
        wall = 2.0 * area / perimeter
        across = float(np.ptp(points, axis=0).max())
        if across >= THIN_RATIO * wall and levels[1] - levels[0] >= THIN_RATIO * wall:
            return section, wall
    return None


def outline_loops(points: np.ndarray, outline: np.ndarray) -> list[np.ndarray] | None:
    """The outline's closed loops as vertex sequences, each counter-clockwise; None if a vertex
    has other than two outline edges."""
    neighbours: dict[int, list[int]] = {}
    for i, j in outline.tolist():
        neighbours.setdefault(i, []).append(j)
        neighbours.setdefault(j, []).append(i)
    if any(len(n) != 2 for n in neighbours.values()):
        return None
    loops, seen = [], set()
    for start in sorted(neighbours):
        if start in seen:
            continue
        loop, previous, at = [start], None, start
        seen.add(start)
        while True:
            step = [n for n in neighbours[at] if n != previous][0] if previous is not None else neighbours[at][0]
            if step == start:
                break
            loop.append(step)
            seen.add(step)
            previous, at = at, step
        loop = np.asarray(loop, dtype=np.int64)
        x, y = points[loop].T
        if np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y) < 0:
            loop = loop[::-1]
        loops.append(loop)
    return loops


def _segments(polyline: np.ndarray, closed: bool):
    """(starts, ends, lengths) of the segments of ``polyline``: from each vertex to the next, and
    with ``closed`` also from the last back to the first."""
    ends = np.roll(polyline, -1, axis=0) if closed else polyline[1:]
    starts = polyline if closed else polyline[:-1]
    return starts, ends, np.linalg.norm(ends - starts, axis=1)


def arc_positions(polyline: np.ndarray, *, closed: bool) -> np.ndarray:
    """The arc-length position of each vertex of ``polyline`` (closed: a loop), the first at 0."""
    length = _segments(polyline, closed)[2]
    return np.concatenate([[0.0], np.cumsum(length[:len(polyline) - 1])])


def feet(query: np.ndarray, polyline: np.ndarray, *, closed: bool) -> np.ndarray:
    """The arc-length position on ``polyline`` (closed: a loop) of the point nearest each ``query``."""
    a, b, length = _segments(polyline, closed)
    start = arc_positions(polyline, closed=closed)[:len(length)]
    nearest, share = nearest_on_segments(query, a, b)
    return start[nearest] + share * length[nearest]


def points_at(polyline: np.ndarray, where: np.ndarray, *, closed: bool) -> np.ndarray:
    """Points at arc-length positions ``where`` on ``polyline``: on a loop (closed) taken round
    it, on an open polyline held to its ends."""
    a, b, length = _segments(polyline, closed)
    if closed:
        ends = np.cumsum(length)
        where = np.mod(where, ends[-1])
        segment = np.minimum(np.searchsorted(ends, where, side="right"), len(polyline) - 1)
        share = (where - (ends[segment] - length[segment])) / length[segment]
    else:
        start = arc_positions(polyline, closed=False)[:-1]
        segment = np.clip(np.searchsorted(start, where, side="right") - 1, 0, len(length) - 1)
        share = np.clip((where - start[segment]) / length[segment], 0.0, 1.0)
    return a[segment] + share[:, None] * (b[segment] - a[segment])


def matched_wall(points: np.ndarray, outline: np.ndarray, wall: float, along: float,
                 across: int = LAYERS_ACROSS):
    """A section that is a wall between two loops (a tube's), triangulated in ``across``
    layers between matched points of its two sides: each vertex of one side paired with its
    nearest point on the other, the pairs ordered along the outer side and filled in where they
    are more than ``along`` apart, and each gap between two pairs split across into layers
    (two triangles a cell). (points, triangles), or None if the section is not such a wall or
    the pairs cross."""
    loops = outline_loops(points, outline)
    if loops is None or len(loops) != 2:
        return None
    area = [abs(signed_area(points[loop])) for loop in loops]
    outer, inner = (points[loops[k]] for k in np.argsort(area)[::-1])
    perimeter_o, perimeter_i = arc_length(outer, closed=True), arc_length(inner, closed=True)
    on_outer = np.concatenate([arc_positions(outer, closed=True), feet(inner, outer, closed=True)])
    on_inner = np.concatenate([feet(outer, inner, closed=True), arc_positions(inner, closed=True)])
    from_outer = np.arange(len(on_outer)) < len(outer)
    order = np.argsort(on_outer, kind="stable")
    on_outer, on_inner = merged_pairs(on_outer[order], on_inner[order], from_outer[order], MERGE * wall,
                                      perimeter_i)
    step_o = np.diff(np.append(on_outer, on_outer[0] + perimeter_o))
    step_i = np.mod(np.diff(np.append(on_inner, on_inner[0])), perimeter_i)
    if step_i.sum() > 1.5 * perimeter_i:        # the inner positions must run forward, once round
        return None
    tolerance = 1e-9 * max(perimeter_o, perimeter_i)
    near = np.minimum(corner_distance(outer, on_outer, closed=True),
                      corner_distance(inner, on_inner, closed=True))
    share = []
    for k, size in enumerate(np.maximum(step_o, step_i)):
        spots = graded_spots(size, near[k], near[(k + 1) % len(near)], EDGE_AT_CORNER * wall, along)
        share.append(np.concatenate([[0.0], np.asarray(spots) / size]))
    pieces = np.array([len(x) for x in share])
    share = np.concatenate(share)
    on_outer = np.repeat(on_outer, pieces) + share * np.repeat(step_o, pieces)
    on_inner = np.repeat(on_inner, pieces) + share * np.repeat(step_i, pieces)
    o, i = points_at(outer, on_outer, closed=True), points_at(inner, on_inner, closed=True)
    n, m = across, len(o)
    grid = o[:, None, :] + (np.arange(n + 1) / n)[None, :, None] * (i - o)[:, None, :]   # (m, n+1, 2)
    ids = np.arange(m * (n + 1)).reshape(m, n + 1)
    nxt = np.roll(ids, -1, axis=0)
    a, b, c, d = ids[:, :-1], nxt[:, :-1], nxt[:, 1:], ids[:, 1:]
    flip = ((np.arange(m)[:, None] + np.arange(n)[None, :]) % 2 == 1)[..., None]     # checkerboard
    triangles = np.concatenate([np.where(flip, np.stack([a, b, d], -1), np.stack([a, b, c], -1)).reshape(-1, 3),
                                np.where(flip, np.stack([b, c, d], -1), np.stack([a, c, d], -1)).reshape(-1, 3)])
    xy = grid.reshape(-1, 2)
    xy, triangles = merged(xy, triangles, tolerance)
    return xy, triangles


def merged_pairs(on_first, on_second, from_first, gap: float, perimeter: float | None = None):
    """Pairs (positions on the two sides, ordered along the first) with a neighbour within ``gap``
    on both sides merged into one pair of the two sides' vertices (a vertex and the foot of the
    other side's vertex next to it are the same place across the wall). ``from_first``: whether
    each pair is a vertex of the first side (else of the second); ``perimeter``: the second side's
    when it is a loop (distances along it taken either way round), None when it is open."""
    kept_first, kept_second, vertex_first, vertex_second = [], [], [], []
    for f, s, own in zip(on_first.tolist(), on_second.tolist(), from_first.tolist()):
        if kept_first:
            near_first = abs(f - kept_first[-1]) <= gap
            apart = abs(s - kept_second[-1])
            near_second = (apart if perimeter is None else min(apart, perimeter - apart)) <= gap
            clash = vertex_first[-1] if own else vertex_second[-1]
            if near_first and near_second and not clash:
                if own:
                    kept_first[-1], vertex_first[-1] = f, True
                else:
                    kept_second[-1], vertex_second[-1] = s, True
                continue
        kept_first.append(f)
        kept_second.append(s)
        vertex_first.append(own)
        vertex_second.append(not own)
    return np.asarray(kept_first), np.asarray(kept_second)


def arc_length(polyline: np.ndarray, *, closed: bool) -> float:
    """The length of ``polyline`` (closed: with the segment back to its first vertex)."""
    return float(_segments(polyline, closed)[2].sum())


def corner_distance(polyline: np.ndarray, where: np.ndarray, *, closed: bool) -> np.ndarray:
    """The distance along ``polyline`` (closed: a loop) from arc positions ``where`` to its
    nearest corner: a vertex where it turns by more than ``CORNER`` degrees, and an open one's two
    ends; ``inf`` when a loop has none."""
    starts, ends, length = _segments(polyline, closed)
    unit = (ends - starts) / length[:, None]
    ahead, behind = (unit, np.roll(unit, 1, axis=0)) if closed else (unit[1:], unit[:-1])
    turned = np.degrees(np.arccos(np.clip(np.einsum("ij,ij->i", ahead, behind), -1.0, 1.0))) > CORNER
    arc = arc_positions(polyline, closed=closed)
    corners = arc[turned] if closed else np.concatenate([arc[:1], arc[1:-1][turned], arc[-1:]])
    if not len(corners):
        return np.full(len(where), np.inf)
    if not closed:
        return np.abs(where[:, None] - corners[None, :]).min(axis=1)
    perimeter = float(length.sum())
    gap = np.abs(np.mod(where, perimeter)[:, None] - corners[None, :])
    return np.minimum(gap, perimeter - gap).min(axis=1)


def signed_area(polygon: np.ndarray) -> float:
    """The closed 2-D ``polygon``'s signed area (positive counter-clockwise)."""
    x, y = polygon.T
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def merged(xy: np.ndarray, triangles: np.ndarray, tolerance: float):
    """Coincident points merged (a side's vertex paired twice) and the triangles that then have
    no area dropped."""
    key = np.round(xy / max(tolerance, 1e-300)).astype(np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first, kind="stable"), kind="stable")    # keep the given order
    first, inverse = np.sort(first), rank[inverse.ravel()]
    triangles = inverse[triangles]
    p = xy[first][triangles]
    twice = (p[:, 1, 0] - p[:, 0, 0]) * (p[:, 2, 1] - p[:, 0, 1]) - (p[:, 1, 1] - p[:, 0, 1]) * (p[:, 2, 0] - p[:, 0, 0])
    distinct = (triangles[:, 0] != triangles[:, 1]) & (triangles[:, 1] != triangles[:, 2]) & (triangles[:, 0] != triangles[:, 2])
    return compacted(xy[first], triangles[distinct & (np.abs(twice) > 0)])


def graded_levels(low: float, high: float, first: float, largest: float) -> np.ndarray:
    """Levels from ``low`` to ``high``: layers ``first`` long at both ends growing by ``GRADING``
    per unit distance up to ``largest`` (symmetric about the middle)."""
    half = 0.5 * (high - low)
    steps = [0.0]
    while steps[-1] < half:
        steps.append(steps[-1] + min(largest, first + GRADING * steps[-1]))
    steps = np.asarray(steps)
    if len(steps) > 2 and steps[-1] - half > 0.5 * (steps[-1] - steps[-2]):
        steps = steps[:-1]
    steps *= half / steps[-1]
    return np.concatenate([low + steps, high - steps[-2::-1]])


def layered_wall(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray,
                 max_tets: int | None = None, across: int = LAYERS_ACROSS, strip=None) -> TetMesh | None:
    """A thin-walled tube's layered mesh along its length (module docstring) with ``across`` cells
    across its wall, each boundary face taking the condition of the input face nearest to it;
    None if the part is not such a tube or its mesh would pass ``BUDGET_SHARE`` of ``max_tets``.
    ``strip`` (points, outline, wall, along, across) -> (points, triangles) or None makes the
    section (:func:`matched_wall` unless given: :func:`fieldgen.sizing.open_section.open_wall`)."""
    found = thin_section(vertices, faces)
    if found is None:
        return None
    (points, triangles, outline, levels, basis), wall = found
    section = (strip or matched_wall)(points, outline, wall, EDGE_ALONG * wall, across)
    if section is None:
        return None
    heights = layers_within(levels, wall, None if max_tets is None else
                             int(BUDGET_SHARE * max_tets) // (3 * len(section[1])))
    if heights is None:
        return None
    xyz, tets = extruded(*section, basis, np.cross(basis[0], basis[1]), heights)
    base = float(face_areas(np.column_stack([points, np.zeros(len(points))]), triangles).sum())
    return filled_prism(xyz, tets, base * (levels[1] - levels[0]), vertices, faces, markers)


def layers_within(levels, wall: float, layers: int | None) -> np.ndarray | None:
    """:func:`graded_levels` with at most ``layers`` layers: the middle's layers made longer
    (the extent is flat along the axis there) until they fit; None if even one-layer middles
    do not."""
    largest = EDGE_ALONG_AXIS * wall
    heights = graded_levels(levels[0], levels[1], EDGE_AT_END * wall, largest)
    while layers is not None and len(heights) - 1 > layers:
        if largest >= levels[1] - levels[0]:
            return None
        largest *= 1.5
        heights = graded_levels(levels[0], levels[1], EDGE_AT_END * wall, largest)
    return heights
