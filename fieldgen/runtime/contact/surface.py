"""The contact surface between two bodies at given poses (docs/model.md §3; D 5.0.2, 5.0.3, C.1, C.2).

Representations (docs/model.md §3.4):

- ``"polygon"`` (M22 III-B): one convex polygon per overlapping tet–tet or triangle–tet pair.
- ``"triangle"`` (D 5.0.3, Algorithm 1): each polygon fanned into triangles that share its
  area centroid (the area centroid, not the vertex mean, so the fan moves continuously when
  a polygon gains or loses a zero-length edge).

Which tet–tet polygons are kept: every pair whose equal-pressure plane exists
(|∇p_b − ∇p_a| > 1e-12·(|∇p_a| + |∇p_b|), D C.2) and whose clipped polygon has positive area.
No filter on how "opposed" the gradients are (Drake drops faces whose normal is more than
5π/8 from the gradients): any such cut makes the force jump when a polygon crosses the
threshold, and breaks the energy argument (the force is −∇ of ∫ min(p_A, p_B) over the
overlap, D A.1, which counts every piece of the equal-pressure surface). Consumers that want
M22's rule (skip unless −∇p_A·n̂ > 0 and ∇p_B·n̂ > 0) have ``grad_a``/``grad_b`` per face.
Triangle–tet polygons: every rigid triangle piece inside the compliant mesh, whichever way it
faces (for a convex indenter this is exactly ∂(displaced volume), D A.1).

Face rules (``face_rule``): ``"all"`` (the default) is the rule above; ``"drake"`` reproduces
Drake's hydroelastic contact surface: tet–tet polygons whose normal is more than 5π/8 from
either pressure gradient are dropped, and so are rigid-triangle pieces whose outward normal is
more than 5π/8 from the compliant tet's gradient (Drake's filters), tet B is clipped by all four
faces and polygons of zero area are kept, as Drake does. Polygons under this rule are computed
in the compliant body's frame (A's for two) with Drake's own sequence of floating-point operations
(:mod:`fieldgen.runtime.contact.drake_arithmetic`), so that the degenerate polygons whose survival is
decided by rounding come out as in Drake, and the face counts agree. ``docs/model.md §3.5``
compares the two rules and says when the choice matters.

Coincident bodies (one mesh and field at one pose, ``"all"`` rule): p_A = p_B throughout the
overlap, so no equal-pressure surface exists; an empty surface and a :class:`ContactWarning`.

Pass-through (D 5.1.2): a face lying in a tet that touches the rigid core, with a vertex
pressure at the core's pressure, means the other body reached the core: a
:class:`PassThroughWarning` is issued (a warning, the surface is still returned).
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass, field

import numba as nb
import numpy as np

from fieldgen.runtime.contact import clip as clip
from fieldgen.runtime.contact import drake_arithmetic as drake_arithmetic
from fieldgen.runtime.contact import drake_tri_tet as drake_tri_tet
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.bvh import PairCache, sorted_candidate_pairs
from fieldgen.runtime.contact.pose import as_matrix, cross_rows

REPRESENTATIONS = ("polygon", "triangle")
FACE_RULES = ("all", "drake")
GRADIENT_EPS = 1e-12


class ContactWarning(UserWarning):
    """Something about a contact the user should know; the result is still returned."""


class PassThroughWarning(ContactWarning):
    """A body reached the rigid core of a compliant body (D 5.1.2)."""


@dataclass(eq=False)
class ContactSurface:
    """A contact surface in the world frame; ``n`` points from A into B.

    Faces are polygons ``face_vertices[face_offsets[k]:face_offsets[k + 1]]`` (indices into
    ``vertices``), counter-clockwise about ``normals[k]``; in the triangle representation every
    face has 3 vertices (see :attr:`triangles`). Per face: ``normals``, ``areas``, ``centroids``
    (area centroid), ``centroid_pressure`` (p0 there), ``grad_a``/``grad_b`` (∇p0 of each body
    in the world frame, NaN for a rigid body), ``element_a``/``element_b`` (the tet or triangle
    of each body). ``vertex_pressure`` is p0 at each vertex.
    """

    representation: str
    vertices: np.ndarray
    face_offsets: np.ndarray
    face_vertices: np.ndarray
    normals: np.ndarray
    areas: np.ndarray
    centroids: np.ndarray
    vertex_pressure: np.ndarray
    centroid_pressure: np.ndarray
    grad_a: np.ndarray
    grad_b: np.ndarray
    element_a: np.ndarray
    element_b: np.ndarray
    X_WA: np.ndarray = field(default_factory=lambda: np.eye(4))
    X_WB: np.ndarray = field(default_factory=lambda: np.eye(4))
    name_a: str = "A"
    name_b: str = "B"

    @property
    def n_faces(self) -> int:
        return int(self.areas.shape[0])

    @property
    def total_area(self) -> float:
        return float(np.sum(self.areas))

    @property
    def triangles(self) -> np.ndarray:
        """(nf, 3) vertex indices; only for the triangle representation."""
        if self.representation != "triangle":
            raise ValueError("triangles exist only in the 'triangle' representation")
        return self.face_vertices.reshape(-1, 3)

    @property
    def centroid(self) -> np.ndarray:
        """Area-weighted centroid of the whole surface (NaN when empty)."""
        area = self.areas.sum()
        if area <= 0:
            return np.full(3, np.nan)
        return (self.centroids * self.areas[:, None]).sum(axis=0) / area

    def face_vertex_counts(self) -> np.ndarray:
        return np.diff(self.face_offsets)


def empty_surface(representation: str, X_WA, X_WB, name_a="A", name_b="B") -> ContactSurface:
    z3 = np.zeros((0, 3))
    zi = np.zeros(0, np.int64)
    return ContactSurface(representation, z3, np.zeros(1, np.int64), zi, z3.copy(), np.zeros(0), z3.copy(),
                          np.zeros(0), np.zeros(0), z3.copy(), z3.copy(), zi, zi.copy(),
                          as_matrix(X_WA), as_matrix(X_WB), name_a, name_b)


def compute_contact_surface(body_a, X_WA, body_b, X_WB, representation: str = "polygon", *,
                            face_rule: str = "all", reuse_pairs: bool = True) -> ContactSurface:
    """Contact surface of ``body_a`` at pose ``X_WA`` and ``body_b`` at ``X_WB`` (Pose or 4x4).

    Compliant–compliant: equal-pressure polygons (D C.1); compliant–rigid: rigid triangles
    clipped by the tets (D 5.0.2); rigid–rigid: an empty surface. ``face_rule``: ``"all"`` keeps
    every polygon, ``"drake"`` applies Drake's 5π/8 filters (module docstring).

    Faces come in the order of their (element of A, element of B) pairs, sorted. The broad
    phase reuses the pairs found at an earlier pose while the relative motion since then stays
    within a margin (``bvh.PairCache``, kept on the compliant body per other body);
    ``reuse_pairs=False`` traverses the trees afresh. The result is the same either way.
    """
    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {REPRESENTATIONS}, got {representation!r}")
    if face_rule not in FACE_RULES:
        raise ValueError(f"face_rule must be one of {FACE_RULES}, got {face_rule!r}")
    drake = face_rule == "drake"
    XA, XB = as_matrix(X_WA), as_matrix(X_WB)
    name_a, name_b = getattr(body_a, "name", "A"), getattr(body_b, "name", "B")
    a_soft, b_soft = isinstance(body_a, CompliantGeometry), isinstance(body_b, CompliantGeometry)
    for body in (body_a, body_b):
        if not isinstance(body, (CompliantGeometry, RigidGeometry)):
            raise TypeError(f"bodies must be CompliantGeometry or RigidGeometry, got {type(body).__name__}")
    if not a_soft and not b_soft:
        return empty_surface(representation, XA, XB, name_a, name_b)
    if a_soft and b_soft and not drake and _coincident(body_a, XA, body_b, XB):
        warnings.warn(ContactWarning(
            f"{name_a} and {name_b} are the same mesh and field at the same pose: p_A = p_B everywhere they "
            "overlap, so there is no equal-pressure surface (D C.2) and, by symmetry, no force"), stacklevel=2)
        return empty_surface(representation, XA, XB, name_a, name_b)
    pairs, tet_first = _candidate_pairs(body_a, XA, body_b, XB, reuse_pairs)
    if len(pairs) == 0:
        return empty_surface(representation, XA, XB, name_a, name_b)
    if a_soft and b_soft:
        polygons = _drake_tet_tet if drake else _tet_tet
        out, grad_a, grad_b = polygons(body_a, XA, body_b, XB, pairs)
    else:
        polygons = _drake_tri_tet if drake else _tri_tet
        out, grad_a, grad_b = polygons(body_a, XA, body_b, XB, pairs, tet_first)
    src = out[7]
    el_a, el_b = pairs[src, 0], pairs[src, 1]
    _warn_pass_through(body_a, el_a, body_b, el_b, out[1], out[2])
    return _surface(representation, out, grad_a, grad_b, el_a, el_b, XA, XB, name_a, name_b)


def _coincident(body_a, XA, body_b, XB) -> bool:
    """Two compliant bodies with one mesh and one field at one pose. Every tet pair then gives
    either no plane (equal gradients) or a polygon lying in a shared tet face, kept or dropped by
    rounding, so the surface would be noise of no sign; the force is zero by symmetry."""
    if not np.array_equal(XA, XB):
        return False
    return body_a is body_b or all(
        x.shape == y.shape and np.array_equal(x, y)
        for x, y in ((body_a.points, body_b.points), (body_a.tets, body_b.tets),
                     (body_a.pressure, body_b.pressure)))


def _candidate_pairs(body_a, XA, body_b, XB, reuse_pairs: bool):
    """Broad phase: the (element of A, element of B) pairs, sorted, and the same pairs with the
    compliant body's tet first (the pairs themselves when A is compliant). With a rigid A the
    (triangle of A, tet of B) pairs come from B's side: no column swaps on the way."""
    if isinstance(body_a, CompliantGeometry):
        pairs = sorted_candidate_pairs(body_a.bvh, body_b.bvh, relative_pose(XA, XB),
                                       _pair_cache(body_a, body_b) if reuse_pairs else None)
        return pairs, pairs
    swapped = sorted_candidate_pairs(body_b.bvh, body_a.bvh, relative_pose(XB, XA),
                                     _pair_cache(body_b, body_a) if reuse_pairs else None)
    return swapped[:, ::-1], swapped


