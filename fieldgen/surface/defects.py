"""The checks that refuse: what keeps a repaired triangle surface from bounding a volume.

The compliant volume is bounded by a closed, oriented 2-manifold that does not cross itself and
encloses a volume (docs/model.md §2.2). :func:`surface_defects` counts every defect and
:func:`describe` names them with their sizes, for the message of the refusal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fieldgen.surface.intersections import CONTACT_TOLERANCE, intersecting_face_pairs
from fieldgen.surface.repair import zero_area_faces
from fieldgen.surface.components import components, consistent_flips, face_components, face_pieces, nonmanifold_vertices
from fieldgen.surface.topology import closed_components, edge_table, signed_volume

#: A closed component whose |volume| is below this fraction of diagonal**3 is flat.
FLAT_TOLERANCE = 1e-9
#: Separate closed pieces closer than this fraction of the diagonal touch as TetGen sees them (its
#: default relative tolerance, ``-T`` 1e-8), and it stops with an internal error after minutes (a
#: plate with two housings set on it, 4 nm apart: docs/model.md §2.2).
PIECE_GAP = 1e-8


@dataclass(frozen=True)
class SurfaceDefects:
    """What stands between a triangle surface and a closed, embedded 2-manifold."""

    open_edges: int            # edges used by one face
    holes: int                 # loops of open edges
    nonmanifold_edges: int     # edges used by more than two faces
    nonmanifold_vertices: int  # vertices where separate sheets touch
    nonorientable_edges: int   # edges whose two faces cannot be wound consistently
    flat_components: int       # closed pieces that enclose no volume
    self_intersections: int    # pairs of faces that cross or overlap
    volume: float              # signed volume, input units cubed
    zero_area_faces: int = 0   # faces with a corner on the opposite edge (not repairable)
    touching_pieces: int = 0   # pairs of separate pieces closer than PIECE_GAP x the diagonal

    @property
    def closed_manifold(self) -> bool:
        return (self.open_edges == 0 and self.nonmanifold_edges == 0
                and self.nonmanifold_vertices == 0 and self.nonorientable_edges == 0)

    @property
    def ok(self) -> bool:
        return (self.closed_manifold and self.flat_components == 0
                and self.self_intersections == 0 and self.zero_area_faces == 0
                and self.touching_pieces == 0 and self.volume > 0)


def _diagonal(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Bounding-box diagonal of the vertices ``faces`` use."""
    span = vertices[np.unique(faces)]
    return float(np.linalg.norm(span.max(axis=0) - span.min(axis=0)))


def _holes(keys: np.ndarray, open_mask: np.ndarray, n_vert: int) -> int:
    """Loops of open edges: the components of the graph of the open edges (keys ``lo * n + hi``)."""
    if not open_mask.any():
        return 0
    ends = np.stack([keys[open_mask] // n_vert, keys[open_mask] % n_vert], axis=1)
    verts, local = np.unique(ends, return_inverse=True)
    return components(len(verts), local.reshape(-1, 2))[0]


def _flat_components(vertices: np.ndarray, faces: np.ndarray, labels, n_comp: int) -> int:
    """Closed pieces whose |volume| is at most ``FLAT_TOLERANCE`` x their diagonal cubed."""
    flat = 0
    for c in np.flatnonzero(closed_components(faces, labels, n_comp)):
        sub = faces[labels == c]
        if abs(signed_volume(vertices, sub)) <= FLAT_TOLERANCE * _diagonal(vertices, sub) ** 3:
            flat += 1
    return flat


def surface_defects(vertices: np.ndarray, faces: np.ndarray, *,
                    check_intersections: bool = True) -> SurfaceDefects:
    """Count every defect that keeps ``faces`` from bounding a volume (docs/model.md §2.2).

    Expects repaired input (merged vertices, no degenerate or duplicate faces).
    """
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return SurfaceDefects(0, 0, 0, 0, 0, 0, 0, 0.0)
    keys, _, _, _, counts = edge_table(faces)
    open_mask = counts == 1
    n_comp, labels, f, g, same = face_components(faces)
    _, conflicts = consistent_flips(len(faces), f, g, same)
    slivers = zero_area_faces(vertices, faces, CONTACT_TOLERANCE * _diagonal(vertices, faces))
    crossings, touching = 0, 0
    if check_intersections:
        crossings = len(intersecting_face_pairs(vertices, faces[~slivers]))
        touching = _touching_pieces(vertices, faces[~slivers]) if not crossings else 0
    return SurfaceDefects(
        open_edges=int(open_mask.sum()),
        holes=int(_holes(keys, open_mask, int(faces.max()) + 1)),
        nonmanifold_edges=int((counts > 2).sum()),
        nonmanifold_vertices=nonmanifold_vertices(faces),
        nonorientable_edges=conflicts,
        flat_components=_flat_components(vertices, faces, labels, n_comp),
        self_intersections=crossings,
        volume=signed_volume(vertices, faces),
        zero_area_faces=int(slivers.sum()),
        touching_pieces=touching,
    )


def _touching_pieces(vertices: np.ndarray, faces: np.ndarray) -> int:
    """Pairs of the separate pieces of ``faces`` (no shared vertex) that come within
    ``PIECE_GAP`` × the diagonal of each other."""
    pieces = face_pieces(faces, len(vertices))
    if len(pieces) < 2:
        return 0
    piece = np.empty(len(faces), dtype=np.int64)
    for k, members in enumerate(pieces):
        piece[members] = k
    pairs = intersecting_face_pairs(vertices, faces, tolerance=PIECE_GAP)
    across = np.sort(piece[pairs], axis=1)
    across = across[across[:, 0] != across[:, 1]]
    return len(np.unique(across, axis=0))


def describe(defects: SurfaceDefects, diag: float, units: str) -> tuple[str, bool]:
    """Sentence naming every defect with its size, and whether --robust could help."""
    parts = []
    if defects.open_edges:
        parts.append(f"it is not closed: {defects.open_edges:,} open edges (used by one "
                     f"face only) around {_count(defects.holes, 'hole')}")
    if defects.nonmanifold_edges:
        parts.append(f"{defects.nonmanifold_edges:,} non-manifold edges (used by more "
                     "than two faces)")
    if defects.nonmanifold_vertices:
        parts.append(f"{defects.nonmanifold_vertices:,} non-manifold vertices (separate "
                     "sheets touching at a point)")
    if defects.nonorientable_edges:
        parts.append(f"it cannot be oriented: {defects.nonorientable_edges:,} edges whose "
                     "faces cannot be wound consistently")
    if defects.self_intersections:
        parts.append(f"it intersects itself: {defects.self_intersections:,} pairs of "
                     "faces cross or overlap")
    if defects.touching_pieces:
        parts.append(f"{_count(defects.touching_pieces, 'pair')} of its separate closed pieces touch (within "
                     f"{PIECE_GAP:g} of its size, which TetGen takes as one surface): an assembly saved as one "
                     "solid, to be united first")
    if defects.zero_area_faces:
        parts.append(f"{defects.zero_area_faces:,} zero-area faces (corners in a line) "
                     "that no edge flip removes")
    robust = bool(parts)
    if defects.flat_components:
        parts.append(f"{defects.flat_components:,} closed pieces enclose no volume (flat)")
    elif defects.closed_manifold and defects.volume <= FLAT_TOLERANCE * diag ** 3:
        parts.append(f"it encloses no volume ({defects.volume:.3g} {units}^3 for a part "
                     f"{diag:.3g} {units} across)")
    return "; ".join(parts), robust


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
