"""A sheet of one thickness, flat, bent or folded sharp (a bracket or mount of sheet metal),
meshed in layers across it (docs/model.md §2.10, "Sheets of one thickness").

A sheet: nearly all of the surface (``SIDE_SHARE`` of its area) lies on two sides that face each
other at one thickness ``t`` — each such triangle's inward ray
(:func:`fieldgen.sizing.thickness.opposite_faces`) meets a triangle of the other side whose
normal is opposite (cosine below ``-PAIRED``) within a few percent of ``t`` — and the rest is the
rim, the cut edges ``t`` wide. Across a free sheet the extent is a parabola; along it the field
is flat except within about ``t/π`` of the rim (as a plate's, :mod:`fieldgen.sizing.extrusion`).
So one side is remeshed by MMGS (``mmgpy``) and a column runs from each of its vertices across
the sheet:

1. the side is remeshed at ``EDGE_FIRST`` t (a clean start from the input's narrow CAD
   triangles), then under a metric graded from its rim: edges ``EDGE_AT_RIM`` t across the rim,
   growing by ``GRADING`` per unit distance up to ``EDGE_ALONG`` t, which is also the edge along
   the rim; every size scaled up when the mesh would pass its share of the tet budget;
2. each vertex's column runs along its inward normal (the side's face normals averaged within
   ``NORMAL_RADIUS`` t, so neighbouring columns stay parallel at the scale of the thickness) to
   the other side (a ray; ``t`` where it misses, at the rim), in ``LAYERS`` equal layers; each
   triangle's column is a stack of prisms of three tets, the diagonals by vertex number
   (:func:`fieldgen.sizing.extrusion.prism_tets`), so the mesh conforms.

A side with sharp folds (no bend radius) is split into panels at its creases, and a block
fills each fold's corner (:mod:`fieldgen.sizing.fold`); a side that meets a sharp fold from
outside is not tried. MMGS may move an open side's rim within the side, past its Hausdorff bound:
if the mesh misses the surface or a column folds, the side is meshed once more with its rim put
back on the input's after each remeshing (:func:`onto_rim`) and the columns at the rim held to
the cut faces (:func:`along_rim_faces`).

The smaller side is tried first (the inside of a bend, where the columns spread rather than
meet), then the other if a column folded or the mesh missed the surface. A mesh is kept only if
no tet is inverted (a column folding over its neighbour) and its boundary and the input surface
are within the surface tolerance of each other (:func:`distance_apart`). Where the columns missed
the surface from either side (a chamfer or a step at the rim, a dimple: their ends fall either
side of the far side's corners), one side is meshed once more with its columns fitted to the far
side (:func:`fitted`, :mod:`fieldgen.sizing.far_side`); otherwise None, and TetGen's passes mesh
the part as any other.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.spatial import cKDTree

from fieldgen.io.vtk_data import distance_to_triangles
from fieldgen.meshing.ftetwild import classify_boundary
from fieldgen.meshing.mmg import MmgFailure, remeshed_surface
from fieldgen.meshing.tetmesh import TetMesh, boundary_faces_of, orient_positive, tet_volumes
from fieldgen.sizing import far_side
from fieldgen.sizing.adapt import symmetric
from fieldgen.sizing.extrusion import prism_tets
from fieldgen.sizing.fold import FOLD, corner_blocks, crease_pairs, split_at_creases
from fieldgen.sizing.segments import along_segments, nearest_on_segments
from fieldgen.sizing.slanted_rim import turned_to_slanted_rim
from fieldgen.sizing.thickness import opposite_faces
from fieldgen.surface.components import components
from fieldgen.surface.remesh import default_tolerance
from fieldgen.surface.topology import (boundary_edges, compacted, face_areas, face_pairs_across_edges, signed_volume,
                                     unit_normals)

#: A sheet: the two sides hold this share of the area, their triangles face each other (cosine
#: below ``-PAIRED``) at one thickness within a spread of it (the first of ``SPREADS`` that pairs
#: enough: a faceted curved wall whose two sides' facets are not aligned spreads by a few
#: percent), and the sheet is at least
#: ``THIN_RATIO`` thicknesses across. ``SAMPLE`` triangles spread through the list are tried
#: first, and a surface of more than ``MAX_FACES`` is not tried: a ray from a long CAD sliver can
#: cost milliseconds (docs/design/sizing.md, "Sheets").
SIDE_SHARE = 0.85
PAIRED = 0.99
SPREADS = (0.02, 0.06)
THIN_RATIO = 8.0
SAMPLE = 256
MAX_FACES = 20_000
#: Layers across the sheet, and the side's edges in thicknesses: everywhere in the first
#: remeshing, then across the rim at the rim, along it and inside, and the growth per unit
#: distance from the rim; the radius the column directions are averaged over
#: (docs/design/sizing.md, "Sheets").
LAYERS = 9
EDGE_FIRST = 1.0
EDGE_AT_RIM = 0.15
EDGE_ALONG = 3.0
GRADING = 0.5
NORMAL_RADIUS = 0.5
#: Where the rim turns by more than 30° (the sine), a column at the corner is held by both cut faces.
RIM_CORNER = 0.5
#: A column fitted to the far side may run as short as ``SHORTEST`` t (a chamfer at the rim); a
#: ray cast again is nudged ``NUDGE`` t into the side (:func:`reaching`).
SHORTEST = 0.1
NUDGE = 0.02
#: MMGS's gradation and Hausdorff bound (in thicknesses); where that bound makes more triangles
#: than the budget (a curved shell, whose every part is bent), the bound is relaxed to this share
#: of the surface tolerance, when larger (docs/design/sizing.md, "Closed shells").
GRADATION = 1.5
HAUSDORFF = 0.01
RELAXED_HAUSDORFF = 0.5
#: Where every side's columns folded, the sides are remeshed once more with MMGS's edges held to
#: at least this many thicknesses: MMGS's slivers standing up at the rim fold them (or make
#: creases the side does not have; docs/design/sizing.md, "Housings and brackets").
SHORTEST_EDGE = 0.1
#: The share of the tet budget the layered mesh may take (the passes refine with the rest); the
#: most its sizes may be scaled up to fit; MMGS's triangles per unit triangle of the metric
#: (measured on the sheets of docs/design/sizing.md, "Sheets").
BUDGET_SHARE = 0.8
MAX_SCALE = 2.0
MMGS_SHARE = 2.4


def thin_on_average(vertices: np.ndarray, faces: np.ndarray, volume: float) -> bool:
    """Whether the part's mean thickness (twice its ``volume`` over its area, a sheet's thickness)
    is under its largest extent over ``THIN_RATIO``: the cheap test before :func:`sheet_sides`."""
    return THIN_RATIO * 2.0 * volume <= float(np.ptp(vertices, axis=0).max()) * float(face_areas(vertices, faces).sum())


def sheet_sides(vertices: np.ndarray, faces: np.ndarray) -> tuple[float, np.ndarray] | None:
    """The sheet's thickness and each face's side (0 or 1; -1 on the rim), the smaller side 0;
    None if the surface is not a sheet (module docstring)."""
    area = face_areas(vertices, faces)
    normals = unit_normals(vertices, faces)
    if len(faces) > MAX_FACES or not _facing_sample(vertices, faces, area, normals):
        return None
    thickness, opposite = opposite_faces(vertices, faces)
    facing = opposite >= 0
    facing[facing] = np.einsum("ij,ij->i", normals[facing], normals[opposite[facing]]) < -PAIRED
    if area[facing].sum() < SIDE_SHARE * area.sum():
        return None
    t = weighted_median(thickness[facing], area[facing])      # by area: a CAD end face has many triangles
    if np.ptp(vertices, axis=0).max() < THIN_RATIO * t:
        return None
    for spread in SPREADS:
        paired = facing & (np.abs(thickness - t) <= spread * t)
        paired[paired] &= paired[opposite[paired]]
        if area[paired].sum() >= SIDE_SHARE * area.sum():
            break
    else:
        return None
    side = _two_sides(faces, paired, opposite)
    if side is None:
        return None
    if area[side == 0].sum() > area[side == 1].sum():
        side = np.where(side < 0, side, 1 - side)
    return t, side


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The value below which half of the total weight lies."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])


def _facing_sample(vertices: np.ndarray, faces: np.ndarray, area: np.ndarray, normals: np.ndarray) -> bool:
    """Whether ``SAMPLE`` triangles spread evenly through the list face an opposite triangle
    (:func:`sheet_sides`) over ``SIDE_SHARE`` of their area: a ray from a long CAD sliver can
    cost milliseconds, so a part that is no sheet is told from a few hundred rays."""
    sample = np.arange(0, len(faces), max(1, len(faces) // SAMPLE))
    _, opposite = opposite_faces(vertices, faces, sample)
    hit = opposite >= 0
    facing = np.zeros(len(sample), dtype=bool)
    facing[hit] = np.einsum("ij,ij->i", normals[sample[hit]], normals[opposite[hit]]) < -PAIRED
    return bool(area[sample[facing]].sum() >= SIDE_SHARE * area[sample].sum())


def _two_sides(faces: np.ndarray, paired: np.ndarray, opposite: np.ndarray) -> np.ndarray | None:
    """Each paired face's side (0 or 1; -1 elsewhere): the pieces of paired faces joined across
    edges, coloured so each face's opposite lies on the other side; None if no such colouring."""
    f, g, _ = face_pairs_across_edges(faces)
    joined = paired[f] & paired[g]
    count, piece = components(len(faces), np.stack([f[joined], g[joined]], axis=1))
    # A piece is a node twice over (node p: on side 0, p + count: on side 1); facing pieces
    # join p to q + count and q to p + count. A colouring exists iff no p meets p + count.
    a, b = piece[paired], piece[opposite[paired]]
    links = np.concatenate([np.stack([a, b + count], axis=1), np.stack([b, a + count], axis=1)])
    _, colour = components(2 * count, links)
    used = np.unique(a)
    if np.any(colour[used] == colour[used + count]):
        return None
    # Each component of the doubled graph and its mirror: the one holding the lower node is side 0.
    first = np.minimum(colour[:count], colour[count:])
    side = np.where(colour[piece] == first[piece], 0, 1)
    return np.where(paired, side, -1)


