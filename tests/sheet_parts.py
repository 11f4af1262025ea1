"""Sheets of one thickness made in the tests (fieldgen/sizing/sheet.py): a tapered plate bent 90°
about an axis across it, as a brake bends sheet metal, its surface a structured grid (fine round
the bend, coarse elsewhere) so the bend is smooth and the input small; a strip bent up and down
(an S); a flat plate with a small dimple in one face."""

from __future__ import annotations

import numpy as np
import trimesh


def _stations(length: float, bend: tuple[float, float], coarse: float, fine: float) -> np.ndarray:
    """Positions along the plate: ``fine`` apart over the ``bend`` interval, ``coarse`` elsewhere."""
    start, end = bend
    pieces = [np.linspace(0.0, start, max(2, int(np.ceil(start / coarse)) + 1)),
              np.linspace(start, end, max(2, int(np.ceil((end - start) / fine)) + 1)),
              np.linspace(end, length, max(2, int(np.ceil((length - end) / coarse)) + 1))]
    return np.unique(np.concatenate(pieces))


def _box_grid(x: np.ndarray, y: np.ndarray, thickness: float):
    """The surface of the box [x] x [y] x [0, thickness] on the grid of ``x`` and ``y``:
    (vertices, faces), wound outward."""
    nx, ny = len(x), len(y)
    X, Y = np.meshgrid(x, y, indexing="ij")
    bottom = np.column_stack([X.ravel(), Y.ravel(), np.zeros(X.size)])
    top = bottom + [0.0, 0.0, thickness]
    vertices = np.vstack([bottom, top])
    at = lambda i, j, level: level * nx * ny + i * ny + j            # noqa: E731
    quads = []
    for i in range(nx - 1):
        for j in range(ny - 1):
            quads += [(at(i, j, 0), at(i, j + 1, 0), at(i + 1, j + 1, 0), at(i + 1, j, 0)),
                      (at(i, j, 1), at(i + 1, j, 1), at(i + 1, j + 1, 1), at(i, j + 1, 1))]
    for i in range(nx - 1):
        quads += [(at(i, 0, 0), at(i + 1, 0, 0), at(i + 1, 0, 1), at(i, 0, 1)),
                  (at(i, ny - 1, 0), at(i, ny - 1, 1), at(i + 1, ny - 1, 1), at(i + 1, ny - 1, 0))]
    for j in range(ny - 1):
        quads += [(at(0, j, 0), at(0, j, 1), at(0, j + 1, 1), at(0, j + 1, 0)),
                  (at(nx - 1, j, 0), at(nx - 1, j + 1, 0), at(nx - 1, j + 1, 1), at(nx - 1, j, 1))]
    quads = np.asarray(quads)
    return vertices, np.vstack([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])


def bent_sheet(length: float = 60.0, width: float = 30.0, thickness: float = 2.0, radius: float = 2.0,
               bend_at: float = 30.0, taper: float = 0.4, coarse: float = 2.0, fine: float = 0.2) -> trimesh.Trimesh:
    """A plate ``length`` x ``width`` x ``thickness`` (mm), narrowed linearly along its length by
    ``taper`` of its width (so it is no prism), bent up by 90° at ``bend_at`` round an axis
    across it, the bend's inner radius ``radius``: every point keeps its depth across the sheet,
    so the thickness is the same everywhere. Watertight, wound outward."""
    arc = 0.5 * np.pi * radius
    x = _stations(length, (bend_at, bend_at + arc), coarse, fine)
    y = np.linspace(-0.5 * width, 0.5 * width, int(np.ceil(width / coarse)) + 1)
    vertices, faces = _box_grid(x, y, thickness)
    px, py, pz = vertices.T
    py = py * (1.0 - taper * px / length)
    centre = thickness + radius              # the bend's axis lies above the plate at x = bend_at
    r = centre - pz                          # the inner face (z = thickness) at the inner radius
    theta = np.clip(px - bend_at, 0.0, arc) / radius
    beyond = np.maximum(px - bend_at - arc, 0.0)
    bent = px > bend_at
    out = np.column_stack([px, py, pz])
    out[bent, 0] = bend_at + r[bent] * np.sin(theta[bent])
    out[bent, 2] = centre - r[bent] * np.cos(theta[bent]) + beyond[bent]
    mesh = trimesh.Trimesh(out, faces, process=True)
    trimesh.repair.fix_normals(mesh)
    assert mesh.is_watertight and mesh.volume > 0
    return mesh


