"""The extent field e(x) by a P1 finite-element heat solve (docs/model.md §2.2, D 5.1.1, E19 VI-A).

Laplace ``Δe = 0`` with e = 0 on FREE faces, e = 1 on RIGID faces and zero flux on INSULATED
faces; with no RIGID face, Poisson ``-Δe = 1`` with e = 0 on FREE faces, divided by ``max e``.
A vertex on both a FREE and a RIGID face is FREE (e = 0): the contact surface must carry exactly
zero pressure so contact force stays continuous as objects touch.

P1 assembly from the hat-function gradients (scikit-fem's assembly is the tested reference);
Dirichlet values by scikit-fem's ``condense``
(symmetric); a direct sparse solve for small systems, pyamg smoothed aggregation + CG for large
ones.

Monotone by construction. On meshes with obtuse dihedral angles (TetGen's, always) the Galerkin
stiffness has positive off-diagonal couplings, and the P1 solution can leave [0, 1] (the discrete
maximum principle fails, most at the rim where a free face meets a bonded one). :func:`solve_extent` therefore solves the Galerkin system first and, only where its
solution leaves the bounds, *upwinds* the positive couplings of the edges around the offending
vertices: the coupling k_ij > 0 becomes -k_ij, its magnitude kept with a diffusive sign
(artificial diffusion d_ij = 2 k_ij on that edge, added to both diagonals, so rows still sum to
zero and the operator stays symmetric positive definite). d_ij = k_ij (coupling 0) is the least
diffusion that gives an M-matrix, but it can cut a vertex off from every neighbour that is off
the free surface, and such a vertex then sits at e = 0 exactly (found on a CAD part, beside the
free surface; :func:`fieldgen.meshing.refine.refine_zero_tets` assumes the operator couples every edge).
It solves again and repeats while anything is out of bounds.
With every positive coupling upwinded the operator is an M-matrix, for which the discrete maximum
principle holds, so the loop ends; in practice one round, on a few percent of the positive
couplings (docs/design/extent-and-estimate.md). This is algebraic flux correction with a limiter that is 1 (Galerkin, full
accuracy) on every edge except those next to a violation, where it is 0 (discrete upwinding).
A mesh whose Galerkin solution is within bounds (the slab, the shell) is solved exactly as
before. Nothing is clipped: the returned extent is the solution of the final linear system,
except where that solution is positive but below the solver's precision (far along a thin wall):
such a value is the smallest positive double, not the 0 or rounding negative the solver returns.

Everything runs under one BLAS thread (:func:`fieldgen.threads.blas_held`) and pyamg's random
draws are seeded, so the result is bit-identical whatever the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix, diags, triu

from fieldgen.errors import BuildError, InputError
from fieldgen.meshing.tetmesh import FREE, RIGID, TetMesh, face_keys, hat_gradients, tet_volumes
from fieldgen.surface.components import components
from fieldgen.threads import blas_held
from fieldgen.units import length_scale

#: Excursions outside [0, 1] this small are the linear solver's rounding, not a maximum-principle
#: violation: AMG-CG returns values like -1e-29 where the exact discrete solution is 0 (a vertex
#: whose neighbours all lie on the free surface). They are set to the bound and reported as
#: ``ExtentSolution.rounding``; anything larger is corrected by upwinding.
ROUNDING = 1e-12
#: Unknowns above which AMG-CG is used: below it the direct solve is as fast, above it AMG-CG is
#: faster (the timings: docs/design/extent-and-estimate.md).
DIRECT_LIMIT = 2_000


@dataclass
class ExtentSolution:
    """The extent at each vertex and how it was obtained."""

    extent: np.ndarray        # (n,) in [0, 1] (clipped after the check)
    problem: str              # "laplace" | "poisson"
    solver: str               # "direct" | "amg-cg"
    iterations: int
    relative_residual: float
    max_violation: float      # largest excursion of the returned extent outside [0, 1] (0: none)
    upwinded_edges: int = 0   # edges whose anti-diffusive (positive) coupling was upwinded
    positive_edges: int = 0   # edges of the Galerkin stiffness with a positive coupling
    rounds: int = 1           # linear solves: 1 when the Galerkin solution already obeys the bounds
    rounding: float = 0.0     # largest excursion (<= ROUNDING) set to the bound: solver rounding
    unreached: tuple = ()     # UnreachedPiece of each piece with no RIGID face, given its own Poisson field


#: Local faces of a tet (face i opposite vertex i).
TET_FACES = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])


@dataclass(frozen=True)
class UnreachedPiece:
    """A piece of a Laplace part that no path inside the part joins to a RIGID face
    (docs/model.md §2.2): its tets, and its size and place, in m."""

    tets: np.ndarray          # indices of its tets in the mesh
    volume: float             # m^3
    centroid: np.ndarray      # (3,) m, of its volume
    lower: np.ndarray         # (3,) m, bounding box
    upper: np.ndarray

    @property
    def size(self) -> float:
        """The diagonal of its bounding box, m."""
        return float(np.linalg.norm(self.upper - self.lower))


def tet_pieces(tets: np.ndarray, n_points: int) -> np.ndarray:
    """Each tet's piece: tets joined through shared faces, numbered in the order of each piece's
    lowest tet. Pieces that touch only at a vertex or an edge are separate: no split of interior
    edges or faces can join them (docs/model.md §2.2)."""
    tets = np.asarray(tets, dtype=np.int64)
    keys = face_keys(tets[:, TET_FACES].reshape(-1, 3), n_points)
    order = np.argsort(keys, kind="stable")
    same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    pairs = np.stack([order[same] // 4, order[same + 1] // 4], axis=1)
    return components(len(tets), pairs)[1]


def unreached_tets(mesh: TetMesh) -> np.ndarray:
    """Per tet: whether its piece (:func:`tet_pieces`) holds no RIGID boundary face; all False for
    a part with no RIGID face at all (a Poisson part, whose every piece has its own source)."""
    rigid_faces = np.asarray(mesh.boundary_faces, dtype=np.int64)[np.asarray(mesh.boundary_markers) == RIGID]
    if not len(rigid_faces):
        return np.zeros(mesh.n_tets, dtype=bool)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    piece = tet_pieces(tets, mesh.n_points)
    rigid_keys = face_keys(rigid_faces, mesh.n_points)
    holds = np.isin(face_keys(tets[:, TET_FACES].reshape(-1, 3), mesh.n_points), rigid_keys).reshape(-1, 4).any(axis=1)
    reached = np.zeros(piece.max() + 1, dtype=bool)
    reached[piece[holds]] = True
    return ~reached[piece]


def unreached_pieces(mesh: TetMesh, unreached: np.ndarray) -> tuple[np.ndarray, tuple[UnreachedPiece, ...]]:
    """The vertices that only ``unreached`` tets hold, each one's group (-1 elsewhere: the
    unreached tets joined through shared vertices, which one Poisson solve couples) and the
    groups as :class:`UnreachedPiece`."""
    tets = np.asarray(mesh.tets, dtype=np.int64)
    own = np.zeros(mesh.n_points, dtype=bool)
    own[tets[unreached].ravel()] = True
    own[tets[~unreached].ravel()] = False
    inside = tets[unreached]
    label = components(mesh.n_points, np.stack([np.repeat(inside[:, 0], 3), inside[:, 1:].ravel()], axis=1))[1]
    tet_group = label[inside[:, 0]]
    groups, tet_group = np.unique(tet_group, return_inverse=True)
    group = np.full(mesh.n_points, -1, dtype=np.int64)
    group[inside.ravel()] = np.repeat(tet_group, 4)
    group[~own] = -1
    points = np.asarray(mesh.points, dtype=np.float64)
    volumes = tet_volumes(points, inside)
    centroids = points[inside].mean(axis=1)
    index = np.flatnonzero(unreached)
    pieces = []
    for g in range(len(groups)):
        mine = tet_group == g
        corners = points[inside[mine]].reshape(-1, 3)
        volume = float(volumes[mine].sum())
        pieces.append(UnreachedPiece(tets=index[mine], volume=volume,
                                     centroid=(volumes[mine] @ centroids[mine]) / volume,
                                     lower=corners.min(axis=0), upper=corners.max(axis=0)))
    return group, tuple(pieces)


def unreached_warnings(solution: ExtentSolution, units: str = "m") -> list[str]:
    """One warning per piece the extent gave a field of its own, naming its volume and place in
    ``units`` (docs/model.md §2.2)."""
    scale = length_scale(units)

    def where(x, size):
        x = np.where(np.abs(x) < 1e-9 * size, 0.0, x) / scale     # rounding beside 0 printed as 0
        return "(" + ", ".join(f"{v:.4g}" for v in x) + ")"

    return [f"a piece of the part of volume {piece.volume / scale ** 3:.4g} {units}^3, centred at "
            f"{where(piece.centroid, piece.size)} {units} (box {where(piece.lower, piece.size)} to "
            f"{where(piece.upper, piece.size)}), has no "
            "path inside the part to a rigid (bonded, core or skin interior) face: it was given a field of "
            "its own, as a part without rigid faces is (Poisson, 1 at its deepest point); bond a face of it "
            "or give it a core to hold it from behind"
            for piece in solution.unreached]


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


def assemble(mesh: TetMesh, problem: str, gradients=None, entries=None):
    """Stiffness matrix (CSR) and load vector of the P1 problem (load = 1 for Poisson, 0 for Laplace).

    Assembled directly from the hat-function gradients: K_ij = Σ_tets V ∇λ_i·∇λ_j, load_i =
    Σ_tets V/4. Written by hand because scikit-fem's generic assembly (``Basis`` + ``asm``, kept
    as :func:`assemble_skfem`, the reference the tests compare against) took 5.3 s at 1M tets
    on this machine, this 1.5 s; the matrices agree to rounding. ``gradients``: the mesh's
    :func:`~fieldgen.meshing.tetmesh.hat_gradients`, when the caller has them; ``entries``: their
    :func:`stiffness_entries`, when the caller has those. K is symmetric, so only the six
    edge entries (i < j by vertex index) of each tet are summed into the upper triangle U and
    K = U + Uᵀ + diag (the diagonal by bincount): 6 instead of 16 entries per tet to convert
    (at 1M tets the 16-entry COO -> CSR conversion alone took 0.8 s).
    """

    n = mesh.n_points
    tets = np.asarray(mesh.tets, dtype=np.int64)
    if entries is None:
        gradients = hat_gradients(np.asarray(mesh.points, dtype=np.float64), tets) if gradients is None \
            else gradients
        entries = stiffness_entries(*gradients)
    values, diagonal_values, volume = entries
    first, second = np.triu_indices(4, k=1)
    index = tets.astype(np.int32 if n < 2 ** 31 else np.int64)
    a, b = index[:, first].ravel(), index[:, second].ravel()
    upper = coo_matrix((values.ravel(), (np.minimum(a, b), np.maximum(a, b))), shape=(n, n)).tocsr()
    diagonal = np.bincount(tets.ravel(), weights=diagonal_values.ravel(), minlength=n)
    stiffness = (upper + upper.T + diags(diagonal, format="csr")).tocsr()
    stiffness.sum_duplicates()
    stiffness.sort_indices()
    if problem == "poisson":
        load = np.bincount(tets.ravel(), weights=np.repeat(volume / 4.0, 4), minlength=n)
    else:
        load = np.zeros(n)
    return stiffness, load


def stiffness_entries(gradients: np.ndarray, det: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each tet's P1 stiffness entries from its hat gradients (t, 4, 3) and det (t,): (t, 6)
    V ∇λ_i·∇λ_j for the pairs i < j in ``np.triu_indices(4, 1)`` order, (t, 4) V |∇λ_i|², and the
    volumes V (t,)."""
    volume = np.abs(det) / 6.0
    # Entry by entry over (4, 3, t) planes: three times faster than a (t, 4, 4) matmul.
    planes = np.ascontiguousarray(np.transpose(gradients, (1, 2, 0)))

    def entry(i, j):
        return (planes[i, 0] * planes[j, 0] + planes[i, 1] * planes[j, 1] + planes[i, 2] * planes[j, 2]) * volume

    first, second = np.triu_indices(4, k=1)
    values = np.stack([entry(i, j) for i, j in zip(first, second)], axis=1)
    return values, np.stack([entry(i, i) for i in range(4)], axis=1), volume


