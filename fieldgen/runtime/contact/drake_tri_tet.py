"""Drake's triangle–tet contact polygons, for a rigid surface against a compliant volume under
the `drake` face rule (docs/model.md §3.5).

For each candidate pair (a tet of the compliant body M, a triangle of the rigid body N), in M's
frame:

* the rigid triangle's unit normal (AB×AC)/|AB×AC| (:func:`triangle_normals`, body frame) is
  rotated into M by ``X_MN`` and normalised again; the pair is skipped unless that normal is
  within 5π/8 of the tet's unit pressure gradient (``n·u ≥ cos 5π/8``);
* the triangle, placed in M, is clipped by the tet's four half-spaces, outward unit normals
  AB×AC/|AB×AC| of the faces (1,2,3), (0,3,2), (0,1,3), (0,2,1) with offsets n·A
  (:func:`_tet_half_spaces`); an edge PQ crossing a plane is cut at w·P + (1 − w)·Q, w the
  ratio of the signed heights, as Drake cuts it; consecutive vertices closer than 1e-14 m are
  removed after each clip;
* a polygon with three or more vertices left is placed in the world by ``X_WM`` and kept, with
  the pressure field of the tet.

The arithmetic is Drake's order (:mod:`fieldgen.runtime.contact.drake_vector`); the kernel keeps
the structure of Drake's function so that each step can be checked against Drake's source. No
code is shared with Drake.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from fieldgen.runtime.contact.drake_vector import COS_ALPHA, cross, dot, normalized, remove_near_duplicates, rotate
from fieldgen.runtime.contact.polygon_output import (MAX_POLYGON, append_face, new_faces, polygon_area_centroid,
                                                     trimmed_faces)


@nb.njit(cache=True)
def triangle_normals(vertices, faces):
    """Unit normals (AB×AC)/|AB×AC| of a rigid surface's triangles, body frame (zero for a
    degenerate triangle)."""
    out = np.empty((faces.shape[0], 3))
    for f in range(faces.shape[0]):
        a = vertices[faces[f, 0]]
        b = vertices[faces[f, 1]]
        c = vertices[faces[f, 2]]
        x, y, z = cross(b[0] - a[0], b[1] - a[1], b[2] - a[2], c[0] - a[0], c[1] - a[1], c[2] - a[2])
        out[f, 0], out[f, 1], out[f, 2] = normalized(x, y, z)
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
            x, y, z = cross(b[0] - a[0], b[1] - a[1], b[2] - a[2], c[0] - a[0], c[1] - a[1], c[2] - a[2])
            m = np.sqrt((x * x + y * y) + z * z)
            x = x / m
            y = y / m
            z = z / m
            normals[t, f, 0] = x
            normals[t, f, 1] = y
            normals[t, f, 2] = z
            offsets[t, f] = dot(x, y, z, a[0], a[1], a[2])
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
        x, y, z = rotate(R, normals_S[f, 0], normals_S[f, 1], normals_S[f, 2])
        NM[f, 0], NM[f, 1], NM[f, 2] = normalized(x, y, z)
        for i in range(3):
            v = SF[f, i]
            if not done_v[v]:
                done_v[v] = True
                x, y, z = rotate(R, PS[v, 0], PS[v, 1], PS[v, 2])
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
        if not dot(uT[t, 0], uT[t, 1], uT[t, 2], NM[f, 0], NM[f, 1], NM[f, 2]) > COS_ALPHA:
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
                dist[i] = dot(hx, hy, hz, poly[i, 0], poly[i, 1], poly[i, 2]) - faceD[t, h]
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
        n = remove_near_duplicates(poly, n)
        if n < 3:
            continue
        for i in range(n):
            j = i if sign > 0.0 else n - 1 - i
            x, y, z = rotate(X_WM, poly[j, 0], poly[j, 1], poly[j, 2])
            world[i, 0] = X_WM[0, 3] + x
            world[i, 1] = X_WM[1, 3] + y
            world[i, 2] = X_WM[2, 3] + z
        for c in range(3):
            nrm[c] = sign * normals_W[f, c]
        area = polygon_area_centroid(world, n, nrm, cen)
        area = max(area, 0.0)
        v = PT[TT[t, 0]]
        x, y, z = rotate(X_WM, v[0], v[1], v[2])
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