def _drake_tet_tet(body_a, XA, body_b, XB, pairs):
    """Compliant–compliant polygons with Drake's arithmetic in A's frame (drake_arithmetic):
    the kernel's output and the world gradients of A and B per polygon."""
    _, gA = _posed_tets(XA, body_a, pairs[:, 0])
    dA, dB = drake_arithmetic.body_tet_data(body_a), drake_arithmetic.body_tet_data(body_b)
    out = drake_arithmetic.tet_tet_polygons(pairs, body_a.points, body_a.tets, dA[0], dA[1], dA[3],
                                            body_b.points, body_b.tets, dB[0], dB[1], dB[2], dB[3],
                                            drake_arithmetic.relative_transform(XA, XB), XA,
                                            body_a.pressure, gA)
    src = out[7]
    return out, gA[pairs[src, 0]], _rotate(XB, body_b.gradient[pairs[src, 1]])


def _tet_tet(body_a, XA, body_b, XB, pairs):
    """Compliant–compliant equal-pressure polygons in the world (D C.1)."""
    PA, gA = _posed_tets(XA, body_a, pairs[:, 0])
    PB, gB = _posed_tets(XB, body_b, pairs[:, 1])
    out = clip.tet_tet_polygons(pairs, PA, body_a.tets, body_a.pressure, gA,
                                PB, body_b.tets, body_b.pressure, gB, GRADIENT_EPS)
    src = out[7]
    return out, gA[pairs[src, 0]], gB[pairs[src, 1]]


