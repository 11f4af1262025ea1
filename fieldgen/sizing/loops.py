"""Mesh size from a stated accuracy, and the discretisation error of the extent field.

The extent e is solved with linear (P1) elements (:mod:`fieldgen.fe.extent`). Its error is
estimated by two meshes: the same problem is solved again on the mesh refined 1:8 (every edge
halved, so the fine vertices are the coarse vertices and edge midpoints) and, since P1's error
falls as h^2 where the field is smooth, e - e_h ≈ (e_fine - e_h) / (1 - 1/4). At a re-entrant
edge the error falls more slowly (about h^(4/3)) and the factor 4/3 underestimates it there
(by up to 1.7/1.33); the tests compare the estimate with much finer builds of real CAD parts,
which have such edges. The boundary of a TetGen mesh is the input surface, so both meshes
cover the same domain.

Three relative errors are recorded (``error_estimate`` in the asset's metadata):

- ``extent``: the root-mean-square of e - e_h over the volume (e ranges over [0, 1], so this
  is relative to its maximum);
- ``pressure``: the root-mean-square of p0(e) - p0(e_h) over the volume divided by the largest
  pressure p0(1), for the asset's law p0 (the discretisation error of the field carried through
  the law, not the layering's interpolation error, which is ``max_interpolation_error``);
- ``characteristic_length``: |L_h - L| / L with L = V / ∫|∇e| dV (D 5.2.1).

The norms integrate the quadratic interpolant through the vertex and midpoint values (exact
mass matrix of the hierarchical quadratic basis: the hat functions plus 4 λ_i λ_j per edge).

Sizing (``--accuracy``): without a skin, the first mesh is TetGen's at about ``FIRST_TETS``
tets (more where the surface has small features); each pass solves, estimates and, until the
worst of the three errors is within the accuracy, refines locally within about ``MAX_TETS``
(the standard adaptive FEM loop): the edges with the most estimated error removed per tet added
are split (:func:`marked_edges`, docs/model.md §2.10), so tets thin across thin walls and
re-entrant edges, where the error gathers on CAD parts (a uniform edge stopped near 2% there at
the tet budget); a part with a rim has the tets holding ``DORFLER`` of the estimated squared
error bisected by scikit-fem's conforming adaptive refinement instead. (TetGen's -m with a size field from the estimate crashed, SIGSEGV, and took minutes
where it finished.) With a skin the mesh is graded by depth below the free surface (TetGen's -m
with a background size field), each pass asking for the edge near the surface that brings the
worst error to ``AIM`` x the accuracy (error ∝ h^rate).

The fine solve of the estimate is the Galerkin solution on the red refinement by a two-grid
preconditioned CG started from the coarse solution (:func:`two_grid_extent`, about 3x faster
than a fresh AMG solve); small fine meshes, and a CG that does not converge, fall back to
:func:`fieldgen.fe.extent.solve_extent`. The estimate therefore also measures what the monotone
solve's upwinding changes on the coarse mesh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fieldgen.meshing.tetmesh import FREE, RIGID, TET_EDGES, TetMesh, hat_gradients, mesh_edges, tet_volumes


DEFAULT_ACCURACY = 0.01
#: Fraction of the accuracy the sizing aims at (the rest is margin for the estimate itself).
AIM = 0.7
MAX_PASSES = 3
#: Without a skin: passes of local refinement after the first mesh, and the share of the estimated
#: squared error the tets refined in each pass hold (Dörfler marking; 0.8 reached 0.8% on
#: angle_block in three passes, 0.5 needed five).
ADAPTIVE_PASSES = 8
DORFLER = 0.8
#: The share of the edges' estimated error split in each steepest-edge pass (:func:`marked_edges`;
#: measured on idler_riser, angle_block and featuretype: 0.6 reached 1% on all three within the tet
#: budget, 0.5 and 0.7 missed it on idler_riser or took a pass more).
EDGE_DORFLER = 0.6
#: Tets added per marked tet by one bisection pass with its closure (measured 2.65-3.0 on CAD parts).
TETS_PER_MARKED = 3.0
#: The share of the budget left to a steepest-edge pass that it is given: an edge adds a little
#: more than the tets around it when it shares a tet with another chosen edge, and the split of
#: zero-pressure tets follows.
EDGE_ROOM = 0.95
#: Largest mesh the sizing asks for (tets before layering).
MAX_TETS = 280_000
#: Convergence rate of the error in the edge length assumed before two passes measure it
#: (between a re-entrant edge's 4/3 and the smooth 2).
ASSUMED_RATE = 1.5
#: With a skin, a pass must shrink the edge near the surface to at most this fraction of the
#: last (about 37% more tets), or the sizing stops: on angle_block with a 2 mm skin a last pass
#: at the tet budget shrank it to 0.95 and took 18 s to go from 2.57% to 2.67% (TetGen's meshes
#: of nearly the same size differ by more than the refinement gains).
MIN_SHRINK = 0.9
#: TetGen's tets per unit of Σ V/s³ over a coarse mesh under a size field s (:func:`predicted_tets`):
#: 5.3-7.5 measured on angle_block, featuretype and idler_riser with skins of 1-2 mm; the largest
#: is taken, so a first mesh predicted within a budget errs towards fewer tets.
SIZE_FIELD_TETS = 7.5
#: Rounds of growing the first near edge towards the budget (3-5 sufficed on angle_block with
#: skins down to 0.05 mm); the edge after the last is taken even if still predicted over.
FIRST_EDGE_ROUNDS = 8
#: Scales of a size field tried, in turn, when TetGen fails on it (:func:`mesh_with_size_field`).
#: Measured: angle_block under a 1 mm skin crashed at a near-surface edge of 0.5 x the skin and
#: meshed at 0.45 and 0.6; idler_riser under 2 mm crashed at 0.35 and meshed at 0.5; in a sweep
#: of skinned corpus builds two passes that failed meshed at 0.95.
SIZE_FIELD_RETRIES = (0.95, 1.05, 0.9)
#: Size of the first, coarse mesh (TetGen tets).
FIRST_TETS = 20_000
#: A part is plate-like when its middle extent is at least this many times its smallest (along
#: the principal axes of its surface): plate_holes is 16 (12.7 x 203 x 305 mm), the dinner plate
#: 11; the CAD parts a few centimetres across 1.1-4.2 (idler_riser 4.2) -
PLATE_RATIO = 6.0
#: - and its walls are across that axis: its mean wall thickness 2 V / A is at least this
#: fraction of its span along the axis (plate_holes 0.91, the dinner plate, a shallow dish, 0.30).
#: A U-channel or a tray 20 mm deep with 2 mm walls is about 0.1: stretched along its depth, its
#: upright walls got tets 3 times coarser across them, and L's estimate rose from 0.76% to 7.4%.
PLATE_SOLID = 0.25
#: A plate-like part's first mesh is made by TetGen in the part stretched this much across its
#: thickness, so its tets are this much thinner across than along, and aims at PLATE_FIRST_TETS
#: tets (more than FIRST_TETS: a plate needs several tets across from the start). Measured
#: (Poisson, no skin, steepest-edge passes to the budget; worst of e, p, L at about 278k tets):
#: plate_holes 1.22% and the dinner plate 1.26% with a first mesh aimed at 70k, where the
#: isotropic first mesh stopped at 3.47% and 4.10%; aimed at 20k, 40k, 55k and 100k, 1.25-1.64%;
#: stretches of 2, 2.5, 3.5, 4 and 5 on plate_holes, 1.35-2.2%.
PLATE_STRETCH = 3.0
PLATE_FIRST_TETS = 70_000
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
    edges: np.ndarray | None = field(default=None, repr=False)         # (m, 2) the mesh's edges
    tet_edges: np.ndarray | None = field(default=None, repr=False)     # (t, 6) each tet's edges (rows of edges)
    edge_surplus: np.ndarray | None = field(default=None, repr=False)  # (m,) see estimate_error

    def to_metadata(self) -> dict:
        return {"method": "two-mesh: the extent solved again on the mesh refined 1:8, "
                          f"difference x {RICHARDSON:.4g} (P1 converges as h^2)",
                "norm": "RMS over the volume relative to the maximum (e: 1, p: p0(1)); "
                        "L = V / integral of |grad e|",
                "extent": float(self.extent), "pressure": float(self.pressure),
                "characteristic_length": float(self.characteristic_length)}


#: Red refinement: corner children (local vertex or edge-midpoint slots 0..9: the four vertices,
#: then the midpoints of ``TET_EDGES`` in order) and, per choice of the inner octahedron's diagonal,
#: its four inner children.
_CORNERS = np.array([(0, 4, 5, 6), (4, 1, 7, 8), (5, 7, 2, 9), (6, 8, 9, 3)])
_DIAGONALS = np.array([(4, 9), (5, 8), (6, 7)])
_CYCLES = np.array([(5, 6, 8, 7), (4, 6, 9, 7), (4, 5, 9, 8)])


def _inner_children() -> np.ndarray:
    """(3, 4, 4) slots of the inner children per diagonal, wound positively for a positive parent
    (a child's orientation relative to its parent is affine-invariant: fixed per pattern)."""
    from fieldgen.meshing.tetmesh import tet_volumes

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
    direct computation to rounding; at 280k parents 0.5 s where computing the inner children
    from their vertices took 3 s."""
    parent_grad, parent_det = gradients
    t = len(parent_det)
    grad = np.empty((t, 8, 4, 3))
    grad[:, :4] = 2.0 * parent_grad[:, None]
    for d in range(3):
        chosen = np.flatnonzero(refined.diagonal == d)
        grad[chosen, 4:] = (_INNER_MAPS[d] @ parent_grad[chosen]).reshape(-1, 4, 4, 3)
    det = np.repeat(0.125 * parent_det, 8)
    return grad.reshape(-1, 4, 3), det


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
    from fieldgen.material.damping import characteristic_length

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
    e_norm = float(_square_integrals(_hierarchical(fine_v, fine_m, tets, tet_edges, edges), volume).sum())
    p_fine_v, p_fine_m = law.pressure(fine_v), law.pressure(fine_m)
    p_h_v, p_h_m = law.pressure(extent), law.pressure(np.clip(mid_h, 0.0, 1.0))
    p_error = RICHARDSON ** 2 * _square_integrals(
        _hierarchical(p_fine_v - p_h_v, p_fine_m - p_h_m, tets, tet_edges, edges), volume)
    p_norm = float(_square_integrals(_hierarchical(p_fine_v, p_fine_m, tets, tet_edges, edges), volume).sum())
    length_h = characteristic_length(points, tets, extent, volumes=coarse_gradients[1] / 6.0,
                                     extent_gradient=np.einsum("tij,ti->tj", coarse_gradients[0], extent[tets]))
    length_f = characteristic_length(fine_points, fine_tets, fine, volumes=fine_gradients[1] / 6.0,
                                     extent_gradient=np.einsum("tij,ti->tj", fine_gradients[0], fine[fine_tets]))
    # The fine solution's departure from the coarse one's linear interpolant at each edge's
    # midpoint (relative, as the larger of e's and p0's): about h² ∂²e/∂s² / 8 along the edge,
    # the error that splitting this very edge removes.
    surplus = np.maximum(np.abs(fine_m - mid_h), np.abs(p_fine_m - p_h_m) / law.max_pressure)
    return ErrorEstimate(
        edges=edges, tet_edges=tet_edges, edge_surplus=surplus,
        extent=math.sqrt(float(e_error.sum()) / total_volume),
        pressure=math.sqrt(float(p_error.sum()) / total_volume) / law.max_pressure,
        characteristic_length=RICHARDSON * abs(length_h - length_f) / length_f,
        tet_rms_extent=np.sqrt(np.maximum(e_error, 0.0) / volume),
        tet_rms_pressure=np.sqrt(np.maximum(p_error, 0.0) / volume),
        extent_rms=math.sqrt(e_norm / total_volume), pressure_rms=math.sqrt(p_norm / total_volume),
        fine_tets=int(refined.mesh.n_tets))



#: Fine meshes with at most this many vertices are solved directly (:func:`fieldgen.fe.extent.solve_extent`).
TWO_GRID_LIMIT = 20_000
#: The estimate's fine solve stops at ``rtol`` of its starting residual, but not below this
#: fraction of the right-hand side's norm (rounding).
ROUNDING = 1e-12


def _prolongation(n: int, edges: np.ndarray):
    """(n + m, n) linear interpolation from a mesh to its red refinement: the identity on the
    vertices, the mean of the two ends on each edge midpoint."""
    from scipy.sparse import coo_matrix, identity, vstack

    m = len(edges)
    midpoints = coo_matrix((np.full(2 * m, 0.5), (np.repeat(np.arange(m), 2), edges.ravel())), shape=(m, n))
    return vstack([identity(n, format="csr"), midpoints]).tocsr()


def two_grid_extent(mesh: TetMesh, refined: RedRefinement, extent: np.ndarray, *, rtol: float = 1e-3,
                    seed: int = 0, maxiter: int = 200, gradients=None, coarse_gradients=None) -> np.ndarray:
    """The Galerkin P1 extent on the red refinement of ``mesh``, solved by CG preconditioned
    with a two-grid cycle: symmetric Gauss-Seidel on the fine mesh and, for the coarse
    correction, one smoothed-aggregation V-cycle on ``mesh``'s own stiffness (the P1 spaces are
    nested, so that is the Galerkin coarse operator Pᵀ A P). CG starts from ``extent``
    interpolated onto the fine mesh (for Poisson scaled by the energy-optimal factor, since
    ``extent`` is normalised to max 1), so it only has to find the difference the estimate
    measures. Measured on angle_block (119k tets, 950k fine): 5.6 s against 9.5 s for the fine
    AMG solve from scratch, estimates equal to 1e-4 relative. ``rtol`` (residual relative to the
    starting one, the coarse solution's on the fine mesh) 1e-3: CG starts from the coarse
    solution, so it only has to resolve the difference the estimate measures, not the whole
    field. On idler_riser's sizing passes (27k to 282k tets) 1e-3 gave the estimates of 1e-6 to
    three or four digits (e 1.6939% against 1.6936%, L 0.1857% against 0.1848%) in 6-7 CG
    iterations instead of 14, and on its steepest-edge meshes 19 instead of 42; 1e-2 moved the
    estimate of L by 6%. The residual is measured against the start's, not the right-hand
    side's: next to an e = 1 face the right-hand side holds the couplings to it, which grow as
    tets there thin, so a mesh with thin tets along it (a prism layer) started below 1e-3 of it
    and the difference came out as zero. A start that solves the fine system exactly is kept.

    Small fine meshes (``TWO_GRID_LIMIT`` vertices) are solved by :func:`fieldgen.fe.extent.solve_extent`.
    ``gradients``, ``coarse_gradients``: the fine and the coarse mesh's hat gradients, when the
    caller has them. Deterministic: one thread, seeded aggregation.
    """
    import pyamg
    from pyamg.relaxation.relaxation import gauss_seidel
    from scipy.sparse.linalg import LinearOperator
    from threadpoolctl import threadpool_limits

    from fieldgen.fe.extent import assemble, dirichlet_values, solve_extent

    fine = refined.mesh
    if fine.n_points <= TWO_GRID_LIMIT:
        return np.asarray(solve_extent(fine).extent, dtype=np.float64)
    n = mesh.n_points
    with threadpool_limits(1):
        problem, dofs_f, values_f = dirichlet_values(fine)
        _, dofs_c, _ = dirichlet_values(mesh)
        stiffness_f, load_f = assemble(fine, problem, gradients=gradients)
        stiffness_c, _ = assemble(mesh, problem, gradients=coarse_gradients)
        prolong = _prolongation(n, refined.edges)
        free_f = np.ones(fine.n_points, dtype=bool)
        free_f[dofs_f] = False
        free_c = np.ones(n, dtype=bool)
        free_c[dofs_c] = False
        inner_f, inner_c = np.flatnonzero(free_f), np.flatnonzero(free_c)
        if len(inner_f) == 0 or len(inner_c) == 0:
            return np.asarray(solve_extent(fine).extent, dtype=np.float64)
        x = prolong @ np.asarray(extent, dtype=np.float64)
        if problem == "poisson":
            x[dofs_f] = 0.0
            x *= float(load_f @ x) / float(x @ (stiffness_f @ x))
        else:
            x[dofs_f] = values_f
        matrix = stiffness_f[inner_f][:, inner_f].tocsr()
        rhs = load_f[inner_f] - stiffness_f[inner_f] @ np.where(free_f, 0.0, x)
        p = prolong[inner_f][:, inner_c].tocsr()
        restrict = p.T.tocsr()
        state = np.random.get_state()
        try:
            np.random.seed(seed)
            coarse = pyamg.smoothed_aggregation_solver(stiffness_c[inner_c][:, inner_c].tocsr(),
                                                       symmetry="symmetric", max_coarse=500).aspreconditioner()
        finally:
            np.random.set_state(state)

        def cycle(r):
            r = np.asarray(r, dtype=np.float64).ravel()
            z = np.zeros_like(r)
            gauss_seidel(matrix, z, r, iterations=1, sweep="forward")
            z += p @ coarse.matvec(restrict @ (r - matrix @ z))
            gauss_seidel(matrix, z, r, iterations=1, sweep="backward")
            return z

        start = x[inner_f].copy()
        initial = float(np.linalg.norm(rhs - matrix @ start))
        scale = float(np.linalg.norm(rhs))
        # rtol x the start's residual, but not below rounding of the right-hand side (a start that
        # is already the fine solution, as for a linear field, is kept).
        target = max(rtol * initial, ROUNDING * scale)
        if initial > target:
            # pyamg measures against the right-hand side's norm, or absolutely when it is 0.
            y, info = pyamg.krylov.cg(matrix, rhs, x0=start, tol=target / scale if scale > 0.0 else target,
                                      maxiter=maxiter, M=LinearOperator(matrix.shape, matvec=cycle, dtype=np.float64))
            if info != 0:       # not converged (not seen): the monotone AMG solve from scratch
                return np.asarray(solve_extent(fine).extent, dtype=np.float64)
            x[inner_f] = y
        if problem == "poisson":
            x = x / x.max()
    return x


def depth_graded_sizes(depth: np.ndarray, skin: float, *, near: float | None = None,
                       grading: float = 0.5) -> np.ndarray:
    """Sizes that resolve a skin of thickness ``skin``: ``near`` (default skin/2) down to 1.25 x
    skin below the free surface, then growing by ``grading`` per unit depth (the rigid interior
    is cut away)."""
    near = 0.5 * skin if near is None else near
    return near + grading * np.maximum(np.asarray(depth) - 1.25 * skin, 0.0)


# ------------------------------------------------------------------ the sizing loop

@dataclass
class SizedMesh:
    """The mesh chosen for an accuracy, its extent solution and error estimate, and the passes."""

    mesh: TetMesh
    skin: object            # SkinResult or None
    split: int              # tets split by the zero-pressure refinement of the final mesh
    solution: object        # ExtentSolution on ``mesh``
    estimate: ErrorEstimate
    accuracy: float
    history: list = field(default_factory=list)
    stopped: str = "accuracy met"   #: why the sizing stopped: one of STOP_REASONS
    refinement: str = ""            #: how passes refined: "steepest edge" or "bisection" ("" if none ran)
    kept: int = 0                   #: the pass (0-based) whose mesh this is: the one of least error
    stretch: dict | None = None     #: a plate's first mesh: {"axis": unit thin axis, "factor"}

    @property
    def passes(self) -> int:
        return len(self.history)

    def report(self) -> dict:
        return {"accuracy": float(self.accuracy), "stopped": self.stopped,
                **({"refinement": self.refinement} if self.refinement else {}),
                **({"stretch": self.stretch} if self.stretch else {}),
                "kept_pass": int(self.kept) + 1, "passes": list(self.history)}


@dataclass
class _Pass:
    """One sizing pass's mesh and results, kept while it is the best so far."""

    index: int
    worst: float
    mesh: TetMesh
    skin: object
    split: int
    solution: object
    estimate: ErrorEstimate


def _better(best: "_Pass | None", candidate: _Pass) -> _Pass:
    """The pass of smaller worst error (the earlier one on a tie). A pass can come out worse
    than the one before it: TetGen's next mesh (with a skin) or edge splits that leave flat tets
    in a plate a few tets thick (plate_holes: 3.47% at 141k tets, then 4.79% at 247k); the
    sizing then keeps the better mesh rather than the last."""
    return candidate if best is None or candidate.worst < best.worst else best


#: Why a sizing loop stopped (``SizedMesh.stopped``, the asset's ``mesher.sizing.stopped``).
STOP_REASONS = ("accuracy met", "tet budget", "pass limit")


def worst_error(estimate: "ErrorEstimate") -> float:
    """The largest of the estimate's relative errors (e, p0, L): what ``accuracy`` bounds."""
    return max(estimate.extent, estimate.pressure, estimate.characteristic_length)


def _edge_for(h: float, error: float, goal: float, rate: float) -> float:
    """Edge length that brings ``error`` at edge ``h`` to ``goal`` when error ∝ h^rate."""
    return h * (goal / max(error, 1e-300)) ** (1.0 / rate)


def accuracy_warning(estimate: "ErrorEstimate", accuracy: float, sizing: dict | None, tets: int, *,
                     sized_by: str | None = None) -> list[str]:
    """A warning when the estimated error of the field exceeds ``accuracy`` (README, "Sized by
    accuracy"), with why: ``sizing`` is the asset's ``mesher.sizing`` (:meth:`SizedMesh.report`,
    ``stopped``; ``law`` when the mesh was sized for another law). The sizing stops at a tet
    budget, so a thin-walled part or a skin can end above what was asked. ``sized_by``: what
    sized a mesh the accuracy did not size, estimated on request (``--estimate``): ``"size"`` (an
    edge length or volume given) or ``"skin"`` (fTetWild under a skin, at half the skin). Empty
    when within it."""
    worst = worst_error(estimate)
    if worst <= accuracy:
        return []
    if sized_by is not None:
        given = sized_by == "size"
        mesh = "the size given" if given else "fTetWild's mesh under the skin (its edge half the skin)"
        return [f"estimated discretisation error {100 * worst:.2f}% (e {100 * estimate.extent:.2f}%, "
                f"p {100 * estimate.pressure:.2f}%, L {100 * estimate.characteristic_length:.2f}%, on {tets:,} tets) "
                f"exceeds the accuracy asked, {100 * accuracy:g}%, on {mesh}: a smaller --edge-length "
                f"{'(or --max-volume) ' if given else ''}lowers it (P1's error falls about as the edge squared)"
                + (", and without a size the accuracy chooses the mesh" if given else "")]
    sizing = sizing or {}
    reasons = []
    if sizing.get("stopped") == "tet budget":
        band = any(p.get("meshed_by") == "band" for p in sizing.get("passes", []))
        budget = BAND_MAX_TETS if band else MAX_TETS
        reasons.append(f"the sizing stopped at its tet budget (about {budget:,} tets to solve on"
                       + ("; its last refinement ended past it" if tets > budget else "") + ")")
    elif sizing.get("stopped") == "pass limit":
        reasons.append("the sizing stopped at its last pass")
    if "law" in sizing:
        reasons.append("the mesh was sized for the law before the fit (a starting law of the fitted "
                       "shape in the spec sizes it for this one)")
    return [f"estimated discretisation error {100 * worst:.2f}% (e {100 * estimate.extent:.2f}%, "
            f"p {100 * estimate.pressure:.2f}%, L {100 * estimate.characteristic_length:.2f}%, on {tets:,} tets) "
            f"exceeds the accuracy asked, {100 * accuracy:g}%: {'; '.join(reasons) or 'the sizing stopped short'}; "
            "a larger accuracy (--accuracy, or `accuracy` in a spec) accepts it, an edge length "
            "(--edge-length, `edge_length`) chooses the mesh yourself"]


def marked_tets(estimate: ErrorEstimate, volume: np.ndarray, law, share: float = DORFLER,
                limit: int | None = None) -> np.ndarray:
    """The fewest tets that hold ``share`` of the estimated squared error (Dörfler marking), at
    most ``limit`` of the worst, sorted; a tet's error is the larger of its e and p0 errors
    (relative)."""
    density = np.maximum(estimate.tet_rms_extent, estimate.tet_rms_pressure / law.max_pressure)
    return _doerfler(density ** 2 * np.asarray(volume, dtype=np.float64), share, limit)


def mesh_by_accuracy(make_mesh, law, accuracy: float, volume: float, *,
                     progress=None, skin: float | None = None, free_surface=None,
                     max_passes: int = MAX_PASSES, max_tets: int = MAX_TETS,
                     plate: np.ndarray | None = None, first_edge: float | None = None) -> SizedMesh:
    """Mesh, solve, estimate and refine until the estimated relative errors of e, p0 and L are
    all within ``accuracy``.

    ``make_mesh(edge_length, background=None, cut=True, stretch=None) -> (mesh, whole, skin,
    split)`` meshes the part with TetGen (a uniform edge length in m, a ``background`` size
    field, or a ``stretch`` (axis, factor) for thin tets) and returns the mesh the extent is
    solved on, the whole part's mesh (before a skin cut), the skin (or None) and the number of
    zero-pressure tets split. ``volume`` is the part's (m³).

    Without a skin: :func:`_refine_locally`, whose first mesh is stretched along ``plate`` (the
    thin axis of a plate-like part, :func:`plate_axis`) if given, and has edge ``first_edge`` (m)
    if given (fTetWild's default edge with --robust); with a ``skin`` thickness (m),
    whose depth is measured from ``free_surface`` (vertices, faces): :func:`_grade_by_depth`.
    """
    from fieldgen.progress import Progress

    progress = progress or Progress(enabled=False)
    if skin is None:
        return _refine_locally(make_mesh, law, accuracy, volume, progress=progress, max_tets=max_tets,
                               plate=plate, first_edge=first_edge)
    return _grade_by_depth(make_mesh, law, accuracy, volume, progress=progress, skin=skin,
                           free_surface=free_surface, max_passes=max_passes, max_tets=max_tets)


def _pass_record(mesh, estimate, edge, marked=None, split_edges=None) -> dict:
    """One pass of ``mesher.sizing.passes``: the mesh, the edge length asked, what the previous
    pass refined (``refined_tets`` bisected, or ``split_edges``) and the estimates."""
    return {"tets": int(mesh.n_tets), "edge_length": float(edge),
            **({"refined_tets": int(len(marked))} if marked is not None else {}),
            **({"split_edges": int(len(split_edges))} if split_edges is not None else {}),
            "extent": float(estimate.extent), "pressure": float(estimate.pressure),
            "characteristic_length": float(estimate.characteristic_length)}


def _report_pass(progress, index, mesh, estimate, accuracy) -> None:
    progress.message(f"sizing pass {index + 1}: {mesh.n_tets:,} tets, estimated error e "
                     f"{100 * estimate.extent:.2f}%, p {100 * estimate.pressure:.2f}%, "
                     f"L {100 * estimate.characteristic_length:.2f}% (asked {100 * accuracy:g}%)")


def marked_edges(estimate: ErrorEstimate, volume: np.ndarray, room: int,
                 share: float = EDGE_DORFLER) -> tuple[np.ndarray, np.ndarray]:
    """The edges to split in a steepest-edge pass, as (k, 2) vertex pairs and their priorities.

    Splitting edge E (in every tet around it) removes about its surplus s_E
    (``ErrorEstimate.edge_surplus``) over the tets around it, a gain of s_E² V_E (V_E their
    volume), and adds about one tet per tet around it, c_E (a little more when two chosen edges
    share a tet: the second is then split in both halves; 1.003-1.02 x on a slab, so the caller
    passes ``EDGE_ROOM`` of what is left of its budget). Edges are taken by gain per added tet,
    s_E² V_E / c_E (the priority; ties by edge index), until they hold ``share`` of the total
    gain or their tets would pass ``room``; at least one. Where the field bends across a thin
    wall only, the chosen edges run across it (Dörfler marking over edges, with a cost)."""
    m = len(estimate.edges)
    around = estimate.tet_edges.ravel()
    count = np.bincount(around, minlength=m).astype(np.float64)
    patch = np.bincount(around, weights=np.repeat(np.asarray(volume, dtype=np.float64), 6), minlength=m)
    gain = estimate.edge_surplus ** 2 * patch
    priority = gain / count
    order = np.lexsort((np.arange(m), -priority))
    by_share = int(np.searchsorted(np.cumsum(gain[order]), share * gain.sum())) + 1
    by_room = int(np.searchsorted(np.cumsum(count[order]), room, side="right"))
    chosen = np.sort(order[:max(1, min(by_share, by_room, m))])
    return estimate.edges[chosen], priority[chosen]


def has_rim(mesh: TetMesh) -> bool:
    """Whether a vertex lies on both a FREE and a RIGID boundary face (where the Dirichlet data
    jump)."""
    return bool(np.intersect1d(mesh.vertices_with(FREE), mesh.vertices_with(RIGID)).size)


def _doerfler(squared: np.ndarray, share: float, limit: int | None) -> np.ndarray:
    """The fewest tets holding ``share`` of Σ ``squared``, at most ``limit``, sorted."""
    order = np.argsort(-squared, kind="stable")
    count = int(np.searchsorted(np.cumsum(squared[order]), share * squared.sum())) + 1
    count = min(count, len(order), len(order) if limit is None else max(int(limit), 0))
    return np.sort(order[:count])


def plate_axis(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray | None:
    """The unit thin axis of a plate-like surface, or None (``PLATE_RATIO``, ``PLATE_SOLID``).

    The axes are the principal axes of the surface's area (the triangles' centroids weighted
    by area, so a CAD export's dense fans do not tilt them); spans are the vertices' extents
    along them. The axis is snapped to a coordinate axis within 1°, rounded and signed (largest
    component positive), so rounding differences between machines do not change the mesh.
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    corners = vertices[faces]
    area = 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    if area.sum() <= 0:
        return None
    centroids = corners.mean(axis=1)
    mean = (area[:, None] * centroids).sum(axis=0) / area.sum()
    offset = centroids - mean
    _, axes = np.linalg.eigh((area[:, None, None] * offset[:, :, None] * offset[:, None, :]).sum(axis=0))
    spans = np.array([np.ptp(vertices @ axes[:, i]) for i in range(3)])
    order = np.argsort(spans)
    thin, middle = spans[order[0]], spans[order[1]]
    if thin <= 0 or middle < PLATE_RATIO * thin:
        return None
    volume = abs(np.einsum("ij,ij->i", corners[:, 0], np.cross(corners[:, 1], corners[:, 2])).sum()) / 6.0
    if 2.0 * volume / area.sum() < PLATE_SOLID * thin:
        return None                       # thin walls along the axis too (a channel, a tray)
    axis = axes[:, order[0]]
    axis = axis * (1.0 if axis[np.argmax(np.abs(axis))] > 0 else -1.0)
    if axis.max() > math.cos(math.radians(1.0)):
        axis = (axis == axis.max()).astype(np.float64)
    axis = np.round(axis / np.linalg.norm(axis), 12) + 0.0     # + 0.0: no -0.0 in the metadata
    return axis / math.sqrt(float(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]))


def _refine_locally(make_mesh, law, accuracy: float, volume: float, *, progress, max_tets: int,
                    plate: np.ndarray | None = None, first_edge: float | None = None) -> SizedMesh:
    """Adaptive refinement without a skin (the standard solve-estimate-mark-refine loop).

    A first, uniform TetGen mesh of about ``FIRST_TETS`` tets in ``volume`` (more where the
    surface has small features), then up to ``ADAPTIVE_PASSES`` passes, never past about
    ``max_tets`` tets. On CAD parts the error gathers at re-entrant edges and thin walls, where a
    uniform edge stopped near 2% at the tet budget.

    Each pass splits the edges of :func:`marked_edges` (:func:`fieldgen.meshing.tetgen.split_edges`):
    the edges along which the fine solution departs most from the coarse one, by gain per added
    tet. In a thin wall the field bends across the wall only, and these edges run across it: on
    idler_riser this reached 0.88% at 278k tets, where bisecting the marked tets in every
    direction stopped at 1.69% at the budget. A ``plate`` (:func:`plate_axis`) starts from
    anisotropic tets instead (``PLATE_STRETCH``, ``PLATE_FIRST_TETS``): split edges cannot make
    a plate meshed one tet thick into good thin tets. A part with a rim (:func:`has_rim`) has its
    tets holding ``DORFLER`` of the squared error (:func:`marked_tets`) bisected instead
    (:func:`fieldgen.meshing.tetgen.bisected`): at the rim ∇e is singular in every direction across
    it, and split by edges fandisk's estimate of L stalled at 3.8-8.8% where bisection reaches
    0.9%.
    """
    from fieldgen.meshing.tetgen import bisected, refine_zero_tets, split_edges

    edge = first_size(volume) if first_edge is None else float(first_edge)
    stretch = None
    if plate is not None:
        stretch = (tuple(float(x) for x in plate), PLATE_STRETCH)
        # TetGen's edge in the stretched part (PLATE_STRETCH x the volume): along the plate;
        # across it the tets are PLATE_STRETCH times thinner.
        edge = first_size(volume * PLATE_STRETCH, PLATE_FIRST_TETS)
    history: list[dict] = []
    mesh, marked, steepest, edges, priority = None, None, None, None, None
    best = None
    passes = 1 + ADAPTIVE_PASSES
    stopped = "pass limit"
    for index in range(passes):
        if mesh is None:
            mesh, _, _, split = make_mesh(edge) if stretch is None else make_mesh(edge, stretch=stretch)
        else:
            with progress.stage("refine"):
                if steepest:
                    mesh, more = refine_zero_tets(split_edges(mesh, edges, priority))
                else:
                    mesh, more = refine_zero_tets(bisected(mesh, marked))
            split += more
        solution, estimate, worst = _solved(mesh, law, progress)
        history.append(_pass_record(mesh, estimate, edge, marked, edges))
        _report_pass(progress, index, mesh, estimate, accuracy)
        best = _better(best, _Pass(index, worst, mesh, None, split, solution, estimate))
        reason = _stop(worst, accuracy, mesh, max_tets)
        if reason:
            stopped = reason
            break   # met, or the tet budget is spent: the estimate says how far it is
        left = max_tets - mesh.n_tets
        if index == passes - 1:
            break
        volumes = np.abs(tet_volumes(mesh.points, mesh.tets))
        if steepest is None:
            steepest = not has_rim(mesh)
        if steepest:
            edges, priority = marked_edges(estimate, volumes, int(EDGE_ROOM * left))
        else:
            marked = marked_tets(estimate, volumes, law, limit=int(left / TETS_PER_MARKED))
    return _sized(best, accuracy, history, stopped,
                  refinement="" if steepest is None else "steepest edge" if steepest else "bisection",
                  stretch=None if stretch is None else {"axis": list(stretch[0]), "factor": float(stretch[1])})


#: The layer band's sizing (:func:`band_by_accuracy`): the largest share of the squared error the
#: tets bisected in a pass may hold (a pass near the accuracy takes only what the goal needs), the
#: passes after the first mesh, and the largest mesh it asks for. On angle_block's 248k-tet cut
#: skin a share of 0.5 took the error from 2.29% to 0.87% at 375k tets (docs/model.md §2.4); on
#: its band the first pass, at 1.8%, takes the whole 0.8 and reaches 1.1%.
BAND_DORFLER = 0.8
#: The error a band's last pass aims at, x the accuracy.
AIM_BAND = 0.85
BAND_PASSES = 6
BAND_MAX_TETS = 400_000


def band_by_accuracy(make_band, law, accuracy: float, *, progress=None,
                     max_tets: int = BAND_MAX_TETS) -> SizedMesh:
    """A skin meshed as a layer band (:mod:`fieldgen.skin.band`), refined until the estimated errors are
    within ``accuracy``: ``make_band() -> (mesh, skin, split, align)`` makes the first mesh, whose
    layers ``align(mesh, extent) -> (mesh, moved)`` slides onto the levels of its solution (after
    the first pass, before its marked tets are bisected: moving vertices keeps the tets); each pass
    bisects the tets holding ``BAND_DORFLER`` of the estimated squared error, or what the goal
    needs near it (scikit-fem's conforming bisection, which splits a flat prism tet across its
    long edges and so keeps it in its layer), while the mesh is under ``max_tets``.
    ``skin(mesh)`` gives the kept mesh's :class:`fieldgen.skin.cut.SkinResult`."""
    from fieldgen.progress import Progress
    from fieldgen.meshing.tetgen import bisected, refine_zero_tets

    progress = progress or Progress(enabled=False)
    mesh, describe, split, align = make_band()
    history: list[dict] = []
    best = None
    marked = None
    stopped = "pass limit"
    aligned = False
    for index in range(1 + BAND_PASSES):
        if index:
            with progress.stage("refine"):
                mesh, more = refine_zero_tets(bisected(mesh, marked))
            split += more
        solution, estimate, worst = _solved(mesh, law, progress)
        history.append({**_pass_record(mesh, estimate, describe.outer_edge, marked), "meshed_by": "band",
                        "aligned": aligned})
        _report_pass(progress, index, mesh, estimate, accuracy)
        best = _better(best, _Pass(index, worst, mesh, None, split, solution, estimate))
        if worst <= accuracy and not aligned:
            # Met on the first mesh: align it still (fewer tets to layer), solve and estimate it.
            with progress.stage("band"):
                mesh, _ = align(mesh, solution.extent)
            aligned = True
            solution, estimate, _ = _solved(mesh, law, progress)
            history.append({**_pass_record(mesh, estimate, describe.outer_edge), "meshed_by": "band",
                            "aligned": True})
            _report_pass(progress, index + 1, mesh, estimate, accuracy)
            if worst_error(estimate) <= accuracy:
                best = _Pass(index + 1, worst_error(estimate), mesh, None, split, solution, estimate)
        reason = _stop(worst, accuracy, mesh, max_tets)
        if reason:
            stopped = reason
            break
        left = max_tets - mesh.n_tets
        if index == BAND_PASSES:
            break
        volumes = np.abs(tet_volumes(mesh.points, mesh.tets))
        # Near the accuracy, mark only what the goal needs: bisecting a tet removes about three
        # quarters of its squared error, and the error is to fall from `worst` to AIM x accuracy.
        share = min(BAND_DORFLER, (1.0 - (AIM_BAND * accuracy / worst) ** 2) / 0.75)
        marked = marked_tets(estimate, volumes, law, share=share, limit=int(left / TETS_PER_MARKED))
        if not aligned:
            with progress.stage("band"):
                mesh, _ = align(mesh, solution.extent)    # the layers onto the levels of e as solved
            aligned = True
    best.skin = describe(best.mesh)
    return _sized(best, accuracy, history, stopped, refinement="bisection")


def _stop(worst: float, accuracy: float, mesh: TetMesh, max_tets: int) -> str | None:
    """Why a sizing loop stops after a pass with error ``worst``: the accuracy is met, or less than
    3% of the mesh is left of the budget; None to go on."""
    if worst <= accuracy:
        return "accuracy met"
    if max_tets - mesh.n_tets < 0.03 * mesh.n_tets:
        return "tet budget"
    return None


def _solved(mesh: TetMesh, law, progress):
    """The extent on ``mesh``, its error estimate and the worst of its errors: each sizing pass."""
    from fieldgen.fe.extent import solve_extent

    with progress.stage("extent"):
        solution = solve_extent(mesh)
    with progress.stage("error estimate"):
        estimate = estimate_error(mesh, solution.extent, law)
    return solution, estimate, worst_error(estimate)


def _sized(best: _Pass, accuracy: float, history: list, stopped: str, refinement: str = "",
           stretch: dict | None = None) -> SizedMesh:
    return SizedMesh(mesh=best.mesh, skin=best.skin, split=int(best.split), solution=best.solution,
                     estimate=best.estimate, accuracy=float(accuracy), history=history, stopped=stopped,
                     refinement=refinement, kept=best.index, stretch=stretch)


def _grade_by_depth(make_mesh, law, accuracy: float, volume: float, *, progress, skin: float,
                    free_surface, max_passes: int, max_tets: int) -> SizedMesh:
    """With a skin: the mesh is graded by depth below ``free_surface`` (vertices, faces): an edge
    ``near`` the surface down to 1.25 x the skin, coarser deeper down, where the rigid interior
    is cut away (TetGen's -m with a background size field over a first coarse mesh of the part,
    :func:`depth_graded_sizes`). Each pass asks for the ``near`` edge that brings the worst error
    to ``AIM`` x the accuracy (error ∝ h^rate, the rate measured from two passes)."""
    from fieldgen.skin.cut import free_surface_depth

    first = first_size(volume)
    history: list[dict] = []
    goal = AIM * accuracy
    _, coarse, _, _ = make_mesh(min(first, 4.0 * skin), cut=False)
    with progress.stage("sizing"):
        depth = free_surface_depth(coarse, free_surface=free_surface)

    def sizes(near):
        return np.minimum(depth_graded_sizes(depth, skin, near=near), max(first, near))

    near = first_near_edge(coarse, sizes, 0.5 * skin, max_tets)
    previous = None
    best = None
    stopped = "pass limit"
    # A uniform edge meshes where TetGen fails on the size field, if one within the budget is
    # no longer than half the skin (the cut needs tets smaller than the skin, as with --edge-length).
    budget_edge = first_size(volume, max_tets)
    for index in range(max_passes):
        uniform = max(near, budget_edge)
        (mesh, _, cut, split), meshed_by, edge = mesh_with_size_field(
            make_mesh, coarse.points, sizes(near), near=near,
            uniform_edge=uniform if uniform <= 0.5 * skin else None, progress=progress)
        if meshed_by != "uniform edge":
            near = edge     # a scaled field's near edge: the next pass starts from it
        # (A uniform mesh is not: TetGen makes several times the tets for a uniform edge that it
        # makes for a size field with that edge near the surface, so the next field starts from
        # the near edge it would have had; on angle_block under 0.15 in, starting from the uniform
        # edge gave a third pass of 44k tets at 2.5 % where this gives 308k at 1.4 %.)
        solution, estimate, worst = _solved(mesh, law, progress)
        history.append({**_pass_record(mesh, estimate, edge), "meshed_by": meshed_by})
        _report_pass(progress, index, mesh, estimate, accuracy)
        best = _better(best, _Pass(index, worst, mesh, cut, split, solution, estimate))
        if worst <= accuracy:
            stopped = "accuracy met"
            break
        if index == max_passes - 1:
            break
        new = next_near_edge(near, worst, previous, goal, mesh.n_tets, max_tets)
        if new is None:
            stopped = "tet budget"
            break   # the tet budget allows no mesh much finer: the estimate says how far it is
        previous = (near, worst)
        near = new
    return _sized(best, accuracy, history, stopped)


def predicted_tets(coarse: TetMesh, sizes: np.ndarray) -> float:
    """About how many tets TetGen makes for the size field ``sizes`` (at ``coarse``'s vertices):
    ``SIZE_FIELD_TETS`` x Σ V / s³ over ``coarse``'s tets (s the mean of a tet's vertex sizes)."""
    volume = np.abs(tet_volumes(coarse.points, coarse.tets))
    size = np.asarray(sizes, dtype=np.float64)[coarse.tets].mean(axis=1)
    return SIZE_FIELD_TETS * float((volume / size ** 3).sum())


def first_near_edge(coarse: TetMesh, sizes, near: float, max_tets: int) -> float:
    """The first pass's edge near the free surface: ``near``, or larger where the mesh it asks
    for (:func:`predicted_tets` of ``sizes(near)``) would pass ``max_tets`` (``FIRST_EDGE_ROUNDS``
    rounds at most). A thin skin over a large part asked for 1.3M tets in its first pass
    (featuretype under 0.05 in: 97-121 s). The edge can pass the skin's thickness (1.4-4x on
    angle_block under skins of 0.3-0.1 mm): the accuracy warning then says how far the field is."""
    for _ in range(FIRST_EDGE_ROUNDS):    # the deep sizes do not grow with near: 1% over each round
        predicted = predicted_tets(coarse, sizes(near))
        if predicted <= max_tets:
            break
        near *= 1.01 * (predicted / max_tets) ** (1.0 / 3.0)
    return float(near)


def mesh_with_size_field(make_mesh, points: np.ndarray, sizes: np.ndarray, *, near: float,
                         uniform_edge: float | None, progress=None):
    """``make_mesh(None, background=...)`` with the size field ``sizes`` at ``points`` (its edge
    near the free surface ``near``), how it was meshed and that edge. Where TetGen fails on the
    field (:class:`fieldgen.errors.MesherCrash`: a crash, an internal error or a flat tet; some
    size fields cause them and fields 5-10% away do not), it is tried with the sizes scaled by
    each of ``SIZE_FIELD_RETRIES`` in turn, then with the uniform edge ``uniform_edge``
    (``make_mesh(uniform_edge)``, TetGen's volume bound) unless that is None. Returns
    (make_mesh's result, "size field", "size field x F" or "uniform edge", the near edge of the
    mesh made: F x ``near`` or ``uniform_edge``). When every attempt fails, one MesherCrash lists
    them. ``progress`` (optional) is told of each retry and why."""
    from fieldgen.errors import MesherCrash

    def retrying(what: str, error: MesherCrash) -> None:
        if progress is not None:
            progress.message(f"TetGen failed on the size field ({error.defect[:120]}); retrying {what}")

    failures = []
    factors = (1.0,) + SIZE_FIELD_RETRIES
    for n, factor in enumerate(factors):
        try:
            made = make_mesh(None, background=convex_background(points, factor * np.asarray(sizes)))
            return made, ("size field" if factor == 1.0 else f"size field x {factor:g}"), factor * near
        except MesherCrash as error:
            failures.append(f"sizes x {factor:g}: {error.defect}")
            if n + 1 < len(factors):
                retrying(f"with the sizes x {factors[n + 1]:g}", error)
            elif uniform_edge is not None:
                retrying(f"with a uniform edge of {uniform_edge:.4g} m", error)
    if uniform_edge is not None:
        try:
            return make_mesh(uniform_edge), "uniform edge", float(uniform_edge)
        except MesherCrash as error:
            failures.append(f"uniform edge {uniform_edge:.4g} m: {error.defect}")
    raise MesherCrash("TetGen failed on every mesh the skin's sizing tried: " + "; ".join(failures),
                      fix="give --edge-length (no larger than half the skin) to mesh with a uniform edge, "
                          "or change --skin slightly")


def next_near_edge(near: float, worst: float, previous: tuple[float, float] | None, goal: float,
                   tets: int, max_tets: int) -> float | None:
    """The skin sizing's next edge near the free surface: the one that brings the ``worst`` error
    at edge ``near`` to ``goal`` (error ∝ h^rate, the rate measured from the ``previous`` pass's
    (edge, error) when there is one, else ``ASSUMED_RATE``), but no finer than the ``max_tets``
    budget allows for a mesh of ``tets`` (the count grows as (near / new)^3); None when that is
    not at most ``MIN_SHRINK`` x ``near`` (stop: a pass that small gains less than TetGen's
    mesh-to-mesh variation)."""
    rate = ASSUMED_RATE
    if previous is not None and previous[1] > worst > 0 and previous[0] > near:
        rate = float(np.clip(math.log(previous[1] / worst) / math.log(previous[0] / near), 1.0, 2.0))
    new = max(_edge_for(near, worst, goal, rate), near * (tets / max_tets) ** (1.0 / 3.0))
    return None if new > MIN_SHRINK * near else float(new)


def convex_background(points: np.ndarray, sizes: np.ndarray):
    """A size field for TetGen (its -m): Delaunay tets over ``points`` with ``sizes`` there.

    TetGen locates each new point in the background mesh by walking from tet to tet; measured
    with tetgen 0.8.4, it crashed (SIGSEGV) on a background mesh that was the part's own mesh
    (not convex) and on the Delaunay tets of its vertices (coincident points), and worked on
    a background covering the domain strictly: so the points are moved by 1e-9 of the part's
    size (seeded: deterministic) and eight corners 2% outside the bounding box are added, with
    the largest size.
    """
    from scipy.spatial import Delaunay

    from fieldgen.meshing.tetmesh import orient_positive, tet_volumes

    points = np.asarray(points, dtype=np.float64)
    sizes = np.asarray(sizes, dtype=np.float64)
    lo, hi = points.min(axis=0), points.max(axis=0)
    extent = float((hi - lo).max())
    jitter = np.random.default_rng(0).uniform(-1.0, 1.0, size=points.shape) * 1e-9 * extent
    pad = 0.02 * extent
    corners = np.array([[x, y, z] for x in (lo[0] - pad, hi[0] + pad) for y in (lo[1] - pad, hi[1] + pad)
                        for z in (lo[2] - pad, hi[2] + pad)])
    cloud = np.vstack([points + jitter, corners])
    tets = orient_positive(cloud, Delaunay(cloud).simplices.astype(np.int64))
    tets = tets[tet_volumes(cloud, tets) > 0]
    return cloud, tets, np.concatenate([sizes, np.full(8, sizes.max())])


def first_size(volume: float, tets: int = FIRST_TETS) -> float:
    """Edge length that gives about ``tets`` TetGen tets in ``volume`` (TetGen's mean tet is about
    a fifth of a regular tet of that edge, measured)."""
    return float((5.0 * 6.0 * math.sqrt(2.0) * volume / tets) ** (1.0 / 3.0))
