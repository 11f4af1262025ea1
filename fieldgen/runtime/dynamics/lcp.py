"""Linear complementarity problems by Lemke's method (B92 ch. 8, 13.2 and App. B).

Find ``z >= 0`` with ``w = M z + q >= 0`` and ``z·w = 0``.

Lemke's complementary pivoting adds an artificial variable ``z0`` with covering
vector ``e = 1``: ``w = M z + q + e z0``. Starting from ``z0 = -min(q)`` it pivots
along almost-complementary bases until ``z0`` leaves the basis (a solution) or the
entering column has no positive entry (an unbounded **ray**). The ratio test is
lexicographic (rows of the basis inverse break ties), so degenerate problems cannot
cycle; ``max_pivots`` is a second guard and ends with status ``"max_iterations"``.

On a ray (B92 App. B, eq. B-3) the certificate ``(z_h, w_h, z0_h)`` satisfies
``w_h = M z_h + z0_h e``, ``z_h >= 0``, ``z_h != 0``, ``w_h >= 0``, ``z_h·w_h = 0``;
hence ``(M z_h)_i = -z0_h <= 0`` wherever ``z_h_i > 0`` (B92 eq. 13-1): for a
contact LCP with dynamic friction these are the impulses that resolve an
inconsistent configuration (Painlevé). For PSD / copositive-plus ``M`` a ray
proves that no solution exists.

Floating-point pivoting on a nearly singular ``M`` (e.g. hundreds of redundant point
contacts on one rigid body: condition numbers ~1e20) can lose feasibility without any
pivot looking wrong. So the point ``z0`` leaving the basis is checked before it is called
a solution: its natural residual ``max_i |min(z_i, w_i)|`` (zero exactly for a solution)
must be at most ``residual_tol`` × ``max(1, ‖q‖∞, ‖M‖∞‖z‖∞)`` (1e-6 by default: pivoting
round-off on a well-posed stiff contact problem reaches ~1e-9 of that scale, the failures
it exists to catch are of order 1); otherwise the status is
``"inaccurate"`` (never ``"solution"``) and ``residual`` says by how much it failed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SOLUTION = "solution"
RAY = "ray"
MAX_ITERATIONS = "max_iterations"
INACCURATE = "inaccurate"
DEFAULT_RESIDUAL_TOL = 1e-6
_TIE = 1e-11        # relative difference below which two ratios count as a tie


@dataclass
class LCPRay:
    """Certificate of ray termination: ``w = M z + z0 e`` with ``z >= 0, w >= 0, z·w = 0``."""

    z: np.ndarray
    w: np.ndarray
    z0: float


@dataclass
class LCPResult:
    """Outcome of ``lemke``. ``z, w`` are the last basic point (the solution if solved)."""

    z: np.ndarray
    w: np.ndarray
    status: str
    pivots: int
    ray: LCPRay | None = None
    residual: float = 0.0        #: natural residual max|min(z, w)| of (z, w), absolute

    @property
    def solved(self) -> bool:
        return self.status == SOLUTION


def residual_scale(M: np.ndarray, q: np.ndarray, z: np.ndarray) -> float:
    """``max(1, ‖q‖∞, ‖M‖∞‖z‖∞)``: the size of the terms that cancel in ``w = M z + q``."""
    if not len(q):
        return 1.0
    return max(1.0, float(np.abs(q).max()), float(np.abs(M).sum(axis=1).max() * np.abs(z).max()))


def natural_residual(z: np.ndarray, w: np.ndarray) -> float:
    """``max_i |min(z_i, w_i)|``: zero exactly when z >= 0, w >= 0, z·w = 0."""
    return float(np.abs(np.minimum(z, w)).max()) if len(z) else 0.0


def _lexicographic_leaving(T: np.ndarray, rhs: np.ndarray, col: np.ndarray,
                           candidates: np.ndarray, n: int) -> int:
    """Row of the lexicographic minimum ratio ``[rhs, B^-1] / col`` among candidates."""
    rows = candidates
    ratios = rhs[rows] / col[rows]
    best = ratios.min()
    rows = rows[ratios <= best + _TIE * abs(best)]
    k = 0
    while len(rows) > 1 and k < n:
        r = T[rows, k] / col[rows]          # column k of B^-1 (the w block of the tableau)
        m = r.min()
        rows = rows[r <= m + _TIE * abs(m)]
        k += 1
    return int(rows[0])


def lemke(M: np.ndarray, q: np.ndarray, *, max_pivots: int | None = None,
          tol: float = 1e-12, residual_tol: float = DEFAULT_RESIDUAL_TOL) -> LCPResult:
    """Solve ``0 <= z ⊥ M z + q >= 0`` by Lemke's method (B92 13.2).

    Returns status ``"solution"``, ``"ray"`` (with certificate, B92 App. B),
    ``"max_iterations"`` or ``"inaccurate"`` (pivoting ended but the point's natural
    residual exceeds ``residual_tol``·``residual_scale(M, q, z)``: round-off, see the module doc); never
    raises on an unsolvable problem. ``tol`` is the relative size below which a pivot
    column entry is treated as zero.
    """
    M = np.asarray(M, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    n = q.shape[0]
    if M.shape != (n, n):
        raise ValueError(f"M must be ({n}, {n}) to match q, got {M.shape}")
    if max_pivots is None:
        max_pivots = 100 * (n + 1)
    if n == 0 or q.min() >= 0:
        z = np.zeros(n)
        return LCPResult(z=z, w=q.copy(), status=SOLUTION, pivots=0)

    # Tableau rows: x_B + ... ; columns [w (n) | z (n) | z0 (1)], constraint
    # I w - M z - e z0 = q. T holds B^-1 [I, -M, -e], rhs holds B^-1 q.
    T = np.hstack([np.eye(n), -M, -np.ones((n, 1))])
    A = T.copy()                            # original constraint matrix [I, -M, -e]
    rhs = q.copy()
    zero_rhs = 1e-14 * float(np.abs(q).max())
    basis = np.arange(n)                    # variable index basic in each row
    z0_index = 2 * n
    # z0 enters; the row of the most negative q leaves. Among ties the lexicographic
    # rule takes the last row, which keeps every row of [rhs, B^-1] lexico-positive.
    row = int(np.flatnonzero(q <= q.min() + 1e-12 * max(1.0, abs(q.min())))[-1])
    leaving = int(basis[row])
    _pivot(T, rhs, basis, row, z0_index, zero_rhs)
    pivots = 1
    entering = _complement(leaving, n)
    while True:
        if pivots >= max_pivots:
            z, w = _basic_point(A, basis, rhs, M, q)
            return LCPResult(z=z, w=w, status=MAX_ITERATIONS, pivots=pivots)
        col = T[:, entering]
        threshold = tol * max(1.0, float(np.abs(col).max()))
        candidates = np.flatnonzero(col > threshold)
        if len(candidates) == 0:
            z, w = _basic_point(A, basis, rhs, M, q)
            return LCPResult(z=z, w=w, status=RAY, pivots=pivots, ray=_ray(basis, col, entering, n))
        row = _leaving_row(T, rhs, col, candidates, basis, z0_index, n)
        leaving = int(basis[row])
        _pivot(T, rhs, basis, row, entering, zero_rhs)
        pivots += 1
        if leaving == z0_index:
            z, w = _basic_point(A, basis, rhs, M, q)
            residual = natural_residual(z, w)
            ok = residual <= residual_tol * residual_scale(M, q, z)
            return LCPResult(z=z, w=w, status=SOLUTION if ok else INACCURATE, pivots=pivots, residual=residual)
        entering = _complement(leaving, n)


def _complement(var: int, n: int) -> int:
    """The complementary variable of ``var`` (w_i <-> z_i)."""
    return var + n if var < n else var - n


def _pivot(T: np.ndarray, rhs: np.ndarray, basis: np.ndarray, row: int, col: int, zero_rhs: float) -> None:
    """Pivot the tableau (``T``, ``rhs``, ``basis``, in place) on ``(row, col)``."""
    p = T[row, col]
    T[row] /= p
    rhs[row] /= p
    factor = T[:, col].copy()
    factor[row] = 0.0
    T[:] -= np.outer(factor, T[row])
    rhs -= factor * rhs[row]
    rhs[np.abs(rhs) <= zero_rhs] = 0.0   # round-off on degenerate rows: exact ties
    basis[row] = col


def _leaving_row(T, rhs, col, candidates, basis, z0_index: int, n: int) -> int:
    """The lexicographic minimum-ratio row, or z0's row when it ties for the minimum ratio
    (then the method terminates early)."""
    row = _lexicographic_leaving(T, rhs, col, candidates, n)
    z0_row = np.flatnonzero(basis == z0_index)
    if len(z0_row) and z0_row[0] in candidates:
        r0 = int(z0_row[0])
        if rhs[r0] / col[r0] <= rhs[row] / col[row] + 1e-12 * max(1.0, abs(rhs[row] / col[row])):
            row = r0
    return row


def _ray(basis: np.ndarray, col: np.ndarray, entering: int, n: int) -> LCPRay:
    """The unbounded ray of a column with no positive entry: entering = t, basic
    x_B = rhs − t col (never decreasing)."""
    direction = np.zeros(2 * n + 1)
    direction[entering] = 1.0
    direction[basis] = np.maximum(-col, 0.0)
    z_h = direction[n:2 * n]
    return LCPRay(z=z_h, w=direction[:n], z0=float(direction[2 * n]))


def _basic_point(A: np.ndarray, basis: np.ndarray, rhs: np.ndarray, M: np.ndarray,
                 q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(z, w) of the basis, re-solved from the original data ``A`` (removes pivoting round-off)."""
    n = q.shape[0]
    values = rhs
    try:
        values = np.linalg.solve(A[:, basis], q)
        if not np.all(np.isfinite(values)) or np.abs(values - rhs).max() > 1e-6 * (
                1.0 + np.abs(rhs).max()):
            values = rhs
    except np.linalg.LinAlgError:
        pass
    x = np.zeros(2 * n + 1)
    x[basis] = np.maximum(values, 0.0)
    z = x[n:2 * n]
    return z, M @ z + q
