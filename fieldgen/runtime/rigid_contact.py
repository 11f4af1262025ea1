"""Point contacts between two rigid triangle meshes, on the meshes themselves (B92 ch. 7).

Two closed, outward-wound surfaces A and B touch at pairs of features: a vertex of one on a
face of the other (vertex–face), an edge of one across an edge of the other (edge–edge), or a
vertex of one against an edge of the other (vertex–edge, while still apart). Each pair within
the **signed-distance margin** gives one point contact for the velocity-level LCP
(``time_stepping``): the normal ``n`` from A into B, the signed distance ``φ0`` along it
(negative: penetrating), at the midpoint of the two closest points. Candidate features come
from the two bodies' triangle BVHs (``bvh.candidate_pairs``, A's boxes grown by the margin),
so the cost follows the number of nearby triangles, not the mesh sizes.

A pair is a contact only if it is a **closest-feature pair**: ``n`` must lie in the normal
cone of A's feature and ``−n`` in B's. For a face that cone is its normal (and the point's
projection must fall inside the triangle); for an edge, the wedge between its two faces'
normals (flat edges, inside a planar region, and reflex edges bound no cone and are skipped);
for a vertex, the directions in which it is the lowest point of its neighbourhood (checked
leniently, to 60° from the vertex's neighbours, so that a tilted face still presents its
vertices as it rotates flat). This is what makes a peg enter a hole: the rim's faces do not
cover the hole, so a peg vertex above the hole has no face below it, and the walls bound it
only through their own faces and the rim's edges. Features deeper than ``depth`` behind a
face (by default the margin, but at least 1e-3 and at most 5 % of the smaller body's bounding
diagonal) are never contacts: they are the far side of the body, not a penetration a step left.

What is not detected: two vertices meeting point to point before they overlap (the
vertex–face or edge–edge pair of the next step catches it, at most one step's motion deep),
and edges parallel to within 1e-3 rad (their end vertices give the vertex–face contacts).
A body declared ``convex`` is replaced by its convex hull (:func:`convex_hull_body`) before
any of this, which is then exact for it and cheaper.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fieldgen.runtime.bodies import RigidBody
from fieldgen.runtime.bvh import BVH, candidate_pairs, roots_within

SUPPORT_COS = -0.5          #: vertex cone leniency: neighbours may rise 60° toward the other body
CONE_TOLERANCE = 1e-3       #: edge wedge / face normal tolerance (sine of the angle)
PARALLEL_SINE = 1e-3        #: edges closer to parallel than this give no edge–edge contact


@dataclass(frozen=True)
class MeshFeatures:
    """Topology of a closed triangle mesh, body frame: unique edges, the faces on each side,
    the in-face direction away from the edge in each face, which edges are convex, the edges
    of each face and each vertex's neighbours (CSR)."""

    edges: np.ndarray           # (e, 2)
    edge_normals: np.ndarray    # (e, 2, 3) normals of the two faces at the edge
    edge_tangents: np.ndarray   # (e, 2, 3) unit, in each face, perpendicular to the edge, into the face
    convex: np.ndarray          # (e,) bool: a convex, non-flat edge
    face_edges: np.ndarray      # (f, 3)
    neighbour_start: np.ndarray  # (v + 1,)
    neighbours: np.ndarray      # (Σ,)
    diagonal: float             # bounding-box diagonal, m


_FEATURES: dict[int, tuple[MeshFeatures, RigidBody]] = {}


