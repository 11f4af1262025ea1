"""Point contacts between two rigid triangle meshes, on the meshes themselves (B92 ch. 7).

Two closed, outward-wound surfaces A and B touch at pairs of features: a vertex of one on a
face of the other (vertex–face), an edge of one across an edge of the other (edge–edge), or,
while still apart, a vertex of one against an edge (vertex–edge) or a vertex (vertex–vertex) of
the other. Each pair within
the **signed-distance margin** gives one point contact for the velocity-level LCP
(``time_stepping``): the normal ``n`` from A into B, the signed distance ``φ0`` along it
(negative: penetrating), at the midpoint of the two closest points. Candidate feature pairs
come from each body's trees of triangles, surface vertices and convex edges
(``bvh.candidate_pairs``, A's boxes grown by the margin), one query per kind of pair, so the
cost follows the number of features within reach of each other, not the mesh sizes.

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

Two vertices still apart are a contact too when the direction between them lies in both
vertices' normal cones (strictly: each is its body's extreme point toward the other): the pole
of a rounded mesh over the pole of another meets the other at a vertex, not at a face or an
edge, and without this pair it would sink into it for one step (a ball pressed onto a rounded
core came 0.12 mm too close before the next step's vertex–face pairs pushed it back out).

What is not detected: edges parallel to within 1e-3 rad (their end vertices give the
vertex–face contacts).
A body declared ``convex`` is replaced by its convex hull (:func:`convex_hull_body`) before
any of this, which is then exact for it and cheaper.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.spatial import ConvexHull

from fieldgen.runtime.contact.geometries import RigidGeometry
from fieldgen.runtime.contact.bvh import BVH, build_bvh, candidate_pairs, roots_within

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
    radius: float               # farthest surface vertex from the body-frame origin, m
    surface_vertices: np.ndarray  # (s,) the vertices some face uses
    vertex_bvh: BVH             # over the surface vertices (element k: surface_vertices[k])
    convex_edges: np.ndarray    # (c,) ids of the convex edges
    edge_bvh: BVH               # over the convex edges (element k: convex_edges[k])


def mesh_features(body: RigidGeometry) -> MeshFeatures:
    """The :class:`MeshFeatures` of ``body`` (computed once, kept in ``body.derived``)."""
    if "mesh_features" in body.derived:
        return body.derived["mesh_features"]
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
    used = np.unique(F)
    extent = V[used].max(axis=0) - V[used].min(axis=0) if len(used) else np.zeros(3)
    convex_edges = np.flatnonzero(convex)
    features = MeshFeatures(edges, normals, tangents, convex, face_edges, n_start, both[:, 1].copy(),
                            float(np.linalg.norm(extent)),
                            float(np.linalg.norm(V[used], axis=1).max()) if len(used) else 0.0, used, build_bvh(V, used[:, None]), convex_edges,
                            build_bvh(V, edges[convex_edges]))
    body.derived["mesh_features"] = features
    return features


def convex_hull_body(body: RigidGeometry) -> RigidGeometry:
    """The convex hull of a rigid mesh as a rigid body (same friction and name), outward wound."""
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
    return RigidGeometry(V, faces, body.mu_static, body.mu_dynamic, body.name)


def core_body(body) -> RigidGeometry | None:
    """The rigid core of a compliant body as a rigid surface (its boundary faces at e = 1,
    wound the other way: their normals point out of the core, into the compliant material),
    or None when it has none (or ``body`` is not compliant). Kept in ``body.derived``."""
    faces = getattr(body, "core_faces", None)
    if faces is None or len(faces) == 0:
        return None
    if "core" in body.derived:
        return body.derived["core"]
    used, local = np.unique(faces, return_inverse=True)    # only the core's own vertices: posing
    core = RigidGeometry(body.points[used], local.reshape(faces.shape)[:, ::-1].copy(),   # them is per step
                         body.mu_static, body.mu_dynamic, f"{body.name} core")
    body.derived["core"] = core
    return core


def _grown(bvh: BVH, margin: float) -> BVH:
    return dataclasses.replace(bvh, lower=bvh.lower - margin, upper=bvh.upper + margin,
                               element_lower=bvh.element_lower - margin, element_upper=bvh.element_upper + margin)


def _neighbour_offsets(V, feat: MeshFeatures, vid: np.ndarray):
    """Every (vertex, neighbour) pair of the vertices ``vid``: the index into ``vid`` it belongs
    to, the neighbour's offset from the vertex (positions ``V``), and each vertex's neighbour count."""
    s, e = feat.neighbour_start[vid], feat.neighbour_start[vid + 1]
    counts = e - s
    owner = np.repeat(np.arange(len(vid)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    nbr = feat.neighbours[np.repeat(s, counts) + offsets]
    return owner, V[nbr] - V[vid[owner]], counts


def _supports(V, feat: MeshFeatures, vid: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """(m,) bool: no neighbour of vertex ``vid[i]`` lies more than 60° below it along
    ``−direction[i]``, i.e. the vertex can be the lowest point of its body along ``−direction``."""
    owner, rel, counts = _neighbour_offsets(V, feat, vid)
    cosine = np.einsum("mk,mk->m", rel, direction[owner]) / np.maximum(np.linalg.norm(rel, axis=1), 1e-300)
    lowest = np.full(len(vid), np.inf)
    np.minimum.at(lowest, owner, cosine)
    return lowest >= SUPPORT_COS


def _dot(x, y):
    return np.einsum("mk,mk->m", x, y)


def _vertex_face(Vv, feat_v, vid, Vf, faces, normals, fid, margin, depth):
    """Vertices ``vid`` of one body against faces ``fid`` of the other (world frame):
    (position, outward normal of the face, signed distance, vertex id) of the pairs kept.
    The cheap test (the distance to the face's plane) runs on every candidate, the rest only on
    the pairs it keeps."""
    p = Vv[vid]
    n = normals[fid]
    d = _dot(n, p - Vf[faces[fid, 0]])
    near = np.flatnonzero((d < margin) & (d > -depth))
    p, n, d, vid, fid = p[near], n[near], d[near], vid[near], fid[near]
    tri = Vf[faces[fid]]
    q = p - d[:, None] * n
    e0, e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0], q - tri[:, 0]
    d00, d01, d11 = _dot(e0, e0), _dot(e0, e1), _dot(e1, e1)
    d20, d21 = _dot(e2, e0), _dot(e2, e1)
    den = d00 * d11 - d01 * d01
    with np.errstate(divide="ignore", invalid="ignore"):
        b1 = (d11 * d20 - d01 * d21) / den
        b2 = (d00 * d21 - d01 * d20) / den
    tol = 1e-9
    keep = (b1 >= -tol) & (b2 >= -tol) & (b1 + b2 <= 1 + tol) & (den > 0)
    idx = np.flatnonzero(keep)
    idx = idx[_supports(Vv, feat_v, vid[idx], n[idx])]
    return p[idx] - 0.5 * d[idx, None] * n[idx], n[idx], d[idx], vid[idx]


def _edge_frames(R, feat: MeshFeatures, eid):
    """World normals and in-face tangents (m, 2, 3) of edges ``eid``."""
    return feat.edge_normals[eid] @ R.T, feat.edge_tangents[eid] @ R.T


def _in_wedge(n, normals, tangents):
    """Direction ``n`` (m, 3) inside each convex edge's wedge of outward normals."""
    return (_dot(n, tangents[:, 0]) <= CONE_TOLERANCE) & (_dot(n, tangents[:, 1]) <= CONE_TOLERANCE) & \
           (_dot(n, normals[:, 0] + normals[:, 1]) > 0)


def _edge_edge(VA, RA, fa, ea, VB, RB, fb, eb, margin, depth):
    """Convex edges ``ea`` of A across convex edges ``eb`` of B: (position, normal A→B, φ).
    The closest points of the two lines and their distance are computed for every candidate,
    the normal cones only for the pairs within (−depth, margin)."""
    a0, b0 = VA[fa.edges[ea, 0]], VB[fb.edges[eb, 0]]
    u, w = VA[fa.edges[ea, 1]] - a0, VB[fb.edges[eb, 1]] - b0
    c = np.cross(u, w)
    cn = np.sqrt(_dot(c, c))
    A, B, C = _dot(u, u), _dot(u, w), _dot(w, w)
    ok = cn > PARALLEL_SINE * np.sqrt(A * C)
    r = a0 - b0
    D, E = _dot(u, r), _dot(w, r)
    den = np.where(ok, A * C - B * B, 1.0)
    s = (B * E - C * D) / den
    t = (A * E - B * D) / den
    ok &= (s > 0) & (s < 1) & (t > 0) & (t < 1)
    gap = np.abs(_dot(c, r)) / np.where(cn > 0, cn, 1.0)      # |φ| of the two lines
    ok &= gap < np.maximum(margin, depth)
    idx = np.flatnonzero(ok)
    ea, eb, c, cn, s, t = ea[idx], eb[idx], c[idx], cn[idx], s[idx], t[idx]
    a0, u, b0, w = a0[idx], u[idx], b0[idx], w[idx]
    na, ta = _edge_frames(RA, fa, ea)
    nb, tb = _edge_frames(RB, fb, eb)
    n = c / cn[:, None]
    n *= np.where(_dot(n, na[:, 0] + na[:, 1]) < 0, -1.0, 1.0)[:, None]
    pa = a0 + s[:, None] * u
    pb = b0 + t[:, None] * w
    d = _dot(n, pb - pa)
    ok = (d < margin) & (d > -depth) & _in_wedge(n, na, ta) & _in_wedge(-n, nb, tb)
    idx = np.flatnonzero(ok)
    return 0.5 * (pa[idx] + pb[idx]), n[idx], d[idx]


def _vertex_edge(Vv, feat_v, vid, Ve, Re, feat_e, eid, margin):
    """Vertices of one body still apart from convex edges of the other: (position, normal from
    the edge's body toward the vertex, distance)."""
    a0 = Ve[feat_e.edges[eid, 0]]
    u = Ve[feat_e.edges[eid, 1]] - a0
    p = Vv[vid]
    s = _dot(p - a0, u) / _dot(u, u)
    c = a0 + s[:, None] * u
    gap = p - c
    d = np.sqrt(_dot(gap, gap))
    idx = np.flatnonzero((s > 0) & (s < 1) & (d < margin) & (d > 1e-12))
    p, c, gap, d, vid, eid = p[idx], c[idx], gap[idx], d[idx], vid[idx], eid[idx]
    ne, te = _edge_frames(Re, feat_e, eid)
    n = gap / d[:, None]
    idx = np.flatnonzero(_in_wedge(n, ne, te))
    idx = idx[_supports(Vv, feat_v, vid[idx], n[idx])]
    return 0.5 * (p[idx] + c[idx]), n[idx], d[idx]


def _in_vertex_cone(V, feat: MeshFeatures, vid: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """(m,) bool: ``direction[i]`` is in vertex ``vid[i]``'s normal cone (to ``CONE_TOLERANCE``):
    no neighbour lies ahead of the vertex along it, so the vertex is its body's extreme point
    that way (strict, unlike :func:`_supports`: a vertex inside a flat region has only the
    region's normal)."""
    owner, rel, counts = _neighbour_offsets(V, feat, vid)
    sine = np.einsum("mk,mk->m", rel, direction[owner]) / np.maximum(np.linalg.norm(rel, axis=1), 1e-300)
    highest = np.full(len(vid), -np.inf)
    np.maximum.at(highest, owner, sine)
    return (highest <= CONE_TOLERANCE) & (counts > 0)


def _vertex_vertex(VA, fa, va, VB, fb, vb, margin):
    """Vertices of A and of B still apart, each its body's extreme point toward the other (the
    direction between them in both vertex cones): (position, normal A→B, distance). Two
    rounded tips meeting point to point touch only here."""
    pa, pb = VA[va], VB[vb]
    gap = pb - pa
    d = np.sqrt(_dot(gap, gap))
    idx = np.flatnonzero((d < margin) & (d > 1e-12))
    pa, pb, gap, d, va, vb = pa[idx], pb[idx], gap[idx], d[idx], va[idx], vb[idx]
    n = gap / d[:, None]
    idx = np.flatnonzero(_in_vertex_cone(VA, fa, va, n))
    idx = idx[_in_vertex_cone(VB, fb, vb[idx], -n[idx])]
    return 0.5 * (pa[idx] + pb[idx]), n[idx], d[idx]


def mesh_contacts(geom_a: RigidGeometry, X_WA: np.ndarray, geom_b: RigidGeometry, X_WB: np.ndarray,
                  margin: float, *, depth: float | None = None):
    """Point contacts between two rigid meshes posed at ``X_WA``, ``X_WB`` (see the module doc):
    (position (m, 3), normal from A into B (m, 3), signed distance φ0 (m,)), world frame."""
    fa, fb = mesh_features(geom_a), mesh_features(geom_b)
    if depth is None:
        size = min(fa.diagonal, fb.diagonal)
        depth = max(1e-3 * size, min(margin, 0.05 * size))
    X_AB = np.linalg.solve(X_WA, X_WB)
    reach = margin + depth
    empty = (np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0))
    if not roots_within(geom_a.bvh, geom_b.bvh, X_AB, reach):   # the usual case for a rigid core:
        return empty                                             # far away, pose nothing

    if len(_grown_pairs(geom_a.bvh, geom_b.bvh, reach, X_AB)) == 0:
        return empty        # every feature lies on a face: no faces within reach, no contact
    RA, RB = X_WA[:3, :3], X_WB[:3, :3]
    VA = geom_a.vertices @ RA.T + X_WA[:3, 3]
    VB = geom_b.vertices @ RB.T + X_WB[:3, 3]
    NA, NB = geom_a.face_normals @ RA.T, geom_b.face_normals @ RB.T
    FA, FB = geom_a.faces, geom_b.faces
    # Each kind of feature pair comes straight from its own two trees (faces, surface vertices,
    # convex edges), A's boxes grown by the reach: every candidate pair appears once, and their
    # number follows the features within reach of each other, not (faces in reach)² as pairs
    # of faces expanded to their vertices and edges would.
    # B's vertices on A's faces (normal: A's face normal), A's vertices on B's faces (−B's)
    vf = _grown_pairs(geom_a.bvh, fb.vertex_bvh, reach, X_AB)
    found = [empty, _deduplicated(*_vertex_face(VB, fb, fb.surface_vertices[vf[:, 1]], VA, FA, NA, vf[:, 0],
                                                margin, depth))]
    fv = _grown_pairs(fa.vertex_bvh, geom_b.bvh, reach, X_AB)
    p, n, d, vid = _vertex_face(VA, fa, fa.surface_vertices[fv[:, 0]], VB, FB, NB, fv[:, 1], margin, depth)
    found.append(_deduplicated(p, -n, d, vid))
    # convex edges across convex edges
    ee = _grown_pairs(fa.edge_bvh, fb.edge_bvh, reach, X_AB)
    found.append(_edge_edge(VA, RA, fa, fa.convex_edges[ee[:, 0]], VB, RB, fb, fb.convex_edges[ee[:, 1]], margin,
                            depth))
    # vertices still apart from convex edges: B's vertex near A's edge, A's vertex near B's edge
    ve = _grown_pairs(fa.edge_bvh, fb.vertex_bvh, margin, X_AB)
    found.append(_vertex_edge(VB, fb, fb.surface_vertices[ve[:, 1]], VA, RA, fa, fa.convex_edges[ve[:, 0]], margin))
    ev = _grown_pairs(fa.vertex_bvh, fb.edge_bvh, margin, X_AB)
    p, n, d = _vertex_edge(VA, fa, fa.surface_vertices[ev[:, 0]], VB, RB, fb, fb.convex_edges[ev[:, 1]], margin)
    found.append((p, -n, d))
    # vertices still apart from vertices (a pole of one rounded mesh over a pole of another)
    vv = _grown_pairs(fa.vertex_bvh, fb.vertex_bvh, margin, X_AB)
    found.append(_vertex_vertex(VA, fa, fa.surface_vertices[vv[:, 0]], VB, fb, fb.surface_vertices[vv[:, 1]], margin))
    return (np.vstack([f[0] for f in found]), np.vstack([f[1] for f in found]),
            np.concatenate([f[2] for f in found]))


def _grown_pairs(bvh_a: BVH, bvh_b: BVH, grow: float, X_AB: np.ndarray) -> np.ndarray:
    """Candidate pairs of the two trees with A's boxes grown by ``grow``."""
    return candidate_pairs(_grown(bvh_a, grow), bvh_b, X_AB)


def _deduplicated(p, n, d, vid):
    """One contact per vertex and normal (a vertex over the shared edge of two coplanar faces)."""
    if not len(d):
        return p, n, d
    key = np.column_stack([vid, np.round(n * 1e6)])
    _, keep = np.unique(key, axis=0, return_index=True)
    keep.sort()
    return p[keep], n[keep], d[keep]


def contact_margin(speed_bound: float, dt: float, scale: float) -> float:
    """Signed-distance margin of a step: twice the largest relative speed of any point of the
    pair times δt (a gap that can close within the step is a constraint of that step), plus
    1e-4 of the pair's size so resting contacts never flicker in and out: a body at rest keeps
    every contact it rests on even where the solvers' tolerances (1e-8 m) leave a gap.""" 
    return 2.0 * speed_bound * dt + 1e-4 * scale


def pair_speed(features_a: MeshFeatures, linear_a, angular_a, features_b: MeshFeatures, linear_b,
               angular_b) -> float:
    """Bound on the relative speed of any two surface points of a pair whose bodies move with
    these twists (body-frame origins): ``|v_a − v_b| + |ω_a| r_a + |ω_b| r_b``, r the farthest
    surface vertex from the origin. δt times it bounds how far a gap can close in a step."""
    return float(np.linalg.norm(np.subtract(linear_a, linear_b)) + np.linalg.norm(angular_a) * features_a.radius
                 + np.linalg.norm(angular_b) * features_b.radius)
