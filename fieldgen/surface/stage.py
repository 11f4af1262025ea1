"""The surface stage: read a closed surface, repair what is safe, refuse what is not.

Everything here is small functions over ``vertices`` (n, 3) float64 and ``faces``
(m, 3) int64 arrays. ``load_surface`` is the entry point; ``surface_defects`` and
``intersecting_face_pairs`` are public so the robust (fTetWild) path and the core check
can reuse them. Lengths are in the input's units until ``load_surface`` scales the
result to metres, so a surface read in ``mm`` is exactly ``1e-3`` times the same
surface read in ``m``.

The compliant volume is bounded by this surface (D 5.1.1, E19 VI-A): it must be a
closed, oriented 2-manifold that does not cross itself and encloses a volume.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.spatial import cKDTree

from fieldgen.errors import InputError, OptionError

from fieldgen.units import LENGTH_UNITS as UNIT_SCALE  # the one table (fieldgen.units); name kept for callers
from fieldgen.units import length_scale

#: Vertices closer than this fraction of the bounding-box diagonal are one vertex.
MERGE_TOLERANCE = 1e-8
#: Distances below this fraction of the bounding-box diagonal count as touching.
CONTACT_TOLERANCE = 1e-10
#: A closed component whose |volume| is below this fraction of diagonal**3 is flat.
FLAT_TOLERANCE = 1e-9



def robust_fix() -> str:
    """The fix for a surface only the robust mesher can use (with the install command that works here)."""
    from fieldgen.install import install_hint

    return f"or pass --robust to mesh it anyway with fTetWild (needs {install_hint('robust')})"

SURFACE_FORMATS = "STL, OBJ, PLY, OFF or GLB"

#: Held while fds 1 and 2 are redirected (:func:`_standard_output_to`).
_DESCRIPTORS = threading.Lock()

#: CAD (B-rep) files, tessellated by OpenCASCADE through cascadio (the optional extra ``step``).
#: They carry their own length unit and are read in metres, whatever ``--units`` says.
STEP_SUFFIXES = (".step", ".stp")
#: OpenCASCADE's tessellation: largest distance of a facet from the B-rep surface (absolute, in
#: OpenCASCADE's millimetres) and largest angle between neighbouring facets' normals (radians).
#: 0.01 mm made 8.3k triangles of featuretype.STEP (5 in long), and TetGen's first mesh of them
#: 409k tets, past the sizing's budget (2.7% estimated); 0.05 mm makes 3.1k (its STL export has
#: 3.5k) and the sizing meets 1% at 219k tets.
STEP_LINEAR_DEFLECTION = 0.05
STEP_ANGULAR_DEFLECTION = 0.5


@dataclass(frozen=True, eq=False)
class Surface:
    """A closed, outward-wound triangle surface in metres, ready for meshing."""

    vertices: np.ndarray      # (n, 3) float64, metres
    faces: np.ndarray         # (m, 3) int64, consistently wound, normals outward
    face_groups: np.ndarray   # (m,) int64 index into group_names, -1 where none
    group_names: tuple[str, ...]
    path: str                 # as given by the user
    sha256: str               # hex SHA-256 of the input file's bytes
    units: str                # the units the input was in
    repairs: tuple[str, ...]  # human sentences, e.g. "merged 1,204 duplicate/seam vertices"

    @property
    def volume(self) -> float:
        """Enclosed volume in m^3 (positive for outward normals)."""
        return float(signed_volume(self.vertices, self.faces))

    @property
    def area(self) -> float:
        """Total surface area in m^2."""
        return float(face_areas(self.vertices, self.faces).sum())

    @property
    def bounds(self) -> np.ndarray:
        """(2, 3) array: lower and upper corner of the bounding box, metres."""
        return np.stack([self.vertices.min(axis=0), self.vertices.max(axis=0)])

    @property
    def face_normals(self) -> np.ndarray:
        """(m, 3) unit outward normals (zero for a zero-area face)."""
        return unit_normals(self.vertices, self.faces)


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

    @property
    def closed_manifold(self) -> bool:
        return (self.open_edges == 0 and self.nonmanifold_edges == 0
                and self.nonmanifold_vertices == 0 and self.nonorientable_edges == 0)

    @property
    def ok(self) -> bool:
        return (self.closed_manifold and self.flat_components == 0
                and self.self_intersections == 0 and self.zero_area_faces == 0
                and self.volume > 0)


# --------------------------------------------------------------------------- geometry

def face_areas(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area of each triangle."""
    p = vertices[faces]
    return 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)


