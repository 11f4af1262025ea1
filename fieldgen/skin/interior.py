"""The rigid interior under a skin, rounded, as a clean triangle surface (docs/model.md §2.2).

Under ``--skin T`` everything deeper than ``T`` below the free faces is rigid. Taken literally that
interior has sharp creases (where two free faces are equally near) and can be a sheet thinner than
any mesh, and ``e`` is singular along its creases. The build's layer band (:mod:`fieldgen.skin.band`)
grows prisms out of the interior's surface, which needs that surface smooth, so the interior is
rounded: it is the part deeper than ``T + ρ`` (``E``), grown back by ``ρ`` (the opening of the
``depth ≥ T`` region by a ball of radius ``ρ = ROUNDING · T``). Under flat faces this is exactly
depth ``T``; its creases become round with radius ``ρ``, and rigid sheets thinner than ``2ρ`` are
left out (they are skin).

Every point of ``E``'s boundary has the free surface at distance ``T + ρ``, with no point of
``E`` in between, so the rounded surface's outward normal lines reach ``T`` without crossing
(the band's columns run along them).

The surface is made in four steps, each deterministic:

1. the depth on a grid of spacing ``GRID · T`` (exact, by VTK's distance to the free faces, only
   near the levels that matter; elsewhere from a grid four times coarser), and ``E``'s boundary
   ``Σ`` as its iso-surface at ``T + ρ`` (VTK's flying edges) with its vertices moved onto that
   depth exactly;
2. the distance to ``Σ`` near the interior's surface, and that surface as its iso-surface at ``ρ``
   (pieces of less area than half a sphere of radius ``ρ`` are the grid's artefacts and are dropped);
3. its vertices moved onto the rounded surface exactly (``y + ρ (x − y)/|x − y|``, ``y`` the
   point of ``Σ`` nearest to ``x``), then remeshed by MMGS (the ``mmgpy`` package: MMG's surface
   remesher, LGPL) to an edge of about ``EDGE · T`` (finer where the surface bends: Hausdorff
   distance ``HAUSDORFF · T``), and moved onto the rounded surface again;
4. wound out of the interior, with unit vertex normals (angle-weighted, smoothed
   ``NORMAL_SMOOTHING`` times) for the band's columns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rtree import index

from fieldgen.errors import BuildError
from fieldgen.io.vtk_data import distance_field, closest_points_on_triangles, distance_to_triangles
from fieldgen.meshing.mmg import MmgFailure, remeshed_surface
from fieldgen.surface.components import vertex_pieces
from fieldgen.surface.topology import compacted, edge_use, face_areas

#: The interior's creases are rounded with radius ROUNDING x the skin thickness, and rigid sheets
#: thinner than twice that are skin (module docstring).
ROUNDING = 0.25
#: Grid spacing of the depth field, x the skin thickness.
GRID = 0.2
#: The depth grid's nodes at most (about 100 bytes each in its arrays): a 200 mm cube under a
#: 3 mm skin would have 37M.
MAX_GRID_NODES = 8_000_000
#: A grid past that many nodes is made coarser to fit, by at most this factor of its spacing
#: (a 215 mm bottle under a 2 mm skin: 19.3M nodes at 0.2 T, 1.4 x coarser fits; the cut it fell
#: back to made 7.9M tets and 7.4 GB, the band 3.1M and 4.8 GB: docs/design/skin.md); past it the
#: band is refused.
MAX_GRID_COARSENING = 1.5
#: The grid's origin is this fraction of its spacing off the part's box (see _depth_grid).
GRID_SHIFT = 0.318
#: The surface's edge and Hausdorff distance to the rounded surface, x the skin thickness.
EDGE = 1.0
HAUSDORFF = 0.15
#: A piece of the interior of area A is remeshed with edges of at most PIECE_EDGE x sqrt(A).
PIECE_EDGE = 0.2
#: Times the surface is remeshed with half the edge when it crosses itself (a thin wall of the
#: interior, thinner than the triangles).
REFINEMENTS = 2
#: Rounds of averaging the vertex normals over their neighbours (the columns' directions).
NORMAL_SMOOTHING = 5


class InteriorError(BuildError):
    """The rounded interior could not be made (the build then cuts the skin as before)."""


@dataclass
class Interior:
    """The rounded rigid interior's surface (m): faces wound out of the interior."""

    vertices: np.ndarray     # (n, 3)
    faces: np.ndarray        # (f, 3)
    normals: np.ndarray      # (n, 3) unit, out of the interior, smoothed
    thickness: float         # the skin thickness T
    rounding: float          # ρ (m)
    max_depth: float         # the part's deepest point below its free faces (at the grid's nodes), m
    coarser: float = 1.0     # the surface's edge / the one asked: above 1 for max_triangles, below for thin walls

    @property
    def area(self) -> float:
        return float(face_areas(self.vertices, self.faces).sum())


