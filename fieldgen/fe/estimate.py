"""The discretisation error of the extent field, estimated by two meshes (docs/model.md §2.10).

The extent e is solved with linear (P1) elements (:mod:`fieldgen.fe.extent`). Its error is
estimated by two meshes: the same problem is solved again on the mesh refined 1:8
(:mod:`fieldgen.fe.refinement`: every edge halved, so the fine vertices are the coarse vertices
and edge midpoints) and, since P1's error falls as h^2 where the field is smooth,
e - e_h ≈ (e_fine - e_h) / (1 - 1/4). At a re-entrant edge the error falls more slowly (about
h^(4/3)) and the factor 4/3 underestimates it there; the tests compare the estimate with much
finer builds of real CAD parts, which have such edges. The boundary of a TetGen mesh is the
input surface, so both meshes cover the same domain.

Three relative errors are recorded (``error_estimate`` in the asset's metadata):

- ``extent``: the root-mean-square of e - e_h over the volume (e ranges over [0, 1], so this
  is relative to its maximum);
- ``pressure``: the root-mean-square of p0(e) - p0(e_h) over the volume divided by the largest
  pressure p0(1), for the asset's law p0 (the discretisation error of the field carried through
  the law, not the layering's interpolation error, which is ``max_interpolation_error``);
- ``characteristic_length``: |L_h - L| / L with L = V / ∫|∇e| dV (D 5.2.1);
- ``surface_gradient``: the root-mean-square over the free surface (e = 0) of ∇e_h - ∇e, relative
  to the root-mean-square of ∇e there. A contact shallower than the surface tets feels
  p0'(0)·|∇e_h|·depth, so this is the relative error of its pressure's normal gradient (its
  stiffness), which the volume norms hardly see (docs/model.md §2.10). ∇e is the gradient of the
  quadratic interpolant of the fine solution on each coarse tet at the free face's edge midpoints
  (the midpoint rule, exact for the quadratic |∇ẽ - ∇e_h|² on the face); P1's gradient error falls
  as h, so this term is the slowest of the four to fall.

The norms integrate the quadratic interpolant through the vertex and midpoint values (exact
mass matrix of the hierarchical quadratic basis: the hat functions plus 4 λ_i λ_j per edge).

The fine solve of the estimate is the Galerkin solution on the red refinement by a two-grid
preconditioned CG started from the coarse solution (:func:`two_grid_extent`, faster than a fresh
AMG solve: docs/design/extent-and-estimate.md); small fine meshes, and a CG that does not
converge, fall back to :func:`fieldgen.fe.extent.solve_extent`. The estimate therefore also
measures what the monotone solve's upwinding changes on the coarse mesh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix, identity, vstack

from fieldgen.fe import extent as extent_solve
from fieldgen.fe.refinement import RedRefinement, red_refine, refined_gradients
from fieldgen.material.damping import characteristic_length
from fieldgen.meshing.tetmesh import FREE, TET_EDGES, TetMesh, find_faces, hat_gradients
from fieldgen.threads import blas_held

#: e - e_h = (e_fine - e_h) / (1 - 2^-2) when the error falls as h^2 (halved edges).
RICHARDSON = 4.0 / 3.0


def _monomial(powers) -> float:
    """∫ Π λ_a^k_a over a tet of unit volume: 6 Π k_a! / (3 + Σ k_a)!."""
    return 6.0 * math.prod(math.factorial(k) for k in powers) / math.factorial(3 + sum(powers))


def _reference_mass() -> np.ndarray:
    """Mass matrix (per unit tet volume) of the 10 hierarchical P2 functions: λ_0..λ_3, then
    4 λ_i λ_j for the six edges in ``TET_EDGES`` order."""
    funcs = [((a,), 1.0) for a in range(4)] + [((i, j), 4.0) for i, j in TET_EDGES]
    mass = np.zeros((10, 10))
    for r, (fa, ca) in enumerate(funcs):
        for c, (fb, cb) in enumerate(funcs):
            powers = [0, 0, 0, 0]
            for a in fa + fb:
                powers[a] += 1
            mass[r, c] = ca * cb * _monomial(powers)
    return mass


_MASS = _reference_mass()
#: A tet's four faces (local vertex triples), face i opposite vertex i.
TET_FACES = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])


@dataclass
class ErrorEstimate:
    """Relative discretisation errors of the P1 extent field, and per-tet indicators."""

    extent: float
    pressure: float
    characteristic_length: float
    tet_rms_extent: np.ndarray = field(repr=False)     # (t,) RMS of the estimated e - e_h on each tet
    tet_rms_pressure: np.ndarray = field(repr=False)   # (t,) the same for p0, Pa
    extent_rms: float = 0.0                            # RMS of e over the volume
    pressure_rms: float = 0.0                          # RMS of p0(e) over the volume, Pa
    fine_tets: int = 0
    surface_gradient: float = 0.0                      # RMS of ∇(e - e_h) on the free surface, relative
    edges: np.ndarray | None = field(default=None, repr=False)         # (m, 2) the mesh's edges
    tet_edges: np.ndarray | None = field(default=None, repr=False)     # (t, 6) each tet's edges (rows of edges)
    edge_surplus: np.ndarray | None = field(default=None, repr=False)  # (m,) see estimate_error
    tet_length: np.ndarray | None = field(default=None, repr=False)    # (t,) see length_shares

    def to_metadata(self) -> dict:
        return {"method": "two-mesh: the extent solved again on the mesh refined 1:8, "
                          f"difference x {RICHARDSON:.4g} (P1 converges as h^2)",
                "norm": "RMS over the volume relative to the maximum (e: 1, p: p0(1)); "
                        "L = V / integral of |grad e|; surface_gradient: RMS of grad e - grad e_h "
                        "over the free surface relative to the RMS of grad e there",
                "extent": float(self.extent), "pressure": float(self.pressure),
                "characteristic_length": float(self.characteristic_length),
                "surface_gradient": float(self.surface_gradient)}


def worst_error(estimate: ErrorEstimate) -> float:
    """The largest of the estimate's relative errors (e, p0, L): what ``accuracy`` bounds.

    ``surface_gradient`` is recorded but not bounded: P1's gradient error falls only as h, and
    holding it to the accuracy took the unit sphere from 19k tets to the 280k budget still above
    1% (docs/design/contact-accuracy.md; docs/model.md §2.10)."""
    return max(estimate.extent, estimate.pressure, estimate.characteristic_length)


def error_percent(value: float, accuracy: float) -> str:
    """A relative error as a percentage with two decimals, or with as many more (up to six) as
    show it above ``accuracy`` when it is: 1.0004 % over an asked 1 % is not printed as 1.00 %."""
    digits = 2
    while value > accuracy and digits < 6 and round(100 * value, digits) <= round(100 * accuracy, digits):
        digits += 1
    return f"{100 * value:.{digits}f}%"


def tet_error(estimate: ErrorEstimate, law) -> np.ndarray:
    """(t,) each tet's RMS error relative to the field's maximum: the larger of e's and p0's
    (p0's over p0(1)), as the sizing marks tets by it."""
    return np.maximum(estimate.tet_rms_extent, estimate.tet_rms_pressure / law.max_pressure)


def _p2_gradient(coefficients: np.ndarray, gradients: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """(f, 3) gradient of hierarchical P2 functions ((f, 10) coefficients, :func:`_hierarchical`) at
    barycentric points (f, 4), with the tets' hat gradients (f, 4, 3)."""
    g = np.einsum("fk,fkj->fj", coefficients[:, :4], gradients)
    for c, (i, j) in enumerate(TET_EDGES):   # ∇(4 λ_i λ_j) = 4 (λ_i ∇λ_j + λ_j ∇λ_i)
        g += 4.0 * coefficients[:, 4 + c, None] * (lam[:, i, None] * gradients[:, j] + lam[:, j, None] * gradients[:, i])
    return g


def surface_gradient_error(mesh: TetMesh, extent: np.ndarray, quadratic: np.ndarray, gradients: np.ndarray) -> float:
    """The ``surface_gradient`` term (module docstring): ``quadratic`` the (t, 10) hierarchical
    coefficients of the fine solution on each tet, ``gradients`` the hat gradients (t, 4, 3)."""
    tets = np.asarray(mesh.tets, dtype=np.int64)
    faces = np.asarray(mesh.boundary_faces, dtype=np.int64)[np.asarray(mesh.boundary_markers) == FREE]
    tet_faces = tets[:, TET_FACES].reshape(-1, 3)
    # Only a tet face with its three vertices on the free surface can be one of its faces.
    on_free = np.zeros(mesh.n_points, dtype=bool)
    on_free[faces.ravel()] = True
    candidates = np.flatnonzero(on_free[tet_faces].all(axis=1))
    if not len(candidates):
        return 0.0
    found, row = find_faces(faces, tet_faces[candidates], mesh.n_points)
    row = candidates[row]
    tet, local = row[found] // 4, TET_FACES[row[found] % 4]
    if not len(tet):
        return 0.0
    g = gradients[tet]
    coarse = np.einsum("fk,fkj->fj", extent[tets[tet]], g)
    corners = np.asarray(mesh.points)[faces[found]]
    area = 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    error = norm = 0.0
    rows = np.arange(len(tet))
    for a, b in ((0, 1), (1, 2), (2, 0)):    # the face's edge midpoints, weight area / 3 each
        lam = np.zeros((len(tet), 4))
        lam[rows, local[:, a]] = 0.5
        lam[rows, local[:, b]] = 0.5
        fine = _p2_gradient(quadratic[tet], g, lam)
        error += float(area @ np.sum((fine - coarse) ** 2, axis=1))
        norm += float(area @ np.sum(fine ** 2, axis=1))
    return math.sqrt(error / norm) if norm > 0 else 0.0


def _hierarchical(vertex: np.ndarray, mid: np.ndarray, tets, tet_edges, edges) -> np.ndarray:
    """(t, 10) hierarchical coefficients of the P2 interpolant of nodal values (vertices, midpoints)."""
    return np.concatenate([vertex[tets], (mid - 0.5 * vertex[edges].sum(axis=1))[tet_edges]], axis=1)


def _square_integrals(coefficients: np.ndarray, volume: np.ndarray) -> np.ndarray:
    """∫ f² over each tet for (t, 10) hierarchical coefficients."""
    return volume * np.einsum("ti,ij,tj->t", coefficients, _MASS, coefficients)


def estimate_error(mesh: TetMesh, extent: np.ndarray, law) -> ErrorEstimate:
    """Relative errors of the P1 ``extent`` on ``mesh`` (and of ``law``'s pressure), estimated
    against the same problem solved on the mesh refined 1:8 (the Galerkin solution by
    :func:`two_grid_extent`, started from ``extent``): E = RICHARDSON (e_fine - e_h).
    """
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    extent = np.asarray(extent, dtype=np.float64)
    n = len(points)
    refined = red_refine(mesh)
    # Hat gradients once per mesh, for the stiffness matrices and L; the fine mesh's from the
    # coarse one's where the children are scaled copies of their parent.
    fine_points, fine_tets = refined.mesh.points, refined.mesh.tets
    coarse_gradients = hat_gradients(points, tets)
    fine_gradients = refined_gradients(refined, coarse_gradients)
    fine = two_grid_extent(mesh, refined, extent, gradients=fine_gradients, coarse_gradients=coarse_gradients)
    edges, tet_edges = refined.edges, refined.tet_edges
    volume = np.abs(coarse_gradients[1]) / 6.0
    total_volume = float(volume.sum())
    mid_h = 0.5 * extent[edges].sum(axis=1)
    fine_v, fine_m = fine[:n], fine[n:]
    e_error = RICHARDSON ** 2 * _square_integrals(
        _hierarchical(fine_v - extent, fine_m - mid_h, tets, tet_edges, edges), volume)
    quadratic = _hierarchical(fine_v, fine_m, tets, tet_edges, edges)
    e_norm = float(_square_integrals(quadratic, volume).sum())
    p_fine_v, p_fine_m = law.pressure(fine_v), law.pressure(fine_m)
    p_h_v, p_h_m = law.pressure(extent), law.pressure(np.clip(mid_h, 0.0, 1.0))
    p_error = RICHARDSON ** 2 * _square_integrals(
        _hierarchical(p_fine_v - p_h_v, p_fine_m - p_h_m, tets, tet_edges, edges), volume)
    p_norm = float(_square_integrals(_hierarchical(p_fine_v, p_fine_m, tets, tet_edges, edges), volume).sum())
    # ∇e_h and ∇e_fine once, for L and for its per-tet shares.
    slope_h = np.einsum("tij,ti->tj", coarse_gradients[0], extent[tets])
    slope_f = np.einsum("tij,ti->tj", fine_gradients[0], fine[fine_tets])
    length_h = characteristic_length(points, tets, extent, volumes=coarse_gradients[1] / 6.0, extent_gradient=slope_h)
    length_f = characteristic_length(fine_points, fine_tets, fine, volumes=fine_gradients[1] / 6.0,
                                     extent_gradient=slope_f)
    # The fine solution's departure from the coarse one's linear interpolant at each edge's
    # midpoint (relative, as the larger of e's and p0's): about h² ∂²e/∂s² / 8 along the edge,
    # the error that splitting this very edge removes.
    surplus = np.maximum(np.abs(fine_m - mid_h), np.abs(p_fine_m - p_h_m) / law.max_pressure)
    return ErrorEstimate(
        edges=edges, tet_edges=tet_edges, edge_surplus=surplus,
        tet_length=length_shares(coarse_gradients[1], fine_gradients[1], slope_h, slope_f),
        extent=math.sqrt(float(e_error.sum()) / total_volume),
        pressure=math.sqrt(float(p_error.sum()) / total_volume) / law.max_pressure,
        characteristic_length=RICHARDSON * abs(length_h - length_f) / length_f,
        tet_rms_extent=np.sqrt(np.maximum(e_error, 0.0) / volume),
        tet_rms_pressure=np.sqrt(np.maximum(p_error, 0.0) / volume),
        extent_rms=math.sqrt(e_norm / total_volume), pressure_rms=math.sqrt(p_norm / total_volume),
        fine_tets=int(refined.mesh.n_tets),
        surface_gradient=surface_gradient_error(mesh, extent, quadratic, coarse_gradients[0]))


def length_shares(coarse_det: np.ndarray, fine_det: np.ndarray, coarse_slope: np.ndarray,
                  fine_slope: np.ndarray) -> np.ndarray:
    """(t,) each coarse tet's share of the estimated relative error of L = V / ∫|∇e| dV:
    RICHARDSON (∫_t |∇e_h| - Σ over its eight children ∫ |∇e_fine|) / ∫|∇e_fine| dV, signed.
    Their sum is RICHARDSON (L_fine - L_h) / L_h, to first order the signed ``characteristic_length``
    term (docs/model.md §2.10); a per-tet indicator for marking. ``*_det`` are the dets of
    :func:`fieldgen.meshing.tetmesh.hat_gradients` of the mesh and of its red refinement
    (children consecutive, eight per parent), ``*_slope`` the extent's gradient (t, 3) on each tet."""
    def slope_volume(det, slope):
        return np.linalg.norm(slope, axis=1) * np.abs(det) / 6.0

    coarse = slope_volume(coarse_det, coarse_slope)
    fine = slope_volume(fine_det, fine_slope).reshape(len(coarse), 8).sum(axis=1)
    total = float(fine.sum())
    return RICHARDSON * (coarse - fine) / total if total > 0 else np.zeros(len(coarse))


#: Fine meshes with at most this many vertices are solved directly (:func:`fieldgen.fe.extent.solve_extent`).
TWO_GRID_LIMIT = 20_000
#: The estimate's fine solve stops at ``rtol`` of its starting residual, but not below this
#: fraction of the right-hand side's norm (rounding).
ROUNDING = 1e-12


def _prolongation(n: int, edges: np.ndarray):
    """(n + m, n) linear interpolation from a mesh to its red refinement: the identity on the
    vertices, the mean of the two ends on each edge midpoint."""
    m = len(edges)
    midpoints = coo_matrix((np.full(2 * m, 0.5), (np.repeat(np.arange(m), 2), edges.ravel())), shape=(m, n))
    return vstack([identity(n, format="csr"), midpoints]).tocsr()


@dataclass(frozen=True)
class FineSystem:
    """The fine mesh's extent system on its free vertices, its starting guess and the two-grid
    transfer (:func:`two_grid_extent`)."""

    problem: str                 # "poisson" or "laplace"
    x: np.ndarray                # every fine vertex: the start, with the Dirichlet values
    inner: np.ndarray            # the fine mesh's free vertices
    matrix: object               # stiffness on them (CSR)
    rhs: np.ndarray
    prolong: object              # coarse free -> fine free interpolation (CSR)
    coarse_matrix: object        # the coarse mesh's stiffness on its free vertices (CSR)


def two_grid_extent(mesh: TetMesh, refined: RedRefinement, extent: np.ndarray, *, rtol: float = 1e-3,
                    seed: int = 0, maxiter: int = 200, gradients=None, coarse_gradients=None) -> np.ndarray:
    """The Galerkin P1 extent on the red refinement of ``mesh``, solved by CG preconditioned
    with a two-grid cycle: symmetric Gauss-Seidel on the fine mesh and, for the coarse
    correction, one smoothed-aggregation V-cycle on ``mesh``'s own stiffness (the P1 spaces are
    nested, so that is the Galerkin coarse operator Pᵀ A P). CG starts from ``extent``
    interpolated onto the fine mesh (for Poisson scaled by the energy-optimal factor, since
    ``extent`` is normalised to max 1), so it only has to find the difference the estimate
    measures, not the whole field: ``rtol`` is the residual relative to the starting one, the
    coarse solution's on the fine mesh (why 1e-3, and why not relative to the right-hand side:
    docs/design/extent-and-estimate.md). A start that solves the fine system exactly is kept.

    Small fine meshes (``TWO_GRID_LIMIT`` vertices) are solved by :func:`fieldgen.fe.extent.solve_extent`.
    ``gradients``, ``coarse_gradients``: the fine and the coarse mesh's hat gradients, when the
    caller has them (the fine ones :func:`fieldgen.fe.refinement.refined_gradients` of the coarse
    ones: the corner children's stiffness entries are then taken from their parents',
    :func:`refined_entries`). Deterministic: one thread, seeded aggregation.
    """
    fine = refined.mesh
    if fine.n_points <= TWO_GRID_LIMIT:
        return np.asarray(extent_solve.solve_extent(fine).extent, dtype=np.float64)
    with blas_held():
        system = fine_system(mesh, refined, extent, gradients=gradients, coarse_gradients=coarse_gradients)
        if system is None:
            return np.asarray(extent_solve.solve_extent(fine).extent, dtype=np.float64)
        x = system.x
        solved = _two_grid_cg(system, rtol=rtol, seed=seed, maxiter=maxiter)
        if solved is None:       # not converged (not seen): the monotone AMG solve from scratch
            return np.asarray(extent_solve.solve_extent(fine).extent, dtype=np.float64)
        x[system.inner] = solved
        if system.problem == "poisson":
            x = x / x.max()
    return x


def fine_system(mesh: TetMesh, refined: RedRefinement, extent: np.ndarray, *, gradients=None,
                coarse_gradients=None) -> FineSystem | None:
    """The fine extent system of :func:`two_grid_extent` started from ``extent`` interpolated
    onto the red refinement; None when either mesh has no free vertex."""
    fine = refined.mesh
    n = mesh.n_points
    problem, dofs_f, values_f = extent_solve.dirichlet_values(fine)
    _, dofs_c, _ = extent_solve.dirichlet_values(mesh)
    coarse_entries = None if coarse_gradients is None else extent_solve.stiffness_entries(*coarse_gradients)
    fine_entries = None if gradients is None or coarse_entries is None else \
        refined_entries(coarse_entries, gradients)
    stiffness_f, load_f = extent_solve.assemble(fine, problem, gradients=gradients, entries=fine_entries)
    stiffness_c, _ = extent_solve.assemble(mesh, problem, gradients=coarse_gradients, entries=coarse_entries)
    prolong = _prolongation(n, refined.edges)
    free_f = np.ones(fine.n_points, dtype=bool)
    free_f[dofs_f] = False
    free_c = np.ones(n, dtype=bool)
    free_c[dofs_c] = False
    inner_f, inner_c = np.flatnonzero(free_f), np.flatnonzero(free_c)
    if len(inner_f) == 0 or len(inner_c) == 0:
        return None
    x = prolong @ np.asarray(extent, dtype=np.float64)
    if problem == "poisson":
        x[dofs_f] = 0.0
        x *= float(load_f @ x) / float(x @ (stiffness_f @ x))
    else:
        x[dofs_f] = values_f
    rows = stiffness_f[inner_f]
    return FineSystem(problem=problem, x=x, inner=inner_f, matrix=rows[:, inner_f].tocsr(),
                      rhs=load_f[inner_f] - rows @ np.where(free_f, 0.0, x),
                      prolong=prolong[inner_f][:, inner_c].tocsr(),
                      coarse_matrix=stiffness_c[inner_c][:, inner_c].tocsr())


def refined_entries(coarse_entries, gradients) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`fieldgen.fe.extent.stiffness_entries` of the red refinement from the parents'
    ``coarse_entries`` and the fine hat ``gradients`` (grad, det) of
    :func:`fieldgen.fe.refinement.refined_gradients`: a corner child's gradients are twice its
    parent's and its volume an eighth, so its entries are half the parent's, to the bit (scaling
    by powers of two is exact); only the four inner children's are computed."""
    values, diagonal, _ = coarse_entries
    grad, det = gradients
    t = len(values)
    inner = np.ascontiguousarray(np.asarray(grad).reshape(t, 8, 4, 3)[:, 4:]).reshape(-1, 4, 3)
    inner_values, inner_diagonal, _ = extent_solve.stiffness_entries(inner, np.asarray(det).reshape(t, 8)[:, 4:].ravel())
    fine_values, fine_diagonal = np.empty((t, 8, 6)), np.empty((t, 8, 4))
    fine_values[:, :4] = 0.5 * values[:, None]
    fine_values[:, 4:] = inner_values.reshape(t, 4, 6)
    fine_diagonal[:, :4] = 0.5 * diagonal[:, None]
    fine_diagonal[:, 4:] = inner_diagonal.reshape(t, 4, 4)
    return fine_values.reshape(-1, 6), fine_diagonal.reshape(-1, 4), np.abs(det) / 6.0


def _two_grid_cg(system: FineSystem, *, rtol: float, seed: int, maxiter: int) -> np.ndarray | None:
    """CG on ``system`` from its start, preconditioned by the two-grid cycle; the solution on its
    free vertices, or None when CG does not converge."""
    # lazy: pyamg is heavy and only a build needs it (warmed while TetGen runs, sizing.mesher)
    import pyamg
    from pyamg.relaxation.relaxation import gauss_seidel  # lazy: with pyamg, above
    from scipy.sparse.linalg import LinearOperator  # lazy: with pyamg, above

    matrix, rhs, p = system.matrix, system.rhs, system.prolong
    restrict = p.T.tocsr()
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        coarse = pyamg.smoothed_aggregation_solver(system.coarse_matrix, symmetry="symmetric",
                                                   max_coarse=500).aspreconditioner()
    finally:
        np.random.set_state(state)

    def cycle(r):
        r = np.asarray(r, dtype=np.float64).ravel()
        z = np.zeros_like(r)
        gauss_seidel(matrix, z, r, iterations=1, sweep="forward")
        z += p @ coarse.matvec(restrict @ (r - matrix @ z))
        gauss_seidel(matrix, z, r, iterations=1, sweep="backward")
        return z

    start = system.x[system.inner].copy()
    initial = float(np.linalg.norm(rhs - matrix @ start))
    scale = float(np.linalg.norm(rhs))
    # rtol x the start's residual, but not below rounding of the right-hand side (a start that
    # is already the fine solution, as for a linear field, is kept).
    target = max(rtol * initial, ROUNDING * scale)
    if initial <= target:
        return start
    # pyamg measures against the right-hand side's norm, or absolutely when it is 0.
    y, info = pyamg.krylov.cg(matrix, rhs, x0=start, tol=target / scale if scale > 0.0 else target,
                              maxiter=maxiter, M=LinearOperator(matrix.shape, matvec=cycle, dtype=np.float64))
    return None if info != 0 else y