def assemble_skfem(mesh: TetMesh, problem: str):
    """The same system assembled by scikit-fem (the reference for :func:`assemble`)."""
    # lazy: scikit-fem is heavy and only the reference assembly and the condensed solve need it
    from skfem import Basis, ElementTetP1, MeshTet, asm
    from skfem.models.poisson import laplace, unit_load  # lazy: with skfem, above

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
    # lazy: pyamg is heavy and only a build needs it (warmed while TetGen runs, sizing.mesher)
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


def positive_couplings(stiffness) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Edges (i < j) whose stiffness coupling k_ij is positive, and k_ij: the anti-diffusive
    couplings that break the M-matrix property (obtuse dihedral angles opposite the edge)."""

    upper = triu(stiffness, k=1, format="coo")
    positive = upper.data > 0
    order = np.lexsort((upper.col[positive], upper.row[positive]))       # deterministic edge order
    return (upper.row[positive][order].astype(np.int64), upper.col[positive][order].astype(np.int64),
            upper.data[positive][order])


#: Artificial diffusion on an upwinded edge, in units of its positive coupling k_ij: 2 turns the
#: coupling into -k_ij (module docstring); 1 would be plain discrete upwinding (coupling 0).
UPWIND_DIFFUSION = 2.0


def upwinded(stiffness, i: np.ndarray, j: np.ndarray, coupling: np.ndarray):
    """The stiffness with artificial diffusion UPWIND_DIFFUSION * ``coupling`` on edges (i, j):
    positive couplings k_ij become -k_ij; symmetric, rows still summing to zero, an M-matrix
    when every positive coupling is upwinded."""

    coupling = UPWIND_DIFFUSION * np.asarray(coupling, dtype=np.float64)
    n = stiffness.shape[0]
    diffusion = coo_matrix((np.concatenate([-coupling, -coupling]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                           shape=(n, n)).tocsr()
    diagonal = np.bincount(i, weights=coupling, minlength=n) + np.bincount(j, weights=coupling, minlength=n)
    out = (stiffness + diffusion + diags(diagonal, format="csr")).tocsr()
    out.sum_duplicates()
    out.sort_indices()
    return out


def _out_of_bounds(x: np.ndarray) -> np.ndarray:
    return (x < -ROUNDING) | (x > 1.0 + ROUNDING)


def _positive_where_joined(x: np.ndarray, matrix, dofs: np.ndarray, values: np.ndarray, problem: str,
                           sourced: np.ndarray | None = None) -> np.ndarray:
    """``x`` with every unknown that the exact solution of ``matrix``'s system makes positive
    raised to the smallest positive double where the solver left it at 0 or below.

    The final operator is an M-matrix wherever it was upwinded, so its solution is strictly
    positive at every unknown joined to a source: through the load (Poisson: every unknown), or
    through couplings to an e = 1 vertex (Laplace). Along a thin wall far from its rigid face the
    exact value falls below the solver's absolute precision (about 1e-16 of e = 1;
    docs/design/extent-and-estimate.md) and can come out as 0 or a rounding negative;
    such a vertex would leave tets at e = 0 at all four vertices, which carry no force. Vertices
    with no such path (cut off behind the free surface) stay at 0. ``sourced``: vertices of a
    Laplace part's unreached pieces, which carry a Poisson load of their own."""
    fixed = np.zeros(len(x), dtype=bool)
    fixed[dofs] = True
    low = ~fixed & (x <= 0.0)
    if not low.any():
        return x
    if problem == "poisson":
        joined = low
    else:
        # Components of the coupling graph without the e = 0 vertices; joined if one holds an e = 1 vertex.
        rigid = np.zeros(len(x), dtype=bool)
        rigid[dofs[values > 0.5]] = True
        if sourced is not None:
            rigid |= sourced & ~fixed            # a load lifts them as the e = 1 vertices lift theirs
        index = np.flatnonzero(~fixed | rigid)
        coupled = matrix[index][:, index].tocoo()
        _, label = components(len(index), np.stack([coupled.row, coupled.col], axis=1))
        lifted = np.zeros(label.max() + 1, dtype=bool)
        lifted[label[rigid[index]]] = True
        joined = np.zeros(len(x), dtype=bool)
        joined[index] = lifted[label]
        joined &= low
    if not joined.any():
        return x
    out = x.copy()
    out[joined] = np.finfo(np.float64).tiny
    return out


