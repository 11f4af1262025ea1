"""Narrow phase: the convex polygon of each candidate pair (D 5.0.2, C.1, C.2; M22 III-B).

Kernels take world-frame vertex arrays and (m, 2) candidate pairs and return the kept
polygons as flat growable arrays: ``vertices`` (nv, 3), ``vertex_pressure`` (nv,),
``offsets`` (nf + 1,), ``normal``/``area``/``centroid``/``centroid_pressure`` per polygon and
``pair`` (nf,) the index of the candidate pair it came from. Polygons are wound
counter-clockwise about their normal. A polygon is kept when it has positive area.

Drake's face rule has its own kernels, which repeat Drake's arithmetic to the last bit
(:mod:`fieldgen.runtime.contact.drake_arithmetic`, ``docs/model.md §3.5``).

Tet faces: face ``i`` is opposite vertex ``i`` (the order of ``fieldgen.meshing.tetmesh``), its outward
normal from the positive (VTK) orientation; a point is inside when ``n·(x - a) <= 0``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from fieldgen.runtime.contact.polygon_output import (
    MAX_POLYGON,
    append_face,
    new_faces,
    polygon_area_centroid,
    trimmed_faces,
)

_FACES = np.array([[1, 2, 3], [0, 3, 2], [0, 1, 3], [0, 2, 1]], dtype=np.int64)


@nb.njit(cache=True, inline="always")
def _clip_halfspace(poly, n, tmp, nx, ny, nz, ax, ay, az):
    """Sutherland–Hodgman: keep the part of poly[:n] with (x - a)·nrm <= 0; result in tmp."""
    m = 0
    for i in range(n):
        j = i + 1 if i + 1 < n else 0
        di = (poly[i, 0] - ax) * nx + (poly[i, 1] - ay) * ny + (poly[i, 2] - az) * nz
        dj = (poly[j, 0] - ax) * nx + (poly[j, 1] - ay) * ny + (poly[j, 2] - az) * nz
        if di <= 0.0:
            if m < MAX_POLYGON:
                tmp[m, 0] = poly[i, 0]
                tmp[m, 1] = poly[i, 1]
                tmp[m, 2] = poly[i, 2]
                m += 1
        if (di < 0.0 and dj > 0.0) or (di > 0.0 and dj < 0.0):
            s = di / (di - dj)
            if m < MAX_POLYGON:
                tmp[m, 0] = poly[i, 0] + s * (poly[j, 0] - poly[i, 0])
                tmp[m, 1] = poly[i, 1] + s * (poly[j, 1] - poly[i, 1])
                tmp[m, 2] = poly[i, 2] + s * (poly[j, 2] - poly[i, 2])
                m += 1
    return m


@nb.njit(cache=True)
def _clip_by_tet(poly, n, tmp, P, tet, skip_mask):
    """Clip poly[:n] by the faces of ``tet`` not flagged in ``skip_mask`` (bit i = face i)."""
    for f in range(4):
        if (skip_mask >> f) & 1:
            continue
        if n == 0:
            return 0
        a = P[tet[_FACES[f, 0]]]
        b = P[tet[_FACES[f, 1]]]
        c = P[tet[_FACES[f, 2]]]
        ux, uy, uz = b[0] - a[0], b[1] - a[1], b[2] - a[2]
        vx, vy, vz = c[0] - a[0], c[1] - a[1], c[2] - a[2]
        nx = uy * vz - uz * vy
        ny = uz * vx - ux * vz
        nz = ux * vy - uy * vx
        inside = 0
        outside = 0
        for i in range(n):
            d = (poly[i, 0] - a[0]) * nx + (poly[i, 1] - a[1]) * ny + (poly[i, 2] - a[2]) * nz
            if d <= 0.0:
                inside += 1
            else:
                outside += 1
        if outside == 0:        # wholly inside this face: Sutherland–Hodgman would copy it as is
            continue
        if inside == 0:         # wholly outside: nothing left
            return 0
        n = _clip_halfspace(poly, n, tmp, nx, ny, nz, a[0], a[1], a[2])
        for i in range(n):
            poly[i, 0] = tmp[i, 0]
            poly[i, 1] = tmp[i, 1]
            poly[i, 2] = tmp[i, 2]
    return n


@nb.njit(cache=True)
def _zero_face_mask(pressure, tet):
    """Bit i set when face i of ``tet`` has p0 = 0 at all three vertices."""
    mask = 0
    for f in range(4):
        if (pressure[tet[_FACES[f, 0]]] == 0.0 and pressure[tet[_FACES[f, 1]]] == 0.0
                and pressure[tet[_FACES[f, 2]]] == 0.0):
            mask |= 1 << f
    return mask


@nb.njit(cache=True, inline="always")
def _slice_by_sign(poly, s, npos, P, tet):
    """The slice of ``tet`` (vertices ``P[tet]``) by the plane where the linear function with
    values ``s`` at its vertices is 0, ``npos`` of them positive (1, 2 or 3): 3 or 4 points in
    ``poly``, in the order of a walk around the slice, each cut from the lone vertex (one or
    three positive) or from the positive end, t = s_p/(s_p − s_q); returns the count."""
    n = 0
    if npos == 1 or npos == 3:
        lone = -1
        for i in range(4):
            if (s[i] > 0.0) == (npos == 1):
                lone = i
        for j in range(4):
            if j != lone:
                t = s[lone] / (s[lone] - s[j])
                for c in range(3):
                    poly[n, c] = P[tet[lone], c] + t * (P[tet[j], c] - P[tet[lone], c])
                n += 1
    else:
        i0 = -1
        i1 = -1
        j0 = -1
        j1 = -1
        for i in range(4):
            if s[i] > 0.0:
                if i0 < 0:
                    i0 = i
                else:
                    i1 = i
            else:
                if j0 < 0:
                    j0 = i
                else:
                    j1 = i
        edges = ((i0, j0), (i0, j1), (i1, j1), (i1, j0))
        for e in edges:
            p_, q_ = e
            t = s[p_] / (s[p_] - s[q_])
            for c in range(3):
                poly[n, c] = P[tet[p_], c] + t * (P[tet[q_], c] - P[tet[p_], c])
            n += 1
    return n


@nb.njit(cache=True, inline="always")
def _wind_about(poly, n, nrm):
    """Wind poly[:n] counter-clockwise about ``nrm``: reversed when its fan from vertex 0
    turns the other way."""
    ox = 0.0
    for i in range(1, n - 1):
        ux = poly[i, 0] - poly[0, 0]
        uy = poly[i, 1] - poly[0, 1]
        uz = poly[i, 2] - poly[0, 2]
        vx = poly[i + 1, 0] - poly[0, 0]
        vy = poly[i + 1, 1] - poly[0, 1]
        vz = poly[i + 1, 2] - poly[0, 2]
        ox += (uy * vz - uz * vy) * nrm[0] + (uz * vx - ux * vz) * nrm[1] + (ux * vy - uy * vx) * nrm[2]
    if ox < 0.0:
        for i in range(n // 2):
            for c in range(3):
                tmpv = poly[i, c]
                poly[i, c] = poly[n - 1 - i, c]
                poly[n - 1 - i, c] = tmpv


@nb.njit(cache=True)
def tet_tet_polygons(pairs, PA, TA, pA, gA, PB, TB, pB, gB, eps_rel):
    """Equal-pressure polygons of tet pairs (D C.1): slice tet a by the plane p_b = p_a, then
    clip by tet b's faces. Tet b's zero-pressure faces are never clipped: on the plane
    p_b = p_a >= 0 inside tet a, so that clip is redundant, and skipping it is D 5.0.2's
    duplicate-clip rule (clip a shared p0 = 0 boundary once, by tet A). Pairs whose gradients
    differ by no more than ``eps_rel``·(|∇p_a| + |∇p_b|) have no plane (D C.2) and are skipped.
    Drake's face rule has its own kernel (:mod:`fieldgen.runtime.contact.drake_arithmetic`).

    The slice and its winding are helpers inlined by numba (``inline="always"``): no measurable
    cost here, unlike the splits of :func:`tri_tet_polygons` (docs/design/runtime.md)."""
    m = pairs.shape[0]
    verts, vpress, offsets, normals, areas, cents, cpress, src = new_faces(m)
    nv = 0
    nf = 0
    poly = np.empty((MAX_POLYGON, 3))
    tmp = np.empty((MAX_POLYGON, 3))
    s = np.empty(4)
    nrm = np.empty(3)
    cen = np.empty(3)
    for k in range(m):
        a = pairs[k, 0]
        b = pairs[k, 1]
        ta = TA[a]
        tb = TB[b]
        # The plane p_b = p_a misses tet b when every vertex of tet b is strictly on one side
        # (p_a extended linearly from tet a): then the clipped polygon would be empty; skip the
        # slice and the clipping (most candidate pairs of a deep overlap end here).
        xa = PA[ta[0]]
        above = 0
        below = 0
        for i in range(4):
            w = PB[tb[i]]
            d = pB[tb[i]] - (pA[ta[0]] + gA[a, 0] * (w[0] - xa[0]) + gA[a, 1] * (w[1] - xa[1])
                             + gA[a, 2] * (w[2] - xa[2]))
            if d > 0.0:
                above += 1
            elif d < 0.0:
                below += 1
        if above == 4 or below == 4:
            continue
        # p_b(x) = pB[tb0] + gB·(x - xb0); s_i = p_b(v_i) - p_a(v_i) at tet a's vertices.
        xb = PB[tb[0]]
        npos = 0
        for i in range(4):
            v = PA[ta[i]]
            pbv = pB[tb[0]] + gB[b, 0] * (v[0] - xb[0]) + gB[b, 1] * (v[1] - xb[1]) + gB[b, 2] * (v[2] - xb[2])
            s[i] = pbv - pA[ta[i]]
            if s[i] > 0.0:
                npos += 1
        if npos == 0 or npos == 4:
            continue
        # the plane's normal (D C.2), and Drake's filter, only for pairs the plane cuts
        dg0 = gB[b, 0] - gA[a, 0]
        dg1 = gB[b, 1] - gA[a, 1]
        dg2 = gB[b, 2] - gA[a, 2]
        dn = np.sqrt(dg0 * dg0 + dg1 * dg1 + dg2 * dg2)
        scale = np.sqrt(gA[a, 0] ** 2 + gA[a, 1] ** 2 + gA[a, 2] ** 2) + np.sqrt(
            gB[b, 0] ** 2 + gB[b, 1] ** 2 + gB[b, 2] ** 2)
        if not dn > eps_rel * scale:
            continue
        nrm[0] = dg0 / dn
        nrm[1] = dg1 / dn
        nrm[2] = dg2 / dn
        n = _slice_by_sign(poly, s, npos, PA, ta)
        _wind_about(poly, n, nrm)
        n = _clip_by_tet(poly, n, tmp, PB, tb, _zero_face_mask(pB, tb))
        if n < 3:
            continue
        area = polygon_area_centroid(poly, n, nrm, cen)
        if not area > 0.0:
            continue
        verts, vpress, nv, nf = append_face(poly, n, nrm, area, cen, PA[ta[0]], pA[ta[0]], gA[a], k,
                                             verts, vpress, offsets, normals, cents, areas, cpress,
                                             src, nv, nf)
    return trimmed_faces(verts, vpress, offsets, normals, areas, cents, cpress, src, nv, nf)


@nb.njit(cache=True, inline="always")
def _slice_point(poly, n, xa, ya, za, da, xb, yb, zb, db):
    """poly[n] = the point of the edge from (xa, ya, za) to (xb, yb, zb) where the signed
    distance, da at the first end and db at the second, goes through 0."""
    s = da / (da - db)
    poly[n, 0] = xa + s * (xb - xa)
    poly[n, 1] = ya + s * (yb - ya)
    poly[n, 2] = za + s * (zb - za)


@nb.njit(cache=True)
def _triangle_planes(PS, SF, unit_normals, f, out):
    """out[f] = the triangle's unit normal u, its vertex 0, and its three edge-plane normals
    u × (v_k+1 − v_k) (pointing into the triangle, which is wound about u)."""
    ux = unit_normals[f, 0]
    uy = unit_normals[f, 1]
    uz = unit_normals[f, 2]
    out[f, 0] = ux
    out[f, 1] = uy
    out[f, 2] = uz
    for c in range(3):
        out[f, 3 + c] = PS[SF[f, 0], c]
    for k in range(3):
        vk = SF[f, k]
        vl = SF[f, k + 1 if k < 2 else 0]
        ex = PS[vl, 0] - PS[vk, 0]
        ey = PS[vl, 1] - PS[vk, 1]
        ez = PS[vl, 2] - PS[vk, 2]
        out[f, 6 + 3 * k] = uy * ez - uz * ey
        out[f, 7 + 3 * k] = uz * ex - ux * ez
        out[f, 8 + 3 * k] = ux * ey - uy * ex


@nb.njit(cache=True, inline="always")
def _walk_slice(poly, npos, b0, b1, b2, x0, y0, z0, d0, x1, y1, z1, d1, x2, y2, z2, d2, x3, y3, z3, d3):
    """The slice of a tet by a plane it crosses (vertices (x_i, y_i, z_i) at signed distances
    d_i, ``b_i`` = d_i > 0, ``npos`` of them positive, none zero): its 3 or 4 points in
    ``poly``, in the order of a walk around the slice; returns the count."""
    if npos == 2:
        # the two vertices above (p, q) and below (r, s): the slice walks p-r, p-s, q-s, q-r
        if b0 == b1:       # {0,1} vs {2,3}
            _slice_point(poly, 0, x0, y0, z0, d0, x2, y2, z2, d2)
            _slice_point(poly, 1, x0, y0, z0, d0, x3, y3, z3, d3)
            _slice_point(poly, 2, x1, y1, z1, d1, x3, y3, z3, d3)
            _slice_point(poly, 3, x1, y1, z1, d1, x2, y2, z2, d2)
        elif b0 == b2:     # {0,2} vs {1,3}
            _slice_point(poly, 0, x0, y0, z0, d0, x1, y1, z1, d1)
            _slice_point(poly, 1, x0, y0, z0, d0, x3, y3, z3, d3)
            _slice_point(poly, 2, x2, y2, z2, d2, x3, y3, z3, d3)
            _slice_point(poly, 3, x2, y2, z2, d2, x1, y1, z1, d1)
        else:              # {0,3} vs {1,2}
            _slice_point(poly, 0, x0, y0, z0, d0, x1, y1, z1, d1)
            _slice_point(poly, 1, x0, y0, z0, d0, x2, y2, z2, d2)
            _slice_point(poly, 2, x3, y3, z3, d3, x2, y2, z2, d2)
            _slice_point(poly, 3, x3, y3, z3, d3, x1, y1, z1, d1)
        return 4
    lone_up = npos == 1
    if b0 == lone_up:
        _slice_point(poly, 0, x0, y0, z0, d0, x1, y1, z1, d1)
        _slice_point(poly, 1, x0, y0, z0, d0, x2, y2, z2, d2)
        _slice_point(poly, 2, x0, y0, z0, d0, x3, y3, z3, d3)
    elif b1 == lone_up:
        _slice_point(poly, 0, x1, y1, z1, d1, x0, y0, z0, d0)
        _slice_point(poly, 1, x1, y1, z1, d1, x2, y2, z2, d2)
        _slice_point(poly, 2, x1, y1, z1, d1, x3, y3, z3, d3)
    elif b2 == lone_up:
        _slice_point(poly, 0, x2, y2, z2, d2, x0, y0, z0, d0)
        _slice_point(poly, 1, x2, y2, z2, d2, x1, y1, z1, d1)
        _slice_point(poly, 2, x2, y2, z2, d2, x3, y3, z3, d3)
    else:
        _slice_point(poly, 0, x3, y3, z3, d3, x0, y0, z0, d0)
        _slice_point(poly, 1, x3, y3, z3, d3, x1, y1, z1, d1)
        _slice_point(poly, 2, x3, y3, z3, d3, x2, y2, z2, d2)
    return 3


@nb.njit(cache=True, inline="always")
def _slice_inside_triangle(PT, TT, t_, PS, SF, f, C, poly):
    """The common case of a large rigid triangle against a small tet, without clipping: when no
    tet vertex lies on the triangle's plane and all four lie strictly inside the prism over the
    triangle (inside its three edge planes, ``C[f]`` from :func:`_triangle_planes`), triangle ∩
    tet is the tet's slice by the plane: 3 or 4 points on the tet's edges, written to ``poly``
    in the order of a walk around the slice (either winding; the count is returned). Returns
    0 when the tet misses the plane or lies strictly outside one edge plane (no overlap), −1
    for every other case (the caller clips). Scalars throughout: this runs for every pair."""
    i0 = TT[t_, 0]
    i1 = TT[t_, 1]
    i2 = TT[t_, 2]
    i3 = TT[t_, 3]
    x0 = PT[i0, 0]
    y0 = PT[i0, 1]
    z0 = PT[i0, 2]
    x1 = PT[i1, 0]
    y1 = PT[i1, 1]
    z1 = PT[i1, 2]
    x2 = PT[i2, 0]
    y2 = PT[i2, 1]
    z2 = PT[i2, 2]
    x3 = PT[i3, 0]
    y3 = PT[i3, 1]
    z3 = PT[i3, 2]
    ux = C[f, 0]
    uy = C[f, 1]
    uz = C[f, 2]
    ax = C[f, 3]
    ay = C[f, 4]
    az = C[f, 5]
    d0 = (x0 - ax) * ux + (y0 - ay) * uy + (z0 - az) * uz
    d1 = (x1 - ax) * ux + (y1 - ay) * uy + (z1 - az) * uz
    d2 = (x2 - ax) * ux + (y2 - ay) * uy + (z2 - az) * uz
    d3 = (x3 - ax) * ux + (y3 - ay) * uy + (z3 - az) * uz
    if d0 == 0.0 or d1 == 0.0 or d2 == 0.0 or d3 == 0.0:
        return -1
    b0 = d0 > 0.0
    b1 = d1 > 0.0
    b2 = d2 > 0.0
    b3 = d3 > 0.0
    npos = np.int64(b0) + np.int64(b1) + np.int64(b2) + np.int64(b3)
    if npos == 0 or npos == 4:
        return 0
    inside = True
    for k in range(3):
        v = SF[f, k]
        px = PS[v, 0]
        py = PS[v, 1]
        pz = PS[v, 2]
        mx = C[f, 6 + 3 * k]
        my = C[f, 7 + 3 * k]
        mz = C[f, 8 + 3 * k]
        e0 = (x0 - px) * mx + (y0 - py) * my + (z0 - pz) * mz
        e1 = (x1 - px) * mx + (y1 - py) * my + (z1 - pz) * mz
        e2 = (x2 - px) * mx + (y2 - py) * my + (z2 - pz) * mz
        e3 = (x3 - px) * mx + (y3 - py) * my + (z3 - pz) * mz
        if e0 < 0.0 and e1 < 0.0 and e2 < 0.0 and e3 < 0.0:
            return 0
        if not (e0 > 0.0 and e1 > 0.0 and e2 > 0.0 and e3 > 0.0):
            inside = False
    if not inside:
        return -1
    return _walk_slice(poly, npos, b0, b1, b2, x0, y0, z0, d0, x1, y1, z1, d1, x2, y2, z2, d2, x3, y3, z3, d3)


@nb.njit(cache=True, inline="always")
def _winding(poly, nx, ny, nz):
    """(v1 − v0) × (v2 − v0) · n: positive when a convex polygon winds counter-clockwise about n."""
    ux = poly[1, 0] - poly[0, 0]
    uy = poly[1, 1] - poly[0, 1]
    uz = poly[1, 2] - poly[0, 2]
    vx = poly[2, 0] - poly[0, 0]
    vy = poly[2, 1] - poly[0, 1]
    vz = poly[2, 2] - poly[0, 2]
    return (uy * vz - uz * vy) * nx + (uz * vx - ux * vz) * ny + (ux * vy - uy * vx) * nz


@nb.njit(cache=True)
def _clip_triangle_by_tet(PT, TT, t_, PS, SF, f, sign, plane, poly, tmp):
    """Rigid triangle ``f`` clipped by tet ``t_`` into ``poly``: its vertex count, 0 where they do
    not overlap. The tet's four face planes (normal (b − a) × (c − a) of the face's vertices a,
    b, c, kept in ``plane``) serve both the separation test (the triangle wholly outside one
    plane) and Sutherland–Hodgman. Only for the pairs the slice of :func:`tri_tet_polygons` does
    not take (a few in a hundred against a fine mesh), so the hot loop keeps its shape."""
    for q in range(4):
        ia = TT[t_, _FACES[q, 0]]
        ib = TT[t_, _FACES[q, 1]]
        ic = TT[t_, _FACES[q, 2]]
        ax = PT[ia, 0]
        ay = PT[ia, 1]
        az = PT[ia, 2]
        ux, uy, uz = PT[ib, 0] - ax, PT[ib, 1] - ay, PT[ib, 2] - az
        vx, vy, vz = PT[ic, 0] - ax, PT[ic, 1] - ay, PT[ic, 2] - az
        nx = uy * vz - uz * vy
        ny = uz * vx - ux * vz
        nz = ux * vy - uy * vx
        plane[q, 0] = nx
        plane[q, 1] = ny
        plane[q, 2] = nz
        plane[q, 3] = ax
        plane[q, 4] = ay
        plane[q, 5] = az
        outside = True
        for i in range(3):
            v = SF[f, i]
            if (PS[v, 0] - ax) * nx + (PS[v, 1] - ay) * ny + (PS[v, 2] - az) * nz <= 0.0:
                outside = False
                break
        if outside:
            return 0
    for i in range(3):
        v = SF[f, i]
        for c in range(3):
            poly[i, c] = PS[v, c]
    n = 3
    if sign < 0.0:   # keep counter-clockwise about the reported normal
        for c in range(3):
            tmpv = poly[1, c]
            poly[1, c] = poly[2, c]
            poly[2, c] = tmpv
    for q in range(4):
        nx = plane[q, 0]
        ny = plane[q, 1]
        nz = plane[q, 2]
        ax = plane[q, 3]
        ay = plane[q, 4]
        az = plane[q, 5]
        inside = 0
        for i in range(n):
            if (poly[i, 0] - ax) * nx + (poly[i, 1] - ay) * ny + (poly[i, 2] - az) * nz <= 0.0:
                inside += 1
        if inside == n:         # wholly inside this face: clipping would copy it as is
            continue
        if inside == 0:         # wholly outside: nothing left
            return 0
        n = _clip_halfspace(poly, n, tmp, nx, ny, nz, ax, ay, az)
        for i in range(n):
            poly[i, 0] = tmp[i, 0]
            poly[i, 1] = tmp[i, 1]
            poly[i, 2] = tmp[i, 2]
    return n


@nb.njit(cache=True)
def tri_tet_polygons(pairs, PT, TT, PS, SF, unit_normals, sign, p, g):
    """Rigid triangles clipped by the compliant tets they overlap (D 5.0.2). ``pairs`` holds
    (tet, triangle); the normal is ``sign``·(triangle outward normal) and the pressure is the
    tet's field interpolated (Drake's face rule: :mod:`fieldgen.runtime.contact.drake_arithmetic`).
    Face rule ``"all"``: a tet wholly inside the prism over the triangle is sliced by the
    triangle's plane (:func:`_slice_inside_triangle`, the usual case for a large rigid face
    against a fine mesh); other pairs are clipped (:func:`_clip_triangle_by_tet`). Both give
    triangle ∩ tet; they differ by round-off. Arrays are read by scalar index (no per-pair
    views or allocations): this runs for every candidate pair of every step. The slice stays in
    the loop: split into numba helpers (inlined or called), the hot path ran measurably slower
    (docs/design/runtime.md). The output has room for every pair's largest polygon
    (``MAX_POLYGON`` vertices), so it is never grown inside the loop."""
    m = pairs.shape[0]
    verts, vpress, offsets, normals, areas, cents, cpress, src = new_faces(m, MAX_POLYGON)
    nv = 0
    nf = 0
    poly = np.empty((MAX_POLYGON, 3))
    tmp = np.empty((MAX_POLYGON, 3))
    nrm = np.empty(3)
    cen = np.empty(3)
    plane = np.empty((4, 6))      # per face of the current tet: normal (3), point a (3)
    planes = np.empty((SF.shape[0], 15))   # _triangle_planes, filled when first used
    planes_done = np.zeros(SF.shape[0], np.bool_)
    for k in range(m):
        t_ = pairs[k, 0]
        f = pairs[k, 1]
        gx = g[t_, 0]
        gy = g[t_, 1]
        gz = g[t_, 2]
        nrx = sign * unit_normals[f, 0]
        nry = sign * unit_normals[f, 1]
        nrz = sign * unit_normals[f, 2]
        if not planes_done[f]:
            _triangle_planes(PS, SF, unit_normals, f, planes)
            planes_done[f] = True
        n = _slice_inside_triangle(PT, TT, t_, PS, SF, f, planes, poly)
        if n == 0:
            continue
        n_slice = n
        if n < 0:
            n = _clip_triangle_by_tet(PT, TT, t_, PS, SF, f, sign, plane, poly, tmp)
        if n < 3:
            continue
        # a slice is walked either way round: measure it about the normal it winds around
        flip = n_slice > 0 and _winding(poly, nrx, nry, nrz) < 0.0
        turn = -1.0 if flip else 1.0
        nrm[0] = turn * nrx
        nrm[1] = turn * nry
        nrm[2] = turn * nrz
        area = polygon_area_centroid(poly, n, nrm, cen)
        cx = cen[0]
        cy = cen[1]
        cz = cen[2]
        if not area > 0.0:
            continue
        # append: vertices with the tet's field p0 + ∇p0·(x − x0) (linear in the tet, D 5.0.1)
        i0 = TT[t_, 0]
        x0 = PT[i0, 0]
        y0 = PT[i0, 1]
        z0 = PT[i0, 2]
        p0 = p[i0]
        for i in range(n):
            r = n - 1 - i if flip else i
            for c in range(3):
                verts[nv + i, c] = poly[r, c]
            vpress[nv + i] = p0 + gx * (poly[r, 0] - x0) + gy * (poly[r, 1] - y0) + gz * (poly[r, 2] - z0)
        nv += n
        offsets[nf + 1] = nv
        normals[nf, 0] = nrx
        normals[nf, 1] = nry
        normals[nf, 2] = nrz
        cents[nf, 0] = cx
        cents[nf, 1] = cy
        cents[nf, 2] = cz
        areas[nf] = area
        cpress[nf] = p0 + gx * (cx - x0) + gy * (cy - y0) + gz * (cz - z0)
        src[nf] = k
        nf += 1
    return trimmed_faces(verts, vpress, offsets, normals, areas, cents, cpress, src, nv, nf)


@nb.njit(cache=True)
def fan_triangles(vertices, vpress, offsets, centroids, cpress):
    """Centroid fans (D 5.0.3, Algorithm 1): polygon k of n vertices becomes n triangles
    (centroid, v_i, v_i+1). Returns new vertices (polygon vertices then one centroid per
    polygon), their pressures, (nt, 3) triangles and (nt,) source polygon."""
    nf = offsets.shape[0] - 1
    nv = vertices.shape[0]
    V = np.empty((nv + nf, 3))
    P = np.empty(nv + nf)
    V[:nv] = vertices
    P[:nv] = vpress
    V[nv:] = centroids
    P[nv:] = cpress
    tris = np.empty((nv, 3), np.int64)
    owner = np.empty(nv, np.int64)
    t = 0
    for k in range(nf):
        s = offsets[k]
        e = offsets[k + 1]
        for i in range(s, e):
            j = i + 1 if i + 1 < e else s
            tris[t, 0] = nv + k
            tris[t, 1] = i
            tris[t, 2] = j
            owner[t] = k
            t += 1
    return V, P, tris, owner
