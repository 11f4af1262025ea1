"""The part's local thickness, and whether it has thin walls (docs/model.md §2.10, "Thin walls").

A wall, floor or tube a few tenths of a millimetre thick in a part a few centimetres across gets
no vertex inside it from a first mesh sized from the part's volume. The local thickness at each
surface triangle is the distance along its inward normal to the surface on the other side (a ray
from the triangle's centroid, trimesh's ray queries); a vertex takes the least of its
triangles'. A part has thin walls when triangles thinner than ``THIN_EDGES`` first edges hold
``THIN_SHARE`` of its area (:func:`has_thin_walls`); its mesh is then adapted to them
(:mod:`fieldgen.sizing.adapt`).
"""

from __future__ import annotations

import numpy as np
import trimesh

#: A part has thin walls when the triangles whose thickness is under THIN_EDGES x the uniform
#: first edge hold at least THIN_SHARE of its area; otherwise its first mesh stays uniform
#: (docs/design/sizing.md, "Thin walls").
THIN_EDGES = 0.75
THIN_SHARE = 0.2
#: Rays cast in one trimesh query (:func:`face_thickness`): its memory grows with the candidate
#: pairs of a query, so a chunk bounds it; the thicknesses are the same whatever the chunk.
RAYS_AT_ONCE = 4096


def face_thickness(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Each triangle's local thickness: the distance from its centroid, along its inward normal,
    to the nearest other triangle hit (``inf`` where the ray leaves the surface without a hit).
    The surface is closed and wound outward (as :func:`fieldgen.surface.stage.load_surface`
    gives it)."""
    return opposite_faces(vertices, faces)[0]


def opposite_faces(vertices: np.ndarray, faces: np.ndarray,
                   only: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each triangle's local thickness (:func:`face_thickness`) and the triangle its ray meets
    there (-1 where none); with ``only`` (face indices), for those triangles alone (in that
    order), the others still hit."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64)
    surface = trimesh.Trimesh(vertices, faces, process=False)
    cast = np.arange(len(faces)) if only is None else np.asarray(only, dtype=np.int64)
    normals = np.asarray(surface.face_normals, dtype=np.float64)[cast]
    centroids = vertices[faces[cast]].mean(axis=1)
    scale = float(np.ptp(vertices, axis=0).max())
    origins = centroids - 1e-9 * scale * normals
    thickness = np.full(len(cast), np.inf)
    opposite = np.full(len(cast), -1, dtype=np.int64)
    # In chunks of rays: trimesh tests every triangle whose box meets a ray's, all at once, which
    # on a threaded part's 65k triangles took over 8 GB in one call.
    for start in range(0, len(cast), RAYS_AT_ONCE):
        chunk = slice(start, start + RAYS_AT_ONCE)
        locations, rays, hit_faces = surface.ray.intersects_location(origins[chunk], -normals[chunk],
                                                                     multiple_hits=True)
        rays = rays + start
        distance = np.einsum("ij,ij->i", locations - centroids[rays], -normals[rays])
        keep = (hit_faces != cast[rays]) & (distance > 1e-7 * scale)
        rays, hit_faces, distance = rays[keep], np.asarray(hit_faces)[keep], distance[keep]
        order = np.lexsort((hit_faces, distance, rays))       # each ray's nearest hit first
        first = order[np.r_[True, rays[order][1:] != rays[order][:-1]]] if len(order) else order
        thickness[rays[first]] = distance[first]
        opposite[rays[first]] = hit_faces[first]
    return thickness, opposite


def vertex_thickness(vertices: np.ndarray, faces: np.ndarray, per_face: np.ndarray) -> np.ndarray:
    """Each vertex's local thickness: the least of its triangles' (``per_face``)."""
    thickness = np.full(len(vertices), np.inf)
    np.minimum.at(thickness, np.asarray(faces, dtype=np.int64).ravel(), np.repeat(per_face, 3))
    return thickness


def has_thin_walls(vertices: np.ndarray, faces: np.ndarray, per_face: np.ndarray, edge: float) -> bool:
    """Whether triangles thinner than ``THIN_EDGES`` x ``edge`` hold ``THIN_SHARE`` of the area."""
    corners = np.asarray(vertices, dtype=np.float64)[np.asarray(faces, dtype=np.int64)]
    area = 0.5 * np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
    thin = area[per_face < THIN_EDGES * edge].sum()
    return bool(area.sum() > 0 and thin >= THIN_SHARE * area.sum())
