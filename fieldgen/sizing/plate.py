"""Plate-like parts: a first mesh thin across the plate (docs/model.md §2.10, docs/design/sizing.md).

A plate meshed one tet thick cannot be refined into good thin tets by split edges, so a
plate-like part's first mesh is made by TetGen in the part stretched across its thickness.
"""

from __future__ import annotations

import math

import numpy as np

from fieldgen.meshing.tetgen import stretched
from fieldgen.surface.remesh import TETS_PER_COST, surface_cost

#: A part is plate-like when its middle extent is at least this many times its smallest (along
#: the principal axes of its surface; the corpus's plates and CAD parts: docs/design/sizing.md,
#: "Plates") -
PLATE_RATIO = 6.0
#: - and its walls are across that axis: its mean wall thickness 2 V / A is at least this
#: fraction of its span along the axis. A U-channel or a tray with thin upright walls is well
#: below: stretched along its depth, its upright walls would get tets coarser across them.
PLATE_SOLID = 0.25
#: A plate-like part's first mesh is made by TetGen in the part stretched this much across its
#: thickness, so its tets are this much thinner across than along, and aims at PLATE_FIRST_TETS
#: tets (more than the usual first mesh: a plate needs several tets across from the start; the
#: values chosen: docs/design/sizing.md, "Plates").
PLATE_STRETCH = 3.0
PLATE_FIRST_TETS = 70_000


def plate_axis(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray | None:
    """The unit thin axis of a plate-like surface, or None (``PLATE_RATIO``, ``PLATE_SOLID``).

    The axes are the principal axes of the surface's area (the triangles' centroids weighted
    by area, so a CAD export's dense fans do not tilt them); spans are the vertices' extents
    along them. The axis is snapped to a coordinate axis within 1°, rounded and signed (largest
    component positive), so rounding differences between machines do not change the mesh.
    """
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    corners = vertices[faces]
    area = 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    if area.sum() <= 0:
        return None
    centroids = corners.mean(axis=1)
    mean = (area[:, None] * centroids).sum(axis=0) / area.sum()
    offset = centroids - mean
    _, axes = np.linalg.eigh((area[:, None, None] * offset[:, :, None] * offset[:, None, :]).sum(axis=0))
    spans = np.array([np.ptp(vertices @ axes[:, i]) for i in range(3)])
    order = np.argsort(spans)
    thin, middle = spans[order[0]], spans[order[1]]
    if thin <= 0 or middle < PLATE_RATIO * thin:
        return None
    volume = abs(np.einsum("ij,ij->i", corners[:, 0], np.cross(corners[:, 1], corners[:, 2])).sum()) / 6.0
    if 2.0 * volume / area.sum() < PLATE_SOLID * thin:
        return None                       # thin walls along the axis too (a channel, a tray)
    axis = axes[:, order[0]]
    axis = axis * (1.0 if axis[np.argmax(np.abs(axis))] > 0 else -1.0)
    if axis.max() > math.cos(math.radians(1.0)):
        axis = (axis == axis.max()).astype(np.float64)
    axis = np.round(axis / np.linalg.norm(axis), 12) + 0.0     # + 0.0: no -0.0 in the metadata
    return axis / math.sqrt(float(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2]))


def stretch_fits(vertices: np.ndarray, faces: np.ndarray, axis: np.ndarray, budget: float) -> bool:
    """Whether the plate's first mesh, made in the part stretched ``PLATE_STRETCH`` times along
    its thin ``axis``, stays within ``budget`` tets as far as its surface goes: the stretch makes
    a side wall's triangles ``PLATE_STRETCH`` times taller, so a CAD surface with finely
    tessellated holes and rounds costs TetGen far more tets stretched (``TETS_PER_COST`` a unit of
    :func:`fieldgen.surface.remesh.surface_cost`). A plate that does not fit is meshed unstretched:
    its fine features already make small tets across it (docs/design/sizing.md, "Plates")."""
    tall = stretched(vertices, axis, PLATE_STRETCH)       # as TetGen is given it (no BLAS sums)
    return TETS_PER_COST * surface_cost(tall, np.asarray(faces, dtype=np.int64)) <= budget
