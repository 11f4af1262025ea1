"""A brute-force reference for distances to triangles, for the tests of the VTK distance query
(the skin's depth, the robust mesher's boundary conditions)."""

from __future__ import annotations

import numpy as np


def point_triangle_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact distance from each point ``p[i]`` to the closed triangle ``(a[i], b[i], c[i])``.

    Rows of (k, 3) arrays. The closest point is in the face when its barycentric coordinates
    are all non-negative; otherwise it is on one of the three edges (the minimum over them).
    """
    ab, ac, ap = b - a, c - a, p - a
    # Barycentric coordinates of the projection of p onto the plane (Cramer's rule).
    d00 = np.einsum("ij,ij->i", ab, ab)
    d01 = np.einsum("ij,ij->i", ab, ac)
    d11 = np.einsum("ij,ij->i", ac, ac)
    d20 = np.einsum("ij,ij->i", ap, ab)
    d21 = np.einsum("ij,ij->i", ap, ac)
    denom = d00 * d11 - d01 * d01
    ok = denom > 0
    safe = np.where(ok, denom, 1.0)
    v = (d11 * d20 - d01 * d21) / safe
    w = (d00 * d21 - d01 * d20) / safe
    inside = ok & (v >= 0) & (w >= 0) & (v + w <= 1)
    foot = a + v[:, None] * ab + w[:, None] * ac
    best = np.where(inside, np.linalg.norm(p - foot, axis=1), np.inf)
    for s, e in ((a, b), (b, c), (c, a)):
        best = np.minimum(best, point_segment_distance(p, s, e))
    return best


def point_segment_distance(p: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Distance from each point to the closed segment ``s``–``e`` (rows)."""
    d = e - s
    length2 = np.einsum("ij,ij->i", d, d)
    t = np.einsum("ij,ij->i", p - s, d) / np.where(length2 > 0, length2, 1.0)
    t = np.clip(np.where(length2 > 0, t, 0.0), 0.0, 1.0)
    return np.linalg.norm(p - (s + t[:, None] * d), axis=1)


def distances_to_each(points: np.ndarray, vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """(n, m) distances from every point to every triangle."""
    tri = np.asarray(vertices, dtype=np.float64)[np.asarray(faces)]
    rows = np.repeat(np.arange(len(points)), len(tri))
    cols = np.tile(np.arange(len(tri)), len(points))
    return point_triangle_distance(points[rows], tri[cols, 0], tri[cols, 1], tri[cols, 2]).reshape(len(points), len(tri))