def rounded_interior(vertices: np.ndarray, faces: np.ndarray, thickness: float, *,
                     rounding: float = ROUNDING, grid: float = GRID, edge: float = EDGE,
                     hausdorff: float = HAUSDORFF, max_triangles: int | None = None) -> Interior:
    """The rounded interior (module docstring) of the closed surface ``vertices``/``faces`` (m,
    wound outward, every face free) under a skin of ``thickness`` m; ``rounding``, ``grid``,
    ``edge`` and ``hausdorff`` are fractions of it. With more than ``max_triangles`` triangles the
    surface is remeshed coarser (edge and Hausdorff distance alike, up to three times): a thin skin
    over a large part. InteriorError when there is none (the part is skin throughout) or a step
    fails."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    T = float(thickness)
    rho = rounding * T
    g = _grid_spacing(vertices, grid * T)
    origin, shape, depth = _depth_grid(vertices, faces, g, low=T - 2 * g, high=T + rho + 2 * g)
    sigma_v, sigma_f = _iso_surface(depth, origin, g, shape, T + rho)
    if not len(sigma_f):
        raise InteriorError(f"no point of the part is deeper than {T + rho:.4g} m below its free faces",
                            fix="the part is skin throughout: a thinner --skin leaves a rigid interior")
    for _ in range(2):      # onto depth T + ρ exactly, along the line to the nearest surface point
        q, distance = closest_points_on_triangles(sigma_v, vertices, faces)
        sigma_v = q + (sigma_v - q) * ((T + rho) / np.maximum(distance, 1e-300))[:, None]
    # Signed distance to E (negative inside) where the rounded surface can be; elsewhere its sign.
    points = _grid_points(origin, shape, g)
    near = (depth >= T - 2 * g) & (depth <= T + rho + 2 * g)
    signed = T + rho - depth
    signed[near] = distance_to_triangles(points[near], sigma_v, sigma_f) * np.where(depth[near] > T + rho, -1.0, 1.0)
    raw_v, raw_f = _iso_surface(signed, origin, g, shape, rho)
    raw_v, raw_f = _large_pieces(raw_v, raw_f, 2.0 * math.pi * rho * rho)
    if not len(raw_f):
        raise InteriorError("the rigid interior is thinner than its rounding everywhere",
                            fix="the part is skin nearly throughout: a thinner --skin leaves a rigid interior")
    raw_v = _onto_rounded(raw_v, sigma_v, sigma_f, rho)
    coarser = 1.0
    for attempt in range(REFINEMENTS + 1):
        v, f = _remeshed(raw_v, raw_f, coarser * edge * T, coarser * hausdorff * T)
        v = _onto_rounded(v, sigma_v, sigma_f, rho)
        if not len(self_intersecting(v, f)):
            break
        if attempt < REFINEMENTS:
            coarser *= 0.5     # triangles wider than a thin wall of the interior cross it: finer
    else:
        raise InteriorError(f"the interior's surface crosses itself even with triangles of {coarser * edge * T:.3g} m",
                            fix="report the part; the build cut the skin instead")
    for _ in range(3):
        if max_triangles is None or len(f) <= max_triangles:
            break
        if coarser < 1.0:
            break
        factor = coarser * 1.05 * math.sqrt(len(f) / max_triangles)
        cv, cf = _remeshed(raw_v, raw_f, factor * edge * T, factor * hausdorff * T)
        cv = _onto_rounded(cv, sigma_v, sigma_f, rho)
        if len(self_intersecting(cv, cf)):     # too coarse for a thin wall of the interior: keep the finer
            break
        v, f, coarser = cv, cf, factor
    v, f = _outward(v, f)
    normals = _facing(_smoothed(vertex_normals(v, f), f, NORMAL_SMOOTHING), vertex_normals(v, f), v, f)
    return Interior(vertices=v, faces=f, normals=normals, thickness=T, rounding=rho, max_depth=float(depth.max()),
                    coarser=coarser)


# ------------------------------------------------------------------ grid and iso-surfaces

def _grid_points(origin, shape, g):
    """The grid's nodes, x fastest (VTK's image order)."""
    axes = [origin[i] + g * np.arange(shape[i]) for i in range(3)]
    z, y, x = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    return np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1)


def _signed_depth(points, vertices, faces):
    """Distance to the closed surface, positive inside (VTK's signed distance is negative there)."""
    from vtkmodules.util.numpy_support import numpy_to_vtk, vtk_to_numpy  # lazy: heavy (VTK)
    from vtkmodules.vtkCommonCore import vtkDoubleArray  # lazy: heavy (VTK)

    values = vtkDoubleArray()
    distance_field(vertices, faces).FunctionValue(numpy_to_vtk(np.ascontiguousarray(points), deep=True), values)
    return -vtk_to_numpy(values).astype(np.float64)


def _grid_nodes(vertices, g: float) -> int:
    """The nodes of :func:`_depth_grid`'s grid of spacing ``g`` over ``vertices``."""
    lo = vertices.min(axis=0) - (2 + GRID_SHIFT) * g
    hi = vertices.max(axis=0) + 2 * g
    return math.prod(int(math.ceil((hi[i] - lo[i]) / g)) + 1 for i in range(3))


def _grid_spacing(vertices, g: float) -> float:
    """``g``, or a spacing up to ``MAX_GRID_COARSENING`` times coarser whose grid holds at most
    ``MAX_GRID_NODES`` nodes; ``g`` when none does (:func:`_depth_grid` then refuses it)."""
    spacing = g
    for _ in range(8):
        nodes = _grid_nodes(vertices, spacing)
        if nodes <= MAX_GRID_NODES:
            return spacing
        spacing *= 1.001 * (nodes / MAX_GRID_NODES) ** (1.0 / 3.0)
        if spacing > MAX_GRID_COARSENING * g:
            return g
    return g


def _depth_grid(vertices, faces, g, *, low, high):
    """Signed depth on a grid of spacing ``g`` over the surface's box (two cells of margin):
    exact where it may lie in [low, high], else interpolated from a grid four times coarser (its
    error is below that grid's cell diagonal, depth being 1-Lipschitz)."""
    from scipy.ndimage import map_coordinates  # lazy: heavy, and only the band skin needs it

    # The grid is shifted off the part's own coordinates by an odd fraction of its spacing: CAD
    # faces at round coordinates put the iso-surfaces through the nodes otherwise, and the
    # degenerate triangles there make MMGS refine (docs/design/skin.md).
    lo = vertices.min(axis=0) - (2 + GRID_SHIFT) * g
    hi = vertices.max(axis=0) + 2 * g
    shape = tuple(int(math.ceil((hi[i] - lo[i]) / g)) + 1 for i in range(3))
    nodes = math.prod(shape)
    if nodes > MAX_GRID_NODES:
        raise InteriorError(f"the depth grid would have {nodes:,} nodes, more than {MAX_GRID_NODES:,} (a thin skin "
                            "over a large part)", fix="give a thicker --skin, or --skin-mesh cut")
    coarse_shape = tuple((n + 3) // 4 + 1 for n in shape)
    coarse = _signed_depth(_grid_points(lo, coarse_shape, 4 * g), vertices, faces).reshape(coarse_shape[::-1])
    fine = _grid_points(lo, shape, g)
    index = (fine - lo) / (4 * g)
    depth = map_coordinates(coarse, [index[:, 2], index[:, 1], index[:, 0]], order=1, mode="nearest")
    margin = math.sqrt(3.0) * 4 * g
    exact = (depth >= low - margin) & (depth <= high + margin)
    depth[exact] = _signed_depth(fine[exact], vertices, faces)
    return lo, shape, depth


def _iso_surface(values, origin, g, shape, level):
    """The iso-surface ``values = level`` of a grid field (VTK's flying edges), cleaned: duplicate
    points merged, degenerate triangles dropped."""
    from vtkmodules.util.numpy_support import numpy_to_vtk, vtk_to_numpy  # lazy: heavy (VTK)
    from vtkmodules.vtkCommonDataModel import vtkImageData  # lazy: heavy (VTK)
    from vtkmodules.vtkFiltersCore import vtkFlyingEdges3D  # lazy: heavy (VTK)

    image = vtkImageData()
    image.SetDimensions(*shape)
    image.SetOrigin(*[float(x) for x in origin])
    image.SetSpacing(g, g, g)
    image.GetPointData().SetScalars(numpy_to_vtk(np.ascontiguousarray(values, dtype=np.float64), deep=True))
    contour = vtkFlyingEdges3D()
    contour.SetInputData(image)
    contour.SetValue(0, float(level))
    contour.ComputeNormalsOff()
    contour.ComputeGradientsOff()
    contour.ComputeScalarsOff()
    contour.Update()
    out = contour.GetOutput()
    if out.GetNumberOfPoints() == 0:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    points = vtk_to_numpy(out.GetPoints().GetData()).astype(np.float64)
    triangles = vtk_to_numpy(out.GetPolys().GetConnectivityArray()).reshape(-1, 3).astype(np.int64)
    return _cleaned(points, triangles)


def _cleaned(points, triangles):
    """Merge points closer than 1e-9 of the surface's size (an iso-surface through a grid node
    repeats it), drop the triangles that then repeat a vertex, and the unused points."""
    if not len(triangles):
        return points, triangles
    quantum = 1e-9 * float(np.ptp(points, axis=0).max())
    _, first, inverse = np.unique(np.round(points / quantum), axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)                      # keep the points' first-seen order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    points = points[first[order]]
    triangles = rank[inverse.ravel()[triangles]]
    keep = (triangles[:, 0] != triangles[:, 1]) & (triangles[:, 1] != triangles[:, 2]) & \
           (triangles[:, 2] != triangles[:, 0])
    return compacted(points, triangles[keep])


def _piece_areas(points, triangles):
    """Each point's connected piece (through shared vertices) and each piece's area."""
    label = vertex_pieces(len(points), triangles)
    area = face_areas(points, triangles)
    return label, np.bincount(label[triangles[:, 0]], weights=area, minlength=label.max() + 1)


def _large_pieces(points, triangles, min_area):
    """The connected pieces (through shared vertices) whose area is at least ``min_area``."""
    if not len(triangles):
        return points, triangles
    label, area = _piece_areas(points, triangles)
    keep = area[label[triangles[:, 0]]] >= min_area
    return compacted(points, triangles[keep])


def _onto_rounded(points, sigma_v, sigma_f, rho):
    """Each point moved to distance ``rho`` from ``Σ`` along the line from its nearest point there."""
    nearest, distance = closest_points_on_triangles(points, sigma_v, sigma_f)
    ok = distance > 1e-12 * rho
    out = np.array(points, dtype=np.float64)
    out[ok] = nearest[ok] + (points[ok] - nearest[ok]) * (rho / distance[ok])[:, None]
    return out


def _remeshed(points, triangles, edge, hausdorff):
    """MMGS's isotropic remeshing at ``edge``, within ``hausdorff`` of the surface."""
    # A small piece of the interior gets edges of at most PIECE_EDGE x the root of its area (a
    # blob a few rounding radii across, meshed at the skin's thickness, had triangles whose
    # vertex normals pointed away from them).
    label, area = _piece_areas(points, triangles)
    size = np.minimum(float(edge), PIECE_EDGE * np.sqrt(area[label]))
    try:     # a stop with a valid mesh is judged by the checks that follow
        made, triangles, _ = remeshed_surface(points, triangles, metric=size, hausd=float(hausdorff), hgrad=1.3,
                                              verbose=-1, angle=0)
    except MmgFailure as error:
        raise InteriorError(f"MMGS could not remesh the interior's surface ({error})",
                            fix="report the part; the build cut the skin instead") from None
    return _cleaned(made, triangles)


def _outward(points, triangles):
    """Wound consistently and out of the interior (each closed piece of positive volume)."""
    import trimesh  # lazy: heavy, and only the band skin needs its winding repair

    mesh = trimesh.Trimesh(points, triangles, process=False)
    trimesh.repair.fix_winding(mesh)
    out = np.array(mesh.faces, dtype=np.int64)
    if not edge_use(out).closed:        # every edge in two triangles: every piece closed
        raise InteriorError("the interior's surface is not closed after remeshing",
                            fix="report the part; the build cut the skin instead")
    # Each piece's signed volume: negative pieces are flipped.
    label = vertex_pieces(len(points), out)[out[:, 0]]
    v = points[out]
    signed = np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])) / 6.0
    flip = np.bincount(label, weights=signed)[label] < 0
    out[flip] = out[flip][:, ::-1]
    return points, out


