"""A bent sheet of one thickness made in the tests (fieldgen/sizing/sheet.py): a tapered plate
bent 90° about an axis across it, as a brake bends sheet metal, its surface a structured grid
(fine round the bend, coarse elsewhere) so the bend is smooth and the input small."""

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
