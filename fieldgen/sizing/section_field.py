"""Any thin-walled prism's section triangulated for its own extent (docs/model.md §2.10, "Thin walls").

Far from its end planes the extent of a free right prism is its section's: the prism's field
with its end faces insulated, which does not vary along the axis (§2.2: Poisson with ``e = 0`` on
the side faces, normalised by its peak). So a section that neither strip fits — a tee, an
I-beam, a profile with webs — is triangulated by MMG2D under that field's metric: the section's
graded triangulation (:func:`fieldgen.sizing.extrusion.graded_section`) extruded one layer deep
with insulated ends, its extent solved (:func:`fieldgen.fe.extent.solve_extent`) and its
Hessian metric taken (:func:`fieldgen.sizing.adapt.hessian_metric`, restricted to the section's
plane) for an interpolation error of ``1 / across²`` of the peak: a parabola across a free wall
of thickness ``t`` (``|λ| = 8 / t²`` relative to its own peak) asks for edges ``t / across``
across a wall whose peak is the section's — about 7 of them measured on 3 mm walls, the
recovered Hessian being low at a wall's faces — and fewer across a thinner wall, whose extent is
lower. Edges stay between ``EDGE_AT_CORNER`` and ``along`` wall thicknesses. ``ROUNDS`` solves
and remeshings, the outline kept exactly throughout. The triangulation is extruded through the
tube's graded layers (:func:`fieldgen.sizing.lengthwise.layered_wall`); the passes then refine
the prism in 3-D as any part.
"""

from __future__ import annotations

import numpy as np

from fieldgen.errors import BuildError, MesherCrash
from fieldgen.fe.extent import solve_extent
from fieldgen.meshing.tetmesh import FREE, INSULATED, TetMesh, boundary_faces_of
from fieldgen.sizing.adapt import hessian_metric
from fieldgen.sizing.extrusion import extruded, graded_section, mmg2d
from fieldgen.sizing.lengthwise import EDGE_AT_CORNER, LAYERS_ACROSS, layered_wall
from fieldgen.surface.topology import boundary_edges, compacted

#: Solve-and-remesh rounds under the section field's metric.
ROUNDS = 2
PLANE = np.eye(3)[:2]
AXIS = np.array([0.0, 0.0, 1.0])


def section_slab(points: np.ndarray, triangles: np.ndarray, depth: float) -> TetMesh:
    """The section extruded ``depth`` along z in one layer, its side faces free and its two
    ends insulated: the prism's field far from its ends, on the section's own vertices."""
    xyz, tets = extruded(points, triangles, PLANE, AXIS, np.array([0.0, depth]))
    boundary = boundary_faces_of(tets)
    ends = np.all(xyz[boundary, 2] == xyz[boundary[:, :1], 2], axis=1)
    return TetMesh(points=xyz, tets=tets, boundary_faces=boundary,
                   boundary_markers=np.where(ends, INSULATED, FREE))


def section_metric(points: np.ndarray, triangles: np.ndarray, across: int, hmin: float,
                   hmax: float, depth: float) -> np.ndarray:
    """MMG2D's (n, 3) metric (m11, m12, m22) at ``points`` for the section's own extent (module
    docstring), solved on the section ``depth`` deep; MesherCrash where that field is not usable
    (a flat triangle, no interior)."""
    slab = section_slab(points, triangles, depth)
    try:
        extent = solve_extent(slab).extent
    except BuildError as error:
        raise MesherCrash(f"the section's own extent could not be solved ({error.defect})") from None
    metric = hessian_metric(slab, extent, 1.0 / across ** 2, hmin, hmax)[:len(points)][:, [0, 1, 3]]
    if not (np.isfinite(metric).all() and float(extent.max()) > 0.0):
        raise MesherCrash("the section's own extent could not be solved on its triangulation")
    return metric


def field_section(points: np.ndarray, outline: np.ndarray, wall: float, along: float,
                  across: int = LAYERS_ACROSS):
    """The section bounded by ``outline`` (2-D ``points``, mean wall thickness ``wall``)
    triangulated for its own extent (module docstring): (points, triangles)."""
    xy, triangles = graded_section(points, outline, wall)
    edges = boundary_edges(triangles)[0]
    for _ in range(ROUNDS):
        metric = section_metric(xy, triangles, across, EDGE_AT_CORNER * wall, along, wall)
        xy, triangles, edges = mmg2d(xy, triangles, edges, metric)
    return compacted(xy, triangles)


def layered_field_wall(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray,
                       max_tets: int | None = None, across: int = LAYERS_ACROSS) -> TetMesh | None:
    """A thin-walled prism of any section meshed in layers (:func:`field_section`, extruded as
    :func:`fieldgen.sizing.lengthwise.layered_wall`); None if the part is not a thin-walled right
    prism, its mesh would pass the budget or its section cannot be meshed so (TetGen's passes then
    mesh it, as any part)."""
    try:
        return layered_wall(vertices, faces, markers, max_tets, across, strip=field_section)
    except MesherCrash:
        return None