def unit_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Unit normal of each triangle by the right-hand rule (zero where the area is zero)."""
    p = vertices[faces]
    n = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
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


# --------------------------------------------------------------------------- topology

def _edge_table(faces: np.ndarray):
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


def _face_pairs_across_edges(faces: np.ndarray):
    """Faces meeting at each edge used by exactly two faces: (f, g, same_direction)."""
    _, edge_id, face_of_edge, forward, counts = _edge_table(faces)
    two = counts[edge_id] == 2
    order = np.argsort(edge_id[two], kind="stable")
    f = face_of_edge[two][order].reshape(-1, 2)
    d = forward[two][order].reshape(-1, 2)
    return f[:, 0], f[:, 1], d[:, 0] == d[:, 1]


def _components(n_faces: int, f: np.ndarray, g: np.ndarray) -> tuple[int, np.ndarray]:
    graph = sparse.coo_matrix((np.ones(len(f)), (f, g)), shape=(n_faces, n_faces)).tocsr()
    return csgraph.connected_components(graph, directed=False)


def _consistent_flips(n_faces: int, f, g, same) -> tuple[np.ndarray, int]:
    """Per-face flip making every two-face edge run opposite ways in its two faces.

    Breadth-first over the face graph from the lowest face of each component. Returns
    the flips and the number of edges that still disagree (non-orientable pieces).
    """
    weight = np.where(same, 2.0, 1.0)  # 2: the faces disagree, 1: they agree
    graph = sparse.coo_matrix((np.r_[weight, weight], (np.r_[f, g], np.r_[g, f])),
                              shape=(n_faces, n_faces)).tocsr()
    n_comp, labels = csgraph.connected_components(graph, directed=False)
    pair_keys = np.minimum(f, g) * n_faces + np.maximum(f, g)
    order_keys = np.argsort(pair_keys, kind="stable")
    pair_keys, pair_same = pair_keys[order_keys], same[order_keys]
    flip = np.zeros(n_faces, dtype=bool)
    seen = np.zeros(n_faces, dtype=bool)
    for root in np.unique(labels, return_index=True)[1]:
        order, pred = csgraph.breadth_first_order(graph, int(root), directed=False,
                                                  return_predecessors=True)
        seen[order] = True
        child = order[1:]
        disagree = _lookup_pairs(pair_keys, pair_same, pred[child], child, n_faces)
        for node, parent, swap in zip(child.tolist(), pred[child].tolist(), disagree.tolist()):
            flip[node] = flip[parent] ^ swap
    conflicts = int(np.count_nonzero(same ^ (flip[f] ^ flip[g])))
    return flip, conflicts


def _lookup_pairs(keys, values, a, b, n):
    """values[k] for the sorted pair keys of faces (a, b)."""
    k = np.minimum(a, b).astype(np.int64) * n + np.maximum(a, b)
    return values[np.searchsorted(keys, k)]


def _nonmanifold_vertices(faces: np.ndarray) -> int:
    """Vertices whose faces form more than one fan (sheets touching at a point)."""
    if len(faces) == 0:
        return 0
    m = len(faces)
    corner = np.arange(3 * m).reshape(m, 3)  # corner (face, local vertex)
    _, edge_id, face_of_edge, _, counts = _edge_table(faces)
    # Directed edge k of face f runs from local vertex k to local vertex (k+1)%3.
    local = np.tile([0, 1, 2], m)
    two = counts[edge_id] == 2
    idx = np.flatnonzero(two)
    order = idx[np.argsort(edge_id[idx], kind="stable")].reshape(-1, 2)
    fa, fb = face_of_edge[order[:, 0]], face_of_edge[order[:, 1]]
    ka = local[order[:, 0]]
    va0, va1 = faces[fa, ka], faces[fa, (ka + 1) % 3]
    # Corner of face fb at the same vertex: find the local index whose vertex matches.
    rows_b = faces[fb]
    kb0 = np.argmax(rows_b == va0[:, None], axis=1)
    kb1 = np.argmax(rows_b == va1[:, None], axis=1)
    src = np.r_[corner[fa, ka], corner[fa, (ka + 1) % 3]]
    dst = np.r_[corner[fb, kb0], corner[fb, kb1]]
    graph = sparse.coo_matrix((np.ones(len(src)), (src, dst)), shape=(3 * m, 3 * m))
    _, label = csgraph.connected_components(graph, directed=False)
    vertex = faces.reshape(-1)
    pairs = np.unique(np.stack([vertex, label], axis=1), axis=0)
    fans = np.bincount(pairs[:, 0])
    return int(np.count_nonzero(fans > 1))


# --------------------------------------------------------------------------- intersections

def _segment_hits_triangle(p, q, t0, t1, t2, eps):
    """Does the closed segment pq meet the closed triangle (t0, t1, t2)? Vectorised.

    Points within ``eps`` of the triangle count as on it. A segment in the triangle's
    plane is clipped against the three edge half-planes (so coplanar overlap counts).
    """
    n = np.cross(t1 - t0, t2 - t0)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    dp = np.einsum("ij,ij->i", n, p - t0)
    dq = np.einsum("ij,ij->i", n, q - t0)
    apart = ((dp > eps) & (dq > eps)) | ((dp < -eps) & (dq < -eps))
    coplanar = (np.abs(dp) <= eps) & (np.abs(dq) <= eps)
    # Parameter range of the segment that lies in the plane (within eps).
    lo = np.zeros(len(p))
    hi = np.ones(len(p))
    crossing = ~apart & ~coplanar
    denom = np.where(crossing, dp - dq, 1.0)
    tc = np.clip(dp / denom, 0.0, 1.0)
    lo = np.where(crossing, tc, lo)
    hi = np.where(crossing, tc, hi)
    for a, b in ((t0, t1), (t1, t2), (t2, t0)):
        e = b - a
        inward = np.cross(n, e)
        inward /= np.maximum(np.linalg.norm(inward, axis=1, keepdims=True), 1e-300)
        sp = np.einsum("ij,ij->i", inward, p - a)
        sq = np.einsum("ij,ij->i", inward, q - a)
        slope = sq - sp
        bound = np.divide(-eps - sp, slope, out=np.zeros_like(sp), where=slope != 0)
        lo = np.where(slope > 0, np.maximum(lo, bound), lo)
        hi = np.where(slope < 0, np.minimum(hi, bound), hi)
        hi = np.where((slope == 0) & (sp < -eps), -1.0, hi)
    return ~apart & (lo <= hi)


def _pairs_intersect(vertices, faces_a, faces_b, eps):
    """For rows of triangles a[i], b[i]: do they meet anywhere but shared vertices/edges?

    Vertices are shared by index. No shared vertex: any edge of one meets the other.
    One shared vertex: the edge opposite it in one meets the other (the meeting set is
    a segment from the shared vertex, so its far end lies on such an edge). Two shared
    vertices: they overlap only if folded flat onto each other.
    """
    shared = (faces_a[:, :, None] == faces_b[:, None, :])  # (k, 3, 3)
    n_shared = shared.any(axis=2).sum(axis=1)
    hit = np.zeros(len(faces_a), dtype=bool)
    A, B = vertices[faces_a], vertices[faces_b]

    zero = np.flatnonzero(n_shared == 0)
    if len(zero):
        a, b = A[zero], B[zero]
        res = np.zeros(len(zero), dtype=bool)
        for i in range(3):
            j = (i + 1) % 3
            res |= _segment_hits_triangle(a[:, i], a[:, j], b[:, 0], b[:, 1], b[:, 2], eps)
            res |= _segment_hits_triangle(b[:, i], b[:, j], a[:, 0], a[:, 1], a[:, 2], eps)
        hit[zero] = res

    one = np.flatnonzero(n_shared == 1)
    if len(one):
        ia = np.argmax(shared[one].any(axis=2), axis=1)  # shared corner in a
        ib = np.argmax(shared[one].any(axis=1), axis=1)  # shared corner in b
        r = np.arange(len(one))
        a, b = A[one], B[one]
        a1, a2 = a[r, (ia + 1) % 3], a[r, (ia + 2) % 3]
        b1, b2 = b[r, (ib + 1) % 3], b[r, (ib + 2) % 3]
        hit[one] = (_segment_hits_triangle(a1, a2, b[:, 0], b[:, 1], b[:, 2], eps)
                    | _segment_hits_triangle(b1, b2, a[:, 0], a[:, 1], a[:, 2], eps))

    two = np.flatnonzero(n_shared == 2)
    if len(two):
        oa = np.argmin(shared[two].any(axis=2), axis=1)  # the unshared corner of a
        ob = np.argmin(shared[two].any(axis=1), axis=1)
        r = np.arange(len(two))
        a, b = A[two], B[two]
        pa, pb = a[r, oa], b[r, ob]
        u, w = a[r, (oa + 1) % 3], a[r, (oa + 2) % 3]
        n = np.cross(w - u, pa - u)
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
        in_plane = np.abs(np.einsum("ij,ij->i", n, pb - u)) <= eps
        side = np.cross(n, w - u)  # in-plane direction away from the edge, towards pa
        same_side = np.einsum("ij,ij->i", side, pb - u) > 0
        hit[two] = in_plane & same_side

    hit[n_shared == 3] = True  # the same triangle twice
    return hit


def _boxes(vertices, faces, pad):
    tri = vertices[faces]
    return tri.min(axis=1) - pad, tri.max(axis=1) + pad


def _candidate_pairs(lo_a, hi_a, lo_b=None, hi_b=None):
    """Index pairs (i, j) whose boxes overlap: within one set (i < j) or across two sets."""
    from rtree import index

    props = index.Property()
    props.dimension = 3
    target_lo, target_hi = (lo_a, hi_a) if lo_b is None else (lo_b, hi_b)
    if len(target_lo) == 0 or len(lo_a) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    tree = index.Index((np.arange(len(target_lo), dtype=np.int64),
                        np.ascontiguousarray(target_lo), np.ascontiguousarray(target_hi)),
                       properties=props)
    ids, counts = tree.intersection_v(np.ascontiguousarray(lo_a), np.ascontiguousarray(hi_a))
    i = np.repeat(np.arange(len(lo_a), dtype=np.int64), np.asarray(counts, dtype=np.int64))
    j = np.asarray(ids, dtype=np.int64)
    if lo_b is None:
        keep = i < j
        i, j = i[keep], j[keep]
    pairs = np.stack([i, j], axis=1)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def intersecting_face_pairs(vertices: np.ndarray, faces: np.ndarray,
                            other_faces: np.ndarray | None = None,
                            chunk: int = 200_000) -> np.ndarray:
    """(k, 2) pairs of faces that cross or overlap (sorted, deterministic).

    With ``other_faces`` (indices into the same ``vertices``) the pairs are
    (face of ``faces``, face of ``other_faces``); otherwise pairs within ``faces``,
    ignoring contact at shared vertices and edges. Broad phase: an R-tree over the
    triangles' boxes; narrow phase: vectorised segment-triangle tests.
    """
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    used = faces if other_faces is None else np.r_[faces, other_faces]
    span = vertices[np.unique(used)]
    eps = CONTACT_TOLERANCE * float(np.linalg.norm(span.max(axis=0) - span.min(axis=0)))
    lo_a, hi_a = _boxes(vertices, faces, eps)
    if other_faces is None:
        pairs = _candidate_pairs(lo_a, hi_a)
        faces_b = faces
    else:
        faces_b = np.asarray(other_faces, dtype=np.int64)
        pairs = _candidate_pairs(lo_a, hi_a, *_boxes(vertices, faces_b, eps))
    hits = []
    for start in range(0, len(pairs), chunk):
        p = pairs[start:start + chunk]
        hits.append(p[_pairs_intersect(vertices, faces[p[:, 0]], faces_b[p[:, 1]], eps)])
    return np.concatenate(hits) if hits else np.zeros((0, 2), dtype=np.int64)


# --------------------------------------------------------------------------- defects

def _closed_components(faces, labels, n_comp, counts_per_face_edge):
    """Boolean per component: every edge of it is used by exactly two faces."""
    bad = np.zeros(n_comp, dtype=bool)
    np.logical_or.at(bad, labels, ~counts_per_face_edge)
    return ~bad


def surface_defects(vertices: np.ndarray, faces: np.ndarray, *,
                    check_intersections: bool = True) -> SurfaceDefects:
    """Count every defect that keeps ``faces`` from bounding a volume (D 5.1.1).

    Expects repaired input (merged vertices, no degenerate or duplicate faces).
    """
    faces = np.asarray(faces, dtype=np.int64)
    if len(faces) == 0:
        return SurfaceDefects(0, 0, 0, 0, 0, 0, 0, 0.0)
    keys, edge_id, _, _, counts = _edge_table(faces)
    open_mask = counts == 1
    n_vert = int(faces.max()) + 1
    holes = 0
    if open_mask.any():
        ends = np.stack([keys[open_mask] // n_vert, keys[open_mask] % n_vert], axis=1)
        verts, local = np.unique(ends, return_inverse=True)
        local = local.reshape(-1, 2)
        g = sparse.coo_matrix((np.ones(len(local)), (local[:, 0], local[:, 1])),
                              shape=(len(verts), len(verts)))
        holes = csgraph.connected_components(g, directed=False)[0]
    f, g2, same = _face_pairs_across_edges(faces)
    _, conflicts = _consistent_flips(len(faces), f, g2, same)
    n_comp, labels = _components(len(faces), f, g2)
    edge_ok = (counts[edge_id] == 2).reshape(-1, 3).all(axis=1)
    closed = _closed_components(faces, labels, n_comp, edge_ok)
    flat = 0
    for c in np.flatnonzero(closed):
        sub = faces[labels == c]
        pts = vertices[np.unique(sub)]
        diag = float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0)))
        if abs(signed_volume(vertices, sub)) <= FLAT_TOLERANCE * diag ** 3:
            flat += 1
    span = vertices[np.unique(faces)]
    diag = float(np.linalg.norm(span.max(axis=0) - span.min(axis=0)))
    slivers = zero_area_faces(vertices, faces, CONTACT_TOLERANCE * diag)
    crossings = 0
    if check_intersections:
        crossings = len(intersecting_face_pairs(vertices, faces[~slivers]))
    return SurfaceDefects(
        open_edges=int(open_mask.sum()),
        holes=int(holes),
        nonmanifold_edges=int((counts > 2).sum()),
        nonmanifold_vertices=_nonmanifold_vertices(faces),
        nonorientable_edges=conflicts,
        flat_components=flat,
        self_intersections=crossings,
        volume=signed_volume(vertices, faces),
        zero_area_faces=int(slivers.sum()),
    )


# --------------------------------------------------------------------------- reading

def _read_obj(text: str):
    """Minimal OBJ reader keeping each face's group/object name (``g``/``o``, latest wins).

    Polygons are split into fans (0, i, i+1); negative indices count back from the
    latest vertex.
    """
    vertices, faces, groups = [], [], []
    names: dict[str, int] = {}
    current = -1
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head, _, rest = line.replace("\t", " ").partition(" ")
        if head == "v":
            vertices.append([float(x) for x in rest.split()[:3]])
        elif head in ("g", "o"):
            name = rest.strip()
            if not name or name == "default":
                current = -1
            else:
                current = names.setdefault(name, len(names))
        elif head == "f":
            idx = []
            for token in rest.split():
                k = int(token.split("/", 1)[0])
                idx.append(k - 1 if k > 0 else len(vertices) + k)
            for i in range(1, len(idx) - 1):
                faces.append((idx[0], idx[i], idx[i + 1]))
                groups.append(current)
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    fc = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if len(fc) and (fc.min() < 0 or fc.max() >= len(v)):
        raise ValueError(f"a face refers to vertex {int(fc.max()) + 1} of {len(v)}")
    return v, fc, np.asarray(groups, dtype=np.int64), tuple(names)


#: One triangle of a binary STL: normal, three corners (float32), a 2-byte attribute.
_STL_RECORD = np.dtype([("normal", "<f4", (3,)), ("corners", "<f4", (3, 3)), ("attribute", "<u2")])


def _read_binary_stl(data: bytes):
    """A binary STL (80-byte header, uint32 triangle count, 50 bytes a triangle) as trimesh reads
    it unprocessed: three vertices per triangle in file order, float32 widened to float64; None
    unless the length is exactly what the count says (trimesh's own test), e.g. for ASCII STL.

    Read here because importing trimesh costs 0.4-0.7 s (networkx, meshio, scipy.ndimage), paid
    before TetGen can start, and binary STL is what CAD exports; tests check that both readers
    give the same arrays."""
    if len(data) < 84:
        return None
    count = int.from_bytes(data[80:84], "little")
    if len(data) != 84 + _STL_RECORD.itemsize * count:
        return None
    corners = np.frombuffer(data, dtype=_STL_RECORD, count=count, offset=84)["corners"]
    vertices = corners.reshape(-1, 3).astype(np.float64)
    return (vertices, np.arange(3 * count, dtype=np.int64).reshape(-1, 3), np.full(count, -1, dtype=np.int64), ())


def _read_stl(path: str, data: bytes):
    """Binary STL directly, anything else through trimesh (ASCII STL). A file trimesh finds no
    triangle in that is not ASCII text is reported as a binary STL of the wrong length."""
    binary = _read_binary_stl(data)
    if binary is not None:
        return binary
    read = _read_with_trimesh(path)
    text = data.lstrip()[:5].lower() == b"solid" and b"\0" not in data
    if len(read[1]) == 0 and len(data) >= 84 and not text:
        count = int.from_bytes(data[80:84], "little")
        raise ValueError(f"a binary STL whose header declares {count} triangles "
                         f"({84 + _STL_RECORD.itemsize * count} bytes) but the file has {len(data)} bytes: "
                         "it was cut short, padded or damaged; export it again")
    return read


def _read_with_trimesh(path: str):
    """Any trimesh format, unprocessed; scenes are flattened with their node transforms."""
    import trimesh

    loaded = trimesh.load(path, force=None, process=False)
    if isinstance(loaded, trimesh.Scene):
        vs, fs, gs, names = [], [], [], []
        offset = 0
        for node in loaded.graph.nodes_geometry:
            transform, geometry_name = loaded.graph[node]
            geom = loaded.geometry[geometry_name]
            if not isinstance(geom, trimesh.Trimesh) or len(geom.faces) == 0:
                continue
            v = np.asarray(geom.vertices, dtype=np.float64)
            v = v @ np.asarray(transform)[:3, :3].T + np.asarray(transform)[:3, 3]
            if geometry_name not in names:
                names.append(geometry_name)
            vs.append(v)
            fs.append(np.asarray(geom.faces, dtype=np.int64) + offset)
            gs.append(np.full(len(geom.faces), names.index(geometry_name), dtype=np.int64))
            offset += len(v)
        if not fs:
            n = sum(len(getattr(g, "vertices", ())) for g in loaded.geometry.values())
            return np.zeros((n, 3)), np.zeros((0, 3), np.int64), np.zeros(0, np.int64), ()
        return np.concatenate(vs), np.concatenate(fs), np.concatenate(gs), tuple(names)
    if not isinstance(loaded, trimesh.Trimesh):
        n = len(getattr(loaded, "vertices", ()))
        return np.zeros((n, 3)), np.zeros((0, 3), np.int64), np.zeros(0, np.int64), ()
    faces = np.asarray(loaded.faces, dtype=np.int64).reshape(-1, 3)
    return (np.asarray(loaded.vertices, dtype=np.float64).reshape(-1, 3), faces,
            np.full(len(faces), -1, dtype=np.int64), ())


def _read_step(path: str):
    """A STEP file's solids as triangles in metres, one face group per body: OpenCASCADE (cascadio)
    tessellates the B-rep into a GLB in a scratch folder, read back as any GLB. Single-threaded,
    so the triangles, and the asset built on them, do not depend on the machine's thread count."""
    import cascadio       # ImportError: the caller names the package and the extra

    from fieldgen.meshing.process import scratch_folder

    with scratch_folder("fieldgen-step-") as folder:
        glb = os.path.join(folder, "part.glb")
        log = os.path.join(folder, "opencascade.log")
        # OpenCASCADE and cascadio report on the process's standard output and error, where
        # stdout carries only the report (docs/model.md §1.5): to a file, and into the error if
        # the reading fails.
        with _standard_output_to(log):
            status = cascadio.step_to_glb(str(path), glb, tol_linear=STEP_LINEAR_DEFLECTION,
                                          tol_angular=STEP_ANGULAR_DEFLECTION, tol_relative=False,
                                          merge_primitives=True, use_parallel=False)
        if status != 0 or not os.path.isfile(glb):
            with open(log, "rb") as handle:
                said = re.sub(r"\x1b\[[0-9;]*m|\*{4}", "", handle.read().decode("utf-8", "replace"))
            said = " ".join(said.split())
            raise ValueError("OpenCASCADE could not read it as STEP" + (f": {said[:300]}" if said else ""))
        return _read_with_trimesh(glb)


@contextmanager
def _standard_output_to(path: str) -> Iterator[None]:
    """File descriptors 1 and 2 (what a C++ library prints) into ``path`` for the block; those
    that are not open are left alone. One block at a time: the descriptors are the process's."""
    with _DESCRIPTORS:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, OSError, ValueError):   # None, closed or not a file
                pass
        saved = {}
        try:
            with open(path, "wb") as sink:
                for descriptor in (1, 2):
                    try:
                        saved[descriptor] = os.dup(descriptor)
                    except OSError:         # not open: nothing to keep quiet there
                        continue
                    os.dup2(sink.fileno(), descriptor)
                yield
        finally:
            for descriptor, copy in saved.items():
                os.dup2(copy, descriptor)
                os.close(copy)


