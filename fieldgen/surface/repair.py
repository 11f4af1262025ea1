"""The repairs that are safe, each counted in a sentence: merge seams, drop degenerate and
duplicate faces, make the winding consistent and outward, flip away zero-area caps. What no
safe repair fixes is refused by :mod:`fieldgen.surface.defects`."""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from fieldgen.surface.intersections import CONTACT_TOLERANCE
from fieldgen.surface.components import components, consistent_flips, face_components
from fieldgen.surface.topology import closed_components, compacted, signed_volume, winding_numbers

#: Vertices closer than this fraction of the bounding-box diagonal are one vertex.
MERGE_TOLERANCE = 1e-8
#: Vertices of a closed piece tested to lie inside another before it counts as nested in it
#: (a cavity at odd depth): :func:`nesting_depths`.
NEST_SAMPLES = 64


def merge_close_vertices(vertices: np.ndarray, faces: np.ndarray, tolerance: float):
    """Merge vertices closer than ``tolerance`` (seams, STL's per-face copies).

    Returns ``(vertices, faces, merged)``: only referenced vertices are kept, each
    cluster takes the position of its lowest-index member, ``merged`` counts the
    referenced vertices that disappeared.
    """
    used = np.unique(faces)
    pts = vertices[used]
    # Copies at one position first: k of them are k²/2 pairs within any tolerance (a file of a
    # triangle repeated a million times would fill the memory), and one cluster whatever it is.
    if tolerance > 0:
        same, copy_of = np.unique(pts, axis=0, return_inverse=True)
        n, label = components(len(same), cKDTree(same).query_pairs(r=tolerance, output_type="ndarray"))
        label = label[copy_of.reshape(-1)]
    else:
        n, label = components(len(pts), np.zeros((0, 2), dtype=np.int64))
    # Renumber clusters in order of their lowest member, so the output is stable.
    first = np.full(n, len(pts))
    np.minimum.at(first, label, np.arange(len(pts)))
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n)
    new_index = np.full(len(vertices), -1, dtype=np.int64)
    new_index[used] = rank[label]
    merged_vertices = pts[np.sort(first)]
    return merged_vertices, new_index[faces], len(pts) - n


def _drop_degenerate_and_duplicate(faces, face_groups, repairs: list[str]):
    """``faces`` without those with two corners at one vertex and without repeats (first kept)."""
    degenerate = ((faces[:, 0] == faces[:, 1]) | (faces[:, 1] == faces[:, 2])
                  | (faces[:, 2] == faces[:, 0]))
    if degenerate.any():
        faces, face_groups = faces[~degenerate], face_groups[~degenerate]
        repairs.append(f"removed {int(degenerate.sum()):,} degenerate faces "
                       "(two corners at one vertex)")
    _, first = np.unique(np.sort(faces, axis=1), axis=0, return_index=True)
    if len(first) < len(faces):
        keep = np.sort(first)
        repairs.append(f"removed {len(faces) - len(keep):,} duplicate faces")
        faces, face_groups = faces[keep], face_groups[keep]
    return faces, face_groups


def _outward_flips(vertices, faces) -> np.ndarray:
    """Per-face flip making the winding consistent and outward: every piece positive on its own,
    then cavities (closed pieces inside an odd number of others) turned inward."""
    n_comp, labels, f, g, same = face_components(faces)
    flip, _ = consistent_flips(len(faces), f, g, same)
    oriented = np.where(flip[:, None], faces[:, [0, 2, 1]], faces)
    closed = closed_components(faces, labels, n_comp)
    sign = np.ones(n_comp)
    for c in range(n_comp):
        if signed_volume(vertices, oriented[labels == c]) < 0:
            sign[c] = -1.0
    comp_flip = sign < 0
    closed_ids = np.flatnonzero(closed)
    if len(closed_ids) > 1:
        pieces = [np.where(comp_flip[c], oriented[labels == c][:, [0, 2, 1]], oriented[labels == c])
                  for c in closed_ids]
        comp_flip[closed_ids[nesting_depths(vertices, pieces) % 2 == 1]] ^= True
    return flip ^ comp_flip[labels]


def nesting_depths(vertices: np.ndarray, pieces: list[np.ndarray]) -> np.ndarray:
    """How many of the other closed ``pieces`` (face arrays) wholly enclose each one: every one of
    up to ``NEST_SAMPLES`` of its vertices (spread by index) inside the other by its winding
    number. A piece that only overlaps another (an assembly's solids, which cross) has vertices
    outside it and is not nested, so it is not taken for a cavity and reversed (which would
    make fTetWild subtract it: docs/model.md §2.11)."""
    used = [np.unique(piece) for piece in pieces]
    samples = [ids[np.unique(np.linspace(0, len(ids) - 1, min(NEST_SAMPLES, len(ids))).astype(np.int64))]
               for ids in used]
    boxes = np.array([[vertices[ids].min(axis=0), vertices[ids].max(axis=0)] for ids in used])
    depth = np.zeros(len(pieces), dtype=np.int64)
    for d, outer in enumerate(pieces):
        within = np.all((boxes[:, 0] >= boxes[d, 0]) & (boxes[:, 1] <= boxes[d, 1]), axis=1)
        within[d] = False
        inner = np.flatnonzero(within)
        if not len(inner):
            continue
        probes = np.concatenate([vertices[samples[c]] for c in inner])
        owner = np.repeat(np.arange(len(inner)), [len(samples[c]) for c in inner])
        inside = np.abs(winding_numbers(vertices, outer, probes)) > 0.5
        outside = np.bincount(owner, weights=~inside, minlength=len(inner))
        depth[inner[outside == 0]] += 1
    return depth


