"""A thin plate that is a right prism, meshed in layers (docs/model.md §2.10, "Thin walls").

Across a free plate of thickness t the extent is a parabola (about 10 P1 elements across for
1 %), and near its side faces it falls to 0 within about t/π, so the field bends across the
plate everywhere and, near the sides, across the sides too. A plate whose surface is the
extrusion of a plane region along its thin axis (every vertex on one of two planes across the
axis, every face on them or parallel to the axis) gets a first mesh that is already thin where
the field bends: its bottom region is triangulated by MMG2D (``mmgpy``) under a metric of edges
``EDGE_AT_RIM`` t across the region's outline, growing by ``GRADING`` per unit distance, and
``EDGE_ALONG`` t along the outline and inside (the outline itself split by us, finer at its
corners, and kept exactly; triangles in its holes dropped); the triangles are extruded in
``LAYERS`` equal layers, each prism split into three tets with diagonals from a lower-numbered
bottom vertex to a higher-numbered top vertex (the same on both prisms sharing a side, so the
mesh conforms). A section too fine for the tet budget is made again with every size scaled up.
Chosen from measurements (docs/design/sizing.md, "Thin walls").
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from fieldgen.errors import MesherCrash
from fieldgen.meshing.ftetwild import classify_boundary
from fieldgen.meshing.mmg import MmgFailure, remesh as run_mmg, scaled_metric, set_metric, unit_scale
from fieldgen.meshing.tetmesh import TetMesh, boundary_faces_of, orient_positive, tet_volumes
from fieldgen.sizing.segments import along_segments
from fieldgen.surface.topology import boundary_edges, compacted, face_areas, unit_normals

#: Layers of tets across the plate, and the section's edges in plate thicknesses: across the
#: outline at the outline, along it and inside, and the growth of the edge across per unit
#: distance from the outline (docs/design/sizing.md, "Thin walls").
LAYERS = 11
EDGE_AT_RIM = 0.15
EDGE_ALONG = 3.0
GRADING = 0.5
#: Remeshing rounds under the graded metric (each reads the metric at the last round's vertices).
ROUNDS = 2
#: The share of the tet budget a layered first mesh may take (the passes refine with the rest).
BUDGET_SHARE = 0.6
#: An outline vertex where it turns by more than this (degrees) is a corner (:func:`split_outline`).
CORNER = 20.0
#: The outline's edges, in plate thicknesses, away from corners (:func:`split_outline`).
OUTLINE_EDGE = 0.3
#: Relative tolerance of the prism test (planes, parallel sides, areas and volume).
PRISM_TOLERANCE = 1e-7


def prism_section(vertices: np.ndarray, faces: np.ndarray, axis, split_sides: bool = False) -> tuple | None:
    """The plate's bottom region as (2-D points, triangles, outline edges), its two levels along
    ``axis`` and the in-plane basis (2, 3), when the surface is a right prism along ``axis``;
    None otherwise. With ``split_sides`` the side faces may have vertices between the levels."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    axis = np.asarray(axis, dtype=np.float64)
    level = vertices @ axis
    low, high = float(level.min()), float(level.max())
    thickness = high - low
    tolerance = PRISM_TOLERANCE * float(np.ptp(vertices, axis=0).max())
    at_low, at_high = np.abs(level - low) <= tolerance, np.abs(level - high) <= tolerance
    if thickness <= 0 or not (split_sides or np.all(at_low | at_high)):
        return None
    bottom, top = at_low[faces].all(axis=1), at_high[faces].all(axis=1)
    side = ~bottom & ~top
    if np.any(np.abs(unit_normals(vertices, faces[side]) @ axis) > PRISM_TOLERANCE ** 0.5):
        return None
    area = face_areas(vertices, faces)
    volume = abs(float(np.einsum("ij,ij->i", vertices[faces[:, 0]],
                                 np.cross(vertices[faces[:, 1]], vertices[faces[:, 2]])).sum())) / 6.0
    base = float(area[bottom].sum())
    if abs(base - area[top].sum()) > 1e-6 * base or abs(volume - base * thickness) > 1e-6 * volume:
        return None
    u = np.eye(3)[int(np.argmin(np.abs(axis)))]
    u = u - (u @ axis) * axis
    u /= np.linalg.norm(u)
    basis = np.stack([u, np.cross(axis, u)])
    points, triangles, outline = flat_region(vertices, faces[bottom], basis)
    return points, triangles, outline, (low, high), basis


