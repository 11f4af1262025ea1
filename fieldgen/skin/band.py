"""The skin as a layer band over the rigid interior, and TetGen's tets outside it (docs/model.md §2.4).

A stiffening law needs the tets thin in ``e`` where it bends, which under a skin is next to the
rigid interior (D 5.1.2: "I mesh objects so that they have layers"). There ``e`` is about
``1 − s/T`` at a distance ``s`` from the interior, so prisms grown out of the interior's surface,
with their layers at the distances ``(1 − e_k) T`` of the law's extent levels ``e_k``
(:func:`fieldgen.material.levels.balanced_levels`), are already layered: the layering stage has little to
add. Farther than about 0.6 ``T`` from the interior the levels are wide and plain tets suffice.

1. The interior is the rounded one of :mod:`fieldgen.skin.interior`; its surface's vertex normals are
   the columns' directions.
2. Each column rises to ``TOP · T`` with its points at the band's heights; where a prism would
   turn inside out (one of its six corners) or the band's top would cut through itself, the
   columns of the triangles concerned are lowered (``LOWERING`` each round). Lowered columns keep
   their heights' proportions: the layering splits what they leave.
3. TetGen meshes the part between the free faces and the band's top (a hole) with edge
   ``OUTER_EDGE · T``; the top's triangles it splits are found in the band's triangles, and each
   new top vertex gets a column by the same barycentric weights at every height.
4. Each prism (a top triangle of TetGen's over the interior) is three tets, its quads split
   through their lowest-numbered vertex so neighbours agree (Dompierre et al. 1999).
5. Once solved, each column's inner points slide along it onto the levels of that solution
   (:func:`aligned_columns`): near the interior's round creases ``e`` falls faster than ``1 − s/T``.

:class:`BandError` when a step fails or the result is not a valid mesh: the build then cuts the
skin out of a whole-part mesh as before (:mod:`fieldgen.skin.cut`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from fieldgen.errors import BuildError
from fieldgen.io.vtk_data import distance_to_triangles, triangles
from fieldgen.meshing import tetgen
from fieldgen.meshing.tetmesh import (RIGID, TetMesh, boundary_faces_of, find_faces, orient_positive,
                                      tet_barycentric, tet_volumes)
from fieldgen.skin.cut import SkinResult
from fieldgen.skin.interior import EDGE, self_intersecting
from fieldgen.surface.topology import signed_volume

#: The band's top, x the skin thickness, above the interior: the tets outside it span levels wide
#: enough for their size (docs/model.md §2.4).
TOP = 0.6
#: TetGen's edge outside the band, x the skin thickness, and its radius-edge bound there.
OUTER_EDGE = 0.9
OUTER_RADIUS_EDGE = 2.0
#: Heights are at most this far apart (x the skin thickness): more layers where the law's levels
#: are sparse (a linear law has none).
MAX_LAYER = 0.2
#: Each round the limiter lowers the columns of a bad prism to this fraction; at most LIMITER_ROUNDS.
LOWERING = 0.7
LIMITER_ROUNDS = 30
#: Seconds TetGen may take outside the band (it usually takes seconds, but can run on for minutes
#: on a finer interior): past it the build cuts the skin instead (docs/design/skin.md).
OUTER_TIMEOUT = 120.0
#: TetGen runs outside the band at most this many times (each after lowering the columns under
#: the prisms its split of the top turned inside out).
MESH_ATTEMPTS = 4


#: The band's first mesh is kept to about this many prism tets: under a thin skin over a large
#: part the interior's surface is remeshed coarser, and the outside with it (the accuracy warning
#: then says how far the field is; docs/design/skin.md has the sizes of the corpus parts' bands).
MAX_PRISM_TETS = 900_000
#: A first mesh larger than this is given up for the cut, whose sizing keeps to its tet budget
#: (docs/design/skin.md).
MAX_TETS = 1_500_000
#: TetGen splits some of the top's triangles: prism tets per triangle and layer, 3 and some more.
PRISMS_PER_TRIANGLE = 3.0 * 1.3


def check_size(surface_area: float, thickness: float, heights: np.ndarray) -> None:
    """BandError when the band's prisms alone would pass ``MAX_TETS``, foreseen before anything is
    made: the interior's surface is about as large as the part's (smaller under convex faces, a
    little larger under concave ones), and is meshed with edges of about
    the skin's thickness (fieldgen.skin.interior.EDGE)."""
    n_triangles = surface_area / (math.sqrt(3.0) / 4.0 * (EDGE * thickness) ** 2)
    foreseen = PRISMS_PER_TRIANGLE * (len(heights) - 1) * n_triangles
    if foreseen > MAX_TETS:
        raise BandError(f"the band would have about {foreseen:,.0f} prism tets, more than {MAX_TETS:,} (a thin skin "
                        "over a large part)", fix="give a thicker --skin, or an --edge-length to mesh the cut skin yourself")


