"""Refinement of a tet mesh by conforming splits: the zero-pressure tets lifted
(:func:`refine_zero_tets`), edges split at their midpoints (:func:`split_edges`) and tets
bisected (:func:`bisected`), each keeping every boundary face's condition (docs/model.md §2.2).

A tet whose four vertices are at e = 0 carries e = 0 everywhere and punches a hole in the
pressure field; a vertex shared by a FREE and a RIGID face counts as FREE.
"""

from __future__ import annotations

import logging

import numpy as np

from fieldgen.errors import BuildError, InputError
from fieldgen.fe.extent import unreached_tets
from fieldgen.meshing.ftetwild import classify_boundary
from fieldgen.meshing.tetmesh import (
    FREE,
    RIGID,
    TET_EDGES,
    TetMesh,
    boundary_faces_of,
    face_keys,
    find_faces,
    orient_positive,
    row_counts,
    tet_volumes,
)
from fieldgen.surface.components import components

# Local faces of a tet (vertex indices 0..3).
_TET_FACES = np.array([(1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)])


def _split_edges(points, tets, edges):
    """Split each edge (k, 2; sorted pairs) at its midpoint in every tet containing it (edge stars
    must be disjoint: a tet holds at most one of the edges)."""
    n = len(points)
    new_points = 0.5 * (points[edges[:, 0]] + points[edges[:, 1]])
    t_idx, local, which = _edge_hits(tets, edges[:, 0] * n + edges[:, 1], n)
    midpoint = n + which
    a_local, b_local = TET_EDGES[local, 0], TET_EDGES[local, 1]
    first = tets[t_idx].copy()
    second = tets[t_idx].copy()
    first[np.arange(len(t_idx)), b_local] = midpoint           # keeps a, replaces b
    second[np.arange(len(t_idx)), a_local] = midpoint          # keeps b, replaces a
    keep = np.ones(len(tets), dtype=bool)
    keep[t_idx] = False
    return np.vstack([points, new_points]), np.vstack([tets[keep], first, second])