#: Volume-mesh formats (FEM meshes), read with meshio: their triangle cells, if any, are the surface.
MESHIO_SUFFIXES = (".vtk", ".vtu", ".msh", ".mesh", ".inp", ".xdmf")


def _read_with_meshio(path: str):
    """The triangle cells of a volume-mesh file (none for a pure tet mesh), unprocessed.

    meshio's own ``read`` prints why each candidate format failed and then calls ``sys.exit``;
    its readers are called here one by one instead (``meshio._helpers``, unchanged through
    meshio 5, which pyproject.toml pins), so nothing is printed and the reasons go into the error."""
    from meshio._helpers import _filetypes_from_path, reader_map

    reasons = []
    for kind in _filetypes_from_path(Path(path)):
        try:
            mesh = reader_map[kind](path)
            break
        except ImportError:
            raise                    # a reader's optional package (h5py for XDMF): said as such
        except Exception as error:    # meshio.ReadError, or whatever else a reader meets
            reasons.append(f"as {kind}: {str(error) or type(error).__name__}")
    else:
        raise ValueError("; ".join(reasons) or "no meshio reader for this suffix")
    points = np.asarray(mesh.points, dtype=np.float64)
    if points.ndim != 2 or points.shape[1] not in (2, 3):
        raise ValueError(f"its points are {points.shape[1:] or 'scalars'}, not 3-D coordinates")
    if points.shape[1] == 2:                 # a flat mesh: z = 0, which the closed-surface check refuses
        points = np.column_stack([points, np.zeros(len(points))])
    blocks = []
    for block in mesh.cells:     # triangles; quads and polygons as fans from their first corner
        data = np.asarray(block.data, dtype=np.int64)
        if (block.type in ("triangle", "quad") or block.type.startswith("polygon")) and data.ndim == 2:
            blocks += [data[:, [0, k, k + 1]] for k in range(1, data.shape[1] - 1)]
    faces = np.concatenate(blocks) if blocks else np.zeros((0, 3), np.int64)
    return points, faces, np.full(len(faces), -1, dtype=np.int64), ()


