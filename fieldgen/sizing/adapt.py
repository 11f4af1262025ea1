"""Anisotropic adaptation by MMG3D (``mmgpy``) under a metric (docs/model.md §2.10, "Thin walls").

A metric M (symmetric positive definite, one per vertex) asks for edges of unit length in M:
an edge along an eigenvector of eigenvalue λ is to be 1/√λ long. Two metrics are used:

- from the geometry (:func:`wall_metric`): across a wall (its normal n, from the nearest surface
  vertex) edges of its local thickness / ``across``, along it the uniform first edge;
- from the solved extent (:func:`hessian_metric`): the Hessian H of e, recovered per vertex by
  averaging the P1 gradients to the vertices twice (volume-weighted), with eigenvalues
  |λ_H| / (8 ε): the P1 interpolation error of a quadratic along an edge h is h² |∂²e/∂s²| / 8, so
  each edge carries about ε of error, thin across a wall where e bends, long along it.

The metric is scaled as one to a tet budget (:func:`fitted_metric`: MMG makes about three tets
per regular unit tet of metric volume) and MMG3D remeshes (:func:`remeshed`), keeping each boundary
face's condition as its reference, so free, bonded and insulated faces survive.
"""

from __future__ import annotations

import math

import numpy as np
import trimesh
from scipy.spatial import cKDTree

from fieldgen.errors import MesherCrash
from fieldgen.meshing.mmg import MmgFailure, remesh as run_mmg
from fieldgen.meshing.tetmesh import TetMesh, orient_positive, p1_gradients, tet_volumes

#: Volume of a regular tet of unit edge, and MMG3D's tets per regular unit tet of metric volume
#: (its tets are smaller than unit: measured 3.1 on a slab, docs/design/sizing.md, "Thin walls").
UNIT_TET = math.sqrt(2.0) / 12.0
MMG_TETS_PER_UNIT = 3.0
#: MMG's gradation (the ratio of neighbouring edges' lengths it allows) and its surface
#: tolerance as a fraction of the thinnest wall (docs/design/sizing.md, "Thin walls").
GRADATION = 1.5
HAUSDORFF_SHARE = 0.05


def symmetric(matrices: np.ndarray) -> np.ndarray:
    """(n, 3, 3) symmetric matrices as MMG's (n, 6): m11, m12, m13, m22, m23, m33."""
    return np.stack([matrices[:, 0, 0], matrices[:, 0, 1], matrices[:, 0, 2],
                     matrices[:, 1, 1], matrices[:, 1, 2], matrices[:, 2, 2]], axis=1)


def wall_metric(points: np.ndarray, surface_vertices: np.ndarray, surface_faces: np.ndarray,
                thickness: np.ndarray, edge: float, across: float) -> np.ndarray:
    """The metric of ``across`` edges across the local ``thickness`` (per surface vertex) in the
    direction of the nearest surface vertex's normal, ``edge`` along the wall; ``edge`` in every
    direction where the wall is thicker than ``across`` x ``edge``."""
    surface = trimesh.Trimesh(surface_vertices, surface_faces, process=False)
    normals = np.asarray(surface.vertex_normals, dtype=np.float64)
    _, nearest = cKDTree(np.asarray(surface_vertices, dtype=np.float64)).query(np.asarray(points, dtype=np.float64))
    thick = np.where(np.isfinite(thickness), thickness, across * edge)[nearest]
    h_across = np.minimum(thick / across, edge)
    n = normals[nearest]
    along = 1.0 / (edge * edge)
    matrices = (1.0 / h_across ** 2 - along)[:, None, None] * n[:, :, None] * n[:, None, :] + along * np.eye(3)
    return symmetric(matrices)


def vertex_average(mesh: TetMesh, per_tet: np.ndarray) -> np.ndarray:
    """Per-tet values (t, k) averaged to the vertices, weighted by the tets' volumes."""
    volume = np.abs(tet_volumes(mesh.points, mesh.tets))
    flat = per_tet.reshape(len(per_tet), -1)
    total = np.zeros((mesh.n_points, flat.shape[1]))
    weight = np.zeros(mesh.n_points)
    for k in range(4):
        np.add.at(total, mesh.tets[:, k], flat * volume[:, None])
        np.add.at(weight, mesh.tets[:, k], volume)
    return (total / np.maximum(weight, 1e-300)[:, None]).reshape((mesh.n_points,) + per_tet.shape[1:])


