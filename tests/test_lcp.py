"""Lemke's method against brute-force enumeration of complementary bases (B92 13.2, App. B)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fieldgen.runtime.dynamics.lcp import lemke


def enumerate_solutions(M, q, tol=1e-9):
    """Every solution found by trying each complementary basis (z_S basic, w_rest basic)."""
    n = len(q)
    found = []
    for k in range(n + 1):
        for S in itertools.combinations(range(n), k):
            S = list(S)
            z = np.zeros(n)
            if S:
                try:
                    z[S] = np.linalg.solve(M[np.ix_(S, S)], -q[S])
                except np.linalg.LinAlgError:
                    continue
            w = M @ z + q
            if z.min() >= -tol and w.min() >= -tol:
                found.append(z)
    return found


def assert_complementary(M, q, z, tol=1e-9):
    w = M @ z + q
    scale = 1.0 + np.abs(q).max()
    assert z.min() >= -tol * scale
    assert w.min() >= -tol * scale
    assert abs(z @ w) <= tol * scale * (1.0 + np.abs(z).max())


def random_p_matrix(rng, n):
    """Non-symmetric P-matrix: strictly row-diagonally dominant with positive diagonal."""
    A = rng.normal(size=(n, n))
    np.fill_diagonal(A, 0.0)
    d = np.abs(A).sum(axis=1) + rng.uniform(0.1, 1.0, size=n)
    return A + np.diag(d)


def is_p_matrix(M):
    n = len(M)
    return all(np.linalg.det(M[np.ix_(S, S)]) > 0
               for k in range(1, n + 1) for S in itertools.combinations(range(n), k))


@pytest.mark.parametrize("seed", range(40))
def test_positive_definite_matches_enumeration(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 7))
    A = rng.normal(size=(n, n))
    M = A @ A.T + 0.1 * np.eye(n)
    q = rng.normal(size=n)
    result = lemke(M, q)
    assert result.status == "solution"
    solutions = enumerate_solutions(M, q)
    assert len(solutions) == 1  # PD: unique solution
    np.testing.assert_allclose(result.z, solutions[0], atol=1e-9)
    assert_complementary(M, q, result.z)


@pytest.mark.parametrize("seed", range(40))
def test_nonsymmetric_p_matrix_matches_enumeration(seed):
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 6))
    M = random_p_matrix(rng, n)
    # make it genuinely non-symmetric and not positive definite in general
    assert is_p_matrix(M)
    q = rng.normal(size=n) * 3
    result = lemke(M, q)
    assert result.status == "solution"
    solutions = enumerate_solutions(M, q)
    assert len(solutions) == 1
    np.testing.assert_allclose(result.z, solutions[0], atol=1e-9)


def test_p_matrix_that_is_not_positive_definite():
    """A P-matrix whose symmetric part is indefinite (so PD theory does not apply)."""
    M = np.array([[1.0, -3.0], [0.0, 1.0]])
    assert is_p_matrix(M)
    assert np.linalg.eigvalsh(M + M.T).min() < 0
    for q in ([-1.0, -1.0], [1.0, -2.0], [-2.0, 1.0], [0.5, 0.5]):
        q = np.array(q)
        result = lemke(M, q)
        assert result.status == "solution"
        np.testing.assert_allclose(result.z, enumerate_solutions(M, q)[0], atol=1e-12)


@pytest.mark.parametrize("seed", range(30))
def test_psd_singular_solution_or_certified_ray(seed):
    """PSD (copositive-plus) M: a ray happens exactly when enumeration finds no solution."""
    rng = np.random.default_rng(2000 + seed)
    n = int(rng.integers(2, 6))
    r = int(rng.integers(1, n))
    A = rng.normal(size=(n, r))
    S = rng.normal(size=(n, n))
    infeasible = seed % 2 == 0
    P = np.eye(n)
    if infeasible:
        # y >= 0 with M^T y = 0 and q·y < 0 is a Farkas certificate: no z can make w >= 0
        y = rng.uniform(0.2, 1.0, size=n)
        P = np.eye(n) - np.outer(y, y) / (y @ y)
    M = P @ A @ A.T @ P + P @ (S - S.T) @ P   # PSD symmetric part, rank-deficient
    q = rng.normal(size=n)
    if infeasible:
        q -= (q @ y + 1.0) * y / (y @ y)
    result = lemke(M, q)
    solutions = enumerate_solutions(M, q)
    assert result.status == ("ray" if infeasible else "solution")
    if result.status == "solution":
        assert_complementary(M, q, result.z)
        assert solutions, "Lemke solved a problem enumeration says is infeasible"
    else:
        assert result.status == "ray"
        assert not solutions, "Lemke returned a ray although a solution exists"
        ray = result.ray
        assert ray.z.min() >= 0 and ray.z.max() > 0
        np.testing.assert_allclose(ray.w, M @ ray.z + ray.z0, atol=1e-9)
        assert ray.w.min() >= -1e-12
        assert abs(ray.z @ ray.w) < 1e-9


def test_trivial_and_infeasible():
    result = lemke(np.eye(3), np.array([1.0, 0.0, 2.0]))
    assert result.status == "solution" and result.pivots == 0
    np.testing.assert_array_equal(result.z, 0.0)
    # w = -z - 1 can never be >= 0 (no z >= 0 solves it, by enumeration): a ray whose
    # certificate (B92 eq. B-3) is checked against M itself: w = M z + z0 with z > 0, w >= 0,
    # z·w = 0, hence (M z)_i = -z0 < 0 where z_i > 0
    M, q = np.array([[-1.0]]), np.array([-1.0])
    assert not enumerate_solutions(M, q)
    result = lemke(M, q)
    assert result.status == "ray"
    ray = result.ray
    assert ray.z[0] > 0 and ray.z0 > 0
    np.testing.assert_allclose(ray.w, M @ ray.z + ray.z0, atol=1e-12)
    assert ray.w.min() >= 0 and abs(ray.z @ ray.w) <= 1e-12
    assert (M @ ray.z)[0] == pytest.approx(-ray.z0)


@pytest.mark.parametrize("n", [4, 8, 12])
def test_degenerate_problems_terminate(n):
    """Ties in q and rank-deficient M (cycling-prone) still end in a valid solution."""
    # four legs of Baraff's chair on the ground: rank-3 Delassus matrix, equal q
    rng = np.random.default_rng(n)
    J = np.hstack([np.ones((n, 1)), rng.integers(-1, 2, size=(n, 2)).astype(float)])
    M = J @ J.T
    q = -np.ones(n)
    result = lemke(M, q)
    assert result.status == "solution"
    assert_complementary(M, q, result.z)
    # fully degenerate: zero matrix with q >= 0 but with many zeros
    result = lemke(np.zeros((n, n)), np.zeros(n))
    assert result.status == "solution"


def test_known_cycling_example_terminates():
    """A degenerate LCP (repeated minimum in q, zero pivots) with lexicographic pivoting."""
    M = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]])  # Murty's cyclic P-matrix
    q = np.array([-1.0, -1.0, -1.0])
    result = lemke(M, q)
    assert result.status == "solution"
    np.testing.assert_allclose(result.z, [1 / 3, 1 / 3, 1 / 3], atol=1e-12)
    assert result.pivots < 20


def test_max_pivots_guard_reports_status():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(6, 6))
    M = A @ A.T + np.eye(6)
    q = -np.abs(rng.normal(size=6)) - 1
    result = lemke(M, q, max_pivots=2)
    assert result.status == "max_iterations"
    assert result.pivots == 2
    assert np.all(np.isfinite(result.z))


def test_deterministic():
    rng = np.random.default_rng(9)
    A = rng.normal(size=(5, 5))
    M, q = A @ A.T, rng.normal(size=5)
    a, b = lemke(M, q), lemke(M.copy(), q.copy())
    assert a.z.tobytes() == b.z.tobytes() and a.pivots == b.pivots