def solve_extent(mesh: TetMesh, *, rtol: float = 1e-10, seed: int = 0,
                 direct_limit: int = DIRECT_LIMIT) -> ExtentSolution:
    """Solve for the extent e at every vertex (D 5.1.1), monotone: every value in [0, 1].

    Galerkin P1 first; where that leaves [0, 1], the positive couplings around the offending
    vertices are upwinded and the system solved again (module docstring), until no vertex is out
    of bounds. ``direct_limit``: systems with more unknowns use AMG-CG (0 forces AMG).
    Raises BuildError if the relative residual of the condensed system exceeds ``rtol``.
    """
    problem, dofs, values = dirichlet_values(mesh)
    group = np.full(mesh.n_points, -1, dtype=np.int64)
    solution = _monotone_solve(mesh, problem, dofs, values, group, (), rtol=rtol, seed=seed,
                               direct_limit=direct_limit)
    # Only a Laplace part with tets at e = 0 throughout can have a piece no path joins to a RIGID
    # face (the refinement leaves none elsewhere): the search for such pieces runs then only.
    if problem == "laplace" and np.any(np.all((solution.extent <= 0.0)[mesh.tets], axis=1)):
        unreached = unreached_tets(mesh)
        if unreached.any():
            group, pieces = unreached_pieces(mesh, unreached)
            solution = _monotone_solve(mesh, problem, dofs, values, group, pieces, rtol=rtol, seed=seed,
                                       direct_limit=direct_limit)
    return solution


