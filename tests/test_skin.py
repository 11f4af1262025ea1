"""--skin THICKNESS: a compliant skin over a rigid interior."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.errors import OptionError
from fieldgen.material.levels import SNAP_FRACTION
from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID, boundary_faces_of, tet_volumes
from fieldgen.skin.cut import cut_skin
from fieldgen.validate import validate_asset
from triangle_distance import point_triangle_distance


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# ------------------------------------------------------------------ distance

def test_point_triangle_distance_regions():
    a, b, c = (np.array([[0.0, 0, 0]]), np.array([[1.0, 0, 0]]), np.array([[0.0, 1, 0]]))
    cases = {(0.2, 0.2, 3.0): 3.0,            # above the face
             (-1.0, -1.0, 0.0): np.sqrt(2),  # vertex region of a
             (0.5, -2.0, 0.0): 2.0,          # edge ab
             (1.0, 1.0, 0.0): np.sqrt(0.5),  # edge bc
             (2.0, 0.0, 1.0): np.sqrt(2)}    # vertex b
    for p, expected in cases.items():
        got = point_triangle_distance(np.array([p]), a, b, c)[0]
        assert got == pytest.approx(expected, abs=1e-15)


# ------------------------------------------------------------------ closed forms

def test_ball_skin_is_the_spherical_shell(tmp_path):
    """A skin t over a ball of radius b is the shell with core a = b - t: e and L (docs/model.md §2.2, §2.6)."""
    b, t = 0.05, 0.015
    a = b - t
    trimesh.creation.icosphere(subdivisions=4, radius=b).export(tmp_path / "ball.stl")
    result = build(tmp_path / "ball.stl", tmp_path / "ball.vtu", BuildOptions(skin=t, modulus=1e5, skin_mesh="cut"))
    asset = read_asset(tmp_path / "ball.vtu")
    r = np.linalg.norm(asset.points, axis=1)
    shell = np.clip((1 / r - 1 / b) / (1 / a - 1 / b), 0.0, 1.0)
    assert np.abs(asset.extent - shell).max() < 0.035          # meshing error of the cut at r = a
    assert np.sqrt(np.mean((asset.extent - shell) ** 2)) < 0.01
    assert r.min() == pytest.approx(a, rel=0.02)                # nothing deeper than the skin is left
    # The cut (e = 1) lies at depth t below the faceted surface, whose faces are between the
    # inscribed radius and b from the centre: r in [inscribed - t, a], widened by the recorded
    # range of the cut's depths (a vertex whose move would flatten a tet stays short). The P1
    # cut of the depth (concave inside a ball) lay outside this band, up to 1.0036 a.
    meta = read_metadata(tmp_path / "ball.vtu")
    low, high = meta["skin"]["cut_depth"]
    assert 1.0 - 1e-9 <= high <= 1.01 and 0.99 <= low <= 1.0 + 1e-9
    ball = trimesh.load(tmp_path / "ball.stl")
    inscribed = np.abs(np.einsum("ij,ij->i", ball.face_normals, ball.triangles_center)).min()
    on_cut = r[asset.extent == 1.0]
    assert on_cut.min() >= inscribed - high * t - 1e-9 and on_cut.max() <= b - low * t + 1e-9
    assert meta["skin"]["cut_vertices_held"] <= 0.01 * len(on_cut)
    # fieldgen inspect says so.
    from fieldgen.inspection import format_summary, summarize
    text = format_summary(summarize(asset, tmp_path / "ball.vtu"))
    assert f"15 mm over a rigid interior, {100 * meta['skin']['skin_volume_fraction']:.1f}% of the part" in text
    assert f"interior {low:.3g}–{high:.3g} × the thickness below the free faces" in text
    exact_l = (b**3 - a**3) / (3 * a * b)
    assert result.characteristic_length == pytest.approx(exact_l, rel=0.01)
    fraction = result.extra["skin_volume_fraction"]
    assert fraction == pytest.approx(1 - (a / b) ** 3, rel=0.02)
    assert meta["skin"]["skin_volume_fraction"] == fraction
    assert meta["skin"]["thickness"] == pytest.approx(t)
    assert meta["skin"]["depth_from"] == "free faces"
    assert meta["boundary"]["problem"] == "laplace" and meta["extent_solution"]["problem"] == "laplace"
    assert meta["deterministic"] is True
    assert validate_asset(tmp_path / "ball.vtu").ok


def _box_surface(h):
    box = trimesh.creation.box(extents=(1.0, 1.0, h))
    box.apply_translation((0.5, 0.5, h / 2))
    return box


def test_depth_is_measured_from_free_faces_only(tmp_path):
    """A slab [0,1]^2 x [0,h] with a bonded bottom and insulated sides: only the top is exposed, so
    the skin is the top layer of thickness t, e = (h - z)/t, L = t and the skin is t/h of the
    volume. Were depth measured from the sides or bottom too, none of these would hold. The cut
    snaps depths within SNAP_FRACTION x t of t onto it (no slivers), so the cut surface is within
    1% of t of the plane z = h - t: that is the tolerance here."""
    h, t = 0.4, 0.1
    _box_surface(h).export(tmp_path / "slab.stl")
    options = BuildOptions(skin=t, modulus=1e5, bonded=("normal:0,0,-1",),
                           insulated=("normal:1,0,0", "normal:-1,0,0", "normal:0,1,0", "normal:0,-1,0"))
    result = build(tmp_path / "slab.stl", tmp_path / "slab.vtu", options)
    asset = read_asset(tmp_path / "slab.vtu")
    z = asset.points[:, 2]
    snap = SNAP_FRACTION * t
    assert h - t - snap - 1e-9 <= z.min() <= h - t + 1e-9
    np.testing.assert_allclose(asset.extent, (h - z) / t, atol=1.5 * SNAP_FRACTION)
    assert result.characteristic_length == pytest.approx(t, rel=1.5 * SNAP_FRACTION)
    assert result.extra["skin_volume_fraction"] == pytest.approx(t / h, abs=snap / h)
    # Without the skin the same slab is all rubber: L = h (the bonded-slab closed form).
    plain = build(tmp_path / "slab.stl", tmp_path / "plain.vtu", dataclasses.replace(options, skin=None))
    assert plain.characteristic_length == pytest.approx(h, rel=1e-6)
    assert validate_asset(tmp_path / "slab.vtu").ok


def test_cut_keeps_outer_markers_and_marks_the_cut_rigid(tmp_path):
    from fieldgen.surface.stage import load_surface
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize

    h, t = 0.4, 0.15
    _box_surface(h).export(tmp_path / "slab.stl")
    surface = load_surface(tmp_path / "slab.stl")
    markers = assign_conditions(surface, [], [parse_selector("normal:1,0,0")])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=t / 2))
    skin = cut_skin(mesh, t)
    out = skin.mesh
    assert np.all(tet_volumes(out.points, out.tets) > 0)
    np.testing.assert_array_equal(out.boundary_faces, boundary_faces_of(out.tets))
    # The insulated +x face keeps its condition; the cut faces are RIGID at depth t.
    centroids = out.points[out.boundary_faces].mean(axis=1)
    on_plus_x = np.isclose(centroids[:, 0], 1.0)
    assert np.all(out.boundary_markers[on_plus_x] == INSULATED)
    rigid = out.boundary_markers == RIGID
    assert rigid.sum() == skin.rigid_faces > 0
    assert np.all(out.boundary_markers[~rigid & ~on_plus_x] == FREE)
    # Exact depth of the box's interior from five free sides: the distance to the nearest one.
    p = out.points
    exact = np.min(np.stack([p[:, 0], p[:, 1], 1 - p[:, 1], p[:, 2], h - p[:, 2]]), axis=0)
    # The cut's vertices are at depth t, except those held short where a tet would flatten (near
    # the planes where two sides are equally near); their recorded depth is still the exact one.
    cut = np.unique(out.boundary_faces[rigid])
    np.testing.assert_allclose(skin.depth[cut], exact[cut], atol=1e-7)                 # float32 STL
    assert np.sum(np.abs(exact[cut] - t) > 1e-7) <= skin.held_vertices <= 0.1 * len(cut)
    free_vertices = np.setdiff1d(out.boundary_faces[~rigid].ravel(), out.boundary_faces[rigid].ravel())
    np.testing.assert_allclose(skin.depth[free_vertices], exact[free_vertices], atol=1e-7)  # float32 STL
    # The skin plus what was cut away is the whole part.
    assert skin.volume_fraction * skin.part_volume == pytest.approx(tet_volumes(out.points, out.tets).sum())
    assert 0 < skin.volume_fraction < 1


def test_interior_faces_count_the_cut_not_the_bonded_faces_that_remain(tmp_path):
    """A slab bonded underneath: near its free sides the bonded bottom is shallower than the skin
    and stays, RIGID like the cut. The count recorded as the interior's faces is the cut's only."""
    from fieldgen.surface.stage import load_surface
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize

    h, t = 0.4, 0.15
    _box_surface(h).export(tmp_path / "slab.stl")
    surface = load_surface(tmp_path / "slab.stl")
    markers = assign_conditions(surface, [parse_selector("normal:0,0,-1")], [])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=t / 2))
    skin = cut_skin(mesh, t)
    out = skin.mesh
    rigid = out.boundary_markers == RIGID
    on_bottom = np.all(out.points[out.boundary_faces][:, :, 2] == 0.0, axis=1)
    assert np.any(rigid & on_bottom)                       # bonded faces remain, RIGID too
    assert skin.rigid_faces == np.sum(rigid & ~on_bottom) > 0


def test_moves_onto_the_depth_never_flatten_a_tet(tmp_path):
    """The interior vertices of a box within 0.05 of depth 0.12 below its top asked to move onto
    it (many sharing tets, some moves longer than their tets): each tet keeps at least KEEP_VOLUME
    of its volume, some vertices reach the depth exactly and some are held, and only the movable
    ones moved."""
    from fieldgen.skin.cut import KEEP_VOLUME, place_cut_at_depth
    from fieldgen.surface.stage import load_surface
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
    from fieldgen.io.vtk_data import distance_to_triangles

    h, t = 0.4, 0.12
    _box_surface(h).export(tmp_path / "slab.stl")
    surface = load_surface(tmp_path / "slab.stl")
    markers = assign_conditions(surface, [], [parse_selector(n) for n in
                                              ("normal:1,0,0", "normal:-1,0,0", "normal:0,1,0", "normal:0,-1,0",
                                               "normal:0,0,-1")])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=0.1))
    free = (surface.vertices, surface.faces[markers == FREE])
    movable = np.abs(distance_to_triangles(mesh.points, *free) - t) < 0.05
    movable[mesh.boundary_faces.ravel()] = False
    before = tet_volumes(mesh.points, mesh.tets)
    moved = place_cut_at_depth(mesh.points, mesh.tets, movable, t, free)
    assert np.all(tet_volumes(moved, mesh.tets) >= KEEP_VOLUME * before * (1 - 1e-12))
    np.testing.assert_array_equal(moved[~movable], mesh.points[~movable])
    depth = distance_to_triangles(moved[movable], *free)
    assert 0 < np.mean(np.abs(depth - t) <= 1e-9 * t) < 1       # some reached the depth, some were held


def test_snap_moves_only_inner_vertices_near_the_depth_and_puts_them_on_it(tmp_path):
    """A box with five free sides, depth 0.12: the vertices inside the box within CUT_SNAP of
    their mean edge of that depth are moved onto it (their recorded depth is then exactly the
    thickness, or, held short, the measured one), no other vertex moves, and no tet keeps less
    than KEEP_VOLUME of its volume."""
    from fieldgen.meshing.tetmesh import mesh_edges
    from fieldgen.skin.cut import CUT_SNAP, KEEP_VOLUME, snap_to_cut
    from fieldgen.surface.stage import load_surface
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
    from fieldgen.io.vtk_data import distance_to_triangles

    h, t = 0.4, 0.12
    _box_surface(h).export(tmp_path / "slab.stl")
    surface = load_surface(tmp_path / "slab.stl")
    markers = assign_conditions(surface, [], [parse_selector("normal:1,0,0")])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=0.08))
    free = (surface.vertices, surface.faces[markers == FREE])
    depth = distance_to_triangles(mesh.points, *free)
    moved_mesh, snapped, moved = snap_to_cut(mesh, depth, t, CUT_SNAP, free)
    # Which vertices were candidates, computed here from the edges directly.
    edges, _ = mesh_edges(mesh.tets, mesh.n_points)
    length = np.linalg.norm(np.diff(mesh.points[edges], axis=1)[:, 0], axis=1)
    total, count = np.zeros(mesh.n_points), np.zeros(mesh.n_points)
    for k in range(2):
        np.add.at(total, edges[:, k], length)
        np.add.at(count, edges[:, k], 1)
    on_boundary = np.zeros(mesh.n_points, dtype=bool)
    on_boundary[mesh.boundary_faces.ravel()] = True
    near = ~on_boundary & (np.abs(depth - t) < CUT_SNAP * total / count)
    assert near.sum() > 10
    np.testing.assert_array_equal(moved, near)
    np.testing.assert_array_equal(moved_mesh.points[~near], mesh.points[~near])
    np.testing.assert_array_equal(snapped[~near], depth[~near])
    measured = distance_to_triangles(moved_mesh.points[near], *free)
    np.testing.assert_allclose(measured, snapped[near], rtol=0, atol=1e-9 * t)
    assert np.mean(snapped[near] == t) > 0.9                    # most reach the depth exactly
    assert np.all(tet_volumes(moved_mesh.points, mesh.tets) >= KEEP_VOLUME * tet_volumes(mesh.points, mesh.tets) * (1 - 1e-12))
    # snap = 0 changes nothing.
    same, unchanged, none = snap_to_cut(mesh, depth, t, 0.0, free)
    assert same is mesh and np.array_equal(unchanged, depth) and not none.any()
    # Excluded vertices are left alone.
    _, _, fewer = snap_to_cut(mesh, depth, t, CUT_SNAP, free, exclude=near)
    assert not fewer.any()


def test_snap_leaves_vertices_at_the_depth_cap_alone(tmp_path):
    """Depths are capped at DEPTH_CAP x the thickness; on a mesh coarse against the skin a capped
    vertex (really much deeper) can lie within CUT_SNAP of its edge of the thickness. Snapping it
    moved it far and gave it a depth above the cap, and the cut then failed ("extent values lie
    outside [0, 1]"; featuretype bonded underneath with a 0.05 in skin). It is not snapped, and
    the skin is cut."""
    from fieldgen.skin.cut import CUT_SNAP, DEPTH_CAP, free_surface_depth, snap_to_cut
    from fieldgen.surface.stage import load_surface
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize

    h, t = 0.4, 0.03
    _box_surface(h).export(tmp_path / "slab.stl")
    surface = load_surface(tmp_path / "slab.stl")
    markers = np.full(len(surface.faces), FREE)
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=0.35))
    free = (surface.vertices, surface.faces)
    depth = free_surface_depth(mesh, cap=DEPTH_CAP * t, free_surface=free)
    capped = depth >= DEPTH_CAP * t
    assert capped.sum() > 0                                # the mesh is coarse: some are capped ...
    _, snapped, moved = snap_to_cut(mesh, depth, t, CUT_SNAP, free)
    assert not moved[capped].any() and snapped.max() <= DEPTH_CAP * t
    skin = cut_skin(mesh, t, free_surface=free)
    assert np.all(tet_volumes(skin.mesh.points, skin.mesh.tets) > 0) and skin.rigid_faces > 0


def _faces_per_edge(faces) -> np.ndarray:
    """How many of the triangles ``faces`` hold each of their edges."""
    pairs = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    return np.unique(pairs, axis=0, return_counts=True)[1]


def _edges_with_more_than_two_faces(faces) -> int:
    return int(np.sum(_faces_per_edge(faces) > 2))


def test_the_cut_is_a_surface_where_the_snap_alone_would_pinch_it(meshes):
    """idler_riser.STL (inches) meshed at the skin's thickness, 2 mm skin: snapping every vertex
    near the depth onto it puts both ends of some edges on the cut with the tets around them
    alternating between the sides, so two kept pieces would meet along an edge (53 edges with
    four cut faces, measured). cut_skin leaves those vertices unsnapped and cuts again: every edge
    of the skin's boundary has exactly two faces, and most of the snap is kept."""
    from fieldgen.surface.selectors import assign_conditions
    from fieldgen.skin.cut import CUT_SNAP, snap_to_cut
    from fieldgen.surface.stage import load_surface
    from fieldgen.material.slicing import slice_by_levels
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
    from fieldgen.io.vtk_data import distance_to_triangles

    t = 2e-3
    surface = load_surface(meshes / "idler_riser.STL", "in")
    markers = assign_conditions(surface, [], [])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=t))
    exposed = (surface.vertices, surface.faces[markers == FREE])
    # The snap alone, then the cut as cut_skin makes it: the pinch is there.
    depth = distance_to_triangles(mesh.points, *exposed)
    depth[mesh.vertices_with(FREE)] = 0.0
    snapped_mesh, snapped_depth, _ = snap_to_cut(mesh, np.minimum(depth, 2 * t), t, CUT_SNAP, exposed)
    top = min(float(depth.max()), 2 * t)
    sliced, value = slice_by_levels(snapped_mesh, snapped_depth / top, np.array([t / top]))
    kept = sliced.tets[value[sliced.tets].mean(axis=1) < t / top]
    assert _edges_with_more_than_two_faces(boundary_faces_of(kept)) > 10
    skin = cut_skin(mesh, t, free_surface=exposed)
    assert _edges_with_more_than_two_faces(skin.mesh.boundary_faces) == 0
    assert np.all(tet_volumes(skin.mesh.points, skin.mesh.tets) > 0)
    cut = np.unique(skin.mesh.boundary_faces[skin.mesh.boundary_markers == RIGID])
    sliced_only = cut_skin(mesh, t, free_surface=exposed, snap=0.0)
    assert skin.held_vertices < 0.5 * sliced_only.held_vertices and len(cut) > 0


