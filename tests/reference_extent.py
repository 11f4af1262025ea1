"""An independent reference for the extent field (docs/model.md §2.2), for the tests that check
a build "meets the accuracy" in truth and not only by its own estimate: the asset's mesh refined
uniformly (scikit-fem's 1:8 red refinement, once or twice), the heat-conduction problem
assembled there with scikit-fem directly (plain Galerkin P1) and solved by pyamg, and the asset's P1
extent compared with it over the volume."""

from __future__ import annotations

import numpy as np


def _prolong(mesh, values: np.ndarray) -> np.ndarray:
    """A P1 field on ``mesh`` at the vertices of ``mesh.refined(1)`` (its vertices, then the
    midpoints of ``mesh.edges``, in that order)."""
    return np.concatenate([values, 0.5 * (values[mesh.edges[0]] + values[mesh.edges[1]])])


def fine_extent_rms(points, tets, extent, bonded_normals=(), refinements: int = 2) -> float:
    """RMS over the volume of (asset extent − reference extent), relative to the range 1.

    Boundary facets whose outward normal is within 1° of one of ``bonded_normals`` take e = 1,
    every other boundary facet e = 0 (a vertex on both: 0). With no bonded facet the reference
    solves −Δu = 1, u = 0 on the boundary, and divides by its largest value (§2.2)."""
    import pyamg
    from skfem import Basis, ElementTetP1, MeshTet, asm, condense
    from skfem.models.poisson import laplace, mass, unit_load

    coarse = MeshTet(np.asarray(points, float).T.copy(), np.asarray(tets, np.int64).T.copy())
    mesh, values = coarse, np.asarray(extent, float)
    for _ in range(refinements):
        values = _prolong(mesh, values)
        mesh = mesh.refined(1)
    basis = Basis(mesh, ElementTetP1())
    facets = mesh.boundary_facets()
    corners = mesh.p[:, mesh.facets[:, facets]]                           # (3, 3 corners, n)
    normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0], axis=0)
    normal /= np.linalg.norm(normal, axis=0)
    inside = mesh.p[:, mesh.t[:, mesh.f2t[0, facets]]].mean(axis=1)     # the tet each facet bounds
    normal *= np.sign(np.sum(normal * (corners[:, 0] - inside), axis=0))  # outward
    bonded = np.zeros(len(facets), bool)
    for direction in bonded_normals:
        direction = np.asarray(direction, float) / np.linalg.norm(direction)
        bonded |= direction @ normal >= np.cos(np.radians(1.0))
    free_nodes = np.unique(mesh.facets[:, facets[~bonded]])
    bonded_nodes = np.setdiff1d(np.unique(mesh.facets[:, facets[bonded]]), free_nodes)
    fixed = np.concatenate([free_nodes, bonded_nodes])
    known = np.zeros(mesh.p.shape[1])
    known[bonded_nodes] = 1.0
    stiffness = asm(laplace, basis)
    load = asm(unit_load, basis) if not len(bonded_nodes) else np.zeros(mesh.p.shape[1])
    reference = np.zeros(mesh.p.shape[1])
    reference[fixed] = known[fixed]
    system, rhs, _, free = condense(stiffness, load, x=known, D=fixed)
    solver = pyamg.smoothed_aggregation_solver(system.tocsr())
    reference[free] = solver.solve(rhs, tol=1e-12, accel="cg", maxiter=500)
    if not len(bonded_nodes):
        reference /= reference.max()
    difference = values - reference
    weights = asm(mass, basis)
    volume = float(np.sum(weights @ np.ones(mesh.p.shape[1])))
    return float(np.sqrt(difference @ (weights @ difference) / volume))