def repair_surface(vertices, faces, face_groups, *, merge_tolerance: float = MERGE_TOLERANCE):
    """Safe repairs, each counted: merge seams, drop degenerate and duplicate faces,
    make winding consistent and outward (nested closed pieces alternate: a closed piece
    inside an odd number of others is a cavity and faces inward).

    Returns ``(vertices, faces, face_groups, repairs)``.
    """
    repairs: list[str] = []
    faces = np.asarray(faces, dtype=np.int64)
    face_groups = np.asarray(face_groups, dtype=np.int64)
    n_unused = len(vertices) - len(np.unique(faces))
    span = vertices[np.unique(faces)]
    diag = float(np.linalg.norm(span.max(axis=0) - span.min(axis=0)))
    vertices, faces, merged = merge_close_vertices(vertices, faces, merge_tolerance * diag)
    if merged:
        repairs.append(f"merged {merged:,} duplicate/seam vertices")
    if n_unused:
        repairs.append(f"dropped {n_unused:,} vertices used by no face")
    faces, face_groups = _drop_degenerate_and_duplicate(faces, face_groups, repairs)
    if len(faces) == 0:
        return vertices, faces, face_groups, tuple(repairs)
    vertices, faces = compacted(vertices, faces)       # removals can orphan some

    final_flip = _outward_flips(vertices, faces)
    faces = np.where(final_flip[:, None], faces[:, [0, 2, 1]], faces)
    if final_flip.any():
        repairs.append(f"reversed {int(final_flip.sum()):,} faces so the winding is "
                       "consistent and normals point outward")
    faces, face_groups, flipped = flip_zero_area_faces(vertices, faces, face_groups,
                                                       CONTACT_TOLERANCE * diag)
    if flipped:
        repairs.append(f"removed {flipped:,} zero-area faces (a corner on the opposite "
                       "edge) by flipping that edge")
    return vertices, faces, face_groups, tuple(repairs)


def zero_area_faces(vertices: np.ndarray, faces: np.ndarray, height: float) -> np.ndarray:
    """Mask of faces whose corner opposite the longest edge is within ``height`` of it."""
    p = vertices[faces]
    edges = np.stack([p[:, 1] - p[:, 0], p[:, 2] - p[:, 1], p[:, 0] - p[:, 2]], axis=1)
    longest = np.linalg.norm(edges, axis=2).max(axis=1)
    twice_area = np.linalg.norm(np.cross(edges[:, 0], -edges[:, 2]), axis=1)
    return twice_area <= height * longest


def flip_zero_area_faces(vertices, faces, face_groups, height: float, max_flips=None):
    """Remove caps (a corner lying on the opposite, longest edge a-b) by flipping a-b.

    The cap (a, b, c) and its neighbour (b, a, d) become (a, d, c) and (d, b, c): the same
    region, consistently wound, with no zero-area face (unless d is also on the line).
    Returns ``(faces, face_groups, flips)``; caps without a unique neighbour are left.
    """
    faces = faces.copy()
    face_groups = face_groups.copy()
    flips = 0
    limit = len(faces) if max_flips is None else max_flips
    tried: set[int] = set()
    while flips < limit:
        caps = [int(i) for i in np.flatnonzero(zero_area_faces(vertices, faces, height))
                if int(i) not in tried]
        if not caps:
            break
        cap = caps[0]
        tried.add(cap)
        p = vertices[faces[cap]]
        lengths = np.linalg.norm(p - p[[1, 2, 0]], axis=1)  # edge k runs k -> k+1
        k = int(np.argmax(lengths))
        a, b, c = faces[cap, k], faces[cap, (k + 1) % 3], faces[cap, (k + 2) % 3]
        rolled = [np.roll(faces, -r, axis=1) for r in range(3)]
        hits = [(f, r) for r in range(3) for f in
                np.flatnonzero((rolled[r][:, 0] == b) & (rolled[r][:, 1] == a))]
        if len(hits) != 1 or (faces[hits[0][0]] == c).any():
            continue
        other, r = hits[0]
        d = rolled[r][other, 2]
        faces[cap] = (a, d, c)
        faces[other] = (d, b, c)
        face_groups[cap] = face_groups[other]
        flips += 1
        tried.discard(cap)
    return faces, face_groups, flips
