"""Triangle-surface topology and measures, the one home of each for the whole tree: edges and
how many faces use them, closedness, areas, normals, enclosed volume and winding numbers
(connected pieces and consistent winding, which need graph searches, are in
:mod:`fieldgen.surface.components`; this module needs numpy only, so the runtime's closedness
checks do not load scipy's sparse graphs).

Small functions over ``vertices`` (n, 3) float64 and ``faces`` (m, 3) int64 arrays. The
compliant volume is bounded by a closed, oriented 2-manifold (docs/model.md §2.2), and a rigid
body's surface must enclose a volume too: both ask :func:`edge_use` whether it does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


# --------------------------------------------------------------------------- measures

def face_areas(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area of each triangle."""
    p = vertices[faces]
    return 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)


def cross(u: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Row-wise cross product of (n, 3) arrays: ``np.cross``'s arithmetic, without its overhead
    on the few rows a local move looks at."""
    return np.column_stack([u[:, 1] * w[:, 2] - u[:, 2] * w[:, 1], u[:, 2] * w[:, 0] - u[:, 0] * w[:, 2],
                            u[:, 0] * w[:, 1] - u[:, 1] * w[:, 0]])


def unit_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unit normal of each triangle by the right-hand rule (zero where the area is zero)."""
    p = vertices[faces]
    n = cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    length = np.linalg.norm(n, axis=1, keepdims=True)
    return np.divide(n, length, out=np.zeros_like(n), where=length > 0)


def signed_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Signed enclosed volume by the divergence theorem (positive for outward normals)."""
    if len(faces) == 0:
        return 0.0
    origin = vertices[faces].reshape(-1, 3).mean(axis=0)
    p = vertices[faces] - origin
    return float(np.einsum("ij,ij->i", p[:, 0], np.cross(p[:, 1], p[:, 2])).sum() / 6.0)


def winding_numbers(vertices: np.ndarray, faces: np.ndarray, points: np.ndarray,
                    chunk: int = 2_000_000) -> np.ndarray:
    """Generalised winding number of a closed surface at each point (1 inside, 0 outside).

    Sum of the solid angles of the triangles seen from the point (Van Oosterom and
    Strackee), divided by 4 pi.
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    tri = vertices[faces]
    out = np.zeros(len(points))
    step = max(1, chunk // max(1, len(faces)))
    for start in range(0, len(points), step):
        q = points[start:start + step]
        a = tri[None, :, 0] - q[:, None]
        b = tri[None, :, 1] - q[:, None]
        c = tri[None, :, 2] - q[:, None]
        la, lb, lc = (np.linalg.norm(x, axis=2) for x in (a, b, c))
        det = np.einsum("pfi,pfi->pf", a, np.cross(b, c))
        den = (la * lb * lc + np.einsum("pfi,pfi->pf", a, b) * lc
               + np.einsum("pfi,pfi->pf", b, c) * la + np.einsum("pfi,pfi->pf", c, a) * lb)
        out[start:start + step] = np.arctan2(det, den).sum(axis=1) / (2.0 * np.pi)
    return out


# --------------------------------------------------------------------------- vertices

def triangle_edges(faces: np.ndarray) -> np.ndarray:
    """The three edges (3m, 2) of every triangle, as vertex pairs: 0-1 of each, then 1-2, then 2-0."""
    return np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])


def compacted(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Only the vertices ``faces`` use, in their order, and ``faces`` renumbered to them."""
    used = np.unique(faces)
    remap = np.full(len(vertices), -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    return vertices[used], remap[faces]


# --------------------------------------------------------------------------- edges

def boundary_edges(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges used by one face only (an open surface's rim): (edges (k, 2), each run the way
    its face runs it; the face of each), in the order of :func:`triangle_edges`."""
    edges = triangle_edges(faces)
    _, first, count = np.unique(np.sort(edges, axis=1), axis=0, return_index=True, return_counts=True)
    once = np.sort(first[count == 1])
    return edges[once], once % max(len(faces), 1)


def edge_table(faces: np.ndarray):
    """Directed edges of every face, grouped by undirected edge.

    Returns ``(key_of_edge, edge_id, face_of_edge, forward, counts)`` where ``edge_id``
    maps each of the 3m directed edges to its undirected edge and ``forward`` says the
    directed edge runs from the smaller to the larger vertex index.
    """
    a = faces.reshape(-1)
    b = faces[:, [1, 2, 0]].reshape(-1)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    key = lo.astype(np.int64) * (int(faces.max(initial=0)) + 1) + hi
    unique, edge_id, counts = np.unique(key, return_inverse=True, return_counts=True)
    face_of_edge = np.repeat(np.arange(len(faces)), 3)
    return unique, edge_id.ravel(), face_of_edge, a < b, counts


@dataclass(frozen=True)
class EdgeUse:
    """How the faces of a triangle set use its edges: the one test of a closed surface."""

    edges: int         # undirected edges
    open: int          # used by one face
    overused: int      # used by more than two faces (non-manifold)
    repeated: int      # directed edges used more than once (wound inconsistently, or non-manifold)
    unmatched: int     # directed edges whose reverse no face uses
    duplicates: int    # uses of a directed edge beyond its first

    @property
    def closed(self) -> bool:
        """Every edge used by exactly two faces."""
        return self.open == 0 and self.overused == 0

    @property
    def closed_and_wound(self) -> bool:
        """Closed, and every edge run one way by one face and the other way by the other."""
        return self.closed and self.repeated == 0


def edge_use(faces: np.ndarray) -> EdgeUse:
    """:class:`EdgeUse` of ``faces`` (m, 3)."""
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    n = int(faces.max(initial=0)) + 1
    a, b = faces.reshape(-1), np.roll(faces, -1, axis=1).reshape(-1)
    _, uses = np.unique(np.minimum(a, b) * n + np.maximum(a, b), return_counts=True)
    runs, same_way = np.unique(a * n + b, return_counts=True)
    matched = np.isin((runs % n) * n + runs // n, runs)
    return EdgeUse(edges=int(len(uses)), open=int(np.sum(uses == 1)), overused=int(np.sum(uses > 2)),
                   repeated=int(np.sum(same_way > 1)), unmatched=int(np.sum(~matched)),
                   duplicates=int(len(a) - len(runs)))


def face_pairs_across_edges(faces: np.ndarray):
    """Faces meeting at each edge used by exactly two faces: (f, g, same_direction)."""
    _, edge_id, face_of_edge, forward, counts = edge_table(faces)
    two = counts[edge_id] == 2
    order = np.argsort(edge_id[two], kind="stable")
    f = face_of_edge[two][order].reshape(-1, 2)
    d = forward[two][order].reshape(-1, 2)
    return f[:, 0], f[:, 1], d[:, 0] == d[:, 1]


def shared_mask(rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Which entries of each row of ``rows`` (faces) also appear in the same row of ``others``."""
    return (rows[:, :, None] == others[:, None, :]).any(axis=2)


def shared_edges(faces: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """The edge each face ``first[i]`` shares with ``second[i]`` (neighbours across it): its two
    vertices (k, 2), in the order the first face lists them."""
    return faces[first][shared_mask(faces[first], faces[second])].reshape(-1, 2)


def closed_components(faces: np.ndarray, labels: np.ndarray, n_comp: int) -> np.ndarray:
    """Boolean per component: every edge of it is used by exactly two faces."""
    _, edge_id, _, _, counts = edge_table(faces)
    two = (counts[edge_id] == 2).reshape(-1, 3).all(axis=1)
    bad = np.zeros(n_comp, dtype=bool)
    np.logical_or.at(bad, labels, ~two)
    return ~bad