def rim_directions(points: np.ndarray, triangles: np.ndarray, step: float):
    """Points sampled every ``step`` along the side's rim (its edges used by one triangle; none on
    a closed side, a shell's), and at each the unit direction across the rim, in the side's plane."""
    rim, face = boundary_edges(triangles)
    a, b = points[rim[:, 0]], points[rim[:, 1]]
    owner = triangles[face]
    along = (b - a) / np.linalg.norm(b - a, axis=1, keepdims=True)
    across = np.cross(along, unit_normals(points, owner))
    samples, segment = along_segments(a, b, step)
    return samples, across[segment]


def rim_metric(points: np.ndarray, samples: np.ndarray, across: np.ndarray, t: float,
               scale: float = 1.0) -> np.ndarray:
    """MMGS's (n, 6) metric at ``points``: edges ``EDGE_AT_RIM`` t across the rim (the direction
    of the nearest rim sample), growing by ``GRADING`` per unit distance up to ``EDGE_ALONG`` t,
    which is the edge along (everywhere on a side with no rim); every size times ``scale``."""
    rim, along = EDGE_AT_RIM * t * scale, EDGE_ALONG * t * scale
    iso = 1.0 / along ** 2
    if not len(samples):
        return np.tile(symmetric(iso * np.eye(3)[None]), (len(points), 1))
    distance, nearest = cKDTree(samples).query(points)
    size = np.minimum(along, rim + GRADING * distance)
    direction = across[nearest]
    matrices = (1.0 / size ** 2 - iso)[:, None, None] * direction[:, :, None] * direction[:, None, :]
    return symmetric(matrices + iso * np.eye(3))