def interior_triangles(heights: np.ndarray, max_prism_tets: int = MAX_PRISM_TETS) -> int:
    """The most triangles the interior's surface may have for the band's prisms to stay within
    ``max_prism_tets`` (``heights``: the band's, k + 1 of them)."""
    return int(max_prism_tets / (PRISMS_PER_TRIANGLE * (len(heights) - 1)))


class BandError(BuildError):
    """The band could not be made into a valid mesh."""


@dataclass
class Band:
    """The skin meshed as a band and tets outside it."""

    mesh: TetMesh
    heights: np.ndarray          # (k + 1,) the band's heights above the interior, m (0 first)
    lowered: int                 # columns the limiter lowered
    outer_tets: int              # TetGen's tets outside the band
    band_tets: int
    columns: np.ndarray          # (k + 1, m) vertex ids of each column, the interior's first
    outer: TetMesh               # TetGen's mesh outside the band (its unmerged/merged_* flags)


@dataclass
class BandSkin:
    """What the build records of a band's skin, for whichever refinement of it is kept: called
    with that mesh, the :class:`fieldgen.skin.cut.SkinResult` (its cut is the interior's faces)."""

    thickness: float             # m
    rounding: float              # the interior's rounding ρ, m
    outer_edge: float            # TetGen's edge outside the band, m
    free_surface: tuple          # (vertices, faces) the depth is measured from
    part_volume: float           # m³
    max_depth: float             # the part's deepest point below the free faces (on the interior's grid)

    def __call__(self, mesh: TetMesh):
        depth = distance_to_triangles(mesh.points, *self.free_surface)
        volume = float(tet_volumes(mesh.points, mesh.tets).sum())
        return SkinResult(mesh=mesh, depth=depth, thickness=self.thickness, max_depth=self.max_depth,
                          volume_fraction=volume / self.part_volume, part_volume=self.part_volume,
                          cut=np.asarray(mesh.boundary_markers) == RIGID, rounding=self.rounding)


def band_heights(levels: np.ndarray, thickness: float, top: float = TOP, max_layer: float = MAX_LAYER) -> np.ndarray:
    """Heights above the interior, from 0 to ``top · T``: ``(1 − e_k) T`` for the extent ``levels``
    below ``top``, with more in between where two are more than ``max_layer · T`` apart."""
    cuts = sorted({0.0, float(top)} | {float(1.0 - e) for e in np.asarray(levels) if 0.0 < 1.0 - e < top})
    heights = [cuts[0]]
    for a, b in zip(cuts[:-1], cuts[1:]):
        parts = int(np.ceil((b - a) / max_layer - 1e-9))
        heights.extend(a + (b - a) * np.arange(1, parts + 1) / parts)
    return np.asarray(heights) * float(thickness)