def _monotone_solve(mesh: TetMesh, problem: str, dofs, values, group: np.ndarray, pieces: tuple, *,
                    rtol: float, seed: int, direct_limit: int) -> ExtentSolution:
    """:func:`solve_extent` with the Dirichlet ``dofs`` and ``values``, and in a Laplace part the
    unreached ``pieces`` (each vertex's ``group``, -1 outside them) under a Poisson source each."""
    with blas_held():
        stiffness, load = assemble(mesh, "poisson" if pieces else problem)
        edge_i, edge_j, coupling = positive_couplings(stiffness)
        upwind = np.zeros(len(coupling), dtype=bool)
        matrix, rounds, iterations = stiffness, 0, 0
        while True:
            rounds += 1
            x, solver, its, residual = _solve_sides(matrix, load, dofs, values, group, rtol=rtol, seed=seed,
                                                    direct_limit=direct_limit)
            iterations += its
            if problem == "poisson":
                peak = x.max()
                if not peak > 0:
                    raise BuildError(f"the Poisson extent has maximum {peak:.3g}, not positive",
                                     fix="check that the mesh has interior vertices and a free boundary")
                x = x / peak  # exactly 1 at the maximum (IEEE: peak / peak == 1)
            elif pieces:
                x = _each_at_its_peak(x, group)
            bad = _out_of_bounds(x)
            if not bad.any() or upwind.all():
                break
            # Upwind every positive coupling on an edge touching an offending vertex or its neighbours.
            near = np.zeros(mesh.n_points, dtype=bool)
            near[bad] = True
            rows = np.flatnonzero(bad)
            near[np.concatenate([stiffness.indices[stiffness.indptr[r]:stiffness.indptr[r + 1]] for r in rows])] = True
            grown = upwind | near[edge_i] | near[edge_j]
            upwind = grown if grown.sum() > upwind.sum() else np.ones_like(upwind)   # else: the M-matrix
            matrix = upwinded(stiffness, edge_i[upwind], edge_j[upwind], coupling[upwind])
    excursion = np.maximum(-x, x - 1.0)
    violation = float(max(0.0, excursion.max()))     # 0 unless rounding defeats the M-matrix
    rounding = float(max(0.0, excursion[excursion <= ROUNDING].max(initial=0.0)))
    extent = np.clip(x, 0.0, 1.0) if excursion.max() > 0 else x
    extent = _positive_where_joined(extent, matrix, dofs, values, problem, sourced=group >= 0)
    if violation <= ROUNDING:
        violation = 0.0
    return ExtentSolution(extent=extent, problem=problem, solver=solver, iterations=int(iterations),
                          relative_residual=float(residual), max_violation=violation,
                          upwinded_edges=int(upwind.sum()), positive_edges=int(len(coupling)), rounds=rounds,
                          rounding=rounding, unreached=pieces)