def _missing_reader(path: str, suffix: str, error: ImportError) -> InputError:
    """trimesh and meshio know more formats than fieldgen installs readers for (3MF: lxml;
    COLLADA: pycollada; XDMF: h5py), and STEP needs the optional extra ``step`` (cascadio): the
    error names the package and how to install it."""
    named = re.findall(r"No module named '([^']+)'|pip install (\S+?)`?$", str(error))
    package = getattr(error, "name", None) or ("".join(named[0]) if named else "one fieldgen lacks")
    if suffix in STEP_SUFFIXES:
        from fieldgen.install import install_hint

        return InputError(
            f"is a CAD (STEP) file: reading it needs the Python package {package!r}, which the optional "
            "extra 'step' installs", path=path,
            fix=f"Install it with {install_hint('step')}; or export the part from its source as a "
                f"surface mesh ({SURFACE_FORMATS})")
    return InputError(
        f"is a {suffix} file: reading it needs the Python package {package!r}, which fieldgen does not install",
        path=path, fix=f"Export the part from its source as a surface mesh ({SURFACE_FORMATS}); "
                       f"or install {package!r} into fieldgen's environment")


def _refuse_asset(path: str) -> None:
    """A fieldgen asset given where a surface is wanted: name the surface it was built from."""
    from fieldgen.io.asset import read_metadata

    try:
        source = read_metadata(path).get("source") or {}
    except InputError:
        return                                   # not an asset: read it as any .vtu
    raise InputError("is a fieldgen asset (tets with a pressure field), not a surface mesh", path=path,
                     fix=f"Give the surface it was built from ({source.get('file', 'its source')}, "
                         f"units {source.get('units', 'm')!r})")


