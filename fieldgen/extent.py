"""The extent field e(x) by a P1 finite-element heat solve (docs/model.md §2.2, D 5.1.1, E19 VI-A).

Laplace ``Δe = 0`` with e = 0 on FREE faces, e = 1 on RIGID faces and zero flux on INSULATED
faces; with no RIGID face, Poisson ``-Δe = 1`` with e = 0 on FREE faces, divided by ``max e``.
A vertex on both a FREE and a RIGID face is FREE (e = 0): the contact surface must carry exactly
zero pressure so contact force stays continuous as objects touch.

P1 assembly from the hat-function gradients (scikit-fem's assembly is the tested reference);
Dirichlet values by scikit-fem's ``condense``
(symmetric); a direct sparse solve for small systems, pyamg smoothed aggregation + CG for large
ones. Everything runs under ``threadpool_limits(1)`` and pyamg's random draws are seeded, so the
result is bit-identical whatever the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import BuildError, InputError
from .mesh import FREE, RIGID, TetMesh, hat_gradients

DIRECT_LIMIT = 10_000  #: unknowns above which AMG-CG is used (spsolve took 3.7 s at 22k, AMG-CG 0.3 s)


@dataclass
class ExtentSolution:
    """The extent at each vertex and how it was obtained."""

    extent: np.ndarray        # (n,) in [0, 1] (clipped after the check)
    problem: str              # "laplace" | "poisson"
    solver: str               # "direct" | "amg-cg"
    iterations: int
    relative_residual: float
    max_violation: float      # largest excursion outside [0, 1] before clipping (0 if none)


def dirichlet_values(mesh: TetMesh) -> tuple[str, np.ndarray, np.ndarray]:
    """Problem kind, Dirichlet vertex indices and their values, from the boundary markers (FREE wins)."""
    free = mesh.vertices_with(FREE)
    rigid = np.setdiff1d(mesh.vertices_with(RIGID), free)
    if len(free) == 0:
        raise InputError("the mesh has no FREE (contacting) boundary face, so e = 0 is nowhere imposed",
                         fix="mark the contacting surface as free")
    if len(rigid) == 0:
        return "poisson", free, np.zeros(len(free))
    dofs = np.concatenate([free, rigid])
    values = np.concatenate([np.zeros(len(free)), np.ones(len(rigid))])
    order = np.argsort(dofs, kind="stable")
    return "laplace", dofs[order], values[order]


def assemble(mesh: TetMesh, problem: str):
    """Stiffness matrix (CSR) and load vector of the P1 problem (load = 1 for Poisson, 0 for Laplace).

    Assembled directly from the hat-function gradients: K_ij = Σ_tets V ∇λ_i·∇λ_j, load_i =
    Σ_tets V/4. Written by hand because scikit-fem's generic assembly (``Basis`` + ``asm``, kept
    as :func:`assemble_skfem`, the reference the tests compare against) took 5.3 s at 1M tets
    on this machine, this 1.5 s; the matrices agree to rounding. K is symmetric, so only the six
    edge entries (i < j by vertex index) of each tet are summed into the upper triangle U and
    K = U + Uᵀ + diag (the diagonal by bincount): 6 instead of 16 entries per tet to convert
    (at 1M tets the 16-entry COO -> CSR conversion alone took 0.8 s).
    """
    from scipy.sparse import coo_matrix, diags

    n = mesh.n_points
    tets = np.asarray(mesh.tets, dtype=np.int64)
    gradients, det = hat_gradients(np.asarray(mesh.points, dtype=np.float64), tets)
    volume = np.abs(det) / 6.0
    local = np.matmul(gradients, gradients.transpose(0, 2, 1))                        # (t, 4, 4)
    local *= volume[:, None, None]
    first, second = np.triu_indices(4, k=1)
    index = tets.astype(np.int32 if n < 2 ** 31 else np.int64)
    a, b = index[:, first].ravel(), index[:, second].ravel()
    upper = coo_matrix((local[:, first, second].ravel(), (np.minimum(a, b), np.maximum(a, b))),
                       shape=(n, n)).tocsr()
    diagonal = np.bincount(tets.ravel(), weights=local[:, np.arange(4), np.arange(4)].ravel(), minlength=n)
    stiffness = (upper + upper.T + diags(diagonal, format="csr")).tocsr()
    stiffness.sum_duplicates()
    stiffness.sort_indices()
    if problem == "poisson":
        load = np.bincount(tets.ravel(), weights=np.repeat(volume / 4.0, 4), minlength=n)
    else:
        load = np.zeros(n)
    return stiffness, load


def assemble_skfem(mesh: TetMesh, problem: str):
    """The same system assembled by scikit-fem (the reference for :func:`assemble`)."""
    from skfem import Basis, ElementTetP1, MeshTet, asm
    from skfem.models.poisson import laplace, unit_load

    skmesh = MeshTet(np.ascontiguousarray(mesh.points.T), np.ascontiguousarray(mesh.tets.T), validate=False)
    basis = Basis(skmesh, ElementTetP1())
    stiffness = asm(laplace, basis).tocsr()
    if problem == "poisson":
        load = asm(unit_load, basis)
    else:
        load = np.zeros(mesh.n_points)
    return stiffness, load


def _amg_cg(matrix, rhs, *, rtol: float, seed: int, maxiter: int = 500):
    """Smoothed-aggregation AMG preconditioned CG; pyamg's np.random draws are seeded and restored."""
    import pyamg

    state = np.random.get_state()
    try:
        np.random.seed(seed)
        ml = pyamg.smoothed_aggregation_solver(matrix, symmetry="symmetric", max_coarse=500)
        residuals: list[float] = []
        x0 = np.zeros_like(rhs)
        x = ml.solve(rhs, x0=x0, tol=rtol, accel="cg", maxiter=maxiter, residuals=residuals)
    finally:
        np.random.set_state(state)
    return x, max(len(residuals) - 1, 0)