def recovered_hessian(mesh: TetMesh, values: np.ndarray) -> np.ndarray:
    """The Hessian (n, 3, 3) of the P1 field ``values``, recovered per vertex: the tets' gradients
    averaged to the vertices, their gradients averaged again, symmetrised."""
    gradient = vertex_average(mesh, p1_gradients(mesh.points, mesh.tets, values))
    hessian = vertex_average(mesh, p1_gradients(mesh.points, mesh.tets, gradient))   # (n, 3, 3)
    return 0.5 * (hessian + np.transpose(hessian, (0, 2, 1)))


def hessian_metric(mesh: TetMesh, extent: np.ndarray, error: float, hmin: float, hmax: float) -> np.ndarray:
    """The metric whose unit edges carry about ``error`` of P1 interpolation error of ``extent``
    (eigenvalues |λ_H| / (8 ``error``)), with edges between ``hmin`` and ``hmax``."""
    values, vectors = np.linalg.eigh(recovered_hessian(mesh, extent))
    wanted = np.clip(np.abs(values) / (8.0 * error), 1.0 / hmax ** 2, 1.0 / hmin ** 2)
    return symmetric(np.einsum("nij,nj,nkj->nik", vectors, wanted, vectors))


def predicted_count(mesh: TetMesh, metric: np.ndarray) -> float:
    """About how many tets MMG makes for ``metric`` (at ``mesh``'s vertices):
    ``MMG_TETS_PER_UNIT`` x Σ V √det M / ``UNIT_TET`` (M the mean of a tet's vertices' metrics)."""
    full = matrices_of(metric)[mesh.tets].mean(axis=1)
    volume = np.abs(tet_volumes(mesh.points, mesh.tets))
    return float(MMG_TETS_PER_UNIT * (volume * np.sqrt(np.maximum(np.linalg.det(full), 0.0))).sum() / UNIT_TET)


def matrices_of(metric: np.ndarray) -> np.ndarray:
    m = np.asarray(metric, dtype=np.float64)
    return np.stack([m[:, [0, 1, 2]], m[:, [1, 3, 4]], m[:, [2, 4, 5]]], axis=1)


def fitted_metric(mesh: TetMesh, metric: np.ndarray, max_tets: int) -> np.ndarray:
    """``metric`` scaled as one (edges longer by the same factor everywhere) so the predicted count
    (:func:`predicted_count`) is within ``max_tets``; unchanged if it already is."""
    predicted = predicted_count(mesh, metric)
    if predicted <= max_tets:
        return metric
    return metric * (max_tets / predicted) ** (2.0 / 3.0)


def remeshed(mesh: TetMesh, metric: np.ndarray, hausdorff: float) -> TetMesh:
    """``mesh`` remeshed by MMG3D under ``metric`` (n, 6), the surface within ``hausdorff`` (m),
    each boundary face's condition kept as its MMG reference; MesherCrash if MMG fails."""
    import mmgpy  # lazy: heavy, and only thin walls adapt with MMG

    mmg = mmgpy.MmgMesh3D()
    mmg.set_mesh_size(vertices=mesh.n_points, tetrahedra=mesh.n_tets, triangles=len(mesh.boundary_faces))
    mmg.set_vertices(np.ascontiguousarray(mesh.points, dtype=np.float64))
    mmg.set_tetrahedra(np.ascontiguousarray(mesh.tets, dtype=np.int32))
    mmg.set_triangles(np.ascontiguousarray(mesh.boundary_faces, dtype=np.int32),
                      refs=np.ascontiguousarray(mesh.boundary_markers, dtype=np.int32))
    mmg["tensor"] = np.ascontiguousarray(metric, dtype=np.float64)
    try:
        run_mmg(mmg, hgrad=GRADATION, hausd=float(hausdorff), verbose=-1)
    except MmgFailure as error:
        raise MesherCrash(f"MMG3D could not adapt the mesh ({error})",
                          fix="give --edge-length to mesh with a uniform edge") from None
    points = np.asarray(mmg.get_vertices(), dtype=np.float64)
    tets, _ = mmg.get_tetrahedra_with_refs()
    faces, refs = mmg.get_triangles_with_refs()
    tets = orient_positive(points, np.asarray(tets, dtype=np.int64))
    return TetMesh(points=points, tets=tets, boundary_faces=np.asarray(faces, dtype=np.int64),
                   boundary_markers=np.asarray(refs, dtype=np.int64))