def read_triangles(path, data: bytes | None = None, units: str = "m"):
    """Raw ``(vertices, faces, face_groups, group_names)`` of a surface file, unrepaired, with
    the vertices as the file gives them, taken to be in ``units``. A STEP file names its own unit:
    its vertices are converted into ``units`` (docs/model.md §1.2), so that scaling by ``units``
    gives metres for every format alike.

    Raises InputError when the file is missing or cannot be read as triangles.
    """
    path = str(path)
    if data is None:
        data = _read_bytes(path)
    suffix = Path(path).suffix.lower()
    try:
        if suffix == ".obj":
            return _read_obj(data.decode("utf-8", errors="replace"))
        if suffix == ".stl":
            return _read_stl(path, data)
        if suffix == ".vtu":
            _refuse_asset(path)
        try:
            if suffix in STEP_SUFFIXES:
                vertices, faces, groups, names = _read_step(path)
                return vertices / UNIT_SCALE[units], faces, groups, names
            return _read_with_meshio(path) if suffix in MESHIO_SUFFIXES else _read_with_trimesh(path)
        except ImportError as error:          # only a library's reader: fieldgen's own imports are not here
            raise _missing_reader(path, suffix, error) from None
    except (ValueError, IndexError, KeyError, TypeError, NotImplementedError, OSError) as error:
        if suffix in STEP_SUFFIXES:
            raise InputError(f"cannot be read as a STEP file ({error})", path=path,
                             fix="Export the part again from its CAD tool as STEP (AP203 or AP214), or as a "
                                 f"surface mesh ({SURFACE_FORMATS})") from error
        raise InputError(
            f"cannot be read as a {suffix.lstrip('.') or 'surface'} mesh ({error})",
            path=path, fix=f"Give a surface mesh file: {SURFACE_FORMATS}") from error