def prism_tets(bottom: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Three tets for each prism (rows of ``bottom`` (m, 3) and ``top`` (m, 3) vertex ids, top[i, j]
    above bottom[i, j]), each quad face split through its lowest id, so prisms sharing a quad
    split it alike (Dompierre, Labbé, Vallet and Camarero 1999). Orientation as it comes."""
    v = np.concatenate([bottom, top], axis=1)
    # The prism's symmetries (rotations, and the flips that swap bottom and top) put its lowest id first.
    symmetries = np.array([[0, 1, 2, 3, 4, 5], [1, 2, 0, 4, 5, 3], [2, 0, 1, 5, 3, 4],
                           [3, 5, 4, 0, 2, 1], [4, 3, 5, 1, 0, 2], [5, 4, 3, 2, 1, 0]])
    v = np.take_along_axis(v, symmetries[np.argmin(v, axis=1)], axis=1)
    v1, v2, v3, v4, v5, v6 = v.T
    first = np.minimum(v2, v6) < np.minimum(v3, v5)
    t1 = np.where(first[:, None], np.stack([v1, v2, v3, v6], 1), np.stack([v1, v2, v3, v5], 1))
    t2 = np.where(first[:, None], np.stack([v1, v2, v6, v5], 1), np.stack([v1, v5, v3, v6], 1))
    t3 = np.stack([v1, v5, v6, v4], 1)
    return np.concatenate([t1, t2, t3])


def _corners_positive(bottom: np.ndarray, top: np.ndarray) -> np.ndarray:
    """(m,) whether every corner of each prism (bottom (m, 3, 3) points, top above them) is
    positively oriented: at each vertex the two triangle edges and the column, in that order."""
    ok = np.ones(len(bottom), dtype=bool)
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        for tri, column in ((bottom, top[:, i] - bottom[:, i]), (top, top[:, i] - bottom[:, i])):
            e1, e2 = tri[:, j] - tri[:, i], tri[:, k] - tri[:, i]
            ok &= np.einsum("ij,ij->i", np.cross(e1, e2), column) > 0
    return ok


#: Barycentric weights of the corners of a triangle's four halves (midpoint subdivision).
_HALVES = np.array([[[1, 0, 0], [.5, .5, 0], [.5, 0, .5]], [[.5, .5, 0], [0, 1, 0], [0, .5, .5]],
                    [[.5, 0, .5], [0, .5, .5], [0, 0, 1]], [[.5, .5, 0], [0, .5, .5], [.5, 0, .5]]])


def limited_columns(vertices: np.ndarray, faces: np.ndarray, normals: np.ndarray, heights: np.ndarray,
                    scale: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each column's points at the ``heights`` (k + 1, n, 3) and its scale (n,): ``scale`` (default
    1), lowered until every prism's corners are positive and the top does not cut through itself."""
    scale = np.ones(len(vertices)) if scale is None else np.array(scale, dtype=np.float64)
    for _ in range(LIMITER_ROUNDS):
        levels = vertices[None] + (heights[:, None] * scale[None])[:, :, None] * normals[None]
        bad = np.zeros(len(faces), dtype=bool)
        for k in range(len(heights) - 1):
            bad |= ~_corners_positive(levels[k][faces], levels[k + 1][faces])
            # TetGen splits the top's triangles and the columns follow by barycentric weights:
            # the prisms over the four halves of each triangle must be sound too.
            for child in _HALVES:
                bottom = np.einsum("cj,fjd->fcd", child, levels[k][faces])
                top = np.einsum("cj,fjd->fcd", child, levels[k + 1][faces])
                bad |= ~_corners_positive(bottom, top)
        if not bad.any():
            crossing = self_intersecting(levels[-1], faces)
            if not len(crossing):
                return levels, scale
            bad[crossing] = True
        scale[np.unique(faces[bad])] *= LOWERING
    raise BandError(f"the band's columns still cross after {LIMITER_ROUNDS} rounds of lowering",
                    fix="report the part; the build cut the skin instead")


def _locate(points: np.ndarray, vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For points on the triangles: the triangle each lies in and its barycentric weights there."""
    from vtkmodules.vtkCommonCore import reference  # lazy: heavy (VTK)
    from vtkmodules.vtkCommonDataModel import vtkStaticCellLocator  # lazy: heavy (VTK)

    locator = vtkStaticCellLocator()
    locator.SetDataSet(triangles(vertices, faces))
    locator.BuildLocator()
    cell, sub, distance = reference(0), reference(0), reference(0.0)
    closest = [0.0, 0.0, 0.0]
    where = np.empty(len(points), dtype=np.int64)
    for i, point in enumerate(points.tolist()):
        locator.FindClosestPoint(point, closest, cell, sub, distance)
        where[i] = cell.get()
    corner = vertices[faces[where]]
    e1, e2, r = corner[:, 1] - corner[:, 0], corner[:, 2] - corner[:, 0], points - corner[:, 0]
    d11, d12, d22 = (np.einsum("ij,ij->i", x, y) for x, y in ((e1, e1), (e1, e2), (e2, e2)))
    r1, r2 = np.einsum("ij,ij->i", r, e1), np.einsum("ij,ij->i", r, e2)
    det = d11 * d22 - d12 * d12
    b1 = (d22 * r1 - d12 * r2) / det
    b2 = (d11 * r2 - d12 * r1) / det
    return where, np.clip(np.stack([1.0 - b1 - b2, b1, b2], axis=1), 0.0, 1.0)


def band_skin(surface_vertices, surface_faces, markers, interior, heights: np.ndarray, *,
              outer_edge: float, outer_radius_edge: float = OUTER_RADIUS_EDGE, surface_tolerance: float | None = None,
              progress=None) -> Band:
    """The skin between the part's surface (``markers`` per face) and the ``interior``
    (:class:`fieldgen.skin.interior.Interior`) meshed as a band of prisms at ``heights`` (m) over the
    interior and TetGen's tets (edge ``outer_edge`` m) outside it (module docstring), their boundary
    held to ``surface_tolerance`` (m; None: the default, :func:`fieldgen.meshing.tetgen.moved_off`).
    The interior's faces are RIGID; the outer faces keep their markers."""
    v, f = interior.vertices, interior.faces
    heights = np.asarray(heights, dtype=np.float64)
    k = len(heights) - 1
    # The first mesh's size, foreseen: the prisms, and TetGen's tets outside the band (about 42
    # per cube of the edge: TetGen's mean tet is a fifth of a regular one, fieldgen.sizing.size_field.first_size).
    outside = (signed_volume(surface_vertices, surface_faces) - signed_volume(v, f)
               - interior.area * heights[-1])
    foreseen = PRISMS_PER_TRIANGLE * k * len(f) + 5 * 6 * np.sqrt(2.0) * max(outside, 0.0) / outer_edge ** 3
    if foreseen > MAX_TETS:
        raise BandError(f"the band's first mesh would have about {foreseen:,.0f} tets, more than {MAX_TETS:,} "
                        "(a thin skin over a large part)",
                        fix="give a thicker --skin, or an --edge-length to mesh the cut skin yourself")
    scale = None
    for attempt in range(MESH_ATTEMPTS):
        levels, scale = limited_columns(v, f, interior.normals, heights, scale)
        top = levels[-1]
        try:
            outer = tetgen.tetrahedralize(surface_vertices, surface_faces, markers, core_vertices=top, core_faces=f,
                                          options=tetgen.MeshingOptions(edge_length=outer_edge,
                                                                        radius_edge=outer_radius_edge,
                                                                        surface_tolerance=surface_tolerance),
                                          timeout=OUTER_TIMEOUT)
        except BuildError as error:
            raise BandError(f"TetGen could not mesh outside the band: {error.defect}",
                            fix="report the part; the build cut the skin instead") from None
        points = outer.points
        interface = outer.boundary_faces[outer.boundary_markers == RIGID]
        on_top = np.unique(interface)
        where, weights = _locate(points[on_top], top, f)
        columns = np.einsum("ij,lijd->lid", weights, levels[:, f[where]])         # (k + 1, m, 3)
        n0, m = len(points), len(on_top)
        ids = np.full((k + 1, n0), -1, dtype=np.int64)
        ids[k, on_top] = on_top
        for level in range(k):
            ids[level, on_top] = n0 + level * m + np.arange(m)
        all_points = np.concatenate([points] + [columns[level] for level in range(k)])
        band = np.concatenate([prism_tets(ids[level][interface], ids[level + 1][interface]) for level in range(k)])
        # TetGen winds the interface out of its volume, into the band: each prism is upside down,
        # so every band tet must come out negative; any other is a prism turned inside out. The
        # columns of the band's triangles under it are lowered and the outside meshed again.
        volume = tet_volumes(all_points, band)
        if not np.any(volume >= 0):
            break
        prisms = np.flatnonzero(volume >= 0) % len(interface)
        located = np.full(n0, -1, dtype=np.int64)
        located[on_top] = where
        scale[np.unique(f[located[interface[prisms]].ravel()])] *= LOWERING
    else:
        raise BandError(f"{int(np.sum(volume >= 0))} of the band's {len(band)} tets are inverted or flat",
                        fix="report the part; the build cut the skin instead")
    tets = np.concatenate([outer.tets, orient_positive(all_points, band)])
    faces = boundary_faces_of(tets)
    found, row = find_faces(faces, outer.boundary_faces, len(all_points))
    face_markers = np.full(len(faces), RIGID, dtype=np.int64)
    face_markers[found] = outer.boundary_markers[row[found]]
    # The new faces are the interior's (one under each top triangle), and no top face is left.
    if np.count_nonzero(~found) != len(interface) or np.any(outer.boundary_markers[row[found]] == RIGID):
        raise BandError("the band and the tets outside it do not close up",
                        fix="report the part; the build cut the skin instead")
    total = float(tet_volumes(all_points, tets).sum())
    enclosed = signed_volume(all_points, faces)
    if not np.isclose(total, enclosed, rtol=1e-9, atol=0.0):
        raise BandError(f"the skin's tets hold {total:.9g} m³ but its boundary encloses {enclosed:.9g} m³ "
                        "(tets overlap)", fix="report the part; the build cut the skin instead")
    return Band(mesh=TetMesh(points=all_points, tets=tets, boundary_faces=faces, boundary_markers=face_markers),
                heights=np.asarray(heights, dtype=np.float64), lowered=int(np.count_nonzero(scale < 1.0)),
                outer_tets=int(outer.n_tets), band_tets=int(len(band)), columns=ids[:, on_top], outer=outer)


def aligned_columns(mesh: TetMesh, columns: np.ndarray, extent: np.ndarray, targets: np.ndarray) -> tuple[TetMesh, int]:
    """``mesh`` with each column's inner points slid along it to where the solved ``extent``
    (interpolated linearly between the column's points) takes the ``targets`` (the levels its
    heights stand for; the first, on the interior, and the last, the band's top, stay): near
    the interior's round creases ``e`` falls faster than ``1 − s/T`` and the layers would straddle
    the law's levels. A column whose ``e`` does not fall monotonically stays; so does any whose
    move would turn a tet inside out (checked until none does). Returns the mesh and how many
    columns moved. The mesh is the band's, or a refinement of it by splitting (which keeps its
    vertices' numbers, so the columns' ids)."""
    points = np.array(mesh.points, dtype=np.float64)
    column_points = points[columns]                       # (k + 1, m, 3)
    values = np.asarray(extent, dtype=np.float64)[columns]
    k = len(columns) - 1
    moved = column_points.copy()
    falling = np.all(np.diff(values, axis=0) < 0, axis=0)
    for j in range(1, k):
        target = targets[j]
        done = np.zeros(values.shape[1], dtype=bool)
        for i in range(k):
            inside = falling & ~done & (values[i] >= target) & (values[i + 1] < target)
            t = (values[i, inside] - target) / (values[i, inside] - values[i + 1, inside])
            moved[j, inside] = column_points[i, inside] + t[:, None] * (column_points[i + 1, inside] - column_points[i, inside])
            done |= inside
    keep = falling.copy()
    tets = np.asarray(mesh.tets)
    for _ in range(LIMITER_ROUNDS):
        trial = points.copy()
        trial[columns[1:k][:, keep].ravel()] = moved[1:k][:, keep].reshape(-1, 3)
        touched = np.zeros(len(points), dtype=bool)
        touched[columns[1:k][:, keep].ravel()] = True
        near = np.flatnonzero(touched[tets].any(axis=1))
        bad = near[tet_volumes(trial, tets[near]) <= 0]
        if not len(bad):
            break
        inverted = np.zeros(len(points), dtype=bool)
        inverted[tets[bad].ravel()] = True
        keep &= ~inverted[columns].any(axis=0)
    else:
        return mesh, 0
    return TetMesh(points=trial, tets=mesh.tets, boundary_faces=mesh.boundary_faces,
                   boundary_markers=mesh.boundary_markers), int(np.count_nonzero(keep))


#: Candidate tets (nearest centroids) searched for a refined vertex's parent, widening in turn;
#: then every tet whose ball about its centroid through its farthest corner holds the vertex (a complete
#: search: a large tet among many small ones can be missed by the nearest centroids). A vertex on a
#: face may lie outside its tet by PARENT_SLACK (barycentric); where round-off puts it farther out
#: of every candidate (a flat tet), the candidate it is least outside of, within PARENT_NEAR.
PARENT_CANDIDATES = (16, 64, 256, 1024)
PARENT_SLACK = 1e-9
PARENT_NEAR = 1e-6
#: Candidate tets examined at a time (bounds the search's temporaries: about 150 bytes each).
PARENT_BATCH = 1 << 20
#: The complete search gives up on a class of tets whose balls would make more candidate pairs
#: than this (about 15 s of work): its vertices stay unfound and the layers are not aligned again.
MAX_BALL_PAIRS = 1 << 23


@dataclass(frozen=True)
class Descendants:
    """Where the vertices a refinement by bisection added lie in the mesh it refined (``parent``:
    that mesh's tet holding each, ``weights``: their barycentric coordinates there; -1 and 0 for
    one not found), vertices ``n_first`` onwards."""

    n_first: int
    parent: np.ndarray           # (m,)
    weights: np.ndarray          # (m, 4)


def descendants(first: TetMesh, mesh: TetMesh) -> Descendants:
    """The tets of ``first`` holding the vertices ``mesh`` (a refinement of ``first`` by splitting,
    which keeps ``first``'s vertices and numbers) added to it, by their barycentric coordinates:
    among the tets of nearest centroids (:data:`PARENT_CANDIDATES`), then among all whose
    centroid is within their own radius (largest centroid-to-corner distance) of the vertex."""
    n_first = first.n_points
    corners = np.asarray(first.points, dtype=np.float64)[np.asarray(first.tets)]       # (t, 4, 3)
    query = np.asarray(mesh.points[n_first:], dtype=np.float64)
    parent, weights = np.full(len(query), -1, dtype=np.int64), np.zeros((len(query), 4))
    if not len(query):
        return Descendants(n_first, parent, weights)
    centroids = corners.mean(axis=1)
    tree = cKDTree(centroids)
    for k in PARENT_CANDIDATES:
        todo = np.flatnonzero(parent < 0)
        if not len(todo):
            break
        k = min(k, len(corners))
        rows = max(1, PARENT_BATCH // k)
        for chunk in (todo[at:at + rows] for at in range(0, len(todo), rows)):
            _find_parents(chunk, query, corners, tree.query(query[chunk], k=k)[1].reshape(len(chunk), k),
                          parent, weights)
    todo = np.flatnonzero(parent < 0)
    if len(todo):
        _search_balls(todo, query, corners, centroids, parent, weights)
    return Descendants(n_first, parent, weights)


def _search_balls(todo: np.ndarray, query: np.ndarray, corners: np.ndarray, centroids: np.ndarray,
                  parent: np.ndarray, weights: np.ndarray) -> None:
    """:func:`descendants`' complete search for the ``todo`` vertices: a tet holds a point only if
    the point is within the tet's largest centroid-to-corner distance (its radius) of its
    centroid. The tets are searched by classes of radius (within a factor 2), so a few large tets
    do not make every vertex a candidate of every small one, and the candidate pairs are taken
    about ``PARENT_BATCH`` at a time. Each vertex keeps the candidate it is least outside of over
    all classes (the first found among equals), if within ``PARENT_NEAR``."""
    radius = np.sqrt(np.max(np.sum((corners - centroids[:, None]) ** 2, axis=-1), axis=1))
    radius = np.maximum(radius, np.finfo(np.float64).tiny) * (1.0 + 1e-9)
    size_class = np.floor(np.log2(radius)).astype(np.int64)
    best = np.full(len(query), -np.inf)
    for value in np.unique(size_class):
        members = np.flatnonzero(size_class == value)
        tree, reach = cKDTree(centroids[members]), float(radius[members].max())
        left = todo[best[todo] < -PARENT_SLACK]            # those inside a tet already are done
        counts = tree.query_ball_point(query[left], r=reach, return_length=True)
        if counts.sum() > MAX_BALL_PAIRS:
            break                # tets overlapping everywhere (a fan of slivers): left unfound
        for rows in _pair_batches(left, counts):
            balls = tree.query_ball_point(query[rows], r=reach)
            row = np.repeat(rows, [len(found) for found in balls])
            tet = members[np.fromiter((t for found in balls for t in found), dtype=np.int64, count=len(row))]
            near = np.sum((centroids[tet] - query[row]) ** 2, axis=-1) <= radius[tet] ** 2
            _least_outside(row[near], tet[near], query, corners, best, parent, weights)
    unfound = todo[best[todo] < -PARENT_NEAR]
    parent[unfound], weights[unfound] = -1, 0.0


def _pair_batches(rows: np.ndarray, counts: np.ndarray):
    """``rows`` in consecutive groups of about ``PARENT_BATCH`` candidate pairs (``counts`` per
    row; a row with more is a group of its own)."""
    ends = np.cumsum(counts)
    start = 0
    while start < len(rows):
        base = ends[start - 1] if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, base + PARENT_BATCH, side="right")))
        yield rows[start:stop]
        start = stop