def mesh_features(body: RigidBody) -> MeshFeatures:
    """The :class:`MeshFeatures` of ``body`` (computed once per body object)."""
    cached = _FEATURES.get(id(body))
    if cached is not None and cached[1] is body:
        return cached[0]
    V, F = body.vertices, body.faces
    directed = np.stack([F, np.roll(F, -1, axis=1)], axis=2).reshape(-1, 2)    # edge k of face f: row 3f + k
    key = np.sort(directed, axis=1)
    edges, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    face_edges = inverse.reshape(-1, 3)
    # the (up to) two faces of each edge; a closed manifold mesh has exactly two
    order = np.argsort(inverse, kind="stable")
    counts = np.bincount(inverse, minlength=len(edges))
    start = np.concatenate([[0], np.cumsum(counts)])
    side0 = order[start[:-1]]
    side1 = np.where(counts >= 2, order[np.minimum(start[:-1] + 1, len(order) - 1)], side0)
    sides = np.stack([side0, side1], axis=1)                 # rows of `directed`
    faces_of = sides // 3
    opposite = F[faces_of, (sides % 3 + 2) % 3]              # the face's vertex not on the edge
    a = V[edges[:, 0]]
    u = V[edges[:, 1]] - a
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    rel = V[opposite] - a[:, None, :]
    tangents = rel - np.einsum("esk,ek->es", rel, u)[:, :, None] * u[:, None, :]
    tangents /= np.maximum(np.linalg.norm(tangents, axis=2, keepdims=True), 1e-300)
    normals = body.face_normals[faces_of]
    sine = np.linalg.norm(np.cross(normals[:, 0], normals[:, 1]), axis=1)
    bends_down = np.einsum("ek,ek->e", normals[:, 0], tangents[:, 1]) < 0.0
    convex = (counts == 2) & bends_down & (sine > 1e-6)
    # vertex neighbours through the edges
    both = np.concatenate([edges, edges[:, ::-1]])
    both = both[np.lexsort((both[:, 1], both[:, 0]))]
    n_start = np.searchsorted(both[:, 0], np.arange(len(V) + 1))
    extent = V.max(axis=0) - V.min(axis=0) if len(V) else np.zeros(3)
    features = MeshFeatures(edges, normals, tangents, convex, face_edges, n_start, both[:, 1].copy(),
                            float(np.linalg.norm(extent)))
    _FEATURES[id(body)] = (features, body)
    return features


def convex_hull_body(body: RigidBody) -> RigidBody:
    """The convex hull of a rigid mesh as a rigid body (same friction and name), outward wound."""
    from scipy.spatial import ConvexHull

    hull = ConvexHull(body.vertices)
    used = np.unique(hull.simplices)
    remap = np.full(len(body.vertices), -1, np.int64)
    remap[used] = np.arange(len(used))
    faces = remap[hull.simplices]
    V = body.vertices[used]
    tri = V[faces]
    outward = np.einsum("fk,fk->f", np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]),
                        hull.equations[:, :3]) < 0
    faces[outward] = faces[outward][:, ::-1]
    return RigidBody(V, faces, body.mu_static, body.mu_dynamic, body.name)


_CORES: dict[int, tuple[RigidBody | None, object]] = {}


def core_body(body) -> RigidBody | None:
    """The rigid core of a compliant body as a rigid surface (its boundary faces at e = 1,
    wound the other way: their normals point out of the core, into the compliant material),
    or None when it has none (or ``body`` is not compliant). Cached per body object."""
    faces = getattr(body, "core_faces", None)
    if faces is None or len(faces) == 0:
        return None
    cached = _CORES.get(id(body))
    if cached is not None and cached[1] is body:
        return cached[0]
    used, local = np.unique(faces, return_inverse=True)    # only the core's own vertices: posing
    core = RigidBody(body.points[used], local.reshape(faces.shape)[:, ::-1].copy(),   # them is per step
                     body.mu_static, body.mu_dynamic, f"{body.name} core")
    _CORES[id(body)] = (core, body)
    return core


def _grown(bvh: BVH, margin: float) -> BVH:
    return dataclasses.replace(bvh, lower=bvh.lower - margin, upper=bvh.upper + margin,
                               element_lower=bvh.element_lower - margin, element_upper=bvh.element_upper + margin)


def _unique_rows(rows: np.ndarray) -> np.ndarray:
    return np.unique(rows, axis=0) if len(rows) else rows.reshape(0, 2)