def _read_bytes(path: str) -> bytes:
    if not os.path.isfile(path):
        raise InputError("file not found", path=path,
                         fix="Check the path (relative paths are taken from the current folder)")
    with open(path, "rb") as handle:
        return handle.read()


# --------------------------------------------------------------------------- repair

def merge_close_vertices(vertices: np.ndarray, faces: np.ndarray, tolerance: float):
    """Merge vertices closer than ``tolerance`` (seams, STL's per-face copies).

    Returns ``(vertices, faces, merged)``: only referenced vertices are kept, each
    cluster takes the position of its lowest-index member, ``merged`` counts the
    referenced vertices that disappeared.
    """
    used = np.unique(faces)
    pts = vertices[used]
    pairs = cKDTree(pts).query_pairs(r=tolerance, output_type="ndarray") if tolerance > 0 \
        else np.zeros((0, 2), dtype=np.int64)
    graph = sparse.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])),
                              shape=(len(pts), len(pts)))
    n, label = csgraph.connected_components(graph, directed=False)
    # Renumber clusters in order of their lowest member, so the output is stable.
    first = np.full(n, len(pts))
    np.minimum.at(first, label, np.arange(len(pts)))
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(n)
    new_index = np.full(len(vertices), -1, dtype=np.int64)
    new_index[used] = rank[label]
    merged_vertices = pts[np.sort(first)]
    return merged_vertices, new_index[faces], len(pts) - n


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
    if len(faces) == 0:
        return vertices, faces, face_groups, tuple(repairs)

    # Compact vertices again (removals can orphan some).
    used = np.unique(faces)
    if len(used) < len(vertices):
        remap = np.full(len(vertices), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        vertices, faces = vertices[used], remap[faces]

    f, g, same = _face_pairs_across_edges(faces)
    flip, _ = _consistent_flips(len(faces), f, g, same)
    oriented = np.where(flip[:, None], faces[:, [0, 2, 1]], faces)
    n_comp, labels = _components(len(faces), f, g)
    _, edge_id, _, _, counts = _edge_table(faces)
    closed = _closed_components(faces, labels, n_comp,
                                (counts[edge_id] == 2).reshape(-1, 3).all(axis=1))
    # Every piece positive on its own, then cavities (odd nesting depth) turned inward.
    sign = np.ones(n_comp)
    for c in range(n_comp):
        if signed_volume(vertices, oriented[labels == c]) < 0:
            sign[c] = -1.0
    comp_flip = sign < 0
    closed_ids = np.flatnonzero(closed)
    if len(closed_ids) > 1:
        pieces = {c: np.where(comp_flip[c], oriented[labels == c][:, [0, 2, 1]],
                              oriented[labels == c]) for c in closed_ids}
        probes = np.stack([vertices[pieces[c][0, 0]] for c in closed_ids])
        depth = np.zeros(len(closed_ids), dtype=np.int64)
        for c in closed_ids:
            inside = np.abs(winding_numbers(vertices, pieces[c], probes)) > 0.5
            inside[closed_ids == c] = False
            depth += inside
        comp_flip[closed_ids[depth % 2 == 1]] ^= True
    final_flip = flip ^ comp_flip[labels]
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


# --------------------------------------------------------------------------- loading

def _describe(defects: SurfaceDefects, diag: float, units: str) -> tuple[str, bool]:
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


def load_surface(path, units: str = "m", *, role: str = "surface",
                 require_closed: bool = True) -> Surface:
    """Read, repair and check a closed surface; return it in metres.

    ``role`` ("surface" or "core") names the input in messages. With
    ``require_closed=False`` (the --robust path) open, non-manifold or self-intersecting
    input is repaired as far as is safe and returned instead of refused.
    Raises InputError for unreadable, empty, open, non-manifold, self-intersecting or
    zero-volume input; OptionError for unknown units.
    """
    length_scale(units)
    path_text = str(path)
    data = _read_bytes(path_text)
    sha = hashlib.sha256(data).hexdigest()
    vertices, faces, groups, names = read_triangles(path_text, data, units)
    if len(faces) == 0 and len(vertices) == 0:
        suffix = os.path.splitext(path_text)[1].lower() or "mesh"
        raise InputError(
            f"no mesh could be read from the {role} file (0 vertices, 0 faces): it is empty, cut short "
            f"or not {suffix} data",
            path=path_text,
            fix=f"Give a triangle surface mesh ({SURFACE_FORMATS}); export it again from its source")
    if len(faces) == 0:
        raise InputError(
            f"the {role} file contains no triangles ({len(vertices):,} vertices, 0 faces)",
            path=path_text,
            fix=f"Give a triangle surface mesh ({SURFACE_FORMATS}); a tetrahedral volume "
                "mesh such as .vtk is not a surface")
    bad = ~np.isfinite(vertices).all(axis=1)
    if bad[np.unique(faces)].any():
        raise InputError(f"{int(bad.sum()):,} vertices have non-finite coordinates",
                         path=path_text, fix="Re-export the mesh from its CAD source")
    vertices, faces, groups, repairs = repair_surface(vertices, faces, groups)
    if len(faces) == 0:
        raise InputError(f"the {role} has no faces left after removing degenerate ones "
                         f"({'; '.join(repairs)})", path=path_text,
                         fix="Export the part as a solid with non-zero size")
    span = vertices.max(axis=0) - vertices.min(axis=0)
    diag = float(np.linalg.norm(span))
    defects = surface_defects(vertices, faces, check_intersections=require_closed)
    if require_closed and not defects.ok:
        defect, robust = _describe(defects, diag, units)
        fix = "Export a closed solid from the CAD source"
        if robust:
            fix = ("Repair it in a mesh editor (close holes, remove overlapping or "
                   f"intersecting faces) and export a closed solid, {robust_fix()}")
        else:
            fix = "Export the part as a closed solid with thickness, not a sheet"
        raise InputError(f"the {role} cannot bound a volume: {defect}", path=path_text, fix=fix)

    vertices = vertices * UNIT_SCALE[units]
    for array in (vertices, faces, groups):
        array.setflags(write=False)
    return Surface(vertices=vertices, faces=faces, face_groups=groups, group_names=names,
                   path=path_text, sha256=sha, units=units, repairs=repairs)


# --------------------------------------------------------------------------- core

def check_core_inside(outer: Surface, core: Surface) -> None:
    """OptionError unless ``core`` lies strictly inside ``outer`` without touching it.

    The core is carved out as a hole with e = 1 on its faces (D 5.1.1); it must be a
    closed surface (``load_surface`` ensures that) inside the outer one.
    """
    fix = ("Give a core surface that lies wholly inside the outer surface with material "
           "all around it (check both use the same units and origin)")
    vertices = np.concatenate([outer.vertices, core.vertices])
    core_faces = core.faces + len(outer.vertices)
    crossing = intersecting_face_pairs(vertices, outer.faces, core_faces)
    if len(crossing):
        raise OptionError(f"the core {core.path} crosses or touches the outer surface: "
                          f"{len(crossing):,} pairs of faces meet", path=outer.path, fix=fix)
    # No crossings: every closed piece of the core is wholly inside or wholly outside.
    f, g, _ = _face_pairs_across_edges(core.faces)
    n_comp, labels = _components(len(core.faces), f, g)
    probes = core.vertices[core.faces[np.unique(labels, return_index=True)[1], 0]]
    inside = winding_numbers(outer.vertices, outer.faces, probes) > 0.5
    if not inside.all():
        lo, hi = outer.bounds / UNIT_SCALE[outer.units]
        raise OptionError(
            f"the core {core.path} is not inside the outer surface: "
            f"{int((~inside).sum()):,} of its {n_comp:,} pieces lie outside "
            f"(the outer surface spans {_box_text(lo, hi, outer.units)})",
            path=outer.path, fix=fix)
    if core.volume >= outer.volume:
        raise OptionError(f"the core {core.path} is not smaller than the outer surface "
                          f"({core.volume:.3g} m^3 vs {outer.volume:.3g} m^3)",
                          path=outer.path, fix=fix)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _box_text(lo, hi, units: str) -> str:
    return ", ".join(f"{axis} {a:.6g}..{b:.6g}" for axis, a, b in zip("xyz", lo, hi)) \
        + f" {units}"