def _least_outside(row: np.ndarray, tet: np.ndarray, query: np.ndarray, corners: np.ndarray, best: np.ndarray,
                   parent: np.ndarray, weights: np.ndarray) -> None:
    """For each vertex ``row`` among the candidate pairs (``row``, ``tet``), the candidate it is
    least outside of (its smallest barycentric weight the largest; the first among equals), kept
    in ``parent`` and ``weights`` where it beats the vertex's ``best`` so far."""
    for at in range(0, len(row), PARENT_BATCH):
        r, t = row[at:at + PARENT_BATCH], tet[at:at + PARENT_BATCH]
        lam = tet_barycentric(corners, query[r, None, :], t)[:, 0, :]                  # (c, 4)
        least = np.nan_to_num(lam.min(axis=-1), nan=-np.inf)
        order = np.lexsort((-least, r))              # by vertex, then the least outside first
        pick = order[np.flatnonzero(np.r_[True, r[order][1:] != r[order][:-1]])]
        better = least[pick] > best[r[pick]]
        pick = pick[better]
        best[r[pick]] = least[pick]
        parent[r[pick]] = t[pick]
        weights[r[pick]] = lam[pick]


def _find_parents(rows: np.ndarray, query: np.ndarray, corners: np.ndarray, candidates: np.ndarray,
                  parent: np.ndarray, weights: np.ndarray) -> None:
    """For each of the ``query`` points ``rows``, the first of its ``candidates`` tets holding it
    (barycentric weights ``>= -PARENT_SLACK``) written into ``parent`` and ``weights``."""
    lam = tet_barycentric(corners, query[rows, None, None, :], candidates)[..., 0, :]   # (m, k, 4)
    inside = lam.min(axis=-1) >= -PARENT_SLACK                 # False for a flat tet's NaN weights
    hit = inside.any(axis=1)
    pick = np.argmax(inside, axis=1)
    parent[rows[hit]] = candidates[hit, pick[hit]]
    weights[rows[hit]] = lam[hit, pick[hit]]