def _drake_tri_tet(body_a, XA, body_b, XB, pairs, tet_tri):
    """One compliant body: Drake's arithmetic in its frame (drake_tri_tet); the rigid side's
    gradient is NaN."""
    a_soft = isinstance(body_a, CompliantGeometry)
    soft, X_S, rigid, X_R = (body_a, XA, body_b, XB) if a_soft else (body_b, XB, body_a, XA)
    _, gS = _posed_tets(X_S, soft, tet_tri[:, 0])
    out = drake_tri_tet.tri_tet_polygons(
        tet_tri, soft.points, soft.tets, drake_arithmetic.body_tet_data(soft)[3], rigid.vertices, rigid.faces,
        drake_tri_tet.body_triangle_normals(rigid), drake_arithmetic.relative_transform(X_S, X_R), X_S,
        -1.0 if a_soft else 1.0, soft.pressure, gS, _rotate(X_R, rigid.face_normals))
    src = out[7]
    el_a, el_b = pairs[src, 0], pairs[src, 1]
    nan = np.full((len(src), 3), np.nan)
    return (out,) + ((gS[el_a], nan) if a_soft else (nan, gS[el_b]))


def _tri_tet(body_a, XA, body_b, XB, pairs, tet_pairs):
    """Compliant–rigid: clip in the compliant body's frame (the rigid surface's few vertices are
    posed there, not the tets), then pose the polygons in the world; the rigid side's gradient
    is NaN."""
    a_soft = isinstance(body_a, CompliantGeometry)
    soft, rigid, X_WS, X_WR, sign = (body_a, body_b, XA, XB, -1.0) if a_soft else (body_b, body_a, XB, XA, 1.0)
    X_SR = relative_pose(X_WS, X_WR)
    out = clip.tri_tet_polygons(tet_pairs, soft.points, soft.tets, _transform(X_SR, rigid.vertices),
                                rigid.faces, _rotate(X_SR, rigid.face_normals), sign, soft.pressure,
                                soft.gradient)
    out = (_transform(X_WS, out[0]), out[1], out[2], _rotate(X_WS, out[3])) + out[4:5] + \
        (_transform(X_WS, out[5]),) + out[6:]
    src = out[7]
    grad = _rotate(X_WS, soft.gradient[tet_pairs[src, 0]])
    nan = np.full((len(src), 3), np.nan)
    return (out,) + ((grad, nan) if a_soft else (nan, grad))


