"""An open thin section (an angle, a channel, a Z) as a structured strip (docs/model.md §2.10, "Thin walls").

A right prism whose section is one thin loop, not a wall between two loops: a leg of the
section ends in a short edge (an end cap, about a wall thickness t long, the outline turning
back on itself across it). With exactly two caps the outline splits there into two sides facing
each other across the wall, from one cap to the other, and the section is the strip between
them, made as the tube's (:func:`fieldgen.sizing.lengthwise.matched_wall`) but open: each vertex
of one side paired with its nearest point on the other, pairs nearer than ``MERGE`` t on both
sides merged, pairs graded to ``EDGE_AT_CORNER`` t at a corner of either side (its ends, the
caps' corners, included) and filled in up to ``along``, each gap cut into ``across`` cells with
checkerboard diagonals; the caps are the first and last rungs. A section with a junction (a tee,
three caps) or rounded tips (no cap) is not such a strip (None), and TetGen meshes it.
"""

from __future__ import annotations

import numpy as np

from fieldgen.sizing.extrusion import graded_spots
from fieldgen.meshing.tetmesh import TetMesh
from fieldgen.sizing.lengthwise import (EDGE_AT_CORNER, LAYERS_ACROSS, MERGE, arc_length, arc_positions,
                                        corner_distance, feet, layered_wall, merged, merged_pairs, outline_loops,
                                        points_at)

#: A cap is an outline edge at most this many wall thicknesses long whose neighbouring edges run
#: back in opposite directions (their directions' cosine below ``-CAP_COSINE``).
CAP_LENGTH = 1.5
CAP_COSINE = 0.9


def layered_open_wall(vertices: np.ndarray, faces: np.ndarray, markers: np.ndarray,
                      max_tets: int | None = None, across: int = LAYERS_ACROSS) -> TetMesh | None:
    """An open thin section's prism meshed in layers along its length, as a tube's
    (:func:`fieldgen.sizing.lengthwise.layered_wall`) with the strip of :func:`open_wall`."""
    return layered_wall(vertices, faces, markers, max_tets, across, strip=open_wall)


def open_wall(points: np.ndarray, outline: np.ndarray, wall: float, along: float, across: int):
    """The open section's strip (module docstring) as (points, triangles), or None if the outline
    is not one loop with two caps or the pairs cross."""
    loops = outline_loops(points, outline)
    if loops is None or len(loops) != 1:
        return None
    sides = _sides(points[loops[0]], wall)
    if sides is None:
        return None
    first, second = sides
    pairs = _pairs(first, second, MERGE * wall)
    if pairs is None:
        return None
    on_first, on_second = _graded(first, second, *pairs, EDGE_AT_CORNER * wall, along)
    rows_first = points_at(first, on_first, closed=False)
    rows_second = points_at(second, on_second, closed=False)
    grid = rows_first[:, None, :] + (np.arange(across + 1) / across)[None, :, None] * (rows_second - rows_first)[:, None, :]
    ids = np.arange(grid.shape[0] * (across + 1)).reshape(grid.shape[0], across + 1)
    a, b, c, d = ids[:-1, :-1], ids[1:, :-1], ids[1:, 1:], ids[:-1, 1:]
    flip = ((np.arange(len(a))[:, None] + np.arange(across)[None, :]) % 2 == 1)[..., None]     # checkerboard
    triangles = np.concatenate([np.where(flip, np.stack([a, b, d], -1), np.stack([a, b, c], -1)).reshape(-1, 3),
                                np.where(flip, np.stack([b, c, d], -1), np.stack([a, c, d], -1)).reshape(-1, 3)])
    tolerance = 1e-9 * (arc_length(first, closed=False) + arc_length(second, closed=False))
    xy, triangles = merged(grid.reshape(-1, 2), triangles, tolerance)
    return xy, triangles


def _sides(loop: np.ndarray, wall: float):
    """The two sides of a loop with exactly two caps, each from the first cap to the second (so
    their first and last points are the caps' ends); None otherwise."""
    run = np.roll(loop, -1, axis=0) - loop
    length = np.linalg.norm(run, axis=1)
    direction = run / length[:, None]
    before, after = np.roll(direction, 1, axis=0), np.roll(direction, -1, axis=0)
    caps = np.flatnonzero((length <= CAP_LENGTH * wall) & (np.einsum("ij,ij->i", before, after) < -CAP_COSINE))
    if len(caps) != 2:
        return None
    n = len(loop)
    i, j = int(caps[0]), int(caps[1])
    first = loop[np.arange(i + 1, j + 1) % n]                        # from cap i's far end to cap j's near end
    second = loop[np.arange(i, j - n, -1) % n]                         # from cap i's near end back to cap j's far end
    if len(first) < 2 or len(second) < 2:
        return None
    return first, second


def _pairs(first: np.ndarray, second: np.ndarray, gap: float):
    """Matched positions (on the first side, on the second), ordered along the first side, the
    caps' ends the first and last pair. A pair within ``gap`` of the previous one on both sides is
    merged into it, the merged pair keeping each side's vertex (every vertex of both sides stays a
    pair's end, so the strip's border is the outline); None if the positions on the second side
    do not run forward."""
    on_first = np.concatenate([arc_positions(first, closed=False), feet(second, first, closed=False)])
    on_second = np.concatenate([feet(first, second, closed=False), arc_positions(second, closed=False)])
    on_first[len(first)], on_second[0] = 0.0, 0.0                                   # the first cap
    on_first[-1], on_second[len(first) - 1] = arc_length(first, closed=False), arc_length(second, closed=False)
    from_first = np.arange(len(on_first)) < len(first)
    order = np.lexsort((on_second, on_first))
    kept_first, kept_second = merged_pairs(on_first[order], on_second[order], from_first[order], gap)
    if np.any(np.diff(kept_second) < 0.0) or np.any(np.diff(kept_first) < 0.0):
        return None
    return kept_first, kept_second


def _graded(first, second, on_first, on_second, rim: float, along: float):
    """The pairs filled in between: pieces ``rim`` long at a corner of either side, growing away
    from it up to ``along``."""
    step_first, step_second = np.diff(on_first), np.diff(on_second)
    near = np.minimum(corner_distance(first, on_first, closed=False),
                      corner_distance(second, on_second, closed=False))
    share = []
    for k, size in enumerate(np.maximum(step_first, step_second)):
        spots = graded_spots(float(size), near[k], near[k + 1], rim, along) if size > 0 else []
        share.append(np.concatenate([[0.0], np.asarray(spots, dtype=np.float64) / max(size, 1e-300)]))
    pieces = np.array([len(s) for s in share])
    share = np.concatenate(share)
    filled_first = np.append(np.repeat(on_first[:-1], pieces) + share * np.repeat(step_first, pieces), on_first[-1])
    filled_second = np.append(np.repeat(on_second[:-1], pieces) + share * np.repeat(step_second, pieces), on_second[-1])
    return filled_first, filled_second
