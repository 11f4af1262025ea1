"""Any thin-walled prism's section triangulated for its own extent (docs/model.md §2.10, "Thin walls").

Far from its end planes the extent of a free right prism is its section's: ``−Δu = 1`` in the
section, ``u = 0`` on its outline (the prism's side faces), normalised by its peak (§2.2). So a
section that neither strip fits — a tee, an I-beam, a profile with webs, walls of several
thicknesses — is triangulated by MMG2D under the metric of that 2-D field: solved with P1
elements (scikit-fem) on the section's graded triangulation
(:func:`fieldgen.sizing.extrusion.graded_section`), its Hessian recovered at the vertices (P1
gradients averaged to the vertices, twice), and each direction given the edge ``h`` whose P1
interpolation error ``h² |λ| / 8`` is ``1 / across²`` of the peak: a parabola across a free wall
of thickness ``t`` (``|λ| = 8 / t²``) gets ``across`` edges across, whatever ``t``. Edges stay
between ``EDGE_AT_CORNER`` (a re-entrant corner, where the field's gradient is singular) and
``along`` wall thicknesses (along a wall the field does not bend). ``ROUNDS`` solves and
remeshings, the outline kept exactly throughout. The triangulation is extruded through the
tube's graded layers (:func:`fieldgen.sizing.lengthwise.layered_wall`); the passes then refine
the prism in 3-D as any part.
"""

from __future__ import annotations

import numpy as np

from fieldgen.errors import MesherCrash
from fieldgen.meshing.tetmesh import TetMesh
from fieldgen.sizing.extrusion import graded_section, mmg2d
from fieldgen.sizing.lengthwise import EDGE_AT_CORNER, LAYERS_ACROSS, layered_wall
from fieldgen.surface.topology import compacted

#: Solve-and-remesh rounds under the section field's metric.
ROUNDS = 2


def section_extent(points: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """The section's own extent at ``points``: ``−Δu = 1`` with ``u = 0`` on the triangulation's
    boundary, by P1 elements (scikit-fem), divided by its maximum."""
    from skfem import Basis, ElementTriP1, MeshTri, asm, condense, solve   # lazy: heavy, as fe/extent
    from skfem.models.poisson import laplace, unit_load  # lazy: with skfem, above

    mesh = MeshTri(np.ascontiguousarray(points.T, dtype=np.float64), np.ascontiguousarray(triangles.T))
    basis = Basis(mesh, ElementTriP1())
    u = solve(*condense(asm(laplace, basis), asm(unit_load, basis), D=mesh.boundary_nodes()))
    return u / float(u.max())


def _gradients(points: np.ndarray, triangles: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each triangle's P1 gradient of ``values`` (m, 2, or m, 2, k for k columns) and its area."""
    corner = points[triangles]
    jacobian = np.stack([corner[:, 1] - corner[:, 0], corner[:, 2] - corner[:, 0]], axis=1)   # rows: edges
    rise = values[triangles[:, 1:]] - values[triangles[:, :1]]
    gradient = np.linalg.solve(jacobian, rise if rise.ndim == 3 else rise[..., None])
    area = 0.5 * np.abs(np.linalg.det(jacobian))
    return (gradient if rise.ndim == 3 else gradient[..., 0]), area


def _to_vertices(n: int, triangles: np.ndarray, per_triangle: np.ndarray, area: np.ndarray) -> np.ndarray:
    """Area-weighted average of ``per_triangle`` values at the ``n`` vertices."""
    flat = per_triangle.reshape(len(triangles), -1)
    total = np.zeros((n, flat.shape[1]))
    weight = np.zeros(n)
    for k in range(3):
        np.add.at(total, triangles[:, k], area[:, None] * flat)
        np.add.at(weight, triangles[:, k], area)
    return (total / weight[:, None]).reshape((n,) + per_triangle.shape[1:])


def recovered_hessian(points: np.ndarray, triangles: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(n, 2, 2) symmetric Hessians of the P1 ``values``: gradients averaged to the vertices, and
    the gradients of those averaged again."""
    gradient, area = _gradients(points, triangles, values)
    at_vertices = _to_vertices(len(points), triangles, gradient, area)
    second, _ = _gradients(points, triangles, at_vertices)          # (m, 2, 2): d/dx_i of g_j
    hessian = _to_vertices(len(points), triangles, second, area)
    return 0.5 * (hessian + np.swapaxes(hessian, 1, 2))


def section_metric(points: np.ndarray, triangles: np.ndarray, across: int, hmin: float,
                   hmax: float) -> np.ndarray:
    """MMG2D's (n, 3) metric (m11, m12, m22) for :func:`section_extent` on this triangulation:
    eigenvalues ``|λ| across² / 8`` clipped to edges between ``hmin`` and ``hmax``."""
    values, vectors = np.linalg.eigh(recovered_hessian(points, triangles, section_extent(points, triangles)))
    wanted = np.clip(np.abs(values) * across ** 2 / 8.0, 1.0 / hmax ** 2, 1.0 / hmin ** 2)
    full = np.einsum("nij,nj,nkj->nik", vectors, wanted, vectors)
    return np.stack([full[:, 0, 0], 0.5 * (full[:, 0, 1] + full[:, 1, 0]), full[:, 1, 1]], axis=1)


def field_section(points: np.ndarray, outline: np.ndarray, wall: float, along: float,
                  across: int = LAYERS_ACROSS):
    """The section bounded by ``outline`` (2-D ``points``, mean wall thickness ``wall``)
    triangulated for its own extent (module docstring): (points, triangles)."""
    xy, triangles = graded_section(points, outline, wall)
    edges = _boundary_edges(triangles)
    for _ in range(ROUNDS):
        metric = section_metric(xy, triangles, across, EDGE_AT_CORNER * wall, along)
        xy, triangles, edges = mmg2d(xy, triangles, edges, metric)
    return compacted(xy, triangles)


def _boundary_edges(triangles: np.ndarray) -> np.ndarray:
    """The edges of ``triangles`` on one triangle only, as oriented in it."""
    edges = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    _, index, count = np.unique(np.sort(edges, axis=1), axis=0, return_index=True, return_counts=True)
    return edges[np.sort(index[count == 1])]


def layered_field_wall(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray,
                       max_tets: int | None = None, across: int = LAYERS_ACROSS) -> TetMesh | None:
    """A thin-walled prism of any section meshed in layers (:func:`field_section`, extruded as
    :func:`fieldgen.sizing.lengthwise.layered_wall`); None if the part is not a thin-walled right
    prism, its mesh would pass the budget or MMG2D fails on its section (TetGen's passes then mesh
    it, as any part)."""
    try:
        return layered_wall(vertices, faces, markers, max_tets, across, strip=field_section)
    except MesherCrash:
        return None