def _surface(representation, out, grad_a, grad_b, el_a, el_b, XA, XB, name_a, name_b) -> ContactSurface:
    """The polygons of a kernel's output as a ContactSurface: as they are, or as centroid fans
    (D 5.0.3) in the triangle representation."""
    verts, vpress, offsets, normals, areas, cents, cpress, _ = out
    if representation == "polygon":
        return ContactSurface("polygon", verts, offsets, np.arange(len(verts), dtype=np.int64), normals, areas,
                              cents, vpress, cpress, grad_a, grad_b, el_a, el_b, XA, XB, name_a, name_b)
    V, P, tris, owner = clip.fan_triangles(verts, vpress, offsets, cents, cpress)
    t = V[tris]
    fan_areas = 0.5 * np.einsum("ij,ij->i", cross_rows(t[:, 1] - t[:, 0], t[:, 2] - t[:, 0]), normals[owner])
    return ContactSurface("triangle", V, np.arange(0, 3 * len(tris) + 1, 3, dtype=np.int64), tris.ravel(),
                          normals[owner], fan_areas, t.mean(axis=1), P, P[tris].mean(axis=1),
                          grad_a[owner], grad_b[owner], el_a[owner], el_b[owner], XA, XB, name_a, name_b)


def _pair_cache(body: CompliantGeometry, other) -> PairCache:
    """The broad-phase cache of ``body`` (whose tree is queried first) against ``other``."""
    caches = body.derived.setdefault("pair_caches", {})
    entry = caches.get(id(other))
    if entry is None or entry[0]() is not other:
        entry = (weakref.ref(other), PairCache())
        caches[id(other)] = entry
    return entry[1]


