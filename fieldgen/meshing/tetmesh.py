"""The tetrahedral mesh that flows between stages, and small pure geometry functions over it.

Conventions (every module relies on them):
- ``points`` (n, 3) float64 in metres; ``tets`` (t, 4) int64, positively oriented in VTK
  order: ``det[p1 - p0, p2 - p0, p3 - p0] > 0``.
- ``boundary_faces`` (f, 3) int64, wound so the normal points out of the volume;
  ``boundary_markers`` (f,) int64 holds the boundary condition of each face (the
  ``FREE``/``RIGID``/``INSULATED`` codes below).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

# Boundary condition codes carried by boundary faces (docs/model.md §2.2).
FREE = 1        #: contacting surface, e = 0 (Dirichlet)
RIGID = 2       #: glued to a rigid core or backing, e = 1 (Dirichlet)
INSULATED = 3   #: zero flux, de/dn = 0 (natural)

CONDITION_NAMES = {FREE: "free", RIGID: "rigid", INSULATED: "insulated"}


@dataclass
class TetMesh:
    """A tetrahedral mesh with the boundary condition of each boundary face."""

    points: np.ndarray
    tets: np.ndarray
    boundary_faces: np.ndarray
    boundary_markers: np.ndarray
    #: TetGen made it with -M, its nearly coplanar facets not merged (fieldgen.meshing.tetgen.moved_off):
    #: the mesher's record of switches says so
    unmerged: bool = False
    #: TetGen's merge moved the boundary this far from the surface (m; at least this far), yet this
    #: merged mesh was kept, for ``merged_kept`` (the mesh without the merge too large, or failed)
    merged_off: float = 0.0
    merged_kept: str = ""

    @property
    def n_points(self) -> int:
        return int(self.points.shape[0])

    @property
    def n_tets(self) -> int:
        return int(self.tets.shape[0])

    def vertices_with(self, condition: int) -> np.ndarray:
        """Sorted indices of the vertices on boundary faces carrying ``condition``."""
        faces = self.boundary_faces[self.boundary_markers == condition]
        return np.unique(faces.ravel())


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross product of (t, 3) arrays: the same products and differences as ``np.cross``
    (bit-identical), about twice as fast at a million rows (no axis moves, no temporaries of
    the whole product)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    np.subtract(a[:, 1] * b[:, 2], a[:, 2] * b[:, 1], out=out[:, 0])
    np.subtract(a[:, 2] * b[:, 0], a[:, 0] * b[:, 2], out=out[:, 1])
    np.subtract(a[:, 0] * b[:, 1], a[:, 1] * b[:, 0], out=out[:, 2])
    return out


def tet_volumes(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volume of each tet (positive for VTK orientation)."""
    p = points[tets]
    a, b, c = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]
    return np.einsum("ij,ij->i", a, cross(b, c)) / 6.0


def orient_positive(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Return ``tets`` with the last two vertices swapped where the volume is negative."""
    tets = np.array(tets, dtype=np.int64, copy=True)
    negative = tet_volumes(points, tets) < 0
    tets[negative, 2], tets[negative, 3] = tets[negative, 3], tets[negative, 2].copy()
    return tets


def hat_gradients(points: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradients (t, 4, 3) of the four P1 hat functions of each tet, and 6 x its signed volume (t,).

    With edges e_k = p_k - p_0: grad λ_1 = e_2×e_3 / det, grad λ_2 = e_3×e_1 / det,
    grad λ_3 = e_1×e_2 / det, grad λ_0 = -(sum of the others), det = e_1·(e_2×e_3) (D 5.0.1):
    the cross products and det are :func:`p1_geometry`'s.
    """
    c1, c2, c3, det = p1_geometry(points, tets)
    grad = np.empty((len(tets), 4, 3))
    grad[:, 1], grad[:, 2], grad[:, 3] = c1, c2, c3
    grad[:, 0] = -(grad[:, 1] + grad[:, 2] + grad[:, 3])
    with np.errstate(divide="ignore", invalid="ignore"):
        grad /= det[:, None, None]
    return grad, det


def p1_geometry(points: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, ...]:
    """What :func:`p1_gradients` needs of the mesh alone: with edges e_k = p_k - p_0, the cross
    products e_2×e_3, e_3×e_1, e_1×e_2 (t, 3) and det = e_1·(e_2×e_3) (t,). Computed once, it
    serves any number of fields on the same mesh (the build computes it during the extent solve)."""
    p = points[tets]
    e1, e2, e3 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0], p[:, 3] - p[:, 0]
    c1, c2, c3 = cross(e2, e3), cross(e3, e1), cross(e1, e2)
    return c1, c2, c3, np.einsum("ij,ij->i", e1, c1)


