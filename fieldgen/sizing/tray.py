"""A thin-walled tray (an open box, a cup, a bin) meshed in layers (docs/model.md §2.10, "Thin walls").

A tray: every face of the surface lies on one of three planes across an ``axis`` — the bottom
(level z0, facing down, inside one loop O), the floor (z1, facing up, inside one loop I) and the
rim (z2, facing up, between O and I) — or is parallel to the axis. Its walls are a tube of
thickness ``t = 2A/P`` (the rim's area over half its perimeter) standing on a floor slab of
thickness ``z1 − z0``. Across the walls and across the floor the extent bends like a parabola,
so each gets about ten elements across:

- the section is the walls' strip (:func:`fieldgen.sizing.lengthwise.matched_wall`) and the
  pocket's region inside the strip's inner side, triangulated by MMG2D under the plate's graded
  metric for the floor's thickness (:func:`fieldgen.sizing.extrusion.graded_section`, the strip's
  inner side kept as its outline, unsplit, so the two conform);
- every section triangle is extruded through ``extrusion.LAYERS`` equal layers from z0 to z1 (the
  floor across its thickness), and the strip's triangles on through the tube's graded layers from
  z1 to z2 (:func:`fieldgen.sizing.lengthwise.graded_levels`: fine at the floor's inner corner and
  at the free rim), the points numbered strip first, pair by pair, as the tube's.

The mirror image (floor on top, an upturned cup) is the same along the opposite axis.
"""

from __future__ import annotations

import numpy as np

from fieldgen.meshing.tetmesh import TetMesh
from fieldgen.sizing import lengthwise
from fieldgen.sizing.extrusion import (LAYERS, PRISM_TOLERANCE, extruded, filled_prism, flat_region,
                                       graded_section)
from fieldgen.surface.topology import compacted, face_areas, unit_normals

#: The share of the tet budget the first mesh may take (the passes refine with the rest).
BUDGET_SHARE = lengthwise.BUDGET_SHARE


def layered_along_axis(vertices: np.ndarray, faces: np.ndarray) -> bool:
    """Whether the part is a thin-walled tube (:mod:`fieldgen.sizing.lengthwise`) or tray, which
    the sizing meshes in layers from the surface as it is (cheap: no thickness rays)."""
    return lengthwise.thin_section(vertices, faces) is not None or tray_section(vertices, faces) is not None