def _solve_sides(matrix, load, dofs, values, group: np.ndarray, *, rtol: float, seed: int, direct_limit: int):
    """:func:`_solve_dirichlet`, in a Laplace part with unreached pieces (``group`` >= 0) as two
    solves of one matrix: the Laplace side with the pieces' vertices held at 0, and the pieces'
    Poisson side (``load`` there) with every other vertex held at 0, added. Apart, each side's
    residual is relative to its own right-hand side: together, a piece's load (of the order of its
    volume) would be lost in the rounding of the Laplace side's (docs/model.md §2.2)."""
    own = group >= 0
    if not own.any():
        return _solve_dirichlet(matrix, load, dofs, values, rtol=rtol, seed=seed, direct_limit=direct_limit)
    held = np.zeros(len(own), dtype=bool)
    held[dofs] = True
    value = np.zeros(len(own))
    value[dofs] = values
    laplace_side = np.flatnonzero(held | own)
    x, solver, its, residual = _solve_dirichlet(matrix, np.zeros_like(load), laplace_side, value[laplace_side],
                                                rtol=rtol, seed=seed, direct_limit=direct_limit)
    poisson_side = np.flatnonzero(held | ~own)
    y, _, more, other = _solve_dirichlet(matrix, np.where(own, load, 0.0), poisson_side,
                                         np.zeros(len(poisson_side)), rtol=rtol, seed=seed,
                                         direct_limit=direct_limit)
    return x + y, solver, its + more, max(residual, other)


def _each_at_its_peak(x: np.ndarray, group: np.ndarray) -> np.ndarray:
    """``x`` with each unreached piece's values (``group`` >= 0) divided by that piece's maximum,
    as the Poisson extent of a part without rigid faces is (docs/model.md §2.2)."""
    own = group >= 0
    peak = np.full(group.max() + 1, -np.inf)
    np.maximum.at(peak, group[own], x[own])
    if not np.all(peak > 0):
        raise BuildError(f"the Poisson extent of a piece without a rigid face has maximum {peak.min():.3g}, "
                         "not positive", fix="check that the mesh has interior vertices and a free boundary")
    out = x.copy()
    out[own] = x[own] / peak[group[own]]
    return out


def _solve_dirichlet(stiffness, load, dofs, values, *, rtol: float, seed: int, direct_limit: int):
    """Solve with e = ``values`` on ``dofs``; returns (e at all vertices, solver, iterations, residual)."""
    # lazy: scipy.sparse.linalg and scikit-fem only for the direct solve of small meshes
    from scipy.sparse.linalg import spsolve
    from skfem import condense  # lazy: as above

    x = np.zeros(stiffness.shape[0])
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
    return x, solver, iterations, float(residual)