# ------------------------------------------------------------------ real part, refusals

def test_cut_lies_at_the_skin_depth_on_a_real_part(meshes):
    """angle_block.STL (inches) under a 2 mm skin, meshed at twice the skin: the P1 cut of the
    depth left a third of the cut's vertices at the skin depth and 1% deeper than 1.3 x; each is
    moved to the exact depth unless a tet around it would flatten (docs/model.md §2.2). Vertices
    near the depth are put on it before the cut, which leaves few slivers and few held vertices:
    slicing alone left 1.1% of the skin's tets with a dihedral angle below 5° and held 7.6% of
    the cut's vertices."""
    from fieldgen.meshing.tetmesh import min_dihedral_angles
    from fieldgen.surface.selectors import assign_conditions
    from fieldgen.surface.stage import load_surface
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
    from fieldgen.io.vtk_data import distance_to_triangles

    t = 2e-3
    surface = load_surface(meshes / "angle_block.STL", "in")
    markers = assign_conditions(surface, [], [])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=2 * t))
    exposed = (surface.vertices, surface.faces[markers == FREE])
    skin = cut_skin(mesh, t, free_surface=exposed)
    out = skin.mesh
    assert np.all(tet_volumes(out.points, out.tets) > 0)
    cut = np.unique(out.boundary_faces[out.boundary_markers == RIGID])
    depth = distance_to_triangles(out.points[cut], *exposed) / t
    exact = np.abs(depth - 1.0) <= 1e-9
    assert exact.mean() >= 0.9                 # the linear cut had a third of them there
    assert np.percentile(depth, 99) < 1.1      # it had 1.31
    assert depth.max() < 1.3                   # it had 1.7
    # What is recorded is what is there.
    assert skin.held_vertices == np.sum(~exact)
    assert skin.cut_depth == pytest.approx((depth.min(), depth.max()), rel=1e-12)
    # The snap: few held, few slivers, and both fewer than slicing alone gives on the same mesh.
    sliced = cut_skin(mesh, t, free_surface=exposed, snap=0.0)
    sliced_cut = np.unique(sliced.mesh.boundary_faces[sliced.mesh.boundary_markers == RIGID])
    assert skin.held_vertices <= 0.02 * len(cut) and sliced.held_vertices > 0.04 * len(sliced_cut)
    flat = np.mean(min_dihedral_angles(out.points, out.tets) < 5.0)
    flat_sliced = np.mean(min_dihedral_angles(sliced.mesh.points, sliced.mesh.tets) < 5.0)
    assert flat < 0.005 and flat_sliced > 4 * flat
    assert _edges_with_more_than_two_faces(out.boundary_faces) == 0