def _along(u: np.ndarray, point: np.ndarray, heading: float, kappa: float):
    """The points (x, z) and headings at distances ``u`` along a line (``kappa`` 0) or an arc of
    signed curvature ``kappa`` from ``point`` at ``heading``."""
    phi = heading + kappa * u
    if kappa == 0.0:
        return point + u[:, None] * [np.cos(heading), np.sin(heading)], phi
    return point + np.column_stack([np.sin(phi) - np.sin(heading), np.cos(heading) - np.cos(phi)]) / kappa, phi


def _curve(s: np.ndarray, pieces) -> tuple[np.ndarray, np.ndarray]:
    """At arc lengths ``s`` along a plane curve starting at the origin heading along +x, made of
    ``pieces`` (length, signed curvature) in order: the points (x, z) and the headings."""
    point, heading, start = np.zeros(2), 0.0, 0.0
    xz, phi = np.zeros((len(s), 2)), np.zeros(len(s))
    for length, kappa in pieces:
        here = (s >= start) & (s <= start + length + 1e-12)
        xz[here], phi[here] = _along(s[here] - start, point, heading, kappa)
        ends, turned = _along(np.array([length]), point, heading, kappa)
        point, heading, start = ends[0], float(turned[0]), start + length
    return xz, phi


def s_sheet(legs=(40.0, 30.0, 40.0), bends=((60.0, 0.8), (-90.0, 6.0)), width: float = 20.0,
            thickness: float = 2.0, coarse: float = 2.0, fine: float = 0.05) -> trimesh.Trimesh:
    """A strip ``width`` x ``thickness`` (mm) with straight ``legs`` joined by ``bends`` (angle in
    degrees, + up, − down; the inner radius), as a brake bends sheet metal: its face z = 0 of the
    flat strip runs along the centreline and every point keeps its depth across the sheet along the
    centreline's normal, so the thickness is the same everywhere. A bend up has the face z =
    thickness inside (radius the inner one), a bend down the face z = 0. Watertight, wound outward."""
    pieces, stations = [], [np.array([0.0])]
    for k, leg in enumerate(legs):
        pieces.append((leg, 0.0))
        if k < len(bends):
            angle, inner = np.radians(bends[k][0]), bends[k][1]
            radius = inner + thickness if angle > 0 else inner           # the face z = 0's radius
            pieces.append((radius * abs(angle), np.sign(angle) / radius))
    start = 0.0
    for length, kappa in pieces:
        step = coarse if kappa == 0.0 else fine
        stations.append(np.linspace(start, start + length, max(2, int(np.ceil(length / step)) + 1)))
        start += length
    s = np.unique(np.concatenate(stations))
    y = np.linspace(-0.5 * width, 0.5 * width, int(np.ceil(width / coarse)) + 1)
    vertices, faces = _box_grid(s, y, thickness)
    position = np.searchsorted(s, vertices[:, 0])
    xz, phi = _curve(s, pieces)
    depth = vertices[:, 2:3]
    across = xz[position] + depth * np.column_stack([-np.sin(phi), np.cos(phi)])[position]   # along the normal
    out = np.column_stack([across[:, 0], vertices[:, 1], across[:, 1]])
    mesh = trimesh.Trimesh(out, faces, process=True)
    trimesh.repair.fix_normals(mesh)
    assert mesh.is_watertight and mesh.volume > 0
    return mesh


def dimpled_plate(depth: float, size: float = 40.0, thickness: float = 2.0, step: float = 1.0,
                  both: bool = False) -> trimesh.Trimesh:
    """A plate ``size`` x ``size`` x ``thickness`` (mm) on a grid of ``step`` squares, the vertex
    in the middle of its top face pushed down by ``depth``: a dimple of radius ``step``, far
    finer than the remeshed side's edges; with ``both``, the bottom face's vertex a quarter of
    the way along pushed up as far too (a dimple on each side). Watertight, wound outward."""
    steps = int(round(size / step)) + 1
    vertices, faces = _box_grid(np.linspace(0.0, size, steps), np.linspace(-0.5 * size, 0.5 * size, steps), thickness)
    middle = np.flatnonzero(np.all(np.isclose(vertices, [0.5 * size, 0.0, thickness]), axis=1))
    assert len(middle) == 1
    vertices[middle, 2] -= depth
    if both:
        quarter = np.flatnonzero(np.all(np.isclose(vertices, [0.25 * size, 0.0, 0.0]), axis=1))
        assert len(quarter) == 1
        vertices[quarter, 2] += depth
    mesh = trimesh.Trimesh(vertices, faces, process=True)
    assert mesh.is_watertight and mesh.volume > 0
    return mesh
