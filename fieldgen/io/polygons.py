"""Splitting a file's polygon faces into triangles.

A convex polygon is split into a fan from its first corner (what every reader did before, so
the triangles of convex faces are unchanged); a non-convex one (a wall face with a notch, an
L-shaped cap, as CAD exporters write them) by ear clipping in the plane that fits it best, since
a fan from a corner covers the notch with triangles that overlap the face's own.
"""

from __future__ import annotations

import numpy as np

#: Ear clipping here is quadratic in the corners or worse (200 corners 0.1 s, 1,600 corners 7 s): a
#: non-convex polygon with more corners is split into a fan, as before (a fan that overlaps the
#: face is then refused as a self-intersection, naming --robust), so no file holds the read up.
MAX_CLIPPED_CORNERS = 256


def split_polygon(corners: list[int], vertices) -> list[tuple[int, int, int]]:
    """Triangles ``(a, b, c)`` of vertex numbers covering the polygon ``corners`` (indices into
    ``vertices``, an (n, 3) array or list of points), each turning as the polygon does."""
    n = len(corners)
    if n <= 3:
        return [tuple(corners)] if n == 3 else []
    points = [vertices[k] for k in corners]
    if _convex_in_space(points):
        return [(corners[0], corners[i], corners[i + 1]) for i in range(1, n - 1)]
    flat = None if n > MAX_CLIPPED_CORNERS else _in_plane(np.asarray(points, dtype=np.float64))
    if flat is None or _convex(flat):
        return [(corners[0], corners[i], corners[i + 1]) for i in range(1, n - 1)]
    return [(corners[a], corners[b], corners[c]) for a, b, c in _ear_clip(flat)]


def _convex_in_space(points) -> bool:
    """A quick test in plain floats (most faces are convex quads): every corner turns the way
    of the polygon's Newell normal."""
    n = len(points)
    nx = ny = nz = 0.0
    for i in range(n):
        (x0, y0, z0), (x1, y1, z1) = points[i][:3], points[(i + 1) % n][:3]
        nx += (y0 - y1) * (z0 + z1)
        ny += (z0 - z1) * (x0 + x1)
        nz += (x0 - x1) * (y0 + y1)
    for i in range(n):
        (xa, ya, za), (xb, yb, zb), (xc, yc, zc) = points[i - 1][:3], points[i][:3], points[(i + 1) % n][:3]
        ux, uy, uz, vx, vy, vz = xb - xa, yb - ya, zb - za, xc - xb, yc - yb, zc - zb
        if nx * (uy * vz - uz * vy) + ny * (uz * vx - ux * vz) + nz * (ux * vy - uy * vx) < 0.0:
            return False
    return True


def _in_plane(points: np.ndarray) -> np.ndarray | None:
    """The polygon's corners in 2-D coordinates of its Newell plane, turning counter-clockwise;
    None if the polygon has no area."""
    following = np.roll(points, -1, axis=0)
    normal = np.cross(points, following).sum(axis=0)
    length = np.linalg.norm(normal)
    if not np.isfinite(length) or length == 0.0:
        return None
    normal /= length
    u = np.cross(normal, np.eye(3)[int(np.argmin(np.abs(normal)))])
    u /= np.linalg.norm(u)
    v = np.cross(normal, u)
    centred = points - points.mean(axis=0)
    return np.column_stack([centred @ u, centred @ v])


def _turns(flat: np.ndarray) -> np.ndarray:
    """The cross product at each corner of the 2-D polygon (positive: a convex corner)."""
    before, after = np.roll(flat, 1, axis=0), np.roll(flat, -1, axis=0)
    a, b = flat - before, after - flat
    return a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0]


def _convex(flat: np.ndarray) -> bool:
    scale = float(np.ptp(flat, axis=0).max()) ** 2
    return bool(np.all(_turns(flat) >= -1e-12 * scale))


def _ear_clip(flat: np.ndarray) -> list[tuple[int, int, int]]:
    """Ear clipping of a simple counter-clockwise polygon; corners where no ear is found (a
    polygon that crosses itself) are finished as a fan."""
    left = list(range(len(flat)))
    triangles = []
    while len(left) > 3:
        for i in range(len(left)):
            a, b, c = left[i - 1], left[i], left[(i + 1) % len(left)]
            if _is_ear(flat, a, b, c, left):
                triangles.append((a, b, c))
                del left[i]
                break
        else:
            break
    triangles += [(left[0], left[i], left[i + 1]) for i in range(1, len(left) - 1)]
    return triangles


def _cross(o, p, q) -> float:
    return float((p[0] - o[0]) * (q[1] - o[1]) - (p[1] - o[1]) * (q[0] - o[0]))


def _is_ear(flat: np.ndarray, a: int, b: int, c: int, left: list[int]) -> bool:
    """Whether the corner b (between a and c) is convex and no other corner lies in or on the
    triangle a b c (the corners left tested at once: a test a corner in Python made a file of a
    few thousand such polygons take an hour to read)."""
    pa, pb, pc = flat[a], flat[b], flat[c]
    if _cross(pa, pb, pc) <= 0.0:
        return False
    others = np.asarray(left)
    p = flat[others]
    inside = (_crosses(pa, pb, p) >= 0.0) & (_crosses(pb, pc, p) >= 0.0) & (_crosses(pc, pa, p) >= 0.0)
    if not inside.any():
        return True
    p, others = p[inside], others[inside]       # of those in or on it, the corners a, b, c and their copies
    skip = (others == a) | (others == b) | (others == c)
    skip |= (p == pa).all(axis=1) | (p == pb).all(axis=1) | (p == pc).all(axis=1)
    return bool(skip.all())


def _crosses(o, p, q: np.ndarray) -> np.ndarray:
    """:func:`_cross` of ``o``, ``p`` and each row of ``q``, in the same float operations."""
    return (p[0] - o[0]) * (q[:, 1] - o[1]) - (p[1] - o[1]) * (q[:, 0] - o[0])