def _posed_tets(X, body: CompliantGeometry, elements: np.ndarray):
    """World vertices and gradients of ``body`` at pose ``X``, computed only for the tets in
    ``elements`` (rows of other vertices and tets are left unset and never read): a fine mesh
    touches few of its tets per step. Same arithmetic per row as posing all."""
    if 4 * len(elements) >= len(body.tets):
        return _transform(X, body.points), _rotate(X, body.gradient)
    return _pose_subset(np.ascontiguousarray(X, dtype=np.float64), body.points, body.tets, body.gradient,
                        np.ascontiguousarray(elements, dtype=np.int64))


def _transform(X, points):
    """``X`` applied to (n, 3) points (one numba call: per-step arrays are small, so numpy's
    per-column overhead dominated)."""
    return _transform_rows(np.ascontiguousarray(X, dtype=np.float64), np.ascontiguousarray(points, dtype=np.float64))


def _rotate(X, vectors):
    """The rotation of ``X`` applied to (n, 3) vectors."""
    return _rotate_rows(np.ascontiguousarray(X, dtype=np.float64), np.ascontiguousarray(vectors, dtype=np.float64))


@nb.njit(cache=True)
def _transform_rows(X, P):
    out = np.empty_like(P)
    for r in range(P.shape[0]):
        for i in range(3):
            out[r, i] = P[r, 0] * X[i, 0] + P[r, 1] * X[i, 1] + P[r, 2] * X[i, 2] + X[i, 3]
    return out


@nb.njit(cache=True)
def _rotate_rows(X, V):
    out = np.empty_like(V)
    for r in range(V.shape[0]):
        for i in range(3):
            out[r, i] = V[r, 0] * X[i, 0] + V[r, 1] * X[i, 1] + V[r, 2] * X[i, 2]
    return out


@nb.njit(cache=True)
def _pose_subset(X, points, tets, gradient, elements):
    """Posed vertices of the tets in ``elements`` and their rotated gradients; other rows unset."""
    P = np.empty_like(points)
    g = np.empty_like(gradient)
    done_p = np.zeros(points.shape[0], np.bool_)
    done_t = np.zeros(tets.shape[0], np.bool_)
    for e in elements:
        if done_t[e]:
            continue
        done_t[e] = True
        for i in range(3):
            g[e, i] = gradient[e, 0] * X[i, 0] + gradient[e, 1] * X[i, 1] + gradient[e, 2] * X[i, 2]
        for k in range(4):
            v = tets[e, k]
            if done_p[v]:
                continue
            done_p[v] = True
            for i in range(3):
                P[v, i] = points[v, 0] * X[i, 0] + points[v, 1] * X[i, 1] + points[v, 2] * X[i, 2] + X[i, 3]
    return P, g


def relative_pose(X_WA: np.ndarray, X_WB: np.ndarray) -> np.ndarray:
    """X_AB = X_WA⁻¹·X_WB for rigid transforms, without a general solve."""
    R = X_WA[:3, :3].T
    out = np.empty((4, 4))
    out[:3, :3] = R @ X_WB[:3, :3]
    out[:3, 3] = R @ (X_WB[:3, 3] - X_WA[:3, 3])
    out[3] = (0.0, 0.0, 0.0, 1.0)
    return out


def _warn_pass_through(body_a, el_a, body_b, el_b, vertex_pressure, offsets) -> None:
    """PassThroughWarning when a face in a core-adjacent tet reaches the core pressure."""
    if len(el_a) == 0:
        return
    face_max = None
    for body, elements, other in ((body_a, el_a, body_b), (body_b, el_b, body_a)):
        if not isinstance(body, CompliantGeometry) or not np.isfinite(body.core_pressure):
            continue
        near_core = body.core_tets[elements]
        if not near_core.any():          # the usual case: skip the per-face maxima
            continue
        if face_max is None:
            face_max = np.maximum.reduceat(vertex_pressure, offsets[:-1]) if len(vertex_pressure) else np.zeros(0)
        touching = near_core & (face_max >= body.core_pressure * (1.0 - 1e-9))
        if np.any(touching):
            warnings.warn(PassThroughWarning(
                f"{other.name} reached the rigid core of {body.name} on {int(touching.sum())} contact faces "
                f"(pressure {face_max[touching].max():.4g} Pa = the field's maximum): the compliant layer is "
                f"passed through, so the contact force no longer grows with penetration (D 5.1.2)"), stacklevel=3)
