"""The output of the polygon kernels (:mod:`fieldgen.runtime.contact.clip`,
:mod:`fieldgen.runtime.contact.drake_arithmetic`): growable flat arrays of polygons.

``vertices`` (nv, 3), ``vertex_pressure`` (nv,), ``offsets`` (nf + 1,), per polygon ``normal``,
``area``, ``centroid``, ``centroid_pressure`` and ``pair``, the index of the candidate pair it
came from (docs/model.md §3.4).
"""

from __future__ import annotations

import numba as nb
import numpy as np

MAX_POLYGON = 16  # 8 is the geometric bound (a tet slice <= 4, +1 per clipping face); slack for ties


@nb.njit(cache=True, inline="always")
def polygon_area_centroid(poly, n, nrm, c):
    """Area (projected on the unit normal), returned, and area centroid, written to ``c``
    (the vertex mean when the area is not positive), by a fan from vertex 0."""
    area = 0.0
    cx = 0.0
    cy = 0.0
    cz = 0.0
    for k in range(1, n - 1):
        ux = poly[k, 0] - poly[0, 0]
        uy = poly[k, 1] - poly[0, 1]
        uz = poly[k, 2] - poly[0, 2]
        vx = poly[k + 1, 0] - poly[0, 0]
        vy = poly[k + 1, 1] - poly[0, 1]
        vz = poly[k + 1, 2] - poly[0, 2]
        a = 0.5 * ((uy * vz - uz * vy) * nrm[0] + (uz * vx - ux * vz) * nrm[1] + (ux * vy - uy * vx) * nrm[2])
        area += a
        cx += a * (poly[0, 0] + poly[k, 0] + poly[k + 1, 0]) / 3.0
        cy += a * (poly[0, 1] + poly[k, 1] + poly[k + 1, 1]) / 3.0
        cz += a * (poly[0, 2] + poly[k, 2] + poly[k + 1, 2]) / 3.0
    if area > 0.0:
        c[0] = cx / area
        c[1] = cy / area
        c[2] = cz / area
    else:
        for i in range(3):
            c[i] = 0.0
            for k in range(n):
                c[i] += poly[k, i]
            c[i] /= max(n, 1)
    return area


@nb.njit(cache=True)
def grow_rows(a, need):
    """``a`` (n, k), or a copy with room for ``need`` rows (at least twice as many)."""
    if need <= a.shape[0]:
        return a
    b = np.empty((max(need, 2 * a.shape[0]), a.shape[1]), a.dtype)
    b[:a.shape[0]] = a
    return b


@nb.njit(cache=True)
def grow(a, need):
    """``a`` (n,), or a copy with room for ``need`` entries (at least twice as many)."""
    if need <= a.shape[0]:
        return a
    b = np.empty(max(need, 2 * a.shape[0]), a.dtype)
    b[:a.shape[0]] = a
    return b


@nb.njit(cache=True)
def new_faces(m, vertices_per_face=4):
    """Output arrays of a polygon kernel with ``m`` candidate pairs (they grow if need be):
    vertices, vertex pressures, offsets, normals, areas, centroids, centroid pressures, source pair.
    Room for ``vertices_per_face`` vertices a pair; with ``MAX_POLYGON`` (the most a clipped
    polygon can have) they never need to grow, so a kernel need not reassign them in its loop
    (measured: 15 % of the rigid-triangle kernel, docs/design/runtime.md); untouched rows cost
    no memory."""
    cap = max(m, 4)
    nv = max(vertices_per_face * m, 16)
    return (np.empty((nv, 3)), np.empty(nv), np.zeros(cap + 1, np.int64),
            np.empty((cap, 3)), np.empty(cap), np.empty((cap, 3)), np.empty(cap), np.empty(cap, np.int64))


@nb.njit(cache=True)
def trimmed_faces(verts, vpress, offsets, normals, areas, cents, cpress, src, nv, nf):
    """The kernel's answer: its output arrays cut to ``nv`` vertices and ``nf`` faces."""
    return (verts[:nv].copy(), vpress[:nv].copy(), offsets[:nf + 1].copy(), normals[:nf].copy(),
            areas[:nf].copy(), cents[:nf].copy(), cpress[:nf].copy(), src[:nf].copy())


@nb.njit(cache=True, inline="always")
def append_face(poly, n, nrm, area, cen, x0, p0, grad, k, verts, vpress, offsets, normals, cents,
                 areas, cpress, src, nv, nf):
    """Append polygon ``poly[:n]`` as face ``nf``: its vertices with the field ``p0 + grad·(x − x0)``
    (linear in the tet it lies in, D 5.0.1), normal, area, centroid and centroid pressure."""
    verts = grow_rows(verts, nv + n)
    vpress = grow(vpress, nv + n)
    for i in range(n):
        for c in range(3):
            verts[nv + i, c] = poly[i, c]
        vpress[nv + i] = p0 + grad[0] * (poly[i, 0] - x0[0]) + grad[1] * (poly[i, 1] - x0[1]) + grad[2] * (
            poly[i, 2] - x0[2])
    nv += n
    offsets[nf + 1] = nv
    for c in range(3):
        normals[nf, c] = nrm[c]
        cents[nf, c] = cen[c]
    areas[nf] = area
    cpress[nf] = p0 + grad[0] * (cen[0] - x0[0]) + grad[1] * (cen[1] - x0[1]) + grad[2] * (cen[2] - x0[2])
    src[nf] = k
    return verts, vpress, nv, nf + 1