# ------------------------------------------------------------------ normals

def vertex_normals(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Unit vertex normals, each triangle's normal weighted by its angle at the vertex."""
    v = points[triangles]
    face = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    face /= np.maximum(np.linalg.norm(face, axis=1), 1e-300)[:, None]
    normals = np.zeros_like(points)
    for i in range(3):
        a = v[:, (i + 1) % 3] - v[:, i]
        b = v[:, (i + 2) % 3] - v[:, i]
        cos = np.einsum("ij,ij->i", a, b) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-300)
        np.add.at(normals, triangles[:, i], face * np.arccos(np.clip(cos, -1.0, 1.0))[:, None])
    return normals / np.maximum(np.linalg.norm(normals, axis=1), 1e-300)[:, None]


def _facing(smoothed, plain, points, triangles, least=0.3):
    """The smoothed normals, except at a vertex where one would lean more than about 73° from a
    triangle around it (cosine below ``least``: a fillet meshed with few triangles, where the
    averages turn too far): the angle-weighted normal there, which faces all of them."""
    v = points[triangles]
    face = np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0])
    face /= np.maximum(np.linalg.norm(face, axis=1), 1e-300)[:, None]
    leaning = np.zeros(len(points), dtype=bool)
    for i in range(3):
        leaning[triangles[np.einsum("ij,ij->i", face, smoothed[triangles[:, i]]) < least, i]] = True
    out = smoothed.copy()
    out[leaning] = plain[leaning]
    return out


