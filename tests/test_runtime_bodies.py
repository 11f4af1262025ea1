"""Bodies: construction from arrays, assets, Drake .vtk meshes and surface files."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.errors import InputError, OptionError
from fieldgen.meshing.tetmesh import boundary_faces_of, p1_gradients
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry, load_body, read_legacy_vtk_tets
from fieldgen.runtime.contact.bvh import build_bvh, candidate_pairs
from fieldgen.runtime.contact.pose import Pose
from test_runtime_meshes import box_grid, box_surface


def test_drake_vtk_field_matches_the_definition(meshes):
    """The bell pepper (Drake's own hydroelastic mesh): p0 = E·d/max d, d the exact distance to
    the boundary triangles, 0 on the boundary, E at the deepest vertex."""
    body = load_body(meshes / "yellow_bell_pepper_no_stem_low.vtk", modulus=2e5)
    assert isinstance(body, CompliantGeometry)
    assert body.tets.shape == (2519, 4) and body.points.shape == (667, 3)
    boundary = boundary_faces_of(body.tets)
    on_boundary = np.unique(boundary)
    assert np.all(body.pressure[on_boundary] == 0.0)
    assert body.pressure.max() == pytest.approx(2e5, rel=1e-15)
    assert len(body.core_faces) == 0 and not body.core_tets.any()
    # exact distance, brute force over every boundary triangle with an independent reference
    # (trimesh.triangles.closest_point was measured off by 0.5% on one of these triangles)
    tri = body.points[boundary]
    rng = np.random.default_rng(7)
    inner = np.setdiff1d(np.arange(len(body.points)), on_boundary)
    sample = rng.choice(inner, 25, replace=False)
    d = np.array([_reference_distance(body.points[i], tri) for i in sample])
    dmax = max(_reference_distance(body.points[i], tri) for i in inner)
    assert np.allclose(body.pressure[sample], 2e5 * d / dmax, rtol=1e-9, atol=0)
    assert np.allclose(body.gradient, p1_gradients(body.points, body.tets, body.pressure))


def _reference_distance(p, tri):
    """Point-to-triangles distance: the plane foot when it lies inside (barycentric test),
    else the nearest point on the three edges."""
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    n = np.cross(b - a, c - a)
    n = n / np.linalg.norm(n, axis=1, keepdims=True)
    foot = p - np.einsum("ij,ij->i", p - a, n)[:, None] * n
    inside = np.ones(len(tri), bool)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= np.einsum("ij,ij->i", np.cross(v - u, foot - u), n) >= 0
    best = np.where(inside, np.linalg.norm(p - foot, axis=1), np.inf)
    for u, v in ((a, b), (b, c), (c, a)):
        t = np.clip(np.einsum("ij,ij->i", p - u, v - u) / np.einsum("ij,ij->i", v - u, v - u), 0, 1)
        best = np.minimum(best, np.linalg.norm(p - (u + t[:, None] * (v - u)), axis=1))
    return best.min()


def test_bad_vtk_files_raise_input_errors(meshes, tmp_path):
    with pytest.raises(InputError, match="negative volume.*Reorder"):
        read_legacy_vtk_tets(meshes / "drake_one_negative_tetrahedron.vtk")
    with pytest.raises(OptionError, match="modulus"):
        load_body(meshes / "yellow_bell_pepper_no_stem_low.vtk")
    garbage = tmp_path / "garbage.vtk"
    garbage.write_text("this is not a vtk file\n")
    with pytest.raises(InputError, match="garbage.vtk"):
        load_body(garbage, modulus=1e5)
    with pytest.raises(InputError, match="not found"):
        load_body(tmp_path / "missing.stl")
    # a surface-only legacy file (triangles, not tets)
    surface = tmp_path / "triangles.vtk"
    surface.write_text("# vtk DataFile Version 2.0\nt\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 3 float\n"
                       "0 0 0\n1 0 0\n0 1 0\nCELLS 1 4\n3 0 1 2\nCELL_TYPES 1\n5\n")
    with pytest.raises(InputError, match="not tetrahedra"):
        load_body(surface, modulus=1e5)


def test_rigid_from_mesh_units_and_outward_normals(meshes, tmp_path):
    import trimesh

    body = load_body(meshes / "box.STL", units="mm")
    assert isinstance(body, RigidGeometry)
    mesh = trimesh.Trimesh(body.vertices, body.faces, process=False)
    raw = trimesh.load(meshes / "box.STL", force="mesh")
    assert mesh.volume == pytest.approx(abs(raw.volume) * 1e-9, rel=1e-9) and mesh.volume > 0
    # an inward-wound copy is flipped back
    inverted = tmp_path / "inverted.stl"
    trimesh.Trimesh(raw.vertices, raw.faces[:, ::-1]).export(inverted)
    flipped = RigidGeometry.from_mesh(inverted, units="mm")
    assert trimesh.Trimesh(flipped.vertices, flipped.faces).volume > 0
    with pytest.raises(OptionError, match="units"):
        RigidGeometry.from_mesh(meshes / "box.STL", units="furlong")
    empty = tmp_path / "empty.obj"
    empty.write_text("# nothing\n")
    with pytest.raises(InputError, match="empty.obj"):
        RigidGeometry.from_mesh(empty)


def test_compliant_body_from_asset_roundtrip(tmp_path):
    """A .vtu asset written by fieldgen.io.asset loads with its metadata (friction, dissipation, L,
    modulus) and its rigid core (faces with e = 1)."""
    from fieldgen.io.asset import Asset, write_asset

    H = 0.02
    points, tets = box_grid(np.linspace(0, 0.1, 3), np.linspace(0, 0.1, 3), np.linspace(0, H, 3))
    extent = 1 - points[:, 2] / H
    metadata = {"law": {"kind": "linear", "modulus": 3e5}, "characteristic_length": H, "dissipation": 0.7,
                "friction": {"static": 0.8, "dynamic": 0.5}, "boundary": {}, "max_interpolation_error": 0.0,
                "source": "test"}
    path = tmp_path / "slab.vtu"
    write_asset(path, Asset(points, tets, extent, 3e5 * extent, metadata))
    body = load_body(path)
    assert isinstance(body, CompliantGeometry) and body.name == "slab"
    assert (body.modulus, body.dissipation, body.mu_static, body.mu_dynamic) == (3e5, 0.7, 0.8, 0.5)
    assert body.characteristic_length == pytest.approx(H)
    assert len(body.core_faces) == 8 and np.all(body.points[body.core_faces, 2] == 0)
    assert np.allclose(body.gradient, [0, 0, -3e5 / H])


def test_body_validation():
    points, tets = box_grid([0, 1], [0, 1], [0, 1])
    with pytest.raises(InputError, match="negative or non-finite"):
        CompliantGeometry.from_arrays(points, tets, -points[:, 0])
    with pytest.raises(InputError, match="pressure must be"):
        CompliantGeometry(points, tets, np.zeros(3), np.zeros((len(tets), 3)))
    with pytest.raises(InputError, match="indices"):
        RigidGeometry(np.zeros((3, 3)), np.array([[0, 1, 5]]))


def test_bvh_finds_every_overlapping_pair():
    """Broad phase against brute force: every tet/triangle pair whose exact boxes (B's box taken
    in A's frame from its transformed corners) overlap is reported, for a rotated pose."""
    rng = np.random.default_rng(3)
    points, tets = box_grid(np.linspace(0, 1, 6), np.linspace(0, 1, 5), np.linspace(0, 1, 4))
    points = points + rng.normal(scale=0.02, size=points.shape)
    v, f = box_surface([0, 0, 0], [0.5, 0.3, 0.2])
    X = Pose.from_xyz_rpy(0.4, 0.3, 0.35, 20, 30, 40).matrix
    pairs = candidate_pairs(build_bvh(points, tets), build_bvh(v, f), X)
    found = {tuple(p) for p in pairs.tolist()}
    tri = (v @ X[:3, :3].T + X[:3, 3])[f]
    tlo, thi = points[tets].min(1), points[tets].max(1)
    flo, fhi = tri.min(1), tri.max(1)
    exact = {(i, j) for i in range(len(tets)) for j in range(len(f))
             if np.all(tlo[i] <= fhi[j]) and np.all(flo[j] <= thi[i])}
    assert exact and exact <= found
    assert len(pairs) == len(found)   # no duplicates
