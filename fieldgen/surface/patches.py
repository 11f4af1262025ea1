"""Planar patches of a triangle surface (docs/model.md §2.11): the flat faces of a CAD part found
by where their vertices lie, not by their normals, so a cap (a corner micrometres from the
opposite edge, whose normal is noise) joins the plane it lies in.

The surface stage gives each patch its own MMGS reference, so MMGS keeps a plane's border where
it is and never takes a cap's noisy normal for a ridge inside it.
"""

from __future__ import annotations

import numpy as np

from fieldgen.surface.components import components
from fieldgen.surface.topology import face_areas, face_pairs_across_edges, unit_normals


def planar_patches(vertices: np.ndarray, faces: np.ndarray, labels: np.ndarray, deviation: float,
                   min_area: float) -> tuple[np.ndarray, np.ndarray]:
    """Each face's patch (0, 1, …), and whether it is planar. A planar patch grows from its largest face across shared
    edges to the faces of the same label whose three vertices lie within ``deviation`` of that
    face's plane; one whose area is at least ``min_area`` is kept. The other faces form patches
    by connected components of the same label. The numbering depends only on the input."""
    vertices, faces = np.asarray(vertices, dtype=np.float64), np.asarray(faces, dtype=np.int64)
    labels = np.asarray(labels)
    first, second, _ = face_pairs_across_edges(faces)
    grown = _grown_planes(vertices, faces, labels, deviation, first, second)
    areas = face_areas(vertices, faces)
    planar = np.bincount(grown, weights=areas)[grown] >= min_area
    _, kept = np.unique(grown[planar], return_inverse=True)
    patch = np.full(len(faces), -1, dtype=np.int64)
    patch[planar] = kept.reshape(-1)
    joined = ~planar[first] & ~planar[second] & (labels[first] == labels[second])
    _, rest = components(len(faces), np.column_stack([first[joined], second[joined]]))
    _, rest = np.unique(rest[~planar], return_inverse=True)
    patch[~planar] = int(kept.max(initial=-1)) + 1 + rest.reshape(-1)
    return patch, planar


def patch_normals(vertices: np.ndarray, faces: np.ndarray, patch: np.ndarray, planar: np.ndarray) -> np.ndarray:
    """Each face's normal, its planar patch's (the area-weighted mean: a cap's noisy normal
    weighs nothing) where it is in one."""
    normals = unit_normals(vertices, faces)
    weighted = normals * face_areas(vertices, faces)[:, None]
    mean = np.zeros((int(patch.max(initial=-1)) + 1, 3))
    np.add.at(mean, patch[planar], weighted[planar])
    mean /= np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-300)
    return np.where(planar[:, None], mean[patch], normals)


def _grown_planes(vertices, faces, labels, deviation, first, second) -> np.ndarray:
    """Each face's plane: the index of the seed (largest first) whose region took it."""
    neighbours = [[] for _ in range(len(faces))]
    for f, g in zip(first.tolist(), second.tolist()):
        neighbours[f].append(g)
        neighbours[g].append(f)
    corners = vertices[faces]
    normals = unit_normals(vertices, faces)
    areas = face_areas(vertices, faces)
    region = np.full(len(faces), -1, dtype=np.int64)
    for seed in np.lexsort((np.arange(len(faces)), -areas)).tolist():
        if region[seed] >= 0:
            continue
        region[seed] = seed
        origin, normal, stack = corners[seed, 0], normals[seed], [seed]
        while stack:
            for g in neighbours[stack.pop()]:
                if region[g] < 0 and labels[g] == labels[seed] and \
                        np.abs((corners[g] - origin) @ normal).max() <= deviation:
                    region[g] = seed
                    stack.append(g)
    return region


def patch_planes(vertices: np.ndarray, faces: np.ndarray, patch: np.ndarray, planar: np.ndarray):
    """Each planar patch's plane ``n · x = c``: the area-weighted mean normal and offset of its
    faces, as (normals (k, 3), offsets (k,)), indexed by patch (rows of non-planar patches zero)."""
    normals = patch_normals(vertices, faces, patch, planar)
    weights = np.where(planar, face_areas(vertices, faces), 0.0)
    count = int(patch.max(initial=-1)) + 1
    plane_normals = np.zeros((count, 3))
    plane_normals[patch[planar]] = normals[planar]
    offsets = np.einsum("ij,ij->i", normals, vertices[faces].mean(axis=1))
    total = np.bincount(patch, weights=weights, minlength=count)
    mean = np.bincount(patch, weights=weights * offsets, minlength=count) / np.maximum(total, 1e-300)
    return plane_normals, mean


def onto_planes(vertices: np.ndarray, faces: np.ndarray, patch: np.ndarray, normals: np.ndarray,
                offsets: np.ndarray, bound: float) -> np.ndarray:
    """``vertices`` moved onto the planes of the planar patches of the faces around them (the
    least move that puts a vertex on every such plane: onto a plane, a line where two meet, a
    point where three do), where that move is at most ``bound``; the others kept."""
    moved = np.array(vertices, dtype=np.float64)
    has_plane = np.linalg.norm(normals, axis=1) > 0
    rows = np.unique(np.column_stack([faces.reshape(-1), np.repeat(patch, 3)]), axis=0)
    rows = rows[has_plane[rows[:, 1]]]
    starts = np.searchsorted(rows[:, 0], np.arange(len(vertices) + 1))
    for vertex in np.flatnonzero(np.diff(starts)).tolist():
        planes = rows[starts[vertex]:starts[vertex + 1], 1]
        matrix = normals[planes]
        residual = offsets[planes] - matrix @ moved[vertex]
        step = np.linalg.lstsq(matrix, residual, rcond=1e-6)[0]
        if np.linalg.norm(step) <= bound:
            moved[vertex] += step
    return moved