def _smoothed(normals, triangles, rounds):
    """Each normal averaged with its neighbours' (through triangles) that turn less than 60° from
    it, ``rounds`` times: across a thin wall of the interior the two sides' normals are opposite,
    and averaged they would point along the wall (a prism on it turned inside out)."""
    original = normals
    for _ in range(rounds):
        total = normals.copy()
        for i in range(3):
            for j in range(3):
                if i != j:
                    near = np.einsum("ij,ij->i", original[triangles[:, i]], original[triangles[:, j]]) > 0.5
                    np.add.at(total, triangles[near, i], normals[triangles[near, j]])
        normals = total / np.maximum(np.linalg.norm(total, axis=1), 1e-300)[:, None]
    return normals


# ------------------------------------------------------------------ crossings

def self_intersecting(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Indices of the triangles that an edge of another triangle (sharing no vertex with it)
    passes through: candidates by an R-tree of their boxes, then a segment-triangle test."""
    boxes_lo = vertices[faces].min(axis=1)
    boxes_hi = vertices[faces].max(axis=1)
    pad = 1e-12 * float(np.ptp(vertices, axis=0).max())
    tree = index.Index(((i, (*lo, *hi), None) for i, (lo, hi) in enumerate(zip(boxes_lo - pad, boxes_hi + pad))),
                       properties=index.Property(dimension=3))
    ids, counts = tree.intersection_v(boxes_lo - pad, boxes_hi + pad)
    a = np.repeat(np.arange(len(faces)), np.asarray(counts, dtype=np.int64))
    b = np.asarray(ids, dtype=np.int64)
    keep = a < b
    a, b = a[keep], b[keep]
    shared = (faces[a][:, :, None] == faces[b][:, None, :]).any(axis=(1, 2))
    a, b = a[~shared], b[~shared]
    hit = np.zeros(len(a), dtype=bool)
    for first, second in ((a, b), (b, a)):
        for i in range(3):
            p = vertices[faces[first, i]]
            q = vertices[faces[first, (i + 1) % 3]]
            hit |= _segment_hits_triangle(p, q, vertices[faces[second]])
    return np.unique(np.concatenate([a[hit], b[hit]]))


def _segment_hits_triangle(p, q, tri):
    """Whether segment pq crosses triangle tri (rows), Möller and Trumbore's test."""
    d = q - p
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    ok = np.abs(det) > 1e-30
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = p - tri[:, 0]
    u = inv * np.einsum("ij,ij->i", s, h)
    qv = np.cross(s, e1)
    v = inv * np.einsum("ij,ij->i", d, qv)
    t = inv * np.einsum("ij,ij->i", e2, qv)
    return ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t >= 0) & (t <= 1)