def _supports(V, feat: MeshFeatures, vid: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """(m,) bool: no neighbour of vertex ``vid[i]`` lies more than 60° below it along
    ``−direction[i]``, i.e. the vertex can be the lowest point of its body along ``−direction``."""
    s, e = feat.neighbour_start[vid], feat.neighbour_start[vid + 1]
    counts = e - s
    owner = np.repeat(np.arange(len(vid)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    nbr = feat.neighbours[np.repeat(s, counts) + offsets]
    rel = V[nbr] - V[vid[owner]]
    cosine = np.einsum("mk,mk->m", rel, direction[owner]) / np.maximum(np.linalg.norm(rel, axis=1), 1e-300)
    lowest = np.full(len(vid), np.inf)
    np.minimum.at(lowest, owner, cosine)
    return lowest >= SUPPORT_COS


def _vertex_face(Vv, feat_v, vid, Vf, faces, normals, fid, margin, depth):
    """Vertices ``vid`` of one body against faces ``fid`` of the other (world frame):
    (position, outward normal of the face, signed distance, vertex id) of the pairs kept."""
    p = Vv[vid]
    n = normals[fid]
    tri = Vf[faces[fid]]
    d = np.einsum("mk,mk->m", n, p - tri[:, 0])
    keep = (d < margin) & (d > -depth)
    q = p - d[:, None] * n
    e0, e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0], q - tri[:, 0]
    d00, d01, d11 = (np.einsum("mk,mk->m", x, y) for x, y in ((e0, e0), (e0, e1), (e1, e1)))
    d20, d21 = np.einsum("mk,mk->m", e2, e0), np.einsum("mk,mk->m", e2, e1)
    den = d00 * d11 - d01 * d01
    with np.errstate(divide="ignore", invalid="ignore"):
        b1 = (d11 * d20 - d01 * d21) / den
        b2 = (d00 * d21 - d01 * d20) / den
    tol = 1e-9
    keep &= (b1 >= -tol) & (b2 >= -tol) & (b1 + b2 <= 1 + tol) & (den > 0)
    idx = np.flatnonzero(keep)
    idx = idx[_supports(Vv, feat_v, vid[idx], n[idx])]
    return p[idx] - 0.5 * d[idx, None] * n[idx], n[idx], d[idx], vid[idx]


def _edge_frames(V, R, feat: MeshFeatures, eid):
    a0 = V[feat.edges[eid, 0]]
    a1 = V[feat.edges[eid, 1]]
    return a0, a1, feat.edge_normals[eid] @ R.T, feat.edge_tangents[eid] @ R.T


def _in_wedge(n, normals, tangents):
    """Direction ``n`` (m, 3) inside each convex edge's wedge of outward normals."""
    return (np.einsum("mk,mk->m", n, tangents[:, 0]) <= CONE_TOLERANCE) & \
           (np.einsum("mk,mk->m", n, tangents[:, 1]) <= CONE_TOLERANCE) & \
           (np.einsum("mk,mk->m", n, normals[:, 0] + normals[:, 1]) > 0)


def _edge_edge(VA, RA, fa, ea, VB, RB, fb, eb, margin, depth):
    """Convex edges ``ea`` of A across convex edges ``eb`` of B: (position, normal A→B, φ)."""
    a0, a1, na, ta = _edge_frames(VA, RA, fa, ea)
    b0, b1, nb, tb = _edge_frames(VB, RB, fb, eb)
    u, w = a1 - a0, b1 - b0
    c = np.cross(u, w)
    cn = np.linalg.norm(c, axis=1)
    ok = cn > PARALLEL_SINE * np.linalg.norm(u, axis=1) * np.linalg.norm(w, axis=1)
    r = a0 - b0
    A, B, C = (np.einsum("mk,mk->m", x, y) for x, y in ((u, u), (u, w), (w, w)))
    D, E = np.einsum("mk,mk->m", u, r), np.einsum("mk,mk->m", w, r)
    den = np.where(ok, A * C - B * B, 1.0)
    s = (B * E - C * D) / den
    t = (A * E - B * D) / den
    ok &= (s > 0) & (s < 1) & (t > 0) & (t < 1)
    n = c / np.where(cn > 0, cn, 1.0)[:, None]
    n *= np.where(np.einsum("mk,mk->m", n, na[:, 0] + na[:, 1]) < 0, -1.0, 1.0)[:, None]
    pa = a0 + s[:, None] * u
    pb = b0 + t[:, None] * w
    d = np.einsum("mk,mk->m", n, pb - pa)
    ok &= (d < margin) & (d > -depth) & _in_wedge(n, na, ta) & _in_wedge(-n, nb, tb)
    idx = np.flatnonzero(ok)
    return 0.5 * (pa[idx] + pb[idx]), n[idx], d[idx]


def _vertex_edge(Vv, feat_v, vid, Ve, Re, feat_e, eid, margin):
    """Vertices of one body still apart from convex edges of the other: (position, normal from
    the edge's body toward the vertex, distance)."""
    a0, a1, ne, te = _edge_frames(Ve, Re, feat_e, eid)
    p = Vv[vid]
    u = a1 - a0
    s = np.einsum("mk,mk->m", p - a0, u) / np.einsum("mk,mk->m", u, u)
    c = a0 + s[:, None] * u
    gap = p - c
    d = np.linalg.norm(gap, axis=1)
    ok = (s > 0) & (s < 1) & (d < margin) & (d > 1e-12)
    n = gap / np.where(d > 0, d, 1.0)[:, None]
    ok &= _in_wedge(n, ne, te)
    idx = np.flatnonzero(ok)
    idx = idx[_supports(Vv, feat_v, vid[idx], n[idx])]
    return 0.5 * (p[idx] + c[idx]), n[idx], d[idx]


def mesh_contacts(geom_a: RigidBody, X_WA: np.ndarray, geom_b: RigidBody, X_WB: np.ndarray,
                  margin: float, *, depth: float | None = None):
    """Point contacts between two rigid meshes posed at ``X_WA``, ``X_WB`` (see the module doc):
    (position (m, 3), normal from A into B (m, 3), signed distance φ0 (m,)), world frame."""
    fa, fb = mesh_features(geom_a), mesh_features(geom_b)
    if depth is None:
        size = min(fa.diagonal, fb.diagonal)
        depth = max(1e-3 * size, min(margin, 0.05 * size))
    X_AB = np.linalg.solve(X_WA, X_WB)
    empty = (np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))
    if not roots_within(geom_a.bvh, geom_b.bvh, X_AB, margin + depth):   # the usual case for a
        return empty                                                       # rigid core: far away
    pairs = candidate_pairs(_grown(geom_a.bvh, margin + depth), geom_b.bvh, X_AB)
    if len(pairs) == 0:     # pose nothing
        return empty
    RA, RB = X_WA[:3, :3], X_WB[:3, :3]
    VA = geom_a.vertices @ RA.T + X_WA[:3, 3]
    VB = geom_b.vertices @ RB.T + X_WB[:3, 3]
    NA, NB = geom_a.face_normals @ RA.T, geom_b.face_normals @ RB.T
    FA, FB = geom_a.faces, geom_b.faces
    out_p, out_n, out_d = [], [], []

    def add(p, n, d):
        out_p.append(p), out_n.append(n), out_d.append(d)

    def deduplicated(p, n, d, vid):
        """One contact per vertex and normal (a vertex over the shared edge of two coplanar faces)."""
        if not len(d):
            return p, n, d
        key = np.column_stack([vid, np.round(n * 1e6)])
        _, keep = np.unique(key, axis=0, return_index=True)
        keep.sort()
        return p[keep], n[keep], d[keep]

    # B's vertices on A's faces (normal: A's face normal), A's vertices on B's faces (−B's)
    vf = _unique_rows(np.column_stack([np.repeat(pairs[:, 0], 3), FB[pairs[:, 1]].reshape(-1)]))
    add(*deduplicated(*_vertex_face(VB, fb, vf[:, 1], VA, FA, NA, vf[:, 0], margin, depth)))
    fv = _unique_rows(np.column_stack([np.repeat(pairs[:, 1], 3), FA[pairs[:, 0]].reshape(-1)]))
    p, n, d, vid = _vertex_face(VA, fa, fv[:, 1], VB, FB, NB, fv[:, 0], margin, depth)
    add(*deduplicated(p, -n, d, vid))
    # convex edges across convex edges
    ee = np.column_stack([np.repeat(fa.face_edges[pairs[:, 0]], 3, axis=1).reshape(-1),
                          np.tile(fb.face_edges[pairs[:, 1]], (1, 3)).reshape(-1)])
    ee = _unique_rows(ee)
    ee = ee[fa.convex[ee[:, 0]] & fb.convex[ee[:, 1]]]
    add(*_edge_edge(VA, RA, fa, ee[:, 0], VB, RB, fb, ee[:, 1], margin, depth))
    # vertices still apart from convex edges: B's vertex near A's edge, A's vertex near B's edge
    ve = _unique_rows(np.column_stack([np.repeat(FB[pairs[:, 1]], 3, axis=1).reshape(-1),
                                       np.tile(fa.face_edges[pairs[:, 0]], (1, 3)).reshape(-1)]))
    ve = ve[fa.convex[ve[:, 1]]]
    add(*_vertex_edge(VB, fb, ve[:, 0], VA, RA, fa, ve[:, 1], margin))
    ev = _unique_rows(np.column_stack([np.repeat(FA[pairs[:, 0]], 3, axis=1).reshape(-1),
                                       np.tile(fb.face_edges[pairs[:, 1]], (1, 3)).reshape(-1)]))
    ev = ev[fb.convex[ev[:, 1]]]
    p, n, d = _vertex_edge(VA, fa, ev[:, 0], VB, RB, fb, ev[:, 1], margin)
    add(p, -n, d)
    return np.vstack(out_p), np.vstack(out_n), np.concatenate(out_d)


def contact_margin(speed_bound: float, dt: float, scale: float) -> float:
    """Signed-distance margin of a step: twice the largest relative speed of any point of the
    pair times δt (a gap that can close within the step is a constraint of that step), and at
    least 1e-6 of the pair's size so resting contacts never flicker in and out."""
    return 2.0 * speed_bound * dt + 1e-6 * scale