def remeshed_side(points: np.ndarray, triangles: np.ndarray, metric: np.ndarray, hausdorff: float,
                  required: np.ndarray | None = None, ridge: float | None = None, shortest: float | None = None):
    """The side remeshed by MMGS under ``metric`` (a size (n,) or a tensor (n, 6)) within
    ``hausdorff``, on a copy about 1 across, its sharp folds kept as ridges (or every edge whose
    faces meet at more than ``ridge`` degrees) and the ``required`` points kept: (points,
    triangles); None if MMGS fails. MMGS's edges are at least ``shortest`` (m) if given."""
    folds = {"ar": FOLD} if len(crease_pairs(points, triangles)[0]) else {}
    folds = folds if ridge is None else {"ar": ridge}
    folds = folds if shortest is None else {**folds, "hmin": shortest}
    try:
        made, triangles, _ = remeshed_surface(points, triangles, metric=metric, unit=True, required=required,
                                              hausd=hausdorff, hgrad=GRADATION, verbose=-1, **folds)
    except MmgFailure:
        return None
    return made, triangles


def column_directions(points: np.ndarray, triangles: np.ndarray, radius: float, panel: np.ndarray) -> np.ndarray:
    """Unit inward directions at the side's vertices: minus the area-weighted normals of the
    triangles whose centroids lie within ``radius`` on the vertex's ``panel`` (the flat or bent
    pieces between sharp folds), and of the vertex's own triangles."""
    weighted = 0.5 * np.cross(points[triangles[:, 1]] - points[triangles[:, 0]],
                              points[triangles[:, 2]] - points[triangles[:, 0]])
    total = np.zeros_like(points)
    for k in range(3):
        np.add.at(total, triangles[:, k], weighted)
    near = cKDTree(points).query_ball_point(points[triangles].mean(axis=1), radius)
    rows = np.concatenate([np.asarray(n, dtype=np.int64) for n in near])
    owner = np.repeat(np.arange(len(triangles)), [len(n) for n in near])
    same = panel[rows] == panel[triangles[owner, 0]]
    np.add.at(total, rows[same], weighted[owner[same]])
    return -total / np.linalg.norm(total, axis=1, keepdims=True)