def test_skin_on_a_real_cad_part_builds_and_validates(tmp_path, meshes):
    """idler_riser.STL (inches): walls thinner than twice the skin, where the skin meets itself."""
    out = tmp_path / "riser.vtu"
    result = run("build", meshes / "idler_riser.STL", "--units", "in", "--skin", "0.1",
                 "--modulus", "1e6", "--bonded", "normal:0,0,-1", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert 0.0 < report["skin_volume_fraction"] < 1.0
    meta = read_metadata(out)
    assert meta["skin"]["skin_volume_fraction"] == report["skin_volume_fraction"]
    assert meta["skin"]["interior_faces"] > 0
    assert meta["boundary"]["bonded"] == ["normal:0,0,-1"]
    assert validate_asset(out).ok
    asset = read_asset(out)
    assert asset.extent.max() == 1.0 and asset.extent.min() == 0.0
    # The asset's boundary is a surface: two faces on every edge (a pinched cut had five edges
    # with four, measured before the cut left such edges' ends unsnapped).
    assert np.all(_faces_per_edge(boundary_faces_of(asset.tets)) == 2)


@pytest.mark.slow
def test_a_thick_skin_over_angle_block_builds_where_tetgen_failed_on_its_size_fields(tmp_path, meshes):
    """angle_block.STL under a 0.15 in skin (K = 0.5): TetGen crashed (SIGSEGV) on the size field
    of a sizing pass, at every scale tried here, so the build failed. The pass is meshed with a
    uniform edge instead (mesher.sizing.passes[].meshed_by) and the asset is valid."""
    out = tmp_path / "block.vtu"
    result = run("build", meshes / "angle_block.STL", "--units", "in", "--skin", "0.15", "--modulus", "1e6",
                 "--law", "hyperbolic", "--k", "0.5", "--skin-mesh", "cut", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    assert validate_asset(out).ok
    passes = read_metadata(out)["mesher"]["sizing"]["passes"]
    allowed = {"size field", "uniform edge"} | {f"size field x {f:g}" for f in (0.95, 1.05, 0.9)}
    assert passes and all(p["meshed_by"] in allowed for p in passes)


def test_skin_thicker_than_the_part_is_refused(tmp_path, meshes):
    """The deepest point the message names (measured at the mesh's vertices, so at most the
    part's true depth) is checked against the depth measured here by trimesh: the largest
    distance to the surface of 8000 seeded random points inside the part."""
    out = tmp_path / "riser.vtu"
    result = run("build", meshes / "idler_riser.STL", "--units", "in", "--skin", "0.5",
                 "--modulus", "1e6", "-o", out)
    assert result.exit_code == 2
    message = result.stderr
    assert "idler_riser.STL" in message and "thicker than the part" in message
    assert " in below the free surface" in message
    reported = float(message.split("deepest point is about ")[1].split(" in below")[0])
    part = trimesh.load(meshes / "idler_riser.STL", force="mesh")
    lo, hi = part.bounds
    inside = lo + np.random.default_rng(0).random((8000, 3)) * (hi - lo)
    depth = float(trimesh.proximity.signed_distance(part, inside[part.contains(inside)]).max())   # in
    assert depth < 0.5                                              # the skin is indeed thicker
    assert 0.85 * depth <= reported <= 1.02 * depth + 0.005         # 2 digits in the message
    assert "--skin below" in message and "Traceback" not in message
    assert list(tmp_path.iterdir()) == []


def test_skin_thicker_than_the_part_raises_option_error(tmp_path):
    h = 0.1
    _box_surface(h).export(tmp_path / "slab.stl")
    with pytest.raises(OptionError) as info:
        build(tmp_path / "slab.stl", tmp_path / "slab.vtu", BuildOptions(skin=0.06, modulus=1e5, units="m"))
    message = str(info.value)
    assert "slab.stl" in message and "thicker than the part" in message
    deepest = float(message.split("deepest point is about ")[1].split(" m below")[0])
    assert 0.045 <= deepest <= 0.05  # h/2 at the centre, measured at the mesh vertices


def test_a_skin_on_a_part_read_in_the_wrong_units_names_its_true_depth(tmp_path, meshes):
    """A 215 mm bottle (metres in its file) read as millimetres under a 2 mm skin: its coarse first
    mesh has every vertex on the surface, where the message once named a depth of 0 mm and asked
    for a skin below it. The depth named is checked against trimesh's (the largest distance to the
    surface of seeded random points inside), and the message points at --units."""
    result = run("build", meshes / "fuze.obj", "--units", "mm", "--skin", "2", "--modulus", "1e6",
                 "-o", tmp_path / "bottle.vtu")
    assert result.exit_code == 2, result.output
    message = result.stderr
    assert "thicker than the part" in message and "--units" in message and "Traceback" not in message
    reported = float(message.split("deepest point is about ")[1].split(" mm below")[0])
    part = trimesh.load(meshes / "fuze.obj", force="mesh")
    lo, hi = part.bounds
    inside = lo + np.random.default_rng(0).random((8000, 3)) * (hi - lo)
    depth = float(trimesh.proximity.signed_distance(part, inside[part.contains(inside)]).max())  # file units
    assert 0.85 * depth <= reported <= 1.02 * depth + 1e-4
    assert list(tmp_path.iterdir()) == []


def test_skin_and_core_are_exclusive(tmp_path):
    with pytest.raises(OptionError, match="--skin and --core"):
        BuildOptions(skin=0.1, core="core.stl", modulus=1e5).checked()
    with pytest.raises(OptionError, match="--skin must be a positive"):
        BuildOptions(skin=-1.0, modulus=1e5).checked()


def test_example_spec_reads():
    from pathlib import Path

    from fieldgen.options import options_from_spec

    spec = Path(__file__).resolve().parents[1] / "assets" / "idler_riser_skin.toml"
    options, input_path, _ = options_from_spec(spec)
    assert options.checked().skin == 0.1 and options.units == "in"
    assert Path(input_path).is_file()


def test_a_skin_that_fills_the_part_is_a_warning_that_names_a_thinner_one(tmp_path):
    """A 6 mm plate under a 2.8 mm skin: only a sliver 0.4 mm thick is deeper than the skin, so
    the rigid interior is scraps; the warning says so and offers half the deepest point (3 mm)."""
    trimesh.creation.box(extents=(0.02, 0.02, 0.006)).export(tmp_path / "slab.stl")
    result = run("build", tmp_path / "slab.stl", "--skin", "0.0028", "--modulus", "1e5", "--edge-length", "0.0014",
                 "-o", tmp_path / "slab.vtu", "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["skin_volume_fraction"] > 0.99
    (warning,) = [w for w in report["warnings"] if "fills" in w]
    assert "the skin (0.0028 m) fills" in warning and "below 0.0015 m" in warning and "drop --skin" in warning
    assert warning in read_metadata(tmp_path / "slab.vtu")["warnings"]
    # A skin half the slab's half-thickness leaves a real interior: no such warning.
    result = run("build", tmp_path / "slab.stl", "--skin", "0.0015", "--modulus", "1e5", "--edge-length", "0.00075",
                 "-o", tmp_path / "thin.vtu", "--json", "--quiet")
    assert result.exit_code == 0, result.output
    assert not [w for w in json.loads(result.stdout)["warnings"] if "fills" in w]