def solve_extent(mesh: TetMesh, *, rtol: float = 1e-10, seed: int = 0,
                 direct_limit: int = DIRECT_LIMIT) -> ExtentSolution:
    """Solve for the extent e at every vertex (D 5.1.1); checked residual and maximum principle.

    ``direct_limit``: systems with more unknowns use AMG-CG (set it to 0 to force AMG).
    Raises BuildError if the relative residual of the condensed system exceeds ``rtol``.
    """
    from scipy.sparse.linalg import spsolve
    from skfem import condense
    from threadpoolctl import threadpool_limits

    problem, dofs, values = dirichlet_values(mesh)
    with threadpool_limits(1):
        stiffness, load = assemble(mesh, problem)
        x = np.zeros(mesh.n_points)
        x[dofs] = values
        matrix, rhs, _, interior = condense(stiffness, load, x=x, D=dofs)
        matrix = matrix.tocsr()
        if len(interior) == 0:
            solution, solver, iterations = np.zeros(0), "direct", 0
        elif len(interior) <= direct_limit:
            solution = spsolve(matrix.tocsc(), rhs)
            solver, iterations = "direct", 1
        else:
            solution, iterations = _amg_cg(matrix, rhs, rtol=0.1 * rtol, seed=seed)
            solver = "amg-cg"
        rhs_norm = np.linalg.norm(rhs)
        residual = np.linalg.norm(rhs - matrix @ solution) / rhs_norm if rhs_norm > 0 else 0.0
    if not residual <= rtol:
        raise BuildError(
            f"the extent solve did not converge: relative residual {residual:.3g} > {rtol:.3g} "
            f"after {iterations} iterations ({solver}, {len(interior)} unknowns)",
            fix="check the mesh for degenerate tets, or loosen rtol")
    x[interior] = solution
    if problem == "poisson":
        peak = x.max()
        if not peak > 0:
            raise BuildError(f"the Poisson extent has maximum {peak:.3g}, not positive",
                             fix="check that the mesh has interior vertices and a free boundary")
        x = x / peak  # exactly 1 at the maximum (IEEE: peak / peak == 1)
    violation = float(max(0.0, -x.min(), x.max() - 1.0))
    extent = np.clip(x, 0.0, 1.0)
    return ExtentSolution(extent=extent, problem=problem, solver=solver, iterations=int(iterations),
                          relative_residual=float(residual), max_violation=violation)
