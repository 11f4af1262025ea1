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
* the query in the frame of body A: the equal-pressure plane from the two linear fields (unit
  normal, offset from the fields' values at A's origin), the 5π/8 tests, the marching-tet slice
  of A's tet, removal of consecutive vertices closer than 1e-14 m, clipping by the four
  half-spaces of B's tet (each normal rotated into A's frame and normalised again), and the
  same duplicate removal; a polygon with three or more vertices left is kept.

The arithmetic is Drake's order (:mod:`fieldgen.runtime.contact.drake_vector`: sums of three
products, rotations row by row, as Eigen evaluates Drake's fixed-size expressions); a legacy
``.vtk`` mesh's distance field is :mod:`fieldgen.runtime.contact.drake_distance`, a rigid
surface's polygons :mod:`fieldgen.runtime.contact.drake_tri_tet`. These are facts of Drake's
code, reimplemented here; no code is shared with it. The kernels keep the structure of Drake's
functions (long ones included) so that each step can be checked against Drake's source.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from fractions import Fraction

import numba as nb
import numpy as np

from fieldgen.runtime.contact.drake_vector import (COS_ALPHA, cross, dot, normalized, remove_near_duplicates,
                                                   rotate, rotate_back, rotate_inverse)
from fieldgen.runtime.contact.polygon_output import (MAX_POLYGON, append_face, new_faces, polygon_area_centroid,
                                                     trimmed_faces)

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
            nx, ny, nz = cross(b[0] - a[0], b[1] - a[1], b[2] - a[2], c[0] - a[0], c[1] - a[1], c[2] - a[2])
            vol = dot(nx, ny, nz, v[0] - a[0], v[1] - a[1], v[2] - a[2])
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
        unit[e, 0], unit[e, 1], unit[e, 2] = normalized(gx, gy, gz)
        p0 = points[tets[e, 0]]
        at_origin[e] = values[tets[e, 0]] - dot(gx, gy, gz, p0[0], p0[1], p0[2])
        a = points[tets[e, 0]]
        b = points[tets[e, 1]]
        c = points[tets[e, 2]]
        d = points[tets[e, 3]]
        ab = (b[0] - a[0], b[1] - a[1], b[2] - a[2])
        ac = (c[0] - a[0], c[1] - a[1], c[2] - a[2])
        ad = (d[0] - a[0], d[1] - a[1], d[2] - a[2])
        bc = (c[0] - b[0], c[1] - b[1], c[2] - b[2])
        bd = (d[0] - b[0], d[1] - b[1], d[2] - b[2])
        faces = (cross(bd[0], bd[1], bd[2], bc[0], bc[1], bc[2]),
                 cross(ac[0], ac[1], ac[2], ad[0], ad[1], ad[2]),
                 cross(ad[0], ad[1], ad[2], ab[0], ab[1], ab[2]),
                 cross(ab[0], ab[1], ab[2], ac[0], ac[1], ac[2]))
        for f in range(4):
            x, y, z = faces[f]
            x, y, z = normalized(x, y, z)
            inward[e, f, 0] = x
            inward[e, f, 1] = y
            inward[e, f, 2] = z
    return grad, at_origin, inward, unit


# --------------------------------------------------------------------------- the query

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
                x, y, z = rotate(R, PB[v, 0], PB[v, 1], PB[v, 2])
                Q[v, 0] = X_MN[0, 3] + x
                Q[v, 1] = X_MN[1, 3] + y
                Q[v, 2] = X_MN[2, 3] + z
        for f in range(4):
            hx, hy, hz = rotate(R, -nB[b, f, 0], -nB[b, f, 1], -nB[b, f, 2])
            hm = np.sqrt((hx * hx + hy * hy) + hz * hz)
            hx = hx / hm
            hy = hy / hm
            hz = hz / hm
            p = Q[TB[b, (f + 1) % 4]]
            normals[b, f, 0] = hx
            normals[b, f, 1] = hy
            normals[b, f, 2] = hz
            offsets[b, f] = dot(hx, hy, hz, p[0], p[1], p[2])
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
    ox, oy, oz = rotate_back(R, tx, ty, tz)
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
        g1x, g1y, g1z = rotate(R, gB[b, 0], gB[b, 1], gB[b, 2])
        f1 = dot(gB[b, 0], gB[b, 1], gB[b, 2], ox, oy, oz) + mB[b]
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
        offset = dot(nx, ny, nz, s * nx, s * ny, s * nz)
        # the 5π/8 tests
        if not dot(nx, ny, nz, uA[a, 0], uA[a, 1], uA[a, 2]) > COS_ALPHA:
            continue
        rx, ry, rz = rotate_inverse(R, -nx, -ny, -nz)
        if not dot(rx, ry, rz, uB[b, 0], uB[b, 1], uB[b, 2]) > COS_ALPHA:
            continue
        # B's vertices in M; a tet B wholly and clearly on one side of the plane gives nothing
        # (a shortcut: the polygon lies in the plane, so every clip would empty it)
        tb = TB[b]
        hmin = np.inf
        hmax = -np.inf
        scale = 0.0
        for i in range(4):
            w = QB[tb[i]]
            h = dot(nx, ny, nz, w[0], w[1], w[2]) - offset
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
            d[i] = dot(nx, ny, nz, v[0], v[1], v[2]) - offset
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
        n = remove_near_duplicates(poly, n)
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
                dist[i] = dot(hx, hy, hz, poly[i, 0], poly[i, 1], poly[i, 2]) - h0
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
        n = remove_near_duplicates(poly, n)
        if n < 3:
            continue
        # into the world, wound about the normal from A into B (the reverse of Drake's order)
        for i in range(n):
            x, y, z = rotate(X_WM, poly[n - 1 - i, 0], poly[n - 1 - i, 1], poly[n - 1 - i, 2])
            world[i, 0] = X_WM[0, 3] + x
            world[i, 1] = X_WM[1, 3] + y
            world[i, 2] = X_WM[2, 3] + z
        x, y, z = rotate(X_WM, -nx, -ny, -nz)
        nrm[0] = x
        nrm[1] = y
        nrm[2] = z
        area = polygon_area_centroid(world, n, nrm, cen)
        area = max(area, 0.0)
        v = PA[ta[0]]
        x, y, z = rotate(X_WM, v[0], v[1], v[2])
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
            out[i, j] = dot(A[0, i], A[1, i], A[2, i], B[0, j], B[1, j], B[2, j])
        out[i, 3] = dot(A[0, i], A[1, i], A[2, i], B[0, 3] - A[0, 3], B[1, 3] - A[1, 3], B[2, 3] - A[2, 3])
    out[3, 3] = 1.0
    return out

