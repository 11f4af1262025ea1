"""The contact query's fast paths against direct computations.

- Broad phase with temporal coherence (``bvh.PairCache``): along a moving sequence of poses,
  the query that reuses earlier candidate pairs returns the same contact surface, array for
  array and bit for bit, and so the same wrench, as the query that traverses the trees afresh;
  and the reuse really happens (otherwise the comparison would prove nothing).
- The motion bound behind the reuse: every box of a tree moved from one pose to another stays
  inside its old mapped box grown by :func:`bvh.motion_bound`.
- Narrow phase (``clip.tri_tet_polygons``, which slices tets lying inside a rigid triangle's
  prism instead of clipping): every polygon equals triangle ∩ tet computed here independently
  (brute force over all tet–triangle pairs, Sutherland–Hodgman in plain numpy), and so does
  the wrench.
"""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.meshing.tetmesh import tet_volumes
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.bvh import PairCache, build_bvh, motion_bound, sorted_candidate_pairs
from fieldgen.runtime.contact.bvh import mapped_boxes  # the box map the traversal uses
from fieldgen.runtime.contact.surface import compute_contact_surface
from fieldgen.runtime.contact.pose import Pose, as_matrix
from fieldgen.runtime.contact.wrench import compute_wrench
from test_runtime_meshes import box_surface, slab

H = 0.008     # pad thickness, m
M0 = 2e5      # Pa
FIELDS = ("vertices", "face_offsets", "face_vertices", "normals", "areas", "centroids", "vertex_pressure",
          "centroid_pressure", "grad_a", "grad_b", "element_a", "element_b")


def jittered_pad(cells=12, layers=5, seed=0):
    """A 40 × 40 × 8 mm pad of tets with its interior vertices moved at random (no plane of the
    rigid box meets a row of vertices exactly), bonded back at z = 0, p0 = M0·(1 − z/H)."""
    points, tets = slab(0.04, H, cells, np.linspace(0.0, H, layers + 1))
    rng = np.random.default_rng(seed)
    spacing = np.array([0.04 / cells, 0.04 / cells, H / layers])
    inner = np.all((points > points.min(axis=0) + 1e-12) & (points < points.max(axis=0) - 1e-12), axis=1)
    points[inner] += rng.uniform(-0.2, 0.2, (int(inner.sum()), 3)) * spacing
    assert np.all(tet_volumes(points, tets) > 0)
    extent = 1.0 - points[:, 2] / H
    return CompliantGeometry.from_arrays(points, tets, M0 * extent, extent=extent, dissipation=5.0,
                                         mu_static=0.5, name="pad")


def box_poses(n=60):
    """A 30 mm box (as a rigid body its frame is at its centre) squeezing into the pad's face,
    sliding and turning slowly, with two jumps larger than any margin."""
    poses = []
    for k in range(n):
        s = k / (n - 1)
        z = H + 0.015 - 0.002 * s + (0.004 if 20 <= k < 25 else 0.0)
        poses.append(Pose.from_xyz_rpy(0.002 * np.sin(3 * s) + (0.003 if k >= 40 else 0.0), -0.001 * s, z,
                                       4.0 * s, -3.0 * s + 1.0, 20.0 * s))
    return poses


@pytest.fixture(scope="module")
def pad():
    return jittered_pad()


@pytest.fixture(scope="module")
def box():
    return RigidGeometry(*box_surface([-0.015] * 3, [0.015] * 3), mu_static=0.6, name="box")