def tray_section(vertices: np.ndarray, faces: np.ndarray):
    """(rim points, rim outline, floor outline, levels (z0, z1, z2), basis (2, 3), axis, wall) for
    the first candidate axis (either sign) along which the surface is a thin-walled tray (module
    docstring); None if there is none."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    normals = unit_normals(vertices, faces)
    tolerance = PRISM_TOLERANCE * float(np.ptp(vertices, axis=0).max())
    for candidate in lengthwise.candidate_axes(vertices, faces):
        for axis in (candidate, -candidate):
            found = _tray_along(vertices, faces, normals, axis, tolerance)
            if found is not None:
                return found
    return None


def _tray_along(vertices, faces, normals, axis, tolerance):
    level = vertices @ axis
    order = np.sort(level)
    breaks = np.flatnonzero(np.diff(order) > tolerance)
    if len(breaks) != 2:
        return None
    cuts = (order[breaks] + order[breaks + 1]) / 2
    cluster = np.searchsorted(cuts, level)
    levels = tuple(float(order[k]) for k in (0, breaks[0] + 1, breaks[1] + 1))
    along = normals @ axis
    flat = (cluster[faces] == cluster[faces][:, :1]).all(axis=1)
    if np.any(np.abs(along[~flat]) > PRISM_TOLERANCE ** 0.5):
        return None
    which = cluster[faces[:, 0]]
    bottom, floor, rim = flat & (which == 0), flat & (which == 1), flat & (which == 2)
    if not (np.all(along[bottom] < 0) and np.all(along[floor] > 0) and np.all(along[rim] > 0)):
        return None                                    # an overhang, or the floor facing down
    u = np.eye(3)[int(np.argmin(np.abs(axis)))]
    u = u - (u @ axis) * axis
    basis = np.stack([u / np.linalg.norm(u), np.cross(axis, u / np.linalg.norm(u))])
    area = face_areas(vertices, faces)
    a_bottom, a_floor, a_rim = (float(area[k].sum()) for k in (bottom, floor, rim))
    volume = abs(float(np.einsum("ij,ij->i", vertices[faces[:, 0]],
                                 np.cross(vertices[faces[:, 1]], vertices[faces[:, 2]])).sum())) / 6.0
    expected = a_bottom * (levels[1] - levels[0]) + a_rim * (levels[2] - levels[1])
    if abs(a_bottom - a_floor - a_rim) > 1e-6 * a_bottom or abs(volume - expected) > 1e-6 * volume:
        return None
    rim_points, _, rim_outline = flat_region(vertices, faces[rim], basis)
    floor_points, _, floor_outline = flat_region(vertices, faces[floor], basis)
    if len(lengthwise.outline_loops(floor_points, floor_outline) or ()) != 1:
        return None
    perimeter = float(np.linalg.norm(rim_points[rim_outline[:, 1]] - rim_points[rim_outline[:, 0]], axis=1).sum())
    wall = 2.0 * a_rim / perimeter
    return rim_points, rim_outline, levels, basis, axis, wall, volume


def layered_tray(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray,
                 max_tets: int | None = None, across: int = lengthwise.LAYERS_ACROSS) -> TetMesh | None:
    """A thin-walled tray's layered mesh (module docstring), each boundary face taking the
    condition of the input face nearest to it; None if the part is not a tray or its mesh would
    pass ``BUDGET_SHARE`` of ``max_tets``."""
    found = tray_section(vertices, faces)
    if found is None:
        return None
    rim_points, rim_outline, levels, basis, axis, wall, volume = found
    strip = lengthwise.matched_wall(rim_points, rim_outline, wall, lengthwise.EDGE_ALONG * wall, across)
    if strip is None:
        return None
    floor = _with_floor(*strip, levels[1] - levels[0])
    if floor is None:
        return None
    xy, triangles, is_strip = floor
    floor_levels = np.linspace(levels[0], levels[1], LAYERS + 1)
    room = None if max_tets is None else (BUDGET_SHARE * max_tets - 3 * LAYERS * len(triangles)) // (3 * int(is_strip.sum()))
    wall_levels = lengthwise.layers_within((levels[1], levels[2]), wall, None if room is None else max(int(room), 0))
    if wall_levels is None:
        return None
    low, low_tets = extruded(xy, triangles, basis, axis, floor_levels)
    high, high_tets = extruded(xy, triangles[is_strip], basis, axis, wall_levels)
    xyz = np.concatenate([low, high[len(xy):]])
    tets = np.concatenate([low_tets, high_tets + LAYERS * len(xy)])
    xyz, tets = compacted(xyz, tets)
    return filled_prism(xyz, tets, volume, vertices, faces, markers)


def _with_floor(xy: np.ndarray, triangles: np.ndarray, floor: float):
    """The strip's points and triangles with the pocket's region inside its inner side meshed
    (:func:`graded_section` for a floor ``floor`` thick): (points, triangles, which are the
    strip's), the strip's points first and in their order; None if the two do not share the
    strip's inner side exactly."""
    flat, _, edges = flat_region(np.column_stack([xy, np.zeros(len(xy))]), triangles, np.eye(3)[:2])
    loops = lengthwise.outline_loops(flat, edges)
    inner = min(loops, key=lambda loop: abs(lengthwise.signed_area(xy[loop])))
    ring = np.arange(len(inner))
    plane, inside = graded_section(xy[inner], np.stack([ring, np.roll(ring, -1)], axis=1), floor, split=False)
    every = np.concatenate([triangles, inside + len(xy)])
    merged, every = lengthwise.merged(np.concatenate([xy, plane]), every, 1e-9 * float(np.ptp(xy, axis=0).max()))
    if len(every) != len(triangles) + len(inside) or len(np.unique(merged, axis=0)) != len(merged):
        return None                     # the pocket's mesh does not share the strip's points
    return merged, every, np.arange(len(every)) < len(triangles)
