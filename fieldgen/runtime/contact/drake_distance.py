"""The distance field Drake gives a legacy ``.vtk`` volume mesh, computed as Drake computes it
(docs/model.md §3.5).

Drake's field for a mesh read from ``.vtk`` is the unsigned distance of each vertex to the
mesh's boundary surface, 0 on the boundary. The boundary triangles are a tet's faces that no
other tet shares, wound outward as Drake winds them (face i opposite vertex i, in
:data:`BOUNDARY_WINDING`'s order). The distance to a triangle ABC is computed in the triangle's
own frame — x along AB, z along AB×AC, y = z × x — as the squared height ``Q_z²`` when the
projection of the query falls inside the triangle (barycentric coordinates by Cramer's rule in
the plane), otherwise the least squared distance to its three edges. A bounding-sphere test
skips triangles that cannot be nearer than the best found. The arithmetic is Drake's order
(:mod:`fieldgen.runtime.contact.drake_vector`); no code is shared with Drake.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from fieldgen.runtime.contact.drake_vector import cross, dot, dot_last, normalized

# Boundary triangles as Drake winds them: face i of a tet (opposite vertex i), outward.
BOUNDARY_WINDING = np.array([[1, 2, 3], [3, 2, 0], [1, 3, 0], [2, 1, 0]], dtype=np.int64)


def boundary_triangles(tets: np.ndarray) -> np.ndarray:
    """Boundary faces (faces of exactly one tet), wound outward as Drake winds them."""
    tets = np.asarray(tets, dtype=np.int64)
    faces = tets[:, BOUNDARY_WINDING].reshape(-1, 3)
    key = np.sort(faces, axis=1)
    _, first, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    return faces[np.sort(first[counts == 1])]


@nb.njit(cache=True, inline="always")
def _segment_distance2(qx, qy, qz, ax, ay, az, bx, by, bz):
    abx, aby, abz = bx - ax, by - ay, bz - az
    aqx, aqy, aqz = qx - ax, qy - ay, qz - az
    if dot(aqx, aqy, aqz, abx, aby, abz) <= 0.0:
        return dot(aqx, aqy, aqz, aqx, aqy, aqz)
    bqx, bqy, bqz = qx - bx, qy - by, qz - bz
    if dot(bqx, bqy, bqz, abx, aby, abz) >= 0.0:
        return dot(bqx, bqy, bqz, bqx, bqy, bqz)
    cx, cy, cz = cross(abx, aby, abz, aqx, aqy, aqz)
    return dot(cx, cy, cz, cx, cy, cz) / dot(abx, aby, abz, abx, aby, abz)


@nb.njit(cache=True)
def _triangle_distance2(q, a, b, c):
    """Squared distance from q to triangle abc, computed in the triangle's frame (x along AB,
    z along AB×AC)."""
    abx, aby, abz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    acx, acy, acz = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    xx, xy, xz = normalized(abx, aby, abz)
    zx, zy, zz = cross(abx, aby, abz, acx, acy, acz)
    zx, zy, zz = normalized(zx, zy, zz)
    yx, yy, yz = cross(zx, zy, zz, xx, xy, xz)
    qx, qy, qz = q[0] - a[0], q[1] - a[1], q[2] - a[2]
    B = (dot(xx, xy, xz, abx, aby, abz), dot(yx, yy, yz, abx, aby, abz), dot_last(zx, zy, zz, abx, aby, abz))
    C = (dot(xx, xy, xz, acx, acy, acz), dot(yx, yy, yz, acx, acy, acz), dot_last(zx, zy, zz, acx, acy, acz))
    Q = (dot(xx, xy, xz, qx, qy, qz), dot(yx, yy, yz, qx, qy, qz), dot_last(zx, zy, zz, qx, qy, qz))
    det = B[0] * C[1] - B[1] * C[0]
    if det != 0.0:
        s = (Q[0] * C[1] - Q[1] * C[0]) / det
        t = (B[0] * Q[1] - B[1] * Q[0]) / det
        if s >= 0.0 and t >= 0.0 and s + t <= 1.0:
            return Q[2] * Q[2]
    d1 = _segment_distance2(Q[0], Q[1], Q[2], 0.0, 0.0, 0.0, B[0], B[1], B[2])
    d2 = _segment_distance2(Q[0], Q[1], Q[2], 0.0, 0.0, 0.0, C[0], C[1], C[2])
    d3 = _segment_distance2(Q[0], Q[1], Q[2], B[0], B[1], B[2], C[0], C[1], C[2])
    return min(d1, min(d2, d3))


@nb.njit(cache=True)
def _distances(queries, tri, centre, radius):
    out = np.empty(queries.shape[0])
    for i in range(queries.shape[0]):
        q = queries[i]
        best = np.inf
        for k in range(tri.shape[0]):
            dc = np.sqrt((q[0] - centre[k, 0]) ** 2 + (q[1] - centre[k, 1]) ** 2 + (q[2] - centre[k, 2]) ** 2) - radius[k]
            if dc > 0.0 and dc * dc > best * (1.0 + 1e-9):     # cannot be the nearest: skip
                continue
            d2 = _triangle_distance2(q, tri[k, 0], tri[k, 1], tri[k, 2])
            if d2 < best:
                best = d2
        out[i] = np.sqrt(best)
    return out


def distance_field(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Unsigned distance of every vertex to the mesh's boundary surface, 0 on the boundary,
    computed as Drake computes the field of a legacy ``.vtk`` mesh (module docstring)."""
    points = np.ascontiguousarray(points, dtype=np.float64)
    tris = boundary_triangles(tets)
    on_boundary = np.zeros(len(points), bool)
    on_boundary[tris.ravel()] = True
    interior = np.flatnonzero(~on_boundary)
    out = np.zeros(len(points))
    if interior.size:
        tri = np.ascontiguousarray(points[tris])
        centre = tri.mean(axis=1)
        radius = np.sqrt(np.max(np.sum((tri - centre[:, None]) ** 2, axis=2), axis=1)) * (1.0 + 1e-12)
        out[interior] = _distances(np.ascontiguousarray(points[interior]), tri, centre, radius)
    return out

