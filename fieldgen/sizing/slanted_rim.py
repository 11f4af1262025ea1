"""Columns near a rim cut aslant to the sheet (docs/model.md §2.10, "Sheets of one thickness").

A funnel's or a dome's wall cut by a plane that is not normal to it has a rim face at an angle
to the wall: a column along the side's normal from a rim vertex leaves the part (or, held to
the cut face by :func:`fieldgen.sizing.sheet.along_rim_faces`, which takes out only the part
across the rim in the side's plane, still does). Here each column within ``BLEND`` t of the rim
whose nearest cut face is slanted against it by more than ``SLANT`` degrees (and at most
``MOST_SLANT``: a face nearly facing the column is a step in the side, not a cut) is turned
towards that face's plane,

    d' = normalise((1 − w) d + w p),   p = normalise(d − (d·n) n),   w = max(0, 1 − s / (BLEND t)),

``n`` the cut face's unit normal, ``s`` the distance to the nearest rim vertex: at the rim the
column lies in the cut face and runs along it to the other side's rim; the turn fades over
``BLEND`` thicknesses, so neighbouring columns stay nearly parallel (turned at the rim alone,
the prisms beside it inverted: 433 of a funnel's triangles). Columns at rims cut square to the
sheet are left as they are.
"""

from __future__ import annotations

import numpy as np
import trimesh
from scipy.spatial import cKDTree

from fieldgen.surface.topology import boundary_edges

#: A cut face slanted by more than ``SLANT`` and at most ``MOST_SLANT`` degrees against a column
#: turns it; the turn fades over ``BLEND`` thicknesses from the rim (docs/design/sizing.md,
#: "Closed shells").
SLANT = 10.0
MOST_SLANT = 60.0
BLEND = 2.0


def turned_to_slanted_rim(points: np.ndarray, triangles: np.ndarray, directions: np.ndarray, cut, t: float) -> np.ndarray:
    """``directions`` (unit, at the side's ``points``) turned towards the ``cut`` faces (vertices,
    faces: the input's rim) near a slanted rim (module docstring); the input where no cut face
    near the rim is slanted."""
    rim = np.unique(boundary_edges(triangles)[0])
    if not len(rim) or not len(cut[1]):
        return directions
    distance, _ = cKDTree(points[rim]).query(points)
    near = np.flatnonzero(distance < BLEND * t)
    surface = trimesh.Trimesh(*cut, process=False)
    _, _, nearest = trimesh.proximity.closest_point(surface, points[near])
    normal = surface.face_normals[nearest]
    along = np.einsum("ij,ij->i", normal, directions[near])
    slanted = (np.abs(along) > np.sin(np.radians(SLANT))) & (np.abs(along) <= np.sin(np.radians(MOST_SLANT)))
    if not slanted.any():
        return directions
    rows, normal, along = near[slanted], normal[slanted], along[slanted]
    projected = directions[rows] - along[:, None] * normal
    projected /= np.linalg.norm(projected, axis=1, keepdims=True)
    weight = np.clip(1.0 - distance[rows] / (BLEND * t), 0.0, 1.0)[:, None]
    turned = directions.copy()
    turned[rows] = (1.0 - weight) * directions[rows] + weight * projected
    turned[rows] /= np.linalg.norm(turned[rows], axis=1, keepdims=True)
    return turned