def flat_region(vertices: np.ndarray, faces: np.ndarray, basis: np.ndarray):
    """A flat region's points (2-D, in ``basis``), its triangles on them and its outline's edges
    (the triangles' edges used once)."""
    used, triangles = np.unique(faces, return_inverse=True)
    triangles = triangles.reshape(-1, 3)
    outline = np.sort(boundary_edges(triangles)[0], axis=1)
    return vertices[used] @ basis.T, triangles, outline[np.lexsort((outline[:, 1], outline[:, 0]))]


def graded_metric(points: np.ndarray, outline_points: np.ndarray, outline: np.ndarray,
                  thickness: float) -> np.ndarray:
    """MMG2D's (n, 3) metric (m11, m12, m22) at ``points``: edges ``EDGE_AT_RIM`` x
    ``thickness`` across the outline (towards the foot of the point on the nearest segment, found
    through points sampled along the outline), growing by
    ``GRADING`` per unit distance up to ``EDGE_ALONG`` x ``thickness``, which is the edge along."""
    rim, along = EDGE_AT_RIM * thickness, EDGE_ALONG * thickness
    a, b = outline_points[outline[:, 0]], outline_points[outline[:, 1]]
    samples, of_sample = along_segments(a, b, 0.5 * rim)
    _, nearest = cKDTree(samples).query(points)
    segment = of_sample[nearest]                                       # then the point's foot on it
    start, run = a[segment], (b - a)[segment]
    share = np.clip(np.einsum("ij,ij->i", points - start, run) / np.einsum("ij,ij->i", run, run), 0.0, 1.0)
    direction = points - (start + share[:, None] * run)
    distance = np.linalg.norm(direction, axis=1)
    across = np.minimum(along, rim + GRADING * distance)
    length = np.linalg.norm(direction, axis=1)
    direction = np.divide(direction, length[:, None], out=np.zeros_like(direction), where=length[:, None] > 0)
    iso = 1.0 / along ** 2
    stretch = 1.0 / across ** 2 - iso
    metric = stretch[:, None, None] * direction[:, :, None] * direction[:, None, :] + iso * np.eye(2)
    metric[length <= 0] = np.eye(2) / rim ** 2
    return np.stack([metric[:, 0, 0], metric[:, 0, 1], metric[:, 1, 1]], axis=1)


def mmg2d(points, triangles, edges, metric):
    """MMG2D under ``metric`` (a size per point, or (n, 3) tensors) with ``edges`` required (so
    the outline is kept exactly); with no ``triangles``, MMG2D meshes the region they bound.
    MMG2D runs on the points moved and scaled to about 1 across (and the metric with them): on a
    section 48 mm across given in metres it made another triangulation of the same count whose
    extent was estimated 4.9 % off against 0.58 % (docs/design/sizing.md, "Thin walls")."""
    centre, size = unit_scale(points)
    plane, triangles, edges = _mmg2d_unit((points - centre) / size, triangles, edges, scaled_metric(metric, size))
    plane = plane * size + centre
    gap, nearest = cKDTree(points).query(plane)
    given = gap <= 1e-12 * size                 # the given points back exactly, not to the last bit
    plane[given] = points[nearest[given]]
    return plane, triangles, edges


def _mmg2d_unit(points, triangles, edges, metric):
    """:func:`mmg2d` on points about 1 across."""
    import mmgpy  # lazy: heavy, and only thin prisms' sections are meshed in 2-D

    mesh = mmgpy.MmgMesh2D()
    mesh.set_mesh_size(vertices=len(points), triangles=len(triangles), edges=len(edges))
    mesh.set_vertices(np.ascontiguousarray(points, dtype=np.float64))
    if len(triangles):
        mesh.set_triangles(np.ascontiguousarray(triangles, dtype=np.int32))
    mesh.set_edges(np.ascontiguousarray(edges, dtype=np.int32), refs=np.ones(len(edges), dtype=np.int32))
    mesh.set_required_edges(np.arange(len(edges), dtype=np.int32))
    set_metric(mesh, metric)
    try:
        run_mmg(mesh, hgrad=1.0 + GRADING, verbose=-1)
    except MmgFailure as error:
        raise MesherCrash(f"MMG2D could not mesh the prism's section ({error})",
                          fix="give --edge-length to mesh with a uniform edge") from None
    return (np.asarray(mesh.get_vertices(), dtype=np.float64), np.asarray(mesh.get_triangles(), dtype=np.int64),
            np.asarray(mesh.get_edges(), dtype=np.int64))