def along_rim_faces(points: np.ndarray, triangles: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """``directions`` with each rim vertex's turned into the cut faces at its rim edges: the part
    across each edge (in the side's plane, normal to the edge) taken out, the second edge's only
    where the rim turns by more than 30° (a corner of the cut; Gram-Schmidt), so a column at the
    rim runs along the cut face instead of out of the part where averaged normals lean (at a bend
    near the rim). On a side split at its creases the crease edges count as rim too; the crease
    is normal to the panel, so a flat panel's columns there are unchanged."""
    rim, face = boundary_edges(triangles)
    along = points[rim[:, 1]] - points[rim[:, 0]]
    across = np.cross(along, unit_normals(points, triangles[face]))
    across /= np.linalg.norm(across, axis=1, keepdims=True)
    out = directions.copy()
    for k in (0, 1):                      # each rim vertex is on two rim edges
        order = np.argsort(rim[:, k], kind="stable")
        vertex, a = rim[order, k], across[order]
        if k == 1:                        # the second edge's direction made normal to the first's
            first = np.zeros_like(points)
            first[rim[:, 0]] = across
            a = a - np.einsum("ij,ij->i", a, first[vertex])[:, None] * first[vertex]
            size = np.linalg.norm(a, axis=1, keepdims=True)
            a = np.where(size > RIM_CORNER, a / np.maximum(size, 1e-300), 0.0)   # a corner of the cut
        out[vertex] -= np.einsum("ij,ij->i", out[vertex], a)[:, None] * a
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def column_depths(points: np.ndarray, directions: np.ndarray, other, t: float, shortest: float = 0.5,
                  missing: float | None = None, every_hit: bool = False) -> np.ndarray:
    """How far each column runs: to the ``other`` surface (vertices, faces) along its direction,
    where its ray first meets it (with ``every_hit``, the nearest of all its hits) if within
    ``shortest`` to twice ``t``; ``missing`` (None: ``t``) elsewhere (at the rim)."""
    import trimesh  # lazy: heavy, and only sheets cast columns

    target = trimesh.Trimesh(*other, process=False)
    start = points - 1e-9 * t * directions
    locations, rays, _ = target.ray.intersects_location(start, directions, multiple_hits=every_hit)
    reach = np.einsum("ij,ij->i", locations - points[rays], directions[rays])
    ok = (reach > shortest * t) & (reach < 2.0 * t)
    depth = np.full(len(points), np.inf)
    np.minimum.at(depth, rays[ok], reach[ok])
    return np.where(np.isfinite(depth), depth, t if missing is None else missing)


def stacked(points: np.ndarray, triangles: np.ndarray, directions: np.ndarray, depth: np.ndarray,
            layers: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The columns' points (layer by layer) and the prisms' tets, positive; None if a tet is flat
    or inverted (a column folded over its neighbour). The triangles face out of the sheet, so a
    prism's three tets (:func:`fieldgen.sizing.extrusion.prism_tets`) have the signs +, -, + times
    that of its triangle taken in increasing vertex order against the column."""
    xyz = np.concatenate([points + s * depth[:, None] * directions for s in np.linspace(0.0, 1.0, layers + 1)])
    tets = prism_tets(triangles, len(points), layers)
    ordered = np.sort(triangles, axis=1)
    normal = np.cross(points[ordered[:, 1]] - points[ordered[:, 0]], points[ordered[:, 2]] - points[ordered[:, 0]])
    sign = np.sign(np.einsum("ij,ij->i", normal, directions[ordered[:, 0]]))
    expected = np.tile(np.concatenate([sign, -sign, sign]), layers)
    volume = tet_volumes(xyz, tets)
    if np.any(np.sign(volume) != expected):       # a flat tet has sign 0
        return None
    return xyz, orient_positive(xyz, tets)


def predicted_tets(vertices: np.ndarray, faces: np.ndarray, t: float) -> float:
    """About how many tets the side (``faces``) makes under :func:`rim_metric`: ``MMGS_SHARE``
    times the metric's unit triangles, the interior at ``EDGE_ALONG`` t and the band along the
    rim (its length ``P``) where the edge across grows from ``EDGE_AT_RIM`` t, ``P ln(EDGE_ALONG /
    EDGE_AT_RIM) / (GRADING EDGE_ALONG t)`` of them; ``LAYERS`` layers of three tets a triangle."""
    points, triangles = compacted(vertices, faces)
    rim = boundary_edges(triangles)[0]
    perimeter = float(np.linalg.norm(points[rim[:, 0]] - points[rim[:, 1]], axis=1).sum())
    along = EDGE_ALONG * t
    unit = float(face_areas(points, triangles).sum()) / along ** 2 \
        + perimeter * np.log(EDGE_ALONG / EDGE_AT_RIM) / (GRADING * along)
    return float(3 * LAYERS * MMGS_SHARE * 4.0 / np.sqrt(3.0) * unit)


class SideStart(NamedTuple):
    """A side compacted (``points``, ``triangles``: the input's) and MMGS's first, clean remeshing of
    it (``made``: points, triangles), which :func:`graded_side` grades."""

    points: np.ndarray
    triangles: np.ndarray
    made: tuple
    hausdorff: float            # MMGS's Hausdorff bound, m, for this side's remeshings
    shortest: float | None = None   # MMGS's shortest edge, m (None: MMGS's own)


def started_side(vertices: np.ndarray, faces: np.ndarray, t: float, scale: float = 1.0,
                 ridge: float | None = None, hausdorff: float | None = None,
                 shortest: float | None = None) -> SideStart | None:
    """The side (``faces``) compacted and remeshed by MMGS at ``EDGE_FIRST`` t (the input's narrow
    CAD triangles made into a clean start), every edge past ``ridge`` degrees kept as a ridge: the
    start :func:`graded_side` grades, made once for both ways it treats the rim; None if MMGS
    fails. MMGS keeps within ``hausdorff`` (m; None: ``HAUSDORFF`` t) of the side here and after, its
    edges at least ``shortest`` (m) if given."""
    points, triangles = compacted(vertices, faces)
    hausdorff = HAUSDORFF * t if hausdorff is None else float(hausdorff)
    first = np.tile(symmetric(np.eye(3)[None] / (EDGE_FIRST * t * scale) ** 2), (len(points), 1))
    if len(crease_pairs(points, triangles)[0]):
        first = np.full(len(points), EDGE_FIRST * t * scale)    # the same size; MMGS's tensor mode made NaN at a crease
    made = remeshed_side(points, triangles, first, hausdorff, ridge=ridge, shortest=shortest)
    if made is None and first.ndim == 2:    # MMGS's tensor mode failed (it crashed on a bowl): the same size as a scalar
        made = remeshed_side(points, triangles, np.full(len(points), EDGE_FIRST * t * scale), hausdorff, ridge=ridge,
                             shortest=shortest)
    return None if made is None else SideStart(points, triangles, made, hausdorff, shortest)


def graded_side(start: SideStart, t: float, scale: float = 1.0, on_rim: bool = False,
                targets: np.ndarray | None = None, kept: np.ndarray | None = None, ridge: float | None = None):
    """The side's ``start`` (:func:`started_side`, made with the same ``t``, ``scale`` and
    ``ridge``) remeshed under :func:`rim_metric` (sizes times ``scale``), the rim's directions
    taken from the input side, refined round the far side's ``targets``, the ``kept`` points made
    vertices MMGS keeps (:mod:`fieldgen.sizing.far_side`), every edge past ``ridge`` degrees kept as
    a ridge (:func:`remeshed_side`); with ``on_rim``, each time with its rim put back on the
    input's (:func:`onto_rim`): (points, triangles); None if MMGS fails."""
    points, triangles, made, hausdorff, shortest = start
    samples, across = rim_directions(points, triangles, 0.5 * EDGE_AT_RIM * t * scale)
    rim = boundary_edges(triangles)[0]
    if on_rim:
        made = onto_rim(made[0], made[1], points, rim), made[1]
    required = None
    if kept is not None and len(kept):  # the far side's shadows made vertices MMGS keeps
        *made, required = far_side.inserted(made[0], made[1], kept)
        required = required[required >= 0]
    metric = rim_metric(made[0], samples, across, t, scale)
    if targets is not None:
        metric = far_side.refined(metric, made[0], targets, far_side.EDGE * t * scale, GRADING, EDGE_ALONG * t * scale)
    made = remeshed_side(made[0], made[1], metric, hausdorff, required, ridge, shortest)
    if made is None or not on_rim:
        return made
    return onto_rim(made[0], made[1], points, rim), made[1]


def onto_rim(points: np.ndarray, triangles: np.ndarray, rim_points: np.ndarray, rim_edges: np.ndarray) -> np.ndarray:
    """``points`` with the rim vertices of ``triangles`` moved to the nearest point of the input
    side's rim (segments ``rim_edges`` on ``rim_points``): MMGS may move an open surface's border
    within the surface, by up to a tenth of the thickness on the sheets measured, far past its
    Hausdorff bound (docs/design/sizing.md, "Sheets")."""
    moved = points.copy()
    rim = np.unique(boundary_edges(triangles)[0])
    a, b = rim_points[rim_edges[:, 0]], rim_points[rim_edges[:, 1]]
    nearest, share = nearest_on_segments(points[rim], a, b)
    moved[rim] = a[nearest] + share[:, None] * (b - a)[nearest]
    return moved


def distance_apart(xyz: np.ndarray, tets: np.ndarray, vertices: np.ndarray, faces: np.ndarray) -> float:
    """How far the mesh's boundary and the input surface are apart: the larger of the distances
    from each one's vertices to the other (m), and of the volumes' difference over the area."""
    boundary = boundary_faces_of(tets)
    volume = float(np.abs(tet_volumes(xyz, tets)).sum())
    return max(float(distance_to_triangles(xyz[np.unique(boundary)], vertices, faces).max()),
               float(distance_to_triangles(vertices, xyz, boundary).max()),
               abs(volume - abs(signed_volume(vertices, faces))) / float(face_areas(vertices, faces).sum()))


def layered_sheet(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray, max_tets: int | None = None,
                  tolerance: float | None = None) -> tuple[TetMesh, dict] | None:
    """A sheet's layered mesh (module docstring), each boundary face taking the condition of the
    input face nearest to it, with its record (thickness, layers, the side's triangles, how far
    the mesh is from the input); None if the surface is not a sheet, or no side gives a mesh
    within ``tolerance`` (m; None: the surface stage's default,
    :func:`fieldgen.surface.remesh.default_tolerance`) of it and ``BUDGET_SHARE`` of ``max_tets``."""
    found = sheet_sides(vertices, faces)
    if found is None:
        return None
    t, side = found
    tolerance = default_tolerance(vertices) if tolerance is None else float(tolerance)
    hausdorff = HAUSDORFF * t
    made = _layered_sides(vertices, faces, markers, side, t, max_tets, tolerance, hausdorff)
    if made is TOO_FINE and RELAXED_HAUSDORFF * tolerance > hausdorff:
        hausdorff = RELAXED_HAUSDORFF * tolerance
        made = _layered_sides(vertices, faces, markers, side, t, max_tets, tolerance, hausdorff)
    if made is FOLDED:                  # MMGS's slivers at the rim: once more, its edges held longer
        made = _layered_sides(vertices, faces, markers, side, t, max_tets, tolerance, hausdorff, SHORTEST_EDGE * t)
    return made if isinstance(made, tuple) else None


#: :func:`_layered_sides`' answers when MMGS, held to its Hausdorff bound, made more than the
#: budget, and when every side's columns folded.
TOO_FINE = "too fine"
FOLDED = "folded"


def _layered_sides(vertices, faces, markers, side: np.ndarray, t: float, max_tets: int | None, tolerance: float,
                   hausdorff: float, shortest: float | None = None):
    """:func:`layered_sheet` with MMGS held within ``hausdorff`` (m) of each side, its edges at least
    ``shortest`` (m) if given: (mesh, record); None; ``TOO_FINE`` when a side's remeshing made more
    triangles than the budget; ``FOLDED`` when every side's columns folded."""
    wanted = None if max_tets is None else BUDGET_SHARE * max_tets
    missed, folded = {}, False          # each side's first mesh that missed the surface, and its scale
    for which in (0, 1):
        if not folds_inward(vertices, faces[side == which]):
            continue                    # its columns would meet at a fold: the other side's part there
        scale = 1.0 if wanted is None else np.sqrt(max(1.0, predicted_tets(vertices, faces[side == which], t) / wanted))
        if scale > MAX_SCALE:
            return None
        start = started_side(vertices, faces[side == which], t, scale, hausdorff=hausdorff, shortest=shortest)
        rims = (False, True) if shortest is None else (False,)    # the second round: as MMGS leaves it
        for on_rim in rims:             # as MMGS leaves the rim, then held to the input's rim
            graded = None if start is None else graded_side(start, t, scale, on_rim)
            if graded is None or (wanted is not None and 3 * LAYERS * len(graded[1]) > wanted):
                if on_rim:
                    break               # this side's first mesh fitted the budget: the other side's may
                # MMGS failed, or made more than predicted: so would the other side
                return None if graded is None else TOO_FINE
            mesh = columns(*graded, compacted(vertices, faces[side == 1 - which]), t, vertices, faces, markers, on_rim,
                           cut=compacted(vertices, faces[side < 0]))
            apart = np.inf if mesh is None else distance_apart(mesh.points, mesh.tets, vertices, faces)
            if apart <= tolerance:
                return mesh, _record(t, graded, apart)
            folded |= mesh is None
            if mesh is not None and which not in missed:
                missed[which] = mesh, scale
        if folded and shortest is not None:
            break                       # the edges held longer did not keep this side's columns apart
    made = fitted(vertices, faces, markers, side, t, missed, tolerance, hausdorff, shortest)
    if made is None or (wanted is not None and 3 * LAYERS * len(made[1][1]) > wanted):
        return FOLDED if folded and not missed and shortest is None else None   # nor the fitted columns fit
    return made[0], {**_record(t, made[1], made[2]), "fitted_to_far_side": True}


def _record(t: float, graded, apart: float) -> dict:
    """What a layered sheet's metadata says of it."""
    return {"thickness": t, "layers": LAYERS, "side_triangles": len(graded[1]), "distance_apart": apart}


def fitted(vertices, faces, markers, side: np.ndarray, t: float, missed: dict, tolerance: float,
           hausdorff: float | None = None, shortest: float | None = None):
    """Where the columns missed part of the sheet (``missed``: side -> its first layered mesh
    farther than ``tolerance`` from the input, and its scale), the side meshed again with its
    columns fitted to the far side (:mod:`fieldgen.sizing.far_side`): the rest of the surface's
    corners and the vertices that mesh missed, their shadows on the side. Tried once, from the
    side with the most shadows inside it (a ring's outer side, whose shadows all fall on its rim,
    cannot reach the corners beyond its chamfers), then with the most in all (a folded bracket's
    corners at its end faces are reached by its rim columns). (mesh, its side's (points,
    triangles), its distance apart) if within ``tolerance``, else None. MMGS within ``hausdorff``
    and its edges at least ``shortest`` (:func:`started_side`)."""
    best = None
    for which, (mesh, scale) in missed.items():
        near, rest = compacted(vertices, faces[side == which]), compacted(vertices, faces[side != which])
        far = far_side.far_corners(*rest, (mesh.points, boundary_faces_of(mesh.tets)), tolerance)
        found = far_side.shadows(far, *near, t, SHORTEST * t)
        rank = int(np.count_nonzero(~found[2])), len(found[1])
        if rank[1] and (best is None or rank > best[0]):
            best = rank, which, scale, near, rest, found
    if best is None:
        return None
    _, which, scale, near, rest, (corners, targets, on_rim) = best
    start = started_side(vertices, faces[side == which], t, scale, ridge=far_side.RIDGE, hausdorff=hausdorff,
                         shortest=shortest)
    graded = None if start is None else graded_side(start, t, scale, targets=targets, kept=targets[~on_rim],
                                                    ridge=far_side.RIDGE)
    if graded is None:
        return None
    points, moved = far_side.placed(*graded, targets, on_rim)
    mesh = columns(points, graded[1], rest, t, vertices, faces, markers, ends=(moved, corners))
    apart = np.inf if mesh is None else distance_apart(mesh.points, mesh.tets, vertices, faces)
    return (mesh, (points, graded[1]), apart) if apart <= tolerance else None


def folds_inward(vertices: np.ndarray, faces: np.ndarray) -> bool:
    """Whether a corner block can fill every sharp fold of the side (``faces``): each met from
    inside, where the columns part, and between two panels only
    (:func:`fieldgen.sizing.fold.split_at_creases`); checked on the input side, before MMGS runs."""
    return split_at_creases(*compacted(vertices, faces)) is not None


def columns(points, triangles, other, t: float, vertices, faces, markers, on_rim: bool = False,
            ends: tuple[np.ndarray, np.ndarray] | None = None, cut=None) -> TetMesh | None:
    """The side's columns to the ``other`` side (vertices, faces), a block in the wedge of each
    sharp fold (:mod:`fieldgen.sizing.fold`), as a TetMesh with the input's conditions; with
    ``on_rim`` the columns at the rim held to its cut faces (:func:`along_rim_faces`; to the ``cut``
    faces' planes where slanted, :mod:`fieldgen.sizing.slanted_rim`); with
    ``ends`` (each point's far corner, -1 for none; the corners) the columns fitted to the far
    side (:func:`reaching`); None if a column or a block folds."""
    split = split_at_creases(points, triangles)
    if split is None:
        return None
    points, triangles, creases = split
    with np.errstate(divide="ignore", invalid="ignore"):     # NaN (a degenerate rim edge, a hairpin): refused by the signs
        directions = column_directions(points, triangles, NORMAL_RADIUS * t, creases.panel)
        if on_rim:
            directions = along_rim_faces(points, triangles, directions)
            if cut is not None:
                directions = turned_to_slanted_rim(points, triangles, directions, cut, t)
        if ends is None:
            depth = column_depths(points, directions, other, t)
        else:
            moved, corners = ends
            moved = moved[creases.input_point(len(points))]
            moved[np.concatenate([creases.inner, creases.copy])] = -1   # a fold's corner block reaches the outer crease itself
            directions, depth = reaching(points, triangles, directions, other, t, moved, corners)
        made = stacked(points, triangles, directions, depth, LAYERS)
        made = None if made is None else corner_blocks(*made, len(points), creases, LAYERS)
    if made is None:
        return None
    xyz, tets = made
    boundary = boundary_faces_of(tets)
    return TetMesh(points=xyz, tets=tets, boundary_faces=boundary,
                   boundary_markers=classify_boundary(xyz, boundary, vertices, faces, markers))


def reaching(points: np.ndarray, triangles: np.ndarray, directions: np.ndarray, rest, t: float,
             ends: np.ndarray, corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Columns fitted to the far side (:mod:`fieldgen.sizing.far_side`): each cast at the ``rest``
    of the surface (a chamfer or a step at the rim included) as near as ``SHORTEST`` t; a ray that
    misses (a rim column grazing its cut face) cast again held in the cut face
    (:func:`along_rim_faces`) from a point nudged into the side, the column then running to where
    that ray met the surface; a point with a far corner
    (``ends`` >= 0, into ``corners``; the points past ``ends``, a crease's copies, have none)
    runs straight to it. (directions, depths)."""
    depth = column_depths(points, directions, rest, t, SHORTEST, np.nan, every_hit=True)
    miss = np.isnan(depth)
    if miss.any():
        held = along_rim_faces(points, triangles, directions)[miss]
        start = points[miss] + NUDGE * t * _into_side(points, triangles)[miss]
        again = column_depths(start, held, rest, t, SHORTEST, np.nan, every_hit=True)
        hit = ~np.isnan(again)
        run = start[hit] + again[hit, None] * held[hit] - points[miss][hit]
        found = np.flatnonzero(miss)[hit]
        directions, depth = directions.copy(), depth.copy()
        depth[found] = np.linalg.norm(run, axis=1)
        directions[found] = run / depth[found, None]
        depth[np.isnan(depth)] = t
    own = np.flatnonzero(ends >= 0)
    if len(own):
        run = corners[ends[own]] - points[own]
        directions, depth = directions.copy(), depth.copy()
        depth[own] = np.linalg.norm(run, axis=1)
        directions[own] = run / depth[own, None]
    return directions, depth


def _into_side(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """At each point the unit direction to the mean of its triangles' centroids (into the side)."""
    total, count = np.zeros_like(points), np.zeros(len(points))
    centroids = points[triangles].mean(axis=1)
    for k in range(3):
        np.add.at(total, triangles[:, k], centroids)
        np.add.at(count, triangles[:, k], 1.0)
    inward = total / np.maximum(count, 1.0)[:, None] - points
    return inward / np.maximum(np.linalg.norm(inward, axis=1, keepdims=True), 1e-300)
