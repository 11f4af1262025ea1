"""Drake's floating-point recipe for `face_rule="drake"` (docs/model.md §3.5).

Which degenerate polygons a contact surface keeps is decided by the sign of rounding errors:
a zero-pressure polygon of a tet whose four vertices are on the boundary lies exactly in a
boundary face of the other tet, and whether it survives clipping by that face depends on the
last bits of the plane, the face normals and the vertex positions. To give the same face count
as Drake, the `drake` rule computes each of those quantities the way Drake's hydroelastic code
(geometry/proximity, pydrake 1.51.1) does, operation for operation, in IEEE double arithmetic
without fused multiply-adds (numba does not contract ``a*b + c``):

* the per-tet field: gradient ∑ uᵢ·∇bᵢ with ∇bᵢ = (AB×AC)/((AB×AC)·AV) for the vertex V = vᵢ
  and A, B, C the next three vertices cyclically; the field's value extrapolated to the body
  origin, u₀ − ∇u·v₀; unit inward face normals from cross products of edge vectors;
* the distance field of a legacy ``.vtk`` mesh (:func:`distance_field`): per boundary triangle
  (wound as Drake winds it) a local frame with x along AB and z along AB×AC, the in-plane
  height when the projection falls inside the triangle, otherwise the nearest edge;
* the query in the frame of body A: the equal-pressure plane from the two linear fields (unit
  normal, offset from the fields' values at A's origin), the 5π/8 tests, the marching-tet slice
  of A's tet, removal of consecutive vertices closer than 1e-14 m, clipping by the four
  half-spaces of B's tet (each normal rotated into A's frame and normalised again), and the
  same duplicate removal; a polygon with three or more vertices left is kept.

Sums of three products are evaluated as ``(a0*b0 + a1*b1) + a2*b2`` and rotations act row by
row, which is how Eigen evaluates Drake's fixed-size expressions. These are facts of Drake's
code, reimplemented here; no code is shared with it. The kernels keep the structure of Drake's
functions (long ones included) so that each step can be checked against Drake's source.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
from fractions import Fraction

import numba as nb
import numpy as np

from fieldgen.runtime.contact.polygon_output import (MAX_POLYGON, append_face, new_faces, polygon_area_centroid,
                                                     trimmed_faces)

COS_ALPHA = math.cos(5.0 * math.pi / 8.0)   # Drake's threshold angle between normal and gradient
NEAR2 = 1e-14 * 1e-14                        # vertices closer than 1e-14 m are merged
DEGENERATE_VOLUME = float(np.finfo(float).eps)

# Marching tetrahedra. Row `code` (bit i set: vertex i strictly above the plane) lists the cut
# edges as (start, end) vertex pairs, in the cyclic order that winds the slice right-handed
# about the plane normal; the cut point is start + t·(end − start), t = d_start/(d_start − d_end).
_E01, _E12, _E20, _E03, _E13, _E23 = (0, 1), (1, 2), (2, 0), (0, 3), (1, 3), (2, 3)
_NONE = (-1, -1)
SLICE_EDGES = np.array([
    [_NONE, _NONE, _NONE, _NONE],
    [_E01, _E03, _E20, _NONE],
    [_E01, _E12, _E13, _NONE],
    [_E13, _E03, _E20, _E12],
    [_E12, _E20, _E23, _NONE],
    [_E01, _E03, _E23, _E12],
    [_E01, _E20, _E23, _E13],
    [_E03, _E23, _E13, _NONE],
    [_E03, _E13, _E23, _NONE],
    [_E13, _E23, _E20, _E01],
    [_E12, _E23, _E03, _E01],
    [_E12, _E23, _E20, _NONE],
    [_E12, _E20, _E03, _E13],
    [_E01, _E13, _E12, _NONE],
    [_E01, _E20, _E03, _NONE],
    [_NONE, _NONE, _NONE, _NONE],
], dtype=np.int64)

# Boundary triangles as Drake winds them: face i of a tet (opposite vertex i), outward.
BOUNDARY_WINDING = np.array([[1, 2, 3], [3, 2, 0], [1, 3, 0], [2, 1, 0]], dtype=np.int64)


# --------------------------------------------------------------------------- small vectors

@nb.njit(cache=True, inline="always")
def _dot(ax, ay, az, bx, by, bz):
    return (ax * bx + ay * by) + az * bz


@nb.njit(cache=True, inline="always")
def _cross(ax, ay, az, bx, by, bz):
    return ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx


@nb.njit(cache=True, inline="always")
def _normalized(x, y, z):
    """x/|x| componentwise; the zero vector is returned unchanged."""
    s = (x * x + y * y) + z * z
    if s > 0.0:
        r = np.sqrt(s)
        return x / r, y / r, z / r
    return x, y, z


@nb.njit(cache=True, inline="always")
def _dot_last(ax, ay, az, bx, by, bz):
    """a·b summed as a0*b0 + (a1*b1 + a2*b2)."""
    return ax * bx + (ay * by + az * bz)


@nb.njit(cache=True, inline="always")
def _rotate(R, x, y, z):
    """R·v for a stored 3×3 matrix: the first two rows summed left to right, the last one
    right to left (Eigen computes rows 0–1 as one SIMD packet and row 2 on its own)."""
    return (_dot(R[0, 0], R[0, 1], R[0, 2], x, y, z), _dot(R[1, 0], R[1, 1], R[1, 2], x, y, z),
            _dot_last(R[2, 0], R[2, 1], R[2, 2], x, y, z))


@nb.njit(cache=True, inline="always")
def _rotate_inverse(R, x, y, z):
    """Rᵀ·v with Rᵀ stored as a matrix of its own (same order as :func:`_rotate`)."""
    return (_dot(R[0, 0], R[1, 0], R[2, 0], x, y, z), _dot(R[0, 1], R[1, 1], R[2, 1], x, y, z),
            _dot_last(R[0, 2], R[1, 2], R[2, 2], x, y, z))


@nb.njit(cache=True, inline="always")
def _rotate_back(R, x, y, z):
    """Rᵀ·v as a transposed view: every row summed left to right."""
    return (_dot(R[0, 0], R[1, 0], R[2, 0], x, y, z), _dot(R[0, 1], R[1, 1], R[2, 1], x, y, z),
            _dot(R[0, 2], R[1, 2], R[2, 2], x, y, z))


# --------------------------------------------------------------------------- per-tet data

@nb.njit(cache=True)
def tet_data(points, tets, values):
    """Per tet, in the body frame: Drake's field gradient (t, 3), the field's value extrapolated
    to the body origin (t,), the unit inward normals of the four faces (t, 4, 3), face i
    opposite vertex i, and the unit gradient (t, 3) (zero for a zero gradient)."""
    t = tets.shape[0]
    grad = np.zeros((t, 3))
    at_origin = np.empty(t)
    inward = np.empty((t, 4, 3))
    unit = np.empty((t, 3))
    for e in range(t):
        gx = 0.0
        gy = 0.0
        gz = 0.0
        for i in range(4):
            v = points[tets[e, i]]
            a = points[tets[e, (i + 1) % 4]]
            b = points[tets[e, (i + 2) % 4]]
            c = points[tets[e, (i + 3) % 4]]
            nx, ny, nz = _cross(b[0] - a[0], b[1] - a[1], b[2] - a[2], c[0] - a[0], c[1] - a[1], c[2] - a[2])
            vol = _dot(nx, ny, nz, v[0] - a[0], v[1] - a[1], v[2] - a[2])
            if abs(vol) <= DEGENERATE_VOLUME:     # Drake refuses such a mesh; keep a zero gradient
                gx = 0.0
                gy = 0.0
                gz = 0.0
                break
            u = values[tets[e, i]]
            gx = gx + u * (nx / vol)
            gy = gy + u * (ny / vol)
            gz = gz + u * (nz / vol)
        grad[e, 0] = gx
        grad[e, 1] = gy
        grad[e, 2] = gz
        unit[e, 0], unit[e, 1], unit[e, 2] = _normalized(gx, gy, gz)
        p0 = points[tets[e, 0]]
        at_origin[e] = values[tets[e, 0]] - _dot(gx, gy, gz, p0[0], p0[1], p0[2])
        a = points[tets[e, 0]]
        b = points[tets[e, 1]]
        c = points[tets[e, 2]]
        d = points[tets[e, 3]]
        ab = (b[0] - a[0], b[1] - a[1], b[2] - a[2])
        ac = (c[0] - a[0], c[1] - a[1], c[2] - a[2])
        ad = (d[0] - a[0], d[1] - a[1], d[2] - a[2])
        bc = (c[0] - b[0], c[1] - b[1], c[2] - b[2])
        bd = (d[0] - b[0], d[1] - b[1], d[2] - b[2])
        faces = (_cross(bd[0], bd[1], bd[2], bc[0], bc[1], bc[2]),
                 _cross(ac[0], ac[1], ac[2], ad[0], ad[1], ad[2]),
                 _cross(ad[0], ad[1], ad[2], ab[0], ab[1], ab[2]),
                 _cross(ab[0], ab[1], ab[2], ac[0], ac[1], ac[2]))
        for f in range(4):
            x, y, z = faces[f]
            x, y, z = _normalized(x, y, z)
            inward[e, f, 0] = x
            inward[e, f, 1] = y
            inward[e, f, 2] = z
    return grad, at_origin, inward, unit


# --------------------------------------------------------------------------- distance field

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
    if _dot(aqx, aqy, aqz, abx, aby, abz) <= 0.0:
        return _dot(aqx, aqy, aqz, aqx, aqy, aqz)
    bqx, bqy, bqz = qx - bx, qy - by, qz - bz
    if _dot(bqx, bqy, bqz, abx, aby, abz) >= 0.0:
        return _dot(bqx, bqy, bqz, bqx, bqy, bqz)
    cx, cy, cz = _cross(abx, aby, abz, aqx, aqy, aqz)
    return _dot(cx, cy, cz, cx, cy, cz) / _dot(abx, aby, abz, abx, aby, abz)


@nb.njit(cache=True)
def _triangle_distance2(q, a, b, c):
    """Squared distance from q to triangle abc, computed in the triangle's frame (x along AB,
    z along AB×AC)."""
    abx, aby, abz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
    acx, acy, acz = c[0] - a[0], c[1] - a[1], c[2] - a[2]
    xx, xy, xz = _normalized(abx, aby, abz)
    zx, zy, zz = _cross(abx, aby, abz, acx, acy, acz)
    zx, zy, zz = _normalized(zx, zy, zz)
    yx, yy, yz = _cross(zx, zy, zz, xx, xy, xz)
    qx, qy, qz = q[0] - a[0], q[1] - a[1], q[2] - a[2]
    B = (_dot(xx, xy, xz, abx, aby, abz), _dot(yx, yy, yz, abx, aby, abz), _dot_last(zx, zy, zz, abx, aby, abz))
    C = (_dot(xx, xy, xz, acx, acy, acz), _dot(yx, yy, yz, acx, acy, acz), _dot_last(zx, zy, zz, acx, acy, acz))
    Q = (_dot(xx, xy, xz, qx, qy, qz), _dot(yx, yy, yz, qx, qy, qz), _dot_last(zx, zy, zz, qx, qy, qz))
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


# --------------------------------------------------------------------------- the query

@nb.njit(cache=True)
def _remove_near_duplicates(poly, n):
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


@nb.njit(cache=True)
def _place_tets(X_MN, PB, TB, nB, elements):
    """B's tets of ``elements`` placed in M: vertex positions (rows of other vertices unset),
    and per tet the four outward unit face normals with their offsets n·(a vertex of the
    face); each normal is the body-frame inward normal negated, rotated and normalised again,
    as Drake builds its clipping half-spaces (a vertex of face f: tet vertex (f + 1) mod 4)."""
    R = X_MN[:3, :3]
    Q = np.empty_like(PB)
    normals = np.empty((TB.shape[0], 4, 3))
    offsets = np.empty((TB.shape[0], 4))
    done_p = np.zeros(PB.shape[0], np.bool_)
    done_t = np.zeros(TB.shape[0], np.bool_)
    for b in elements:
        if done_t[b]:
            continue
        done_t[b] = True
        for i in range(4):
            v = TB[b, i]
            if not done_p[v]:
                done_p[v] = True
                x, y, z = _rotate(R, PB[v, 0], PB[v, 1], PB[v, 2])
                Q[v, 0] = X_MN[0, 3] + x
                Q[v, 1] = X_MN[1, 3] + y
                Q[v, 2] = X_MN[2, 3] + z
        for f in range(4):
            hx, hy, hz = _rotate(R, -nB[b, f, 0], -nB[b, f, 1], -nB[b, f, 2])
            hm = np.sqrt((hx * hx + hy * hy) + hz * hz)
            hx = hx / hm
            hy = hy / hm
            hz = hz / hm
            p = Q[TB[b, (f + 1) % 4]]
            normals[b, f, 0] = hx
            normals[b, f, 1] = hy
            normals[b, f, 2] = hz
            offsets[b, f] = _dot(hx, hy, hz, p[0], p[1], p[2])
    return Q, normals, offsets


@nb.njit(cache=True)
def tet_tet_polygons(pairs, PA, TA, gA, mA, uA, PB, TB, gB, mB, nB, uB, X_MN, X_WM, pressure_a, grad_a_W):
    """Drake's contact polygons of the candidate (tet of A, tet of B) pairs, computed in A's
    frame M (``PA``: A's body-frame vertices; ``PB``: B's, placed by ``X_MN``), then placed in
    the world by ``X_WM``. ``gA``/``mA``/``uA`` and ``gB``/``mB``/``nB``/``uB``: :func:`tet_data`
    of each body. Returns the arrays of :func:`fieldgen.runtime.contact.clip.tet_tet_polygons`; polygons wind
    counter-clockwise about the normal from A into B; pressures are p_A interpolated with the
    world-frame gradients ``grad_a_W``."""
    m = pairs.shape[0]
    verts, vpress, offsets, normals, areas, cents, cpress, src = new_faces(m)
    nv = 0
    nf = 0
    R = X_MN[:3, :3]
    tx, ty, tz = X_MN[0, 3], X_MN[1, 3], X_MN[2, 3]
    ox, oy, oz = _rotate_back(R, tx, ty, tz)
    ox, oy, oz = -ox, -oy, -oz                      # A's origin in B's frame
    QB, faceN, faceD = _place_tets(X_MN, PB, TB, nB, pairs[:, 1])
    poly = np.empty((MAX_POLYGON, 3))
    tmp = np.empty((MAX_POLYGON, 3))
    world = np.empty((MAX_POLYGON, 3))
    dist = np.empty(MAX_POLYGON)
    d = np.empty(4)
    nrm = np.empty(3)
    cen = np.empty(3)
    x0 = np.empty(3)
    for k in range(m):
        a = pairs[k, 0]
        b = pairs[k, 1]
        # the equal-pressure plane in M: unit normal nh (towards increasing p_A) and offset
        g1x, g1y, g1z = _rotate(R, gB[b, 0], gB[b, 1], gB[b, 2])
        f1 = _dot(gB[b, 0], gB[b, 1], gB[b, 2], ox, oy, oz) + mB[b]
        nx = gA[a, 0] - g1x
        ny = gA[a, 1] - g1y
        nz = gA[a, 2] - g1z
        mag = np.sqrt((nx * nx + ny * ny) + nz * nz)
        if not mag > 0.0:
            continue
        nx = nx / mag
        ny = ny / mag
        nz = nz / mag
        s = (f1 - mA[a]) / mag
        offset = _dot(nx, ny, nz, s * nx, s * ny, s * nz)
        # the 5π/8 tests
        if not _dot(nx, ny, nz, uA[a, 0], uA[a, 1], uA[a, 2]) > COS_ALPHA:
            continue
        rx, ry, rz = _rotate_inverse(R, -nx, -ny, -nz)
        if not _dot(rx, ry, rz, uB[b, 0], uB[b, 1], uB[b, 2]) > COS_ALPHA:
            continue
        # B's vertices in M; a tet B wholly and clearly on one side of the plane gives nothing
        # (a shortcut: the polygon lies in the plane, so every clip would empty it)
        tb = TB[b]
        hmin = np.inf
        hmax = -np.inf
        scale = 0.0
        for i in range(4):
            w = QB[tb[i]]
            h = _dot(nx, ny, nz, w[0], w[1], w[2]) - offset
            hmin = min(hmin, h)
            hmax = max(hmax, h)
            scale = max(scale, max(abs(w[0]), max(abs(w[1]), abs(w[2]))))
        tol = 1e-9 * max(abs(hmin), abs(hmax)) + 1e-12 * scale
        if hmin > tol or hmax < -tol:
            continue
        # slice tet A by the plane
        ta = TA[a]
        code = 0
        for i in range(4):
            v = PA[ta[i]]
            d[i] = _dot(nx, ny, nz, v[0], v[1], v[2]) - offset
            if d[i] > 0.0:
                code |= 1 << i
        if SLICE_EDGES[code, 0, 0] < 0:
            continue
        n = 0
        for j in range(4):
            i0 = SLICE_EDGES[code, j, 0]
            if i0 < 0:
                break
            i1 = SLICE_EDGES[code, j, 1]
            t = d[i0] / (d[i0] - d[i1])
            p0 = PA[ta[i0]]
            p1 = PA[ta[i1]]
            for c in range(3):
                poly[n, c] = p0[c] + t * (p1[c] - p0[c])
            n += 1
        n = _remove_near_duplicates(poly, n)
        if n < 3:
            continue
        # clip by the four faces of tet B (outward normals, rotated into M, normalised again)
        for f in range(4):
            hx = faceN[b, f, 0]
            hy = faceN[b, f, 1]
            hz = faceN[b, f, 2]
            h0 = faceD[b, f]
            inside = 0
            for i in range(n):
                dist[i] = _dot(hx, hy, hz, poly[i, 0], poly[i, 1], poly[i, 2]) - h0
                if dist[i] <= 0.0:
                    inside += 1
            if inside == n:         # every vertex kept, nothing cut: the polygon as it is
                continue
            if inside == 0:
                n = 0
                break
            out = 0
            for i in range(n):
                j = i + 1 if i + 1 < n else 0
                if dist[i] <= 0.0:
                    if out < MAX_POLYGON:
                        tmp[out, 0] = poly[i, 0]
                        tmp[out, 1] = poly[i, 1]
                        tmp[out, 2] = poly[i, 2]
                        out += 1
                    if dist[j] > 0.0 and out < MAX_POLYGON:
                        wa = dist[j] / (dist[j] - dist[i])
                        wb = 1.0 - wa
                        for c in range(3):
                            tmp[out, c] = wa * poly[i, c] + wb * poly[j, c]
                        out += 1
                elif dist[j] <= 0.0 and out < MAX_POLYGON:
                    wa = dist[j] / (dist[j] - dist[i])
                    wb = 1.0 - wa
                    for c in range(3):
                        tmp[out, c] = wa * poly[i, c] + wb * poly[j, c]
                    out += 1
            n = out
            for i in range(n):
                poly[i, 0] = tmp[i, 0]
                poly[i, 1] = tmp[i, 1]
                poly[i, 2] = tmp[i, 2]
        if n == 0:
            continue
        n = _remove_near_duplicates(poly, n)
        if n < 3:
            continue
        # into the world, wound about the normal from A into B (the reverse of Drake's order)
        for i in range(n):
            x, y, z = _rotate(X_WM, poly[n - 1 - i, 0], poly[n - 1 - i, 1], poly[n - 1 - i, 2])
            world[i, 0] = X_WM[0, 3] + x
            world[i, 1] = X_WM[1, 3] + y
            world[i, 2] = X_WM[2, 3] + z
        x, y, z = _rotate(X_WM, -nx, -ny, -nz)
        nrm[0] = x
        nrm[1] = y
        nrm[2] = z
        area = polygon_area_centroid(world, n, nrm, cen)
        area = max(area, 0.0)
        v = PA[ta[0]]
        x, y, z = _rotate(X_WM, v[0], v[1], v[2])
        x0[0] = X_WM[0, 3] + x
        x0[1] = X_WM[1, 3] + y
        x0[2] = X_WM[2, 3] + z
        verts, vpress, nv, nf = append_face(world, n, nrm, area, cen, x0, pressure_a[ta[0]], grad_a_W[a],
                                             k, verts, vpress, offsets, normals, cents, areas, cpress, src, nv, nf)
    return trimmed_faces(verts, vpress, offsets, normals, areas, cents, cpress, src, nv, nf)


def body_tet_data(body):
    """:func:`tet_data` of a CompliantGeometry, computed once and kept on the body."""
    if "drake_tet_data" not in body.derived:
        body.derived["drake_tet_data"] = tet_data(body.points, body.tets, body.pressure)
    return body.derived["drake_tet_data"]


def relative_transform(X_WA: np.ndarray, X_WB: np.ndarray) -> np.ndarray:
    """X_AB = X_WA⁻¹·X_WB as Drake composes it: rotation Rᵀ_WA·R_WB and translation
    Rᵀ_WA·(p_WB − p_WA), each entry a three-term sum. Drake's routine picks SIMD code at run
    time; on a CPU with AVX2 and FMA it sums as fma(a₂, b₂, fma(a₁, b₁, a₀·b₀)), elsewhere left
    to right. Both are exact when X_WA is the identity."""
    A = np.ascontiguousarray(X_WA, dtype=np.float64)
    B = np.ascontiguousarray(X_WB, dtype=np.float64)
    if not _FUSED:
        return _relative_transform(A, B)
    out = np.zeros((4, 4))
    d = (B[0, 3] - A[0, 3], B[1, 3] - A[1, 3], B[2, 3] - A[2, 3])
    for i in range(3):
        for j in range(4):
            v = B[:3, j] if j < 3 else d
            out[i, j] = _fma(A[2, i], v[2], _fma(A[1, i], v[1], A[0, i] * v[0]))
    out[3, 3] = 1.0
    return out


def _libm_fma():
    """Correctly rounded a·b + c: the C library's fma, else exact rational arithmetic."""
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or None)
        f = libm.fma
        f.restype = ctypes.c_double
        f.argtypes = (ctypes.c_double, ctypes.c_double, ctypes.c_double)
        return lambda a, b, c: f(float(a), float(b), float(c))
    except (OSError, AttributeError):
        return lambda a, b, c: float(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def _cpu_fuses() -> bool:
    """True on an x86-64 CPU with AVX2 and FMA (where Drake's pose composition fuses)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return {"avx2", "fma"} <= flags
    except OSError:
        pass
    return False


_FUSED = _cpu_fuses()
_fma = _libm_fma()


@nb.njit(cache=True)
def _relative_transform(A, B):
    out = np.zeros((4, 4))
    for i in range(3):
        for j in range(3):
            out[i, j] = _dot(A[0, i], A[1, i], A[2, i], B[0, j], B[1, j], B[2, j])
        out[i, 3] = _dot(A[0, i], A[1, i], A[2, i], B[0, 3] - A[0, 3], B[1, 3] - A[1, 3], B[2, 3] - A[2, 3])
    out[3, 3] = 1.0
    return out


# --------------------------------------------------------------------------- rigid triangles

@nb.njit(cache=True)
def triangle_normals(vertices, faces):
    """Unit normals (AB×AC)/|AB×AC| of a rigid surface's triangles, body frame (zero for a
    degenerate triangle)."""
    out = np.empty((faces.shape[0], 3))
    for f in range(faces.shape[0]):
        a = vertices[faces[f, 0]]
        b = vertices[faces[f, 1]]
        c = vertices[faces[f, 2]]
        x, y, z = _cross(b[0] - a[0], b[1] - a[1], b[2] - a[2], c[0] - a[0], c[1] - a[1], c[2] - a[2])
        out[f, 0], out[f, 1], out[f, 2] = _normalized(x, y, z)
    return out


@nb.njit(cache=True)
def _tet_half_spaces(PT, TT, elements):
    """Per tet of ``elements`` (others unset), in its body frame: the four outward unit face
    normals (AB×AC normalised, faces (1,2,3), (0,3,2), (0,1,3), (0,2,1)) and their offsets n·A."""
    normals = np.empty((TT.shape[0], 4, 3))
    offsets = np.empty((TT.shape[0], 4))
    done = np.zeros(TT.shape[0], np.bool_)
    for t in elements:
        if done[t]:
            continue
        done[t] = True
        for f in range(4):
            a = PT[TT[t, _TET_FACES[f, 0]]]
            b = PT[TT[t, _TET_FACES[f, 1]]]
            c = PT[TT[t, _TET_FACES[f, 2]]]
            x, y, z = _cross(b[0] - a[0], b[1] - a[1], b[2] - a[2], c[0] - a[0], c[1] - a[1], c[2] - a[2])
            m = np.sqrt((x * x + y * y) + z * z)
            x = x / m
            y = y / m
            z = z / m
            normals[t, f, 0] = x
            normals[t, f, 1] = y
            normals[t, f, 2] = z
            offsets[t, f] = _dot(x, y, z, a[0], a[1], a[2])
    return normals, offsets


_TET_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]], dtype=np.int64)


@nb.njit(cache=True)
def tri_tet_polygons(pairs, PT, TT, uT, PS, SF, normals_S, X_MN, X_WM, sign, pressure, grad_W, normals_W):
    """Drake's polygons of (tet of the compliant body M, triangle of the rigid body N) pairs:
    each rigid triangle placed in M by ``X_MN``, skipped unless its normal (rotated into M and
    normalised again) is within 5π/8 of the tet's unit gradient ``uT``, clipped by the tet's four
    half-spaces in Drake's way (the cut point w·P + (1 − w)·Q), near-duplicate vertices removed;
    then placed in the world by ``X_WM``. ``normals_S``: :func:`triangle_normals` of N. The
    reported normal is ``sign``·``normals_W`` (world), and the polygon winds about it. Returns
    the arrays of :func:`fieldgen.runtime.contact.clip.tri_tet_polygons`."""
    m = pairs.shape[0]
    verts, vpress, offsets, normals, areas, cents, cpress, src = new_faces(m)
    nv = 0
    nf = 0
    R = X_MN[:3, :3]
    faceN, faceD = _tet_half_spaces(PT, TT, pairs[:, 0])
    # the candidate triangles' vertices and unit normals in M
    QS = np.empty_like(PS)
    NM = np.empty((SF.shape[0], 3))
    done_v = np.zeros(PS.shape[0], np.bool_)
    done_f = np.zeros(SF.shape[0], np.bool_)
    for f in pairs[:, 1]:
        if done_f[f]:
            continue
        done_f[f] = True
        x, y, z = _rotate(R, normals_S[f, 0], normals_S[f, 1], normals_S[f, 2])
        NM[f, 0], NM[f, 1], NM[f, 2] = _normalized(x, y, z)
        for i in range(3):
            v = SF[f, i]
            if not done_v[v]:
                done_v[v] = True
                x, y, z = _rotate(R, PS[v, 0], PS[v, 1], PS[v, 2])
                QS[v, 0] = X_MN[0, 3] + x
                QS[v, 1] = X_MN[1, 3] + y
                QS[v, 2] = X_MN[2, 3] + z
    poly = np.empty((MAX_POLYGON, 3))
    tmp = np.empty((MAX_POLYGON, 3))
    world = np.empty((MAX_POLYGON, 3))
    dist = np.empty(MAX_POLYGON)
    nrm = np.empty(3)
    cen = np.empty(3)
    x0 = np.empty(3)
    for k in range(m):
        t = pairs[k, 0]
        f = pairs[k, 1]
        if not _dot(uT[t, 0], uT[t, 1], uT[t, 2], NM[f, 0], NM[f, 1], NM[f, 2]) > COS_ALPHA:
            continue
        for i in range(3):
            w = QS[SF[f, i]]
            poly[i, 0] = w[0]
            poly[i, 1] = w[1]
            poly[i, 2] = w[2]
        n = 3
        for h in range(4):
            hx = faceN[t, h, 0]
            hy = faceN[t, h, 1]
            hz = faceN[t, h, 2]
            inside = 0
            for i in range(n):
                dist[i] = _dot(hx, hy, hz, poly[i, 0], poly[i, 1], poly[i, 2]) - faceD[t, h]
                if dist[i] <= 0.0:
                    inside += 1
            if inside == n:
                continue
            if inside == 0:
                n = 0
                break
            # Not the tet–tet loop above: Drake's triangle–tet clipping walks edges (prev, i) and
            # interpolates from the later vertex, so its points differ in the last bits.
            out = 0
            prev = n - 1
            for i in range(n):
                if dist[i] <= 0.0:
                    if not dist[prev] <= 0.0 and out < MAX_POLYGON:
                        wa = dist[prev] / (dist[prev] - dist[i])
                        wb = 1.0 - wa
                        for c in range(3):
                            tmp[out, c] = wa * poly[i, c] + wb * poly[prev, c]
                        out += 1
                    if out < MAX_POLYGON:
                        tmp[out, 0] = poly[i, 0]
                        tmp[out, 1] = poly[i, 1]
                        tmp[out, 2] = poly[i, 2]
                        out += 1
                elif dist[prev] <= 0.0 and out < MAX_POLYGON:
                    wa = dist[prev] / (dist[prev] - dist[i])
                    wb = 1.0 - wa
                    for c in range(3):
                        tmp[out, c] = wa * poly[i, c] + wb * poly[prev, c]
                    out += 1
                prev = i
            n = out
            for i in range(n):
                poly[i, 0] = tmp[i, 0]
                poly[i, 1] = tmp[i, 1]
                poly[i, 2] = tmp[i, 2]
        if n == 0:
            continue
        n = _remove_near_duplicates(poly, n)
        if n < 3:
            continue
        for i in range(n):
            j = i if sign > 0.0 else n - 1 - i
            x, y, z = _rotate(X_WM, poly[j, 0], poly[j, 1], poly[j, 2])
            world[i, 0] = X_WM[0, 3] + x
            world[i, 1] = X_WM[1, 3] + y
            world[i, 2] = X_WM[2, 3] + z
        for c in range(3):
            nrm[c] = sign * normals_W[f, c]
        area = polygon_area_centroid(world, n, nrm, cen)
        area = max(area, 0.0)
        v = PT[TT[t, 0]]
        x, y, z = _rotate(X_WM, v[0], v[1], v[2])
        x0[0] = X_WM[0, 3] + x
        x0[1] = X_WM[1, 3] + y
        x0[2] = X_WM[2, 3] + z
        verts, vpress, nv, nf = append_face(world, n, nrm, area, cen, x0, pressure[TT[t, 0]], grad_W[t],
                                             k, verts, vpress, offsets, normals, cents, areas, cpress, src, nv, nf)
    return trimmed_faces(verts, vpress, offsets, normals, areas, cents, cpress, src, nv, nf)


def body_triangle_normals(body):
    """:func:`triangle_normals` of a RigidGeometry, computed once and kept on the body."""
    if "drake_triangle_normals" not in body.derived:
        body.derived["drake_triangle_normals"] = triangle_normals(body.vertices, body.faces)
    return body.derived["drake_triangle_normals"]