def split_outline(points: np.ndarray, outline: np.ndarray, rim: float, along: float):
    """The outline's segments split into pieces of ``rim`` at a corner (an end where the outline
    turns by more than ``CORNER`` degrees), growing by ``GRADING`` per unit distance from it up to
    ``along``: (points, edges), the given points first."""
    direction = points[outline[:, 1]] - points[outline[:, 0]]
    length = np.linalg.norm(direction, axis=1)
    # the turn at each vertex between its two segments (a vertex of another count is a corner)
    ends = outline.ravel()
    order = np.argsort(ends, kind="stable")
    vertex, first, count = np.unique(ends[order], return_index=True, return_counts=True)
    corner = np.zeros(len(points), dtype=bool)
    corner[vertex[count != 2]] = True
    two = count == 2
    one, other = order[first[two]] // 2, order[first[two] + 1] // 2
    at = vertex[two]
    towards = [(points[outline[e].sum(axis=1) - at] - points[at]) for e in (one, other)]   # to the far ends
    cosine = np.einsum("ij,ij->i", *towards) / (np.linalg.norm(towards[0], axis=1) * np.linalg.norm(towards[1], axis=1))
    corner[at] = np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))) < 180.0 - CORNER   # 180°: straight on
    new_points, edges, count = [points], [], len(points)
    for (i, j), run, size in zip(outline, direction, length):
        spots = graded_spots(size, 0.0 if corner[i] else np.inf, 0.0 if corner[j] else np.inf, rim, along)
        ids = [int(i)] + list(range(count, count + len(spots))) + [int(j)]
        new_points.append(points[i] + np.outer(np.asarray(spots) / size, run).reshape(-1, 2))
        count += len(spots)
        edges += list(zip(ids[:-1], ids[1:]))
    return np.concatenate(new_points), np.asarray(edges, dtype=np.int64)


def graded_spots(size: float, start: float, end: float, rim: float, along: float,
                 grading: float = GRADING) -> list[float]:
    """Where to split a segment of length ``size`` whose ends lie ``start`` and ``end`` from the
    nearest corner (``inf``: none): pieces of ``rim`` at a corner, growing by ``grading`` per
    unit distance from it, up to ``along``; the distances from the segment's start."""
    reach, spots = 0.0, []
    while True:
        near = min(start + reach, end + size - reach)
        step = min(along, rim + grading * near)
        reach += step
        if reach >= size - 0.5 * step:
            return spots
        spots.append(reach)


def inside_outline(query: np.ndarray, points: np.ndarray, outline: np.ndarray) -> np.ndarray:
    """Which ``query`` points (2-D) lie inside the region the ``outline`` segments bound (holes
    outside): an odd number of segments crossed by a ray in +x (chunked, numpy)."""
    a, b = points[outline[:, 0]], points[outline[:, 1]]
    inside = np.zeros(len(query), dtype=bool)
    for start in range(0, len(query), 2048):
        q = query[start:start + 2048, None, :]
        straddles = (a[None, :, 1] > q[..., 1]) != (b[None, :, 1] > q[..., 1])
        with np.errstate(divide="ignore", invalid="ignore"):
            x = a[None, :, 0] + (q[..., 1] - a[None, :, 1]) * (b[None, :, 0] - a[None, :, 0]) / (b[None, :, 1] - a[None, :, 1])
        inside[start:start + 2048] = (np.count_nonzero(straddles & (x > q[..., 0]), axis=1) % 2) == 1
    return inside