def test_reused_pairs_give_the_direct_surface_and_wrench(pad, box):
    X_pad = Pose.from_xyz_rpy(0.0005, -0.0003, 0.0, 1.0, -0.5, 3.0)
    pad.derived.pop("pair_caches", None)
    faces = 0
    for pose in box_poses():
        for a, Xa, b, Xb in ((pad, X_pad, box, pose), (box, pose, pad, X_pad)):
            fast = compute_contact_surface(a, Xa, b, Xb, "polygon")
            direct = compute_contact_surface(a, Xa, b, Xb, "polygon", reuse_pairs=False)
            for name in FIELDS:
                assert np.array_equal(getattr(fast, name), getattr(direct, name), equal_nan=True), name
            w_fast = compute_wrench(fast, a, b)
            w_direct = compute_wrench(direct, a, b)
            assert np.array_equal(w_fast.force, w_direct.force) and np.array_equal(w_fast.torque, w_direct.torque)
            faces += fast.n_faces
    cache = pad.derived["pair_caches"][id(box)][1]
    # the comparison above covered both kinds of query: most steps reused, the jumps traversed
    assert cache.reuses > 30 and 3 <= cache.traversals < 30
    assert faces > 1000


def test_reused_pairs_between_two_compliant_bodies(pad):
    other = jittered_pad(cells=7, layers=3, seed=1)
    other.derived.pop("pair_caches", None)
    pad.derived.pop("pair_caches", None)
    flipped = Pose.from_xyz_rpy(0.0, 0.0, 0.0, 180.0, 0.0, 0.0)   # its face (z = H) down
    for k in range(30):
        X = as_matrix(Pose.from_xyz_rpy(0.0004 * k, 0.0, 2 * H - 0.001 - 0.00005 * k, 0.0, 0.0, 0.3 * k)) @ \
            as_matrix(flipped)
        fast = compute_contact_surface(pad, np.eye(4), other, X, "triangle")
        direct = compute_contact_surface(pad, np.eye(4), other, X, "triangle", reuse_pairs=False)
        assert fast.n_faces > 0
        for name in FIELDS:
            assert np.array_equal(getattr(fast, name), getattr(direct, name), equal_nan=True), name
    cache = pad.derived["pair_caches"][id(other)][1]
    assert cache.reuses > 0


def test_motion_bound_contains_every_moved_box():
    rng = np.random.default_rng(3)
    points = rng.uniform(-0.02, 0.03, (40, 3))
    tree = build_bvh(points, rng.integers(0, 40, (30, 3)))
    reach = float(max(np.abs(tree.lower[0]).max(), np.abs(tree.upper[0]).max()))
    lo = np.vstack([tree.lower, tree.element_lower])
    hi = np.vstack([tree.upper, tree.element_upper])
    for _ in range(200):
        X0 = as_matrix(Pose.from_xyz_rpy(*rng.uniform(-0.05, 0.05, 3), *rng.uniform(-180, 180, 3)))
        X1 = X0 @ as_matrix(Pose.from_xyz_rpy(*rng.uniform(-1e-3, 1e-3, 3), *rng.uniform(-2, 2, 3)))
        bound = motion_bound(X0, X1, reach)
        c0, h0 = mapped_boxes(lo, hi, X0)
        c1, h1 = mapped_boxes(lo, hi, X1)
        assert np.all(c1 - h1 >= c0 - h0 - bound - 1e-15) and np.all(c1 + h1 <= c0 + h0 + bound + 1e-15)
        # and it is not vacuous: some box moves by more than half the bound
        assert np.max(np.maximum(np.abs((c1 - h1) - (c0 - h0)), np.abs((c1 + h1) - (c0 + h0)))) > 0.5 * bound / 3


def test_cache_follows_a_pose_far_away_and_back(pad, box):
    """A pose jump beyond the margin refills the cache; pairs equal the direct ones each time."""
    cache = PairCache()
    X_near = as_matrix(Pose.from_xyz_rpy(0.0, 0.0, H + 0.014, 2.0, 0.0, 10.0))
    X_far = as_matrix(Pose.from_xyz_rpy(0.0, 0.0, H + 0.5))
    for X in (X_near, X_far, X_near, X_near):
        got = sorted_candidate_pairs(pad.bvh, box.bvh, X, cache)
        assert np.array_equal(got, sorted_candidate_pairs(pad.bvh, box.bvh, X))
    assert cache.traversals == 3 and cache.reuses == 1


# --------------------------------------------------------------------------- narrow phase