def _edge_hits(tets, keys, n):
    """Where the edges ``keys`` (unique keys ``a * n + b`` of sorted pairs, a < b) lie in
    ``tets``: for each occurrence, the tet, its local edge (row of ``TET_EDGES``) and the index
    of the key, in tet order. Only tets holding two endpoints of the edges can contain one, so
    keys are formed for those few (forming the keys of every tet each round is slow)."""
    keys = np.asarray(keys, dtype=np.int64)
    candidates = _tets_touching(tets, np.stack([keys // n, keys % n], axis=1), n)
    pairs = np.sort(tets[candidates][:, TET_EDGES], axis=2)           # (c, 6, 2)
    tet_keys = pairs[..., 0] * n + pairs[..., 1]                         # (c, 6)
    order = np.argsort(keys)
    pos = np.clip(np.searchsorted(keys[order], tet_keys), 0, len(keys) - 1)
    c_idx, local = np.nonzero(keys[order][pos] == tet_keys)
    return candidates[c_idx], local, order[pos[c_idx, local]]


def _independent_edges(tets, keys, rank, n) -> np.ndarray:
    """Which of the edges ``keys`` (unique keys ``a * n + b`` of sorted pairs) no tet holds
    together with an edge of smaller ``rank`` (unique integers): an independent set, so each tet
    is split at most once in a round, and never empty (the smallest rank is always in it)."""
    t_idx, _, which = _edge_hits(tets, keys, n)
    ranks = np.asarray(rank, dtype=np.int64)[which]
    best = np.full(len(tets), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(best, t_idx, ranks)
    take = np.ones(len(keys), dtype=bool)
    take[which[ranks != best[t_idx]]] = False
    return take


def split_edges(mesh: TetMesh, edges: np.ndarray, priority: np.ndarray | None = None) -> TetMesh:
    """``mesh`` with each of ``edges`` (k, 2) split at its midpoint in every tet around it: conforming
    by construction, and every other edge kept. Each round splits the edges that rank highest by
    ``priority`` (ties: the smaller vertex pair) in every tet around them, so a tet is split at
    most once per round and a steep direction goes first; rounds continue until every edge is
    split. A boundary face that is split passes its condition to its two halves
    (:func:`_carried_markers`)."""
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    pairs = np.unique(np.sort(np.asarray(edges, dtype=np.int64).reshape(-1, 2), axis=1), axis=0, return_index=True)
    pairs, first = pairs
    priority = np.zeros(len(pairs)) if priority is None else np.asarray(priority, dtype=np.float64)[first]
    n = len(points)
    known = np.unique(np.sort(tets[:, TET_EDGES], axis=2).reshape(-1, 2) @ np.array([n, 1]))
    keys = pairs @ np.array([n, 1])
    if len(keys) and not np.isin(keys, known).all():
        raise BuildError("split_edges was given a pair of vertices that is not an edge of the mesh",
                         fix="this is a fieldgen bug: report it with the input")
    rank = np.empty(len(pairs), dtype=np.int64)
    rank[np.lexsort((keys, -priority))] = np.arange(len(pairs))
    while len(pairs):
        n = len(points)
        take = _independent_edges(tets, pairs @ np.array([n, 1]), rank, n)
        points, tets = _split_edges(points, tets, pairs[take])
        pairs, rank = pairs[~take], rank[~take]
    faces, markers = _carried_markers(mesh, points, tets)
    return TetMesh(points=points, tets=tets, boundary_faces=faces, boundary_markers=markers)


def _tets_touching(tets, edges, n):
    """Sorted indices of the tets holding at least two endpoints of ``edges`` (a superset of the
    tets containing one of the edges)."""
    ends = np.zeros(n, dtype=bool)
    ends[np.asarray(edges).ravel()] = True
    return np.flatnonzero(row_counts(ends[tets]) >= 2)


def _split_faces(points, tets, faces):
    """Split each face (k, 3) at its centroid in every tet holding it (no tet may hold two).

    Each owner tet becomes three: the centroid replaces one face vertex in each piece.
    """
    n = len(points)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    keys = face_keys(faces, n)
    order = np.argsort(keys, kind="stable")
    ends = np.zeros(n, dtype=bool)
    ends[faces.ravel()] = True
    candidates = np.flatnonzero(row_counts(ends[tets]) >= 3)
    tet_keys = face_keys(tets[candidates][:, _TET_FACES].reshape(-1, 3), n).reshape(-1, 4)
    pos = np.clip(np.searchsorted(keys[order], tet_keys), 0, len(keys) - 1)
    hit = keys[order][pos] == tet_keys
    c_idx, local = np.nonzero(hit)
    owners = candidates[c_idx]
    centre = n + order[pos[c_idx, local]]
    pieces = np.repeat(tets[owners], 3, axis=0)
    pieces[np.arange(len(pieces)), _TET_FACES[local].ravel()] = np.repeat(centre, 3)
    keep = np.ones(len(tets), dtype=bool)
    keep[owners] = False
    return np.vstack([points, points[faces].mean(axis=1)]), np.vstack([tets[keep], pieces])


def _independent_faces(tets, faces, n):
    """The rows of ``faces`` (k, 3; unique sorted triples) to split in one round: a face is kept
    unless a tet around it holds a chosen face of lower row, so no tet holds two."""
    chosen_keys = face_keys(faces, n)
    ends = np.zeros(n, dtype=bool)
    ends[faces.ravel()] = True
    near = tets[np.flatnonzero(row_counts(ends[tets]) >= 3)]
    near_keys = face_keys(near[:, _TET_FACES].reshape(-1, 3), n).reshape(-1, 4)
    rank_order = np.argsort(chosen_keys, kind="stable")
    pos = np.clip(np.searchsorted(chosen_keys[rank_order], near_keys), 0, len(chosen_keys) - 1)
    hit = chosen_keys[rank_order][pos] == near_keys
    rank = np.where(hit, rank_order[pos], np.iinfo(np.int64).max)
    lowest = rank.min(axis=1)
    t_idx, local = np.nonzero(hit)
    blocked = np.unique(rank[t_idx, local][rank[t_idx, local] != lowest[t_idx]])
    return np.setdiff1d(np.arange(len(faces)), blocked)


def _faces_beside_lifted(tets, zero, flags, n):
    """The faces (unique sorted triples) that a tet of ``zero`` shares with a tet holding a vertex
    off e = 0 (``flags`` False): a vertex at such a face's centroid is joined to that vertex."""
    ends = np.zeros(n, dtype=bool)
    ends[tets[zero].ravel()] = True
    near = tets[row_counts(ends[tets]) >= 3]
    lifted = near[row_counts(flags[near]) < 4]
    faces = tets[zero][:, _TET_FACES].reshape(-1, 3)
    beside = np.isin(face_keys(faces, n), face_keys(lifted[:, _TET_FACES].reshape(-1, 3), n))
    return np.unique(np.sort(faces[beside], axis=1), axis=0)


def _split_corner_tets(points, tets, corner, n0, boundary_face_keys):
    """Split tets with no interior edge: one interior face each (an independent set of faces per
    round: no tet holds two of them), or the tet's centroid when all four faces are boundary."""
    local_faces = tets[corner][:, _TET_FACES]                                    # (c, 4, 3)
    keys = face_keys(local_faces.reshape(-1, 3), n0).reshape(-1, 4)
    interior = ~np.isin(keys, boundary_face_keys)
    has_face = interior.any(axis=1)
    lone = corner[~has_face]
    first = np.argmax(interior, axis=1)
    chosen_faces = np.sort(local_faces[np.arange(len(corner)), first][has_face], axis=1)
    chosen_faces = np.unique(chosen_faces, axis=0)
    if len(chosen_faces):
        accepted = _independent_faces(tets, chosen_faces, len(points))
        # Lone tets (if any) wait for the next round: their indices change here.
        return _split_faces(points, tets, chosen_faces[accepted])
    if len(lone):
        m = len(points)
        centroids = points[tets[lone]].mean(axis=1)
        pieces = np.repeat(tets[lone], 4, axis=0)
        pieces[np.arange(len(pieces)), np.tile(np.arange(4), len(lone))] = np.repeat(m + np.arange(len(lone)), 4)
        points = np.vstack([points, centroids])
        tets = np.vstack([np.delete(tets, lone, axis=0), pieces])
    return points, tets


def _star_pairs(tets: np.ndarray, keep: np.ndarray | None = None) -> np.ndarray:
    """Edges joining each tet's vertices (those ``keep`` flags, all when None) into one
    connected set: a star from the first kept vertex, at most 3 edges a tet instead of 6, with the same
    connected components as all the edges among kept vertices."""
    tets = np.asarray(tets, dtype=np.int64)
    if keep is None:
        return np.stack([np.repeat(tets[:, 0], 3), tets[:, 1:].ravel()], axis=1)
    kept = keep[tets]
    first = kept.argmax(axis=1)                                    # the first kept vertex's column
    root = tets[np.arange(len(tets)), first]
    use = kept & (np.arange(4) != first[:, None])                  # none in a tet with no kept vertex
    return np.stack([np.broadcast_to(root[:, None], tets.shape)[use], tets[use]], axis=1)


def _at_zero(n: int, tets: np.ndarray, on_free: np.ndarray, on_rigid: np.ndarray,
             reaching: np.ndarray | None = None) -> np.ndarray:
    """Vertices whose extent is 0 in every solve (docs/model.md §2.2): the FREE ones and, for the
    Laplace problem (some RIGID vertex), every vertex joined to no RIGID vertex by a path of mesh
    edges through vertices off the free surface: e at such a vertex is a weighted mean of values
    that are all 0. For the Poisson problem the source lifts every vertex off the free surface.

    ``reaching``: vertices already known to be joined to a RIGID one on an earlier mesh that this
    one refines by splitting (every old edge survives, split or whole, so a joined vertex stays
    joined); then only the tets holding another vertex off the free surface are searched."""
    flags = np.zeros(n, dtype=bool)
    flags[:len(on_free)] = on_free
    if not on_rigid.any():
        return flags
    seeds = np.zeros(n, dtype=bool)
    seeds[:len(on_rigid)] = on_rigid
    if reaching is not None:
        seeds[:len(reaching)] |= reaching
        unknown = ~flags & ~seeds
        tets = tets[unknown[tets].any(axis=1)]     # a path from an unknown vertex to a seed stays in these
    label = components(n, _star_pairs(tets, ~flags))[1]
    reaches_rigid = np.zeros(label.max() + 1, dtype=bool)
    reaches_rigid[label[np.flatnonzero(seeds)]] = True
    return flags | ~reaches_rigid[label]


def _check_every_piece_has_a_rigid_face(mesh: TetMesh, on_rigid: np.ndarray, path) -> None:
    """In the Laplace problem every separate piece of the part needs an e = 1 face: a piece without
    one has e = 0 throughout (no refinement can change that)."""
    tets = np.asarray(mesh.tets, dtype=np.int64)
    label = components(mesh.n_points, _star_pairs(tets))[1]
    used = np.unique(label[tets[:, 0]])
    held = np.unique(label[on_rigid])
    lacking = np.setdiff1d(used, held)
    if len(lacking):
        raise InputError(f"{len(lacking)} of the part's {len(used)} separate pieces have no rigid (e = 1) face "
                         "while another piece has one, so their extent would be 0 throughout", path=path,
                         fix="bond a face of every piece (--bonded SELECTOR), give each piece a core, or build "
                             "each piece as its own part")


def bisected(mesh: TetMesh, marked: np.ndarray) -> TetMesh:
    """``mesh`` with the ``marked`` tets refined by scikit-fem's conforming adaptive refinement
    (``MeshTet.refined(marked)``: bisection with closure, so neighbours are split only as far as
    conformity needs). Each new boundary face takes the condition of the old boundary face it
    lies in (:func:`fieldgen.meshing.ftetwild.classify_boundary`: the nearest one to its centroid)."""
    from skfem import MeshTet  # lazy: heavy, and only the sizing's refinement bisects

    # scikit-fem logs a warning for every intermediate mesh whose arrays it makes contiguous:
    # harmless, and it would reach the user's terminal through --quiet.
    log = logging.getLogger("skfem")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        refined = MeshTet(np.ascontiguousarray(mesh.points.T), np.ascontiguousarray(mesh.tets.T),
                          validate=False).refined(np.asarray(marked, dtype=np.int64))
    finally:
        log.setLevel(level)
    points = np.ascontiguousarray(refined.p.T, dtype=np.float64)
    tets = orient_positive(points, np.ascontiguousarray(refined.t.T, dtype=np.int64))
    if not np.array_equal(points[:mesh.n_points], mesh.points):   # pragma: no cover - skfem's layout
        raise BuildError("scikit-fem's refinement renumbered the old vertices",
                         fix="this is a fieldgen bug: report it with the scikit-fem version")
    faces, markers = _carried_markers(mesh, points, tets)
    return TetMesh(points=points, tets=tets, boundary_faces=faces, boundary_markers=markers)


def _carried_markers(mesh: TetMesh, points: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Boundary faces of ``tets``, a refinement of ``mesh`` by splitting that keeps the old
    vertices' numbers, and their conditions: a face that was already on the boundary keeps its
    own; each child of a split face takes the condition of the old face it lies in (the nearest
    to it, :func:`fieldgen.meshing.ftetwild.classify_boundary`), looked up among the split faces only (the
    search over every boundary face is much slower)."""
    faces = boundary_faces_of(tets)
    old = np.asarray(mesh.boundary_markers, dtype=np.int64)
    if len(np.unique(old)) == 1:
        return faces, np.full(len(faces), old[0], dtype=np.int64)
    old_faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    kept, row = find_faces(faces, old_faces, len(points))
    markers = np.empty(len(faces), dtype=np.int64)
    markers[kept] = old[row[kept]]
    split = ~find_faces(old_faces, faces[kept], len(points))[0]
    if np.any(~kept):
        markers[~kept] = classify_boundary(points, faces[~kept], mesh.points, old_faces[split], old[split])
    return faces, markers


def _free_and_rigid(mesh: TetMesh) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex: on a FREE face; on a RIGID face and no FREE one (FREE wins, extent.dirichlet_values)."""
    on_free = np.zeros(mesh.n_points, dtype=bool)
    on_free[mesh.vertices_with(FREE)] = True
    on_rigid = np.zeros(mesh.n_points, dtype=bool)
    on_rigid[mesh.vertices_with(RIGID)] = True
    return on_free, on_rigid & ~on_free


def _zero(tets: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Indices of the tets whose four vertices are flagged at e = 0."""
    return np.flatnonzero(row_counts(flags[tets]) == 4)


def _edges_beside_lifted(tets, zero, flags, keys, n) -> np.ndarray:
    """Which of the edges ``keys`` (of the ``zero`` tets) a tet holding a vertex off e = 0 also
    holds (only tets holding two vertices of zero tets can)."""
    ends = np.zeros(n, dtype=bool)
    ends[tets[zero].ravel()] = True
    around = tets[row_counts(ends[tets]) >= 2]
    lifted = around[row_counts(flags[around]) < 4]
    lifted_pairs = np.sort(lifted[:, TET_EDGES], axis=2)
    return np.isin(keys, lifted_pairs[..., 0] * n + lifted_pairs[..., 1])


def _split_round(points, tets, zero, flags, boundary_edges, boundary_faces, laplace: bool):
    """One round of :func:`refine_zero_tets`: ``(points, tets)`` after splitting, or None when
    nothing can join what is left to a rigid face.

    Laplace: a new vertex must be joined to one off e = 0, or it is cut off itself and every tet
    around it is a zero tet again. So only edges a tet with a vertex off e = 0 also holds are
    split, else faces such a tet shares, at their centroids; zero tets with neither wait until
    their neighbours are lifted (splitting the longest edge instead makes cut-off midpoints, and
    the zero tets multiply round by round). Poisson: every new vertex is lifted by the source, so
    the longest interior edge is split, else an interior face.
    """
    n = len(points)
    pairs = np.sort(tets[zero][:, TET_EDGES], axis=2)                  # (z, 6, 2)
    keys = pairs[..., 0] * n + pairs[..., 1]
    interior = ~np.isin(keys, boundary_edges[:, 0] * n + boundary_edges[:, 1])
    length = np.linalg.norm(points[pairs[..., 0]] - points[pairs[..., 1]], axis=2)
    if laplace:
        interior &= _edges_beside_lifted(tets, zero, flags, keys, n)
        if not interior.any():
            faces = _faces_beside_lifted(tets, zero, flags, n)
            if not len(faces):
                return None     # reported by the caller
            return _split_faces(points, tets, faces[_independent_faces(tets, faces, n)])
    length = np.where(interior, length, -1.0)
    best = np.argmax(length, axis=1)
    has_edge = interior.any(axis=1)
    chosen = np.unique(keys[np.arange(len(zero)), best][has_edge])
    if len(chosen):
        # Keep an independent set: an edge is taken unless a tet around it holds a smaller chosen edge.
        accepted = chosen[_independent_edges(tets, chosen, np.arange(len(chosen)), n)]
        return _split_edges(points, tets, np.stack([accepted // n, accepted % n], axis=1))
    # Poisson, no interior edge left (corner tets, common in fTetWild meshes of thin parts):
    # split one interior face of every such tet at its centroid, all in one round; a tet with
    # no interior face (a lone tet) is split at its centroid.
    return _split_corner_tets(points, tets, zero, n, np.unique(face_keys(boundary_faces, n)))


def _check_lifted(mesh: TetMesh, points, tets, on_free, on_rigid, pieces_checked: bool, path) -> None:
    """BuildError unless no zero tet is left and every tet the refinement made is positive."""
    remaining = len(_zero(tets, _at_zero(len(points), tets, on_free, on_rigid)))
    if remaining and not pieces_checked:   # the rounds ran out before a split revealed the piece
        _check_every_piece_has_a_rigid_face(mesh, on_rigid, path)
    if remaining:
        raise BuildError(f"{remaining} tets still have e = 0 at all four vertices after refinement (on the free "
                         "surface, or cut off from every rigid face)",
                         fix="mesh finer (smaller edge_length) near thin features, and give every separate "
                             "piece of the part a rigid (bonded) face or none at all")
    # Every tet the refinement made holds a new vertex (index >= n0); TetGen's own are unchanged.
    made = tets[row_counts(tets >= mesh.n_points) > 0]
    if np.any(tet_volumes(points, made) <= 0):
        raise BuildError("refining zero-pressure tets produced a non-positive tet", fix="report this mesh")


def refine_zero_tets(mesh: TetMesh, *, path=None) -> tuple[TetMesh, int]:
    """Split every tet whose 4 vertices are at e = 0; return the new mesh and how many were found.

    In a part with RIGID faces, a piece that holds none (tets joined through faces,
    :func:`fieldgen.fe.extent.unreached_tets`) gets a Poisson field of its own in the extent solve
    (docs/model.md §2.2), so its zero tets are lifted as a Poisson part's are, and the rest as a
    Laplace part's: each side by :func:`_lift_zero_tets`, the reached one first. Such pieces are
    looked for only when lifting the whole mesh at once fails (the search costs about as much as
    finding the boundary faces). Boundary faces are unchanged.
    """
    try:
        return _lift_zero_tets(mesh, path=path)
    except (InputError, BuildError):
        unreached = unreached_tets(mesh)
        if not unreached.any():
            raise
    reached, found = _lift_zero_tets(_sub_mesh(mesh, mesh.points, ~unreached), path=path)
    rest, more = _lift_zero_tets(_sub_mesh(mesh, reached.points, unreached), path=path)
    refined = TetMesh(points=rest.points, tets=np.vstack([reached.tets, rest.tets]),
                      boundary_faces=np.array(mesh.boundary_faces, dtype=np.int64),
                      boundary_markers=np.array(mesh.boundary_markers, dtype=np.int64))
    return refined, found + more


def _sub_mesh(mesh: TetMesh, points: np.ndarray, chosen: np.ndarray) -> TetMesh:
    """The ``chosen`` tets of ``mesh`` over ``points`` (``mesh``'s, perhaps with more after them)
    with the boundary faces they hold."""
    tets = np.asarray(mesh.tets, dtype=np.int64)[chosen]
    faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    held = find_faces(faces, tets[:, _TET_FACES].reshape(-1, 3), len(points))[0]
    return TetMesh(points=points, tets=tets, boundary_faces=faces[held],
                   boundary_markers=np.asarray(mesh.boundary_markers, dtype=np.int64)[held])


def _lift_zero_tets(mesh: TetMesh, *, path=None) -> tuple[TetMesh, int]:
    """Split every tet whose 4 vertices are at e = 0, in a part whose every piece has a RIGID face
    or none has; return the new mesh and how many were found.

    Such tets carry e = 0 everywhere and punch holes in the pressure field. A vertex is at e = 0
    when it lies on a FREE face or, in the Laplace problem, when no path through vertices off the
    free surface joins it to a RIGID one (:func:`_at_zero`). Each zero tet is removed by a
    conforming split that puts a new vertex off the free surface: an interior edge (not on any
    boundary face) is bisected in every tet around it, so the midpoint couples to every vertex of
    those tets. In the Laplace problem the new vertex must be joined to one off e = 0, so the edge
    is one that a tet holding a vertex off e = 0 also holds, else a face such a tet shares is split
    at its centroid (in both tets); a zero region shrinks from its rim inward, and zero tets with
    neither wait for their neighbours. In the Poisson problem (every new vertex is lifted by the
    source) the edge is the longest; a tet whose edges all lie on the boundary (a corner tet) has
    an interior face split at the centroid in both tets sharing it, and a lone tet whose four
    faces are all boundary is split at its centroid. Boundary faces are unchanged. Repeats until
    none is left (verified).
    A Laplace part with a separate piece that has no RIGID face raises InputError naming
    ``path`` (that piece is at e = 0 throughout, whatever is split): :func:`refine_zero_tets`
    then lifts such pieces apart, as Poisson parts.
    """
    points = np.asarray(mesh.points, dtype=np.float64)
    tets = np.asarray(mesh.tets, dtype=np.int64)
    on_free, on_rigid = _free_and_rigid(mesh)
    laplace = bool(on_rigid.any())
    # A separate piece without a RIGID face is refused. The whole-mesh search for one runs only
    # once some vertex off the free surface is cut off from every RIGID one: such a piece has one
    # from the start (an interior vertex) or after its first split (every split adds one), so a
    # part with no cut-off vertex (the common case) skips the search.
    pieces_checked = not laplace
    boundary_edges = np.unique(np.sort(mesh.boundary_faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1), axis=0)
    boundary_faces = np.asarray(mesh.boundary_faces, dtype=np.int64)
    n0 = len(points)
    flags = _at_zero(n0, tets, on_free, on_rigid)
    found = len(_zero(tets, flags))
    # Every round splits at least one edge or all corner tets, so this bound is never reached on
    # a valid mesh; it only guards against a bug looping forever.
    for _ in range(max(64, 2 * found + 8)):
        if len(points) > len(flags):   # the mesh was split: vertices joined to a RIGID one stay joined
            flags = _at_zero(len(points), tets, on_free, on_rigid, reaching=~flags)
        if not pieces_checked and (np.any(flags[:n0] & ~on_free) or np.any(flags[n0:])):
            _check_every_piece_has_a_rigid_face(mesh, on_rigid, path)
            pieces_checked = True
        zero = _zero(tets, flags)
        if len(zero) == 0:
            break
        split = _split_round(points, tets, zero, flags, boundary_edges, boundary_faces, laplace)
        if split is None:
            break
        points, tets = split
    _check_lifted(mesh, points, tets, on_free, on_rigid, pieces_checked, path)
    refined = TetMesh(points=points, tets=tets, boundary_faces=np.array(mesh.boundary_faces, dtype=np.int64),
                      boundary_markers=np.array(mesh.boundary_markers, dtype=np.int64))
    return refined, found