def graded_section(points: np.ndarray, outline: np.ndarray, thickness: float,
                   scale: float = 1.0, split: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The region bounded by ``outline`` triangulated by MMG2D: the outline split
    (:func:`split_outline`; as given without ``split``) and kept, the region meshed at
    ``EDGE_ALONG`` x ``thickness`` (the triangles outside the region, in its holes, dropped:
    :func:`inside_outline`), then remeshed ``ROUNDS`` times under :func:`graded_metric`. Every size
    scales with ``thickness`` (times ``scale``)."""
    size = thickness * scale
    rim, along = EDGE_AT_RIM * size, EDGE_ALONG * size
    boundary, edges = split_outline(points, outline, rim, OUTLINE_EDGE * size) if split else (points, outline)
    mesh = mmg2d(boundary, np.empty((0, 3), dtype=np.int64), edges, np.full(len(boundary), along))
    inside = inside_outline(mesh[0][mesh[1]].mean(axis=1), points, outline)   # MMG2D fills holes
    mesh = (mesh[0], mesh[1][inside], mesh[2])
    for _ in range(ROUNDS):
        mesh = mmg2d(*mesh, graded_metric(mesh[0], points, outline, size))
    return compacted(mesh[0], mesh[1])      # no point left over from the holes


def extruded(points: np.ndarray, triangles: np.ndarray, basis: np.ndarray, axis,
             heights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """3-D points and positive tets of the 2-D triangulation extruded along ``axis`` through the
    increasing ``heights`` (a layer between each two; three tets a prism)."""
    plane = points @ basis
    xyz = np.concatenate([plane + h * np.asarray(axis, dtype=np.float64) for h in heights])
    return xyz, orient_positive(xyz, prism_tets(triangles, len(points), len(heights) - 1))


def prism_tets(triangles: np.ndarray, count: int, layers: int) -> np.ndarray:
    """The tets of ``triangles`` (on ``count`` points a layer, the points numbered layer by layer)
    stacked through ``layers`` layers: three a prism, each diagonal from a lower-numbered bottom
    vertex to a higher-numbered top vertex, so two prisms sharing a side split it alike and the
    mesh conforms. Not oriented."""
    a, b, c = np.sort(triangles, axis=1).T
    tets = []
    for j in range(layers):
        lo, hi = j * count, (j + 1) * count
        tets += [np.stack([a + lo, b + lo, c + lo, c + hi], axis=1), np.stack([a + lo, b + lo, b + hi, c + hi], axis=1),
                 np.stack([a + lo, a + hi, b + hi, c + hi], axis=1)]
    return np.concatenate(tets)


def layered_plate(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray, axis,
                  max_tets: int | None = None) -> TetMesh | None:
    """A right-prism plate's layered mesh (module docstring), each boundary face taking the
    condition of the input face nearest to it; None if the surface is not a right prism along
    ``axis`` or the mesh does not fill its volume. A section whose prisms would pass
    ``BUDGET_SHARE`` of ``max_tets`` is made again with every size scaled up to fit (once)."""
    section = prism_section(vertices, faces, axis)
    if section is None:
        return None
    points, triangles, outline, levels, basis = section
    plane, triangles = graded_section(points, outline, levels[1] - levels[0])
    wanted = None if max_tets is None else BUDGET_SHARE * max_tets
    if wanted is not None and 3 * LAYERS * len(triangles) > wanted:
        scale = 3 * LAYERS * len(triangles) / wanted     # the band along the outline: count ∝ 1/size
        plane, triangles = graded_section(points, outline, levels[1] - levels[0], scale)
    xyz, tets = extruded(plane, triangles, basis, axis, np.linspace(levels[0], levels[1], LAYERS + 1))
    base = float(face_areas(np.column_stack([points, np.zeros(len(points))]), section[1]).sum())
    return filled_prism(xyz, tets, base * (levels[1] - levels[0]), vertices, faces, markers)


def filled_prism(xyz: np.ndarray, tets: np.ndarray, volume: float, vertices, faces, markers) -> TetMesh | None:
    """The extruded mesh with each boundary face's condition from the nearest input face; None
    when a tet is flat or the tets do not fill the prism's ``volume``."""
    volumes = np.abs(tet_volumes(xyz, tets))
    if volumes.min() <= 0 or abs(volumes.sum() - volume) > 1e-6 * volumes.sum():
        return None
    boundary = boundary_faces_of(tets)
    conditions = classify_boundary(xyz, boundary, vertices, faces, markers)
    return TetMesh(points=xyz, tets=tets, boundary_faces=boundary, boundary_markers=conditions)