def clip_triangle_by_tet(tri, tet_points):
    """Triangle ∩ tet by Sutherland–Hodgman against the tet's four face planes (outward
    normals from the centroid), in plain numpy: the reference polygon."""
    poly = [np.asarray(v, float) for v in tri]
    centre = tet_points.mean(axis=0)
    for f in ((1, 2, 3), (0, 3, 2), (0, 1, 3), (0, 2, 1)):
        a, b, c = tet_points[list(f)]
        n = np.cross(b - a, c - a)
        if np.dot(centre - a, n) > 0:
            n = -n
        out = []
        for i in range(len(poly)):
            p, q = poly[i], poly[(i + 1) % len(poly)]
            dp, dq = np.dot(p - a, n), np.dot(q - a, n)
            if dp <= 0:
                out.append(p)
            if dp * dq < 0:
                out.append(p + dp / (dp - dq) * (q - p))
        poly = out
        if not poly:
            return []
    return poly


def polygon_area_centroid(poly, normal):
    area, moment = 0.0, np.zeros(3)
    for k in range(1, len(poly) - 1):
        a = 0.5 * np.dot(np.cross(poly[k] - poly[0], poly[k + 1] - poly[0]), normal)
        area += a
        moment += a * (poly[0] + poly[k] + poly[k + 1]) / 3
    return area, moment / area if area else np.mean(poly, axis=0)


@pytest.mark.parametrize("k", [5, 33, 59])
def test_tri_tet_polygons_equal_brute_force_clipping(pad, box, k):
    X_pad = as_matrix(Pose.from_xyz_rpy(0.0005, -0.0003, 0.0, 1.0, -0.5, 3.0))
    X_box = as_matrix(box_poses()[k])
    surface = compute_contact_surface(pad, X_pad, box, X_box, "polygon", reuse_pairs=False)
    P = pad.points @ X_pad[:3, :3].T + X_pad[:3, 3]
    V = box.vertices @ X_box[:3, :3].T + X_box[:3, 3]
    grad = pad.gradient @ X_pad[:3, :3].T
    expected = {}
    force = np.zeros(3)
    tet_lo, tet_hi = P[pad.tets].min(axis=1), P[pad.tets].max(axis=1)
    tri_lo, tri_hi = V[box.faces].min(axis=1), V[box.faces].max(axis=1)
    touching = np.all((tet_lo[:, None] <= tri_hi[None] + 1e-9) & (tri_lo[None] <= tet_hi[:, None] + 1e-9), axis=2)
    for t, f in zip(*np.nonzero(touching)):      # every pair whose boxes come within 1 nm
        tet, tri = pad.tets[t], box.faces[f]
        if True:
            normal = -box.face_normals[f] @ X_box[:3, :3].T      # from the pad (A) into the box (B)
            poly = clip_triangle_by_tet(V[tri], P[tet])
            if len(poly) < 3:
                continue
            area, centroid = polygon_area_centroid(poly, -normal)     # wound about the outward normal
            if area > 1e-14 * 0.03 ** 2:
                pressure = pad.pressure[tet[0]] + grad[t] @ (centroid - P[tet[0]])
                expected[(t, f)] = (area, centroid, pressure)
                force += area * pressure * normal
    got = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(surface.element_a, surface.element_b))}
    kept = {key for key, i in got.items() if surface.areas[i] > 1e-14 * 0.03 ** 2}
    assert kept == set(expected) and len(expected) > 50
    for key in expected:
        i = got[key]
        area, centroid, pressure = expected[key]
        assert surface.areas[i] == pytest.approx(area, rel=1e-9, abs=1e-18)
        assert np.allclose(surface.centroids[i], centroid, rtol=0, atol=1e-12)
        assert surface.centroid_pressure[i] == pytest.approx(pressure, rel=1e-9, abs=1e-9 * M0)
    wrench = compute_wrench(surface, pad, box)
    assert np.allclose(wrench.force, force, rtol=1e-12, atol=1e-12 * np.abs(force).max())
