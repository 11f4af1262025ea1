"""Drake's small-vector arithmetic, in the order Drake's compiled code evaluates it (docs/model.md §3.5).

The `drake` face rule (:mod:`fieldgen.runtime.contact.drake_arithmetic`,
:mod:`fieldgen.runtime.contact.drake_tri_tet`, :mod:`fieldgen.runtime.contact.drake_distance`)
keeps the degenerate polygons Drake keeps only if every quantity carries Drake's rounding. Eigen
evaluates Drake's fixed-size expressions as follows, in IEEE double arithmetic without fused
multiply-adds (numba does not contract ``a*b + c``):

* a sum of three products as ``(a0*b0 + a1*b1) + a2*b2`` (:func:`dot`); where Eigen sums a row
  on its own, ``a0*b0 + (a1*b1 + a2*b2)`` (:func:`dot_last`);
* a 3×3 rotation applied row by row, rows 0–1 as one SIMD packet and row 2 alone
  (:func:`rotate`); its transpose stored as a matrix of its own (:func:`rotate_inverse`) or taken
  as a transposed view (:func:`rotate_back`);
* a unit vector as each component over the square root of the summed squares (:func:`normalized`);
* a polygon's vertices closer than 1e-14 m to the last one kept dropped
  (:func:`remove_near_duplicates`).

These are facts of Drake's code (geometry/proximity, pydrake 1.51.1), reimplemented; no code is
shared with it. Every function is inlined into the kernels that call it.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

COS_ALPHA = math.cos(5.0 * math.pi / 8.0)   # Drake's threshold angle between normal and gradient
NEAR2 = 1e-14 * 1e-14                        # vertices closer than 1e-14 m are merged


@nb.njit(cache=True, inline="always")
def dot(ax, ay, az, bx, by, bz):
    return (ax * bx + ay * by) + az * bz


@nb.njit(cache=True, inline="always")
def cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@nb.njit(cache=True, inline="always")
def normalized(x, y, z):
    """x/|x| componentwise; the zero vector is returned unchanged."""
    s = (x * x + y * y) + z * z
    if s > 0.0:
        r = np.sqrt(s)
        return x / r, y / r, z / r
    return x, y, z


@nb.njit(cache=True, inline="always")
def dot_last(ax, ay, az, bx, by, bz):
    """a·b summed as a0*b0 + (a1*b1 + a2*b2)."""
    return ax * bx + (ay * by + az * bz)


@nb.njit(cache=True, inline="always")
def rotate(R, x, y, z):
    """R·v for a stored 3×3 matrix: the first two rows summed left to right, the last one
    right to left (Eigen computes rows 0–1 as one SIMD packet and row 2 on its own)."""
    return (dot(R[0, 0], R[0, 1], R[0, 2], x, y, z), dot(R[1, 0], R[1, 1], R[1, 2], x, y, z),
            dot_last(R[2, 0], R[2, 1], R[2, 2], x, y, z))


@nb.njit(cache=True, inline="always")
def rotate_inverse(R, x, y, z):
    """Rᵀ·v with Rᵀ stored as a matrix of its own (same order as :func:`rotate`)."""
    return (dot(R[0, 0], R[1, 0], R[2, 0], x, y, z), dot(R[0, 1], R[1, 1], R[2, 1], x, y, z),
            dot_last(R[0, 2], R[1, 2], R[2, 2], x, y, z))


@nb.njit(cache=True, inline="always")
def rotate_back(R, x, y, z):
    """Rᵀ·v as a transposed view: every row summed left to right."""
    return (dot(R[0, 0], R[1, 0], R[2, 0], x, y, z), dot(R[0, 1], R[1, 1], R[2, 1], x, y, z),
            dot(R[0, 2], R[1, 2], R[2, 2], x, y, z))



@nb.njit(cache=True)
def remove_near_duplicates(poly, n):
    """Drop each vertex within 1e-14 m of the last one kept, then the last if it is within
    1e-14 m of the first (three or more left)."""
    if n <= 1:
        return n
    m = 1
    for i in range(1, n):
        dx = poly[m - 1, 0] - poly[i, 0]
        dy = poly[m - 1, 1] - poly[i, 1]
        dz = poly[m - 1, 2] - poly[i, 2]
        if (dx * dx + dy * dy) + dz * dz < NEAR2:
            continue
        if m != i:
            poly[m, 0] = poly[i, 0]
            poly[m, 1] = poly[i, 1]
            poly[m, 2] = poly[i, 2]
        m += 1
    if m >= 3:
        dx = poly[0, 0] - poly[m - 1, 0]
        dy = poly[0, 1] - poly[m - 1, 1]
        dz = poly[0, 2] - poly[m - 1, 2]
        if (dx * dx + dy * dy) + dz * dz < NEAR2:
            m -= 1
    return m

