"""Red refinement: every tet split into eight, every edge halved (docs/model.md §2.10).

The error estimate (:mod:`fieldgen.fe.estimate`) solves the extent again on this refinement of
the mesh; the fine vertices are the coarse vertices and the edge midpoints, so both meshes cover
the same domain and the P1 spaces are nested.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.meshing.tetmesh import TET_EDGES, TetMesh, mesh_edges, tet_volumes

#: Red refinement: corner children (local vertex or edge-midpoint slots 0..9: the four vertices,
#: then the midpoints of ``TET_EDGES`` in order) and, per choice of the inner octahedron's diagonal,
#: its four inner children.
_CORNERS = np.array([(0, 4, 5, 6), (4, 1, 7, 8), (5, 7, 2, 9), (6, 8, 9, 3)])
_DIAGONALS = np.array([(4, 9), (5, 8), (6, 7)])
_CYCLES = np.array([(5, 6, 8, 7), (4, 6, 9, 7), (4, 5, 9, 8)])


def _inner_children() -> np.ndarray:
    """(3, 4, 4) slots of the inner children per diagonal, wound positively for a positive parent
    (a child's orientation relative to its parent is affine-invariant: fixed per pattern)."""
    reference = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    slots = np.vstack([reference, 0.5 * (reference[TET_EDGES[:, 0]] + reference[TET_EDGES[:, 1]])])
    out = np.empty((3, 4, 4), dtype=np.int64)
    for d, ((a, b), cycle) in enumerate(zip(_DIAGONALS, _CYCLES)):
        for k in range(4):
            child = np.array([a, b, cycle[k], cycle[(k + 1) % 4]])
            if tet_volumes(slots, child[None])[0] < 0:
                child[[2, 3]] = child[[3, 2]]
            out[d, k] = child
    assert np.all(tet_volumes(slots, _CORNERS) > 0)
    return out


_INNER = _inner_children()


def _inner_maps() -> np.ndarray:
    """(3, 16, 4): per diagonal, the inner children's hat gradients as combinations of the
    parent's. A child vertex at slot s has parent barycentric coordinates b_s (a unit vector, or
    the mean of two), so at any point the parent's coordinates are λ = B μ with B = [b_s] over the
    child's four slots, and μ = B⁻¹ λ: grad μ_k = Σ_j (B⁻¹)_kj grad λ_j, exactly (affine maps)."""
    unit = np.eye(4)
    bary = np.vstack([unit, 0.5 * (unit[TET_EDGES[:, 0]] + unit[TET_EDGES[:, 1]])])      # (10, 4)
    return np.stack([np.vstack([np.linalg.inv(bary[_INNER[d, k]].T) for k in range(4)])
                     for d in range(3)])


_INNER_MAPS = _inner_maps()


@dataclass
class RedRefinement:
    """A mesh split 1:8 (every edge halved) and where its vertices came from."""

    mesh: TetMesh
    edges: np.ndarray        # (m, 2) parent edges; fine vertex n + k is the midpoint of edge k
    tet_edges: np.ndarray    # (t, 6) edge index of each parent tet's local edge
    diagonal: np.ndarray     # (t,) which of _DIAGONALS cut each parent's inner octahedron


def red_refine(mesh: TetMesh) -> RedRefinement:
    """Split every tet into eight (Bey's red refinement, the inner octahedron cut along its
    shortest diagonal); boundary faces split into four and keep their markers."""
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    n = len(points)
    edges, tet_edges = mesh_edges(tets, n)
    fine_points = np.vstack([points, 0.5 * (points[edges[:, 0]] + points[edges[:, 1]])])
    slots = np.concatenate([tets, n + tet_edges], axis=1)                      # (t, 10)
    diagonal_length = np.stack([np.linalg.norm(fine_points[slots[:, a]] - fine_points[slots[:, b]], axis=1)
                                for a, b in _DIAGONALS], axis=1)
    choice = np.argmin(diagonal_length, axis=1)
    inner = np.stack([slots[np.arange(len(tets))[:, None], _INNER[choice, k]] for k in range(4)], axis=1)
    children = np.concatenate([slots[:, _CORNERS], inner], axis=1).reshape(-1, 4)
    # Boundary faces: the midpoints of their edges by key lookup.
    faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    keys = edges[:, 0] * n + edges[:, 1]

    def midpoint(u, v):
        lo, hi = np.minimum(u, v), np.maximum(u, v)
        return n + np.searchsorted(keys, lo * n + hi)

    p, q, r = faces[:, 0], faces[:, 1], faces[:, 2]
    mpq, mqr, mrp = midpoint(p, q), midpoint(q, r), midpoint(r, p)
    fine_faces = np.stack([np.stack([p, mpq, mrp], 1), np.stack([mpq, q, mqr], 1),
                           np.stack([mrp, mqr, r], 1), np.stack([mpq, mqr, mrp], 1)], axis=1).reshape(-1, 3)
    markers = np.repeat(np.asarray(mesh.boundary_markers, dtype=np.int64), 4)
    return RedRefinement(mesh=TetMesh(points=fine_points, tets=children, boundary_faces=fine_faces,
                                      boundary_markers=markers), edges=edges, tet_edges=tet_edges,
                          diagonal=choice)


def refined_gradients(refined: RedRefinement, gradients) -> tuple[np.ndarray, np.ndarray]:
    """:func:`fieldgen.meshing.tetmesh.hat_gradients` of the red refinement, from the parent mesh's
    ``gradients`` (grad, det), without the fine vertices: each parent's four corner children are
    the parent halved about one of its vertices, with the vertices in the parent's order
    (``_CORNERS``), so their hat gradients are twice the parent's; the four inner children's are
    fixed combinations of the parent's (``_INNER_MAPS``, per diagonal); every child's det is an
    eighth of the parent's (eight children of equal volume, wound as the parent). Equal to the
    direct computation to rounding, and several times faster (docs/design/extent-and-estimate.md)."""
    parent_grad, parent_det = gradients
    t = len(parent_det)
    grad = np.empty((t, 8, 4, 3))
    grad[:, :4] = 2.0 * parent_grad[:, None]
    for d in range(3):
        chosen = np.flatnonzero(refined.diagonal == d)
        grad[chosen, 4:] = (_INNER_MAPS[d] @ parent_grad[chosen]).reshape(-1, 4, 4, 3)
    det = np.repeat(0.125 * parent_det, 8)
    return grad.reshape(-1, 4, 3), det