def realigned(mesh: TetMesh, columns: np.ndarray, extent: np.ndarray, targets: np.ndarray,
              base: TetMesh, found: Descendants) -> tuple[TetMesh, int]:
    """``mesh`` (a refinement by splitting of the band's aligned mesh ``base``, its added vertices
    ``found`` in ``base``'s tets) with the columns slid onto the levels of its solved ``extent``
    and every added vertex moved by the columns' displacement interpolated linearly in its parent
    tet, so that a vertex bisection put on a layer stays on it; and how many columns moved. The
    columns' limiter (:func:`aligned_columns`) checks ``base``'s tets at the mesh's positions:
    each tet of the refinement is an affine image of part of one of them, so it stays positive
    when they do. ``mesh`` itself where a tet would turn inside out all the same, or a vertex the
    refinement added was not found in a parent."""
    n_first = found.n_first
    coarse = TetMesh(points=mesh.points[:n_first], tets=base.tets, boundary_faces=base.boundary_faces,
                     boundary_markers=base.boundary_markers)
    slid, moved = aligned_columns(coarse, columns, np.asarray(extent)[:n_first], targets)
    if not moved or np.any(found.parent < 0):
        return mesh, 0
    shift = np.zeros_like(mesh.points)
    shift[:n_first] = slid.points - mesh.points[:n_first]
    shift[n_first:] = np.einsum("ij,ijk->ik", found.weights, shift[:n_first][np.asarray(base.tets)[found.parent]])
    points = mesh.points + shift
    if np.any(tet_volumes(points, mesh.tets) <= 0.0):
        return mesh, 0
    return TetMesh(points=points, tets=mesh.tets, boundary_faces=mesh.boundary_faces,
                   boundary_markers=mesh.boundary_markers), moved