def p1_gradients(points: np.ndarray, tets: np.ndarray, values: np.ndarray,
                 geometry: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """Gradient (t, 3) of the piecewise-linear interpolant of vertex ``values`` in each tet (D 5.0.1).

    ``values`` (n, k) gives (t, 3, k). Closed form through :func:`hat_gradients` (cross products
    over the determinant): 0.3 s at 1M tets where a batched ``np.linalg.solve`` took 0.5 s.
    ``geometry``: :func:`p1_geometry` of these points and tets, when the caller has it (the
    result is the same to the bit).
    """
    values = np.asarray(values, dtype=np.float64)
    c1, c2, c3, det = p1_geometry(points, tets) if geometry is None else geometry
    dv = values[tets[:, 1:]] - values[tets[:, :1]]   # (t, 3) or (t, 3, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        if dv.ndim == 2:
            grad = dv[:, 0, None] * c1 + dv[:, 1, None] * c2 + dv[:, 2, None] * c3
            return grad / det[:, None]
        grad = (c1[:, :, None] * dv[:, None, 0] + c2[:, :, None] * dv[:, None, 1]
                + c3[:, :, None] * dv[:, None, 2])
        return grad / det[:, None, None]


def tet_barycentric(corners: np.ndarray, query: np.ndarray, index: np.ndarray | None = None) -> np.ndarray:
    """Barycentric coordinates (..., m, 4) of points ``query`` (..., m, 3) in the tets whose
    corners are ``corners`` (..., 4, 3); the leading axes broadcast (one tet against many points,
    or each point against its own tet with m = 1). With ``index`` (integers), the tets are
    ``corners[index]``, gathered here into one copy that is also the edges' workspace (96 bytes a
    tet, a large batch's largest temporary): the caller holds no copy of its own, and its
    ``corners`` are never written.

    With edges e_k = p_k - p_0, the last three weights solve [e_1 e_2 e_3] λ = q - p_0 (one LU
    solve per tet, all of its m points as right-hand sides); the first is 1 minus their sum. The
    weights reconstruct the point (Σ λ_i p_i = q) and sum to 1, to rounding; a point outside the
    tet has a negative weight. A degenerate tet (its edge matrix's determinant 0, also when the
    determinant underflows) gives NaN weights for every point, never an error."""
    corners = np.asarray(corners, dtype=np.float64)
    if index is None:
        origin = corners[..., :1, :]                                            # (..., 1, 3)
        edges = corners[..., 1:, :] - origin
    else:
        gathered = np.take(corners, np.asarray(index, dtype=np.intp), axis=0)  # a copy, whatever the index
        origin, edges = gathered[..., :1, :], gathered[..., 1:, :]
        edges -= origin                                   # in the copy: the caller's corners stay
    edges = np.swapaxes(edges, -1, -2)                             # (..., 3, 3), columns e_1 e_2 e_3
    flat = np.abs(np.linalg.det(edges)) <= 0.0
    edges[flat] = np.eye(3)
    local = np.linalg.solve(edges, np.swapaxes(np.asarray(query, dtype=np.float64) - origin, -1, -2))
    del edges, origin                                # the callers' batches are large: free them early
    local = np.swapaxes(local, -1, -2)                                          # (..., m, 3)
    local[np.broadcast_to(flat[..., None], local.shape[:-1])] = np.nan
    return np.concatenate([1.0 - local.sum(axis=-1, keepdims=True), local], axis=-1)


def min_dihedral_angles(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Smallest interior dihedral angle of each tet, in degrees.

    The angle between faces i and j is arccos(-n_i·n_j) for unit outward normals; arccos falls
    monotonically, so the smallest angle is arccos of the largest cosine (one arccos per tet).
    """
    p = points[tets]
    # Outward-ish face normals: face i is opposite vertex i.
    faces = ((1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1))
    normals = np.empty((len(tets), 4, 3))
    for i, (a, b, c) in enumerate(faces):
        n = np.cross(p[:, b] - p[:, a], p[:, c] - p[:, a])
        normals[:, i] = n / np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    largest = np.full(len(tets), -np.inf)
    for i in range(4):
        for j in range(i + 1, 4):
            np.maximum(largest, -np.einsum("ij,ij->i", normals[:, i], normals[:, j]), out=largest)
    return np.degrees(np.arccos(np.clip(largest, -1.0, 1.0)))


#: A tet's six edges as pairs of local vertex indices; every module that walks edges uses this
#: order (the red refinement's midpoint slots follow it).
TET_EDGES = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])


def mesh_edges(tets: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The unique edges of ``tets`` over ``n`` points (sorted pairs, lexicographic) and each tet's
    six edge ids (rows of the first, in ``TET_EDGES`` order)."""
    pairs = np.sort(np.asarray(tets)[:, TET_EDGES], axis=2)              # (t, 6, 2)
    keys = pairs[..., 0] * n + pairs[..., 1]
    unique, inverse = np.unique(keys.ravel(), return_inverse=True)
    return np.stack([unique // n, unique % n], axis=1), inverse.reshape(-1, 6)


def boundary_faces_of(tets: np.ndarray) -> np.ndarray:
    """Faces used by exactly one tet, wound outward (for positively oriented tets).

    Returned in a deterministic order (sorted by their sorted vertex triple). The triples are
    sorted as one int64 key ``(a·n + b)·n + c`` when n < 2**21 (0.4 s at 1M tets, where
    ``lexsort`` on three columns took 3 s and ``np.unique(axis=0)`` ~10 s); the same order.
    """
    # Face i opposite vertex i, wound so its normal points away from vertex i.
    local = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])
    tets = np.asarray(tets, dtype=np.int64)
    faces = tets[:, local].reshape(-1, 3)
    key = np.sort(faces, axis=1)
    n = int(tets.max()) + 1 if tets.size else 0
    if n < 2 ** 21:
        packed = (key[:, 0] * n + key[:, 1]) * n + key[:, 2]
        order = np.argsort(packed)  # equal keys are removed below, so ties need no stable order
        ordered = packed[order]
        same = ordered[1:] == ordered[:-1]
    else:
        order = np.lexsort(key.T[::-1])
        ordered = key[order]
        same = np.all(ordered[1:] == ordered[:-1], axis=1)
    shared = np.zeros(len(ordered), dtype=bool)
    shared[1:] |= same
    shared[:-1] |= same
    return faces[order[~shared]]


_FACE_RECORD = np.dtype([("a", np.int64), ("b", np.int64), ("c", np.int64)])


def face_keys(faces: np.ndarray, n: int, limit: int = 2 ** 21) -> np.ndarray:
    """One sortable key per triangle of vertex ids below ``n``, whatever its vertex order.

    An int64 ``(a·n + b)·n + c`` of the sorted triple when ``n < limit`` (fast); otherwise a record
    of the sorted triple, which sorts, compares and searches the same way.
    """
    s = np.sort(np.asarray(faces, dtype=np.int64).reshape(-1, 3), axis=1)
    if n < limit:
        return (s[:, 0] * n + s[:, 1]) * n + s[:, 2]
    return np.ascontiguousarray(s).view(_FACE_RECORD).ravel()


def find_faces(faces: np.ndarray, known: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``faces``: whether it is one of ``known`` (any vertex order) and its row there
    (meaningful where found; the first such row if ``known`` repeats a face). Vertex ids < ``n``."""
    keys, known_keys = face_keys(faces, n), face_keys(known, n)
    if not len(known_keys):
        return np.zeros(len(keys), dtype=bool), np.zeros(len(keys), dtype=np.int64)
    order = np.argsort(known_keys, kind="stable")
    position = np.clip(np.searchsorted(known_keys[order], keys), 0, len(order) - 1)
    return known_keys[order][position] == keys, order[position]


def box_grid(xs, ys, zs) -> tuple[np.ndarray, np.ndarray]:
    """Structured tet mesh of the box xs x ys x zs (coordinates may be graded).

    Every cell is split into the 6 Kuhn tets around its main diagonal, so neighbouring cells
    share faces (conforming). Returns (points, VTK-positive tets). Used for closed-form
    fields (slabs, cubes) in examples, scenes and tests.
    """
    xs, ys, zs = (np.asarray(c, dtype=np.float64) for c in (xs, ys, zs))
    X, Y, Z = np.meshgrid(xs, ys, zs, indexing="ij")
    points = np.stack([X.ravel(), Y.ravel(), Z.ravel()], axis=1)
    index = np.arange(points.shape[0]).reshape(len(xs), len(ys), len(zs))
    i, j, k = (a.ravel() for a in np.meshgrid(np.arange(len(xs) - 1), np.arange(len(ys) - 1),
                                              np.arange(len(zs) - 1), indexing="ij"))
    tets = []
    for perm in itertools.permutations(range(3)):
        corner = np.zeros(3, int)
        path = [corner.copy()]
        for axis in perm:
            corner[axis] = 1
            path.append(corner.copy())
        tets.append(np.stack([index[i + c[0], j + c[1], k + c[2]] for c in path], axis=1))
    return points, orient_positive(points, np.concatenate(tets, axis=0))


def row_counts(flags: np.ndarray) -> np.ndarray:
    """Number of True entries in each row of a (t, 4) bool array.

    numpy's per-row reductions over 4 columns are slow, and this is called many times per
    refinement; read as one uint32 per row, one multiply sums the four 0/1 bytes into the top
    byte (no carries: the sum is at most 4), whatever the byte order.
    """
    words = np.ascontiguousarray(flags, dtype=np.bool_).view(np.uint32).ravel()
    return (words * np.uint32(0x01010101)) >> np.uint32(24)


def zero_tets(mesh: TetMesh) -> np.ndarray:
    """Indices of tets whose four vertices all lie on FREE faces (e = 0 on the whole tet)."""
    on_free = np.zeros(mesh.n_points, dtype=bool)
    on_free[mesh.vertices_with(FREE)] = True
    return np.flatnonzero(row_counts(on_free[mesh.tets]) == 4)
