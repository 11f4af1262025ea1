"""Tests of the surface stage: reading, repair, refusal, units, core checks.

Outcome of every file in the mesh corpus (tests/data/meshes), measured with
``load_surface`` (STL parts read in mm, the rest in m):

| file | outcome | why |
|---|---|---|
| angle_block.STL | loads | CAD part; STL per-face copies merged (1,760 vertices) |
| box.STL | refused: intersects itself, 4,665 face pairs | closed and consistently wound, but its shells cross one another (checked below) |
| bunny.ply | refused: 215 open edges / 70 holes, 125 non-manifold edges, 199 non-manifold vertices, 2 crossing pairs | scanned, not watertight |
| drake_bad_geometry_volume_zero.obj | loads after reversing 4 faces, volume 0.5 | a closed triangular prism whose 4 "bad" faces are wound the wrong way; Drake gets zero volume from the raw winding, but the surface is a closed orientable manifold, so making the winding consistent (a repair the issue names as safe) is unambiguous |
| drake_neg_volume.obj | refused: 3 open edges, 1 hole | a single triangle |
| drake_non_convex_mesh.obj | loads, volume 1/6 - 1/15 = 0.1 | a valid closed non-convex (dimpled) tetrahedron |
| drake_one_negative_tetrahedron.vtk | refused: no triangles (4 vertices) | a tet volume mesh, not a surface |
| drake_two_inverted_faces.obj | refused: 8 open edges, 2 holes | only the top and bottom of a cube: no winding repair can close it |
| fandisk.obj | loads | closed CAD benchmark |
| featuretype.STL | loads | CAD part (8,706 seam vertices merged) |
| idler_riser.STL | loads | CAD part (3,934 merged) |
| plate_8in_col.obj | loads | thin non-convex collision mesh, closed |
| plate_holes.STL | loads | CAD part (3,138 merged) |
| pr2_l_finger_tip.obj | refused: 4 open edges, 1 hole | a real 0.5 mm quadrilateral hole in the plane z = -6.25 mm, not a seam |
| soup.stl | refused: 300 open edges / 100 holes, 1,248 crossing pairs | 100 loose triangles |
| teapot.stl | refused: 64 open edges / 6 holes, 1 non-manifold vertex, 56 crossing pairs | modelled, not watertight |
| torus.STL | loads | closed (21,750 merged) |
| unit_sphere.STL | loads | closed (3,198 merged) |
| yellow_bell_pepper_no_stem_low.vtk | refused: no triangles (667 vertices) | a tet volume mesh, not a surface |
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np
import pytest
import trimesh

from fieldgen.errors import InputError, OptionError
from fieldgen.install import install_hint
from fieldgen.io.surface_readers import read_triangles
from fieldgen.surface.components import face_components
from fieldgen.surface.defects import surface_defects
from fieldgen.surface.intersections import intersecting_face_pairs
from fieldgen.surface.repair import repair_surface
from fieldgen.surface.stage import UNIT_SCALE, Surface, check_core_inside, load_surface
from fieldgen.surface.topology import winding_numbers

ROOT = Path(__file__).resolve().parents[1]

#: File -> the repair it needs (None: none). "merge" STL parts: each face stores its own three
#: corners; how many merge is counted independently below (trimesh's rounding merge).
LOADS = {
    "angle_block.STL": "merge",
    "featuretype.STL": "merge",
    # OpenCASCADE tessellates each B-rep face on its own: the seams between faces are merged
    # (counted only as "some": trimesh's own STEP loader tessellates with other tolerances).
    "featuretype.STEP": "seams",
    "idler_riser.STL": "merge",
    "plate_holes.STL": "merge",
    "torus.STL": "merge",
    "unit_sphere.STL": "merge",
    "fandisk.obj": None,
    "plate_8in_col.obj": None,
    "drake_non_convex_mesh.obj": None,
    "drake_bad_geometry_volume_zero.obj": "reversed 4 faces",
}


def independent_merge_count(path) -> int:
    """Corners that coincide with another, counted by trimesh's own merge (coordinates rounded to
    10^-digits of the file's unit): the same count for 3 to 6 digits, so no tolerance decides it."""
    raw = trimesh.load(path, force="mesh", process=False)
    used = len(np.unique(raw.faces))
    counts = set()
    for digits in (3, 6):
        merged = trimesh.Trimesh(raw.vertices, raw.faces, process=False)
        merged.merge_vertices(digits_vertex=digits)
        counts.add(used - len(merged.vertices))
    assert len(counts) == 1, counts
    return counts.pop()


# File -> patterns that must all appear in the refusal, and whether --robust is offered.
REFUSED = {
    # the count of crossing pairs: bounded independently by test_box_stl_crossing_pairs_counted_by_vtk
    "box.STL": ([r"intersects itself: [\d,]+ pairs of faces"], True),
    # {open}, {holes}, {nonmanifold_edges}, {nonmanifold_vertices}: counted here by
    # surface_counts (trimesh and scipy), not by fieldgen
    "bunny.ply": ([r"{open} open edges", r"{holes} holes?\b", r"{nonmanifold_edges} non-manifold edges",
                   r"{nonmanifold_vertices} non-manifold vertices"], True),
    "drake_neg_volume.obj": ([r"not closed: {open} open edges", r"{holes} holes?\b"], True),
    "drake_two_inverted_faces.obj": ([r"not closed: {open} open edges", r"{holes} holes?\b"], True),
    "pr2_l_finger_tip.obj": ([r"not closed: {open} open edges", r"{holes} holes?\b"], True),
    "soup.stl": ([r"{open} open edges", r"{holes} holes?\b", r"intersects itself: [\d,]+ pairs"], True),
    "teapot.stl": ([r"{open} open edges", r"{holes} holes?\b", r"{nonmanifold_vertices} non-manifold vertices"],
                   True),
    "drake_one_negative_tetrahedron.vtk": ([r"no triangles \(4 vertices"], False),
    "yellow_bell_pepper_no_stem_low.vtk": ([r"no triangles \(667 vertices"], False),
}


def _components(n: int, pairs: np.ndarray) -> np.ndarray:
    """scipy's connected components of the graph of ``pairs`` over ``n`` nodes: each node's label."""
    import scipy.sparse
    from scipy.sparse.csgraph import connected_components

    graph = scipy.sparse.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1]


def surface_counts(path) -> dict[str, int]:
    """Counted independently of fieldgen: the file read by trimesh, coincident corners merged
    (to 10^-6 of the file's unit), degenerate and repeated triangles dropped. Open edges are
    those one triangle uses, holes the connected loops they form; non-manifold edges those
    more than two use; a non-manifold vertex is one whose triangles fall into more than one fan,
    triangles at the vertex joined across the edges through it that exactly two triangles use."""
    raw = trimesh.load(path, force="mesh", process=False)
    mesh = trimesh.Trimesh(raw.vertices, raw.faces, process=False)
    mesh.merge_vertices(digits_vertex=6)
    f = mesh.faces[(mesh.faces[:, 0] != mesh.faces[:, 1]) & (mesh.faces[:, 1] != mesh.faces[:, 2])
                   & (mesh.faces[:, 2] != mesh.faces[:, 0])]
    f = f[np.sort(np.unique(np.sort(f, axis=1), axis=0, return_index=True)[1])]
    n, m = len(mesh.vertices), len(f)
    # side k of face i is row k·m + i
    sides = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    edges, edge_of, uses = np.unique(sides, axis=0, return_inverse=True, return_counts=True)
    edge_of = edge_of.ravel()
    open_edges = edges[uses == 1]
    hole_of = _components(n, open_edges)
    # fans: nodes are (vertex, face) incidences; two faces sharing a two-face edge join at both its ends
    incidence = np.unique(f.ravel() * m + np.repeat(np.arange(m), 3))
    shared = np.flatnonzero(uses[edge_of] == 2)
    shared = shared[np.argsort(edge_of[shared], kind="stable")].reshape(-1, 2)     # the two sides of each edge
    face_a, face_b = shared[:, 0] % m, shared[:, 1] % m
    joins = [np.searchsorted(incidence, np.stack([sides[shared[:, 0], end] * m + face_a,
                                                   sides[shared[:, 0], end] * m + face_b], axis=1)) for end in (0, 1)]
    fan_of = _components(len(incidence), np.concatenate(joins))
    fans = np.bincount(np.unique(np.stack([incidence // m, fan_of], axis=1), axis=0)[:, 0], minlength=n)
    return {"open": len(open_edges), "holes": len(np.unique(hole_of[np.unique(open_edges)])),
            "nonmanifold_edges": int((uses > 2).sum()), "nonmanifold_vertices": int((fans > 1).sum())}


def _units(name: str) -> str:
    return "mm" if name.endswith((".STL", ".STEP")) else "m"


#: Parts outside the development corpus (SOURCES.md, "Parts outside the development corpus"):
#: tests/test_corpus_sources.py checks that they read, their units and size, and which are closed.
OUTSIDE_CORPUS = {
    "20mm-xyz-cube.stl", "busted.STL", "round.stl", "1002_tray_bottom.STL", "octagonal_pocket.stl",
    "ADIS16480.STL", "counter.unitsmm.STL", "robotiq_arg2f_140_inner_finger.stl",
    "robotiq_arg2f_140_outer_finger.stl", "robotiq_arg2f_coupling.stl", "robotiq_3f_link_1.STL",
    "robotiq_3f_link_3.STL", "robotiq_ft300_coupling.STL", "robotiq_fts150.stl", "SQNutO8T5P1.stl",
    "Sqr3H5L3D3P1.stl", "xamla_mount_c920_left.stl", "kinova_forearm.STL", "kinova_finger_distal.STL",
    "xamla_mount_rpi_bottom.stl", "clearpath_a200_lidar_mount.stl", "omx_plate.stl",
    "kortex_lite_left_finger_dist.STL", "j100_sick_inverted_bracket.stl", "kinova_ring_small.STL",
    "stretch_link_arm_l1.STL", "interbotix_uxarm_left_inner_knuckle.stl",
    "jackal_sick_lms1xx_upright_bracket.stl", "jackal_camera_bracket.stl", "rbkairos_box_handle.stl",
    "summit_xl_fr07_s101.stl", "summit_xl_steel_camera_base.stl", "summit_xl_tecnalia_axis_holder.stl",
    "trifinger_lower_link.STL", "solo12_neo_pixel_cover.STL", "fuze.obj", "cycloidal.ply", "evo_bowl_col.obj",
    "leap_fingertip.stl", "leap_thumb_pip.stl", "wallhole.obj", "box_sides.STEP",
    "franka_hand_col.stl", "shadow_palm.stl", "schunk_pw70_square_holder.stl", "schunk_pg70.stl",
}


def test_every_corpus_file_has_a_decided_outcome(meshes):
    files = {p.name for p in meshes.iterdir() if p.name != "SOURCES.md"}
    assert files == set(LOADS) | set(REFUSED) | OUTSIDE_CORPUS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(LOADS))
def test_corpus_file_loads_closed_and_outward(meshes, name):
    surface = load_surface(meshes / name, _units(name))
    defects = surface_defects(surface.vertices, surface.faces)
    assert defects.ok, defects
    assert surface.volume > 0
    # Outward: the winding number just outside each face is 0, just inside 1 (sampled).
    rng = np.random.default_rng(0)
    pick = rng.choice(len(surface.faces), size=min(20, len(surface.faces)), replace=False)
    tri = surface.vertices[surface.faces[pick]]
    centre = tri.mean(axis=1)
    size = np.linalg.norm(surface.bounds[1] - surface.bounds[0])
    step = 1e-6 * size
    normals = surface.face_normals[pick]
    outside = winding_numbers(surface.vertices, surface.faces, centre + step * normals)
    inside = winding_numbers(surface.vertices, surface.faces, centre - step * normals)
    assert np.allclose(outside, 0.0, atol=0.05) and np.allclose(inside, 1.0, atol=0.05)
    expected = LOADS[name]
    if expected == "merge":
        count = independent_merge_count(meshes / name)
        assert count > 0
        expected = f"merged {count:,} duplicate/seam vertices"
    if expected == "seams":
        assert any(re.fullmatch(r"merged [1-9][\d,]* duplicate/seam vertices", r) for r in surface.repairs)
    elif expected is None:
        assert surface.repairs == ()
    else:
        assert any(expected in r for r in surface.repairs), surface.repairs


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_corpus_file_refused_naming_file_defect_and_fix(meshes, name):
    patterns, robust = REFUSED[name]
    with pytest.raises(InputError) as info:
        load_surface(meshes / name, _units(name))
    message = str(info.value)
    assert message.startswith(str(meshes / name) + ":")
    counts = surface_counts(meshes / name) if any("{" in p for p in patterns) else {}
    for pattern in patterns:
        pattern = pattern.format(**counts) if counts else pattern
        assert re.search(pattern, message), (pattern, message)
    assert ("--robust" in message) == robust
    # the install command only when the extra is missing (the tests' venv has it)
    assert "pip install" not in message


def test_a_refusal_naming_robust_names_its_install_command_when_the_extra_is_missing(meshes, monkeypatch):
    import fieldgen.surface.stage as stage_module

    monkeypatch.setattr(stage_module, "extra_installed", lambda extra: False)
    with pytest.raises(InputError) as info:
        load_surface(meshes / "box.STL", _units("box.STL"))
    message = str(info.value)
    assert "--robust" in message and install_hint("robust") in message
    assert f"pip install -e '{ROOT}[robust]'" in message


def test_drake_prism_becomes_the_closed_form_prism(meshes):
    # Right triangle legs 1, 1 extruded by 1: volume 1/2, area 2*(1/2) + 1 + 1 + sqrt(2).
    surface = load_surface(meshes / "drake_bad_geometry_volume_zero.obj")
    assert surface.volume == pytest.approx(0.5, rel=1e-12)
    assert surface.area == pytest.approx(3 + np.sqrt(2), rel=1e-12)


def test_drake_non_convex_volume_closed_form(meshes):
    # Unit corner tetrahedron (1/6) minus the dimple tet (1,0,0),(0,1,0),(0,0,1),(.2,.2,.2).
    surface = load_surface(meshes / "drake_non_convex_mesh.obj")
    dimple = abs(np.linalg.det(np.array([[-1, 1, 0], [-1, 0, 1], [-0.8, 0.2, 0.2]]))) / 6
    assert surface.volume == pytest.approx(1 / 6 - dimple, rel=1e-12)


def test_box_stl_really_overlaps_itself(meshes):
    """Independent evidence for refusing box.STL: its closed shells cross one another — a shell
    with some of its vertices inside another shell (by that shell's winding number) and some
    outside, which neither an embedded surface nor a cavity has; and none was reversed (a
    one-vertex nesting probe once took such shells for cavities)."""
    v, f, g, repairs = repair_surface(*read_triangles(meshes / "box.STL")[:3])
    assert surface_defects(v, f, check_intersections=False).closed_manifold
    assert not any("reversed" in r for r in repairs)
    n, labels = face_components(f)[:2]
    crossing = 0
    for a in range(n):
        ids = np.unique(f[labels == a])
        for b in range(n):
            if b != a:
                inside = np.abs(winding_numbers(v, f[labels == b], v[ids])) > 0.5
                crossing += bool(inside.any() and not inside.all())
    assert crossing >= 2


def vtk_crossing_pairs(vertices: np.ndarray, faces: np.ndarray) -> int:
    """Pairs of triangles with no corner in common that VTK's triangle-triangle test
    (vtkCollisionDetectionFilter, the surface against itself) finds meeting."""
    import vtk
    from vtk.util.numpy_support import numpy_to_vtk, numpy_to_vtkIdTypeArray, vtk_to_numpy

    def poly():
        data, points, cells = vtk.vtkPolyData(), vtk.vtkPoints(), vtk.vtkCellArray()
        points.SetData(numpy_to_vtk(np.ascontiguousarray(vertices, dtype=np.float64), deep=True))
        cells.SetData(numpy_to_vtkIdTypeArray(np.arange(0, 3 * len(faces) + 1, 3, dtype=np.int64), deep=True),
                      numpy_to_vtkIdTypeArray(np.ascontiguousarray(faces, dtype=np.int64).ravel(), deep=True))
        data.SetPoints(points)
        data.SetPolys(cells)
        return data

    collide = vtk.vtkCollisionDetectionFilter()
    for port in (0, 1):
        collide.SetInputData(port, poly())
        collide.SetMatrix(port, vtk.vtkMatrix4x4())
    collide.SetCollisionModeToAllContacts()
    collide.Update()
    pairs = np.stack([vtk_to_numpy(collide.GetContactCells(0)), vtk_to_numpy(collide.GetContactCells(1))], axis=1)
    pairs = np.unique(np.sort(pairs, axis=1), axis=0)
    apart = ~(faces[pairs[:, 0]][:, :, None] == faces[pairs[:, 1]][:, None, :]).any(axis=(1, 2))
    return int(apart.sum())


def test_box_stl_crossing_pairs_counted_by_vtk(meshes):
    """The refusal's count of crossing face pairs against VTK's own triangle-triangle test on
    the same triangles (read and merged by trimesh): at least VTK's count, and at most 2% above
    it (VTK's test leaves out pairs that only overlap in a common plane or touch, which the
    count includes: 53 of 4,665 here, measured when this test was written)."""
    raw = trimesh.load(meshes / "box.STL", force="mesh", process=False)
    mesh = trimesh.Trimesh(raw.vertices, raw.faces, process=False)
    mesh.merge_vertices(digits_vertex=6)
    reference = vtk_crossing_pairs(np.asarray(mesh.vertices), np.asarray(mesh.faces))
    with pytest.raises(InputError) as info:
        load_surface(meshes / "box.STL", "mm")
    reported = int(re.search(r"intersects itself: ([\d,]+) pairs", str(info.value)).group(1).replace(",", ""))
    assert reference > 4000
    assert reference <= reported <= 1.02 * reference, (reported, reference)


def test_robust_path_loads_open_surface_without_refusing(meshes):
    surface = load_surface(meshes / "pr2_l_finger_tip.obj", require_closed=False)
    defects = surface_defects(surface.vertices, surface.faces)
    assert defects.open_edges == 4 and defects.holes == 1
    assert len(surface.faces) == 998


# ------------------------------------------------------------------ units, hash, reading

def test_mm_scales_by_exactly_1e_minus_3(meshes):
    in_m = load_surface(meshes / "angle_block.STL", "m")
    in_mm = load_surface(meshes / "angle_block.STL", "mm")
    assert np.array_equal(in_mm.vertices, in_m.vertices * 1e-3)
    assert np.array_equal(in_mm.faces, in_m.faces)
    assert in_mm.units == "mm" and in_m.units == "m"
    assert in_mm.volume == pytest.approx(in_m.volume * 1e-9, rel=1e-12)


def test_inch_and_cm_scale(tmp_path):
    path = _write(tmp_path / "cube.stl", trimesh.creation.box((2, 2, 2)))
    assert load_surface(path, "in").volume == pytest.approx(8 * 0.0254 ** 3, rel=1e-12)
    assert load_surface(path, "cm").volume == pytest.approx(8e-6, rel=1e-12)
    assert UNIT_SCALE == {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254}


def test_unknown_units_refused(meshes):
    with pytest.raises(OptionError, match="unknown units 'furlong'.*m, cm, mm, in"):
        load_surface(meshes / "fandisk.obj", "furlong")


def test_sha256_is_of_the_file_bytes(meshes):
    path = meshes / "fandisk.obj"
    surface = load_surface(path)
    assert surface.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert surface.path == str(path)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="nothing.stl: file not found"):
        load_surface(tmp_path / "nothing.stl")
    bad = tmp_path / "bad.obj"
    bad.write_text("v 0 0 0\nv 1 0 0\nf 1 2 9\n")
    with pytest.raises(InputError, match=r"bad.obj: face 1 of 1 refers to vertex 9 \(counting from 1\), but the file holds 2"):
        load_surface(bad)
    empty = tmp_path / "empty.obj"
    empty.write_text("# nothing\nv 0 0 0\n")
    with pytest.raises(InputError, match=r"no triangles \(1 vertices, 0 faces\)"):
        load_surface(empty)


def test_closed_form_cube_volume_area_and_repairs(tmp_path):
    # An STL stores 3 vertices per face: 36 for a cube, 8 after merging.
    path = _write(tmp_path / "cube.stl", trimesh.creation.box((1, 2, 3)))
    surface = load_surface(path)
    assert surface.repairs == ("merged 28 duplicate/seam vertices",)
    assert len(surface.vertices) == 8 and len(surface.faces) == 12
    assert surface.volume == pytest.approx(6.0, rel=1e-14)
    assert surface.area == pytest.approx(2 * (2 + 3 + 6), rel=1e-14)
    assert np.allclose(surface.bounds, [[-0.5, -1, -1.5], [0.5, 1, 1.5]])
    assert surface.vertices.dtype == np.float64 and surface.faces.dtype == np.int64
    with pytest.raises(ValueError):
        surface.vertices[0, 0] = 1.0  # read-only


def test_inverted_and_mixed_winding_is_repaired_and_counted(tmp_path):
    box = trimesh.creation.box((1, 1, 1))
    inverted = box.faces[:, ::-1]
    path = _write_obj(tmp_path / "inv.obj", box.vertices, inverted)
    surface = load_surface(path)
    assert surface.repairs == ("reversed 12 faces so the winding is consistent and "
                               "normals point outward",)
    assert surface.volume == pytest.approx(1.0)
    mixed = box.faces.copy()
    mixed[[0, 3, 7]] = mixed[[0, 3, 7], ::-1]
    surface = load_surface(_write_obj(tmp_path / "mixed.obj", box.vertices, mixed))
    assert any(r.startswith("reversed 3 faces") for r in surface.repairs)
    assert np.array_equal(np.sort(surface.faces, axis=1), np.sort(box.faces, axis=1))


def test_degenerate_duplicate_faces_and_unused_vertices_are_removed(tmp_path):
    box = trimesh.creation.box((1, 1, 1))
    faces = np.vstack([box.faces, box.faces[2], [[0, 0, 1]], [[1, 2, 2]]])
    vertices = np.vstack([box.vertices, [[9.0, 9.0, 9.0]]])
    surface = load_surface(_write_obj(tmp_path / "dirty.obj", vertices, faces))
    assert "removed 2 degenerate faces (two corners at one vertex)" in surface.repairs
    assert "removed 1 duplicate faces" in surface.repairs
    assert "dropped 1 vertices used by no face" in surface.repairs
    assert len(surface.faces) == 12 and surface.volume == pytest.approx(1.0)


def test_hollow_part_cavity_faces_inward(tmp_path):
    # Outer 2x2x2 box, inner 1x1x1 box, both written outward: the inner one is a cavity.
    outer, inner = trimesh.creation.box((2, 2, 2)), trimesh.creation.box((1, 1, 1))
    v = np.vstack([outer.vertices, inner.vertices])
    f = np.vstack([outer.faces, inner.faces + 8])
    surface = load_surface(_write_obj(tmp_path / "hollow.obj", v, f))
    assert surface.volume == pytest.approx(8 - 1)
    assert any(r.startswith("reversed 12 faces") for r in surface.repairs)


def test_two_separate_solids_load(tmp_path):
    a, b = trimesh.creation.box((1, 1, 1)), trimesh.creation.box((1, 1, 1))
    b.apply_translation([3, 0, 0])
    surface = load_surface(_write(tmp_path / "two.stl", trimesh.util.concatenate([a, b])))
    assert surface.volume == pytest.approx(2.0)


def test_flat_closed_surface_refused_without_robust(tmp_path):
    # Four coplanar points wired as a tetrahedron: closed, manifold, no volume.
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0.3, 0.3, 0]], dtype=float)
    f = np.array([[0, 2, 1], [0, 1, 3], [1, 2, 3], [2, 0, 3]])
    with pytest.raises(InputError) as info:
        load_surface(_write_obj(tmp_path / "flat.obj", v, f))
    assert "1 closed pieces enclose no volume (flat)" in str(info.value)
    assert "flat.obj:" in str(info.value)


def test_overlapping_solids_refused_with_robust(tmp_path):
    a, b = trimesh.creation.box((1, 1, 1)), trimesh.creation.box((1, 1, 1))
    b.apply_translation([0.5, 0.3, 0.2])
    with pytest.raises(InputError) as info:
        load_surface(_write(tmp_path / "overlap.stl", trimesh.util.concatenate([a, b])))
    message = str(info.value)
    assert re.search(r"intersects itself: [\d,]+ pairs of faces", message)
    assert "--robust" in message and "overlap.stl:" in message


def test_pushed_through_vertex_is_a_self_intersection():
    box = trimesh.creation.box((1, 1, 1))
    v = np.array(box.vertices)
    corner = int(np.argmax(v.sum(axis=1)))  # (0.5, 0.5, 0.5)
    v[corner] = [-0.2, -0.1, -0.9]          # through the opposite faces and out
    assert len(intersecting_face_pairs(v, np.asarray(box.faces))) > 0
    assert len(intersecting_face_pairs(np.asarray(box.vertices), np.asarray(box.faces))) == 0


def test_nonmanifold_vertex_and_edge_are_counted():
    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=float)
    faces = np.array([[0, 2, 1], [0, 1, 3], [1, 2, 3], [0, 3, 2]])
    # Two tets touching at vertex 0 only (the second mirrored through the origin).
    v = np.vstack([tet, -tet[1:]])
    f = np.vstack([faces, np.where(faces == 0, 0, faces + 3)[:, [0, 2, 1]]])
    d = surface_defects(v, f)
    assert d.nonmanifold_vertices == 1 and d.nonmanifold_edges == 0 and d.open_edges == 0
    # Two cubes sharing one edge: that edge is used by four faces.
    a, b = trimesh.creation.box((1, 1, 1)), trimesh.creation.box((1, 1, 1))
    b.apply_translation([1, 1, 0])
    m = trimesh.util.concatenate([a, b])
    v, f, g, _ = repair_surface(np.asarray(m.vertices), np.asarray(m.faces),
                                np.full(len(m.faces), -1))
    assert surface_defects(v, f).nonmanifold_edges == 1


@pytest.mark.parametrize("case, expected", [
    ("crossing", 1), ("apart", 0), ("coplanar_overlap", 1), ("coplanar_apart", 0),
    ("vertex_shared_crossing", 1), ("vertex_shared_clear", 0),
    ("edge_shared_folded", 1), ("edge_shared_flat", 0), ("edge_shared_bent", 0),
])
def test_triangle_pair_cases(case, expected):
    v = {
        "crossing": [[0, 0, 0], [2, 0, 0], [0, 2, 0], [0.5, 0.5, -1], [0.5, 0.5, 1], [1.5, 1.5, 0]],
        "apart": [[0, 0, 0], [2, 0, 0], [0, 2, 0], [0.5, 0.5, 1], [0.5, 0.5, 2], [1.5, 1.5, 1]],
        "coplanar_overlap": [[0, 0, 0], [2, 0, 0], [0, 2, 0], [0.5, 0.5, 0], [3, 0.5, 0], [0.5, 3, 0]],
        "coplanar_apart": [[0, 0, 0], [2, 0, 0], [0, 2, 0], [2, 2, 0], [3, 2, 0], [2, 3, 0]],
    }
    if case in v:
        pairs = intersecting_face_pairs(np.array(v[case], float), np.array([[0, 1, 2], [3, 4, 5]]))
    else:
        pts = np.array([[0, 0, 0], [2, 0, 0], [0, 2, 0],
                        {"vertex_shared_crossing": [1, 1, -1], "vertex_shared_clear": [-1, -1, 1],
                         "edge_shared_folded": [1, 0.5, 0], "edge_shared_flat": [-1, 0.5, 0],
                         "edge_shared_bent": [1, 0.5, 1e-3]}[case],
                        [0.5, 0.5, 1]], float)
        if case.startswith("vertex"):
            faces = np.array([[0, 1, 2], [0, 3, 4]])
        else:
            faces = np.array([[0, 1, 2], [0, 3, 2]])  # share the edge 0-2
        pairs = intersecting_face_pairs(pts, faces)
    assert len(pairs) == expected


# ------------------------------------------------------------------ formats and groups

def test_glb_scene_applies_node_transforms(tmp_path):
    scene = trimesh.Scene()
    scene.add_geometry(trimesh.creation.box((1, 1, 1)), geom_name="moved",
                       transform=trimesh.transformations.translation_matrix([5, 0, 0]))
    scene.add_geometry(trimesh.creation.box((1, 1, 1)), geom_name="still")
    path = tmp_path / "scene.glb"
    scene.export(path)
    surface = load_surface(path)
    assert surface.volume == pytest.approx(2.0)
    assert np.allclose(surface.bounds, [[-0.5, -0.5, -0.5], [5.5, 0.5, 0.5]])
    moved = surface.face_groups == surface.group_names.index("moved")
    assert moved.sum() == 12
    assert surface.vertices[np.unique(surface.faces[moved])][:, 0].min() == pytest.approx(4.5)


@pytest.mark.parametrize("ext", ["ply", "off", "stl"])
def test_other_formats_read(tmp_path, ext):
    path = _write(tmp_path / f"cube.{ext}", trimesh.creation.box((1, 1, 1)))
    assert load_surface(path).volume == pytest.approx(1.0)


def test_obj_groups_quads_and_negative_indices(tmp_path):
    path = tmp_path / "g.obj"
    path.write_text(
        "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\nv 1 1 1\nv 0 1 1\n"
        "g top\nf 5 6 7 8\n"
        "g rest\nf 1 4 3 2\nf -8/1/1 -7/1/1 -3/1/1 -4/1/1\nf 2 3 7 6\n"
        "o sides\nf 3 4 8 7\nf 4 1 5 8\n")
    surface = load_surface(path)
    assert surface.group_names == ("top", "rest", "sides")
    assert np.bincount(surface.face_groups).tolist() == [2, 6, 4]  # quads -> 2 triangles
    assert surface.volume == pytest.approx(1.0)
    top = surface.vertices[surface.faces[surface.face_groups == 0]]
    assert np.all(top[:, :, 2] == 1.0)


def test_load_is_deterministic(meshes):
    a = load_surface(meshes / "featuretype.STL", "mm")
    b = load_surface(meshes / "featuretype.STL", "mm")
    assert np.array_equal(a.vertices, b.vertices) and np.array_equal(a.faces, b.faces)


@pytest.mark.slow
def test_self_intersection_check_handles_50k_faces():
    sphere = trimesh.creation.icosphere(subdivisions=6)  # 81,920 faces
    v, f = np.asarray(sphere.vertices), np.asarray(sphere.faces)
    assert len(intersecting_face_pairs(v, f)) == 0
    dented = v.copy()
    dented[0] = -1.1 * v[0]  # drag one vertex through the ball: the spike pierces the far side
    assert len(intersecting_face_pairs(dented, f)) > 0


def test_deep_dimple_is_not_an_intersection():
    sphere = trimesh.creation.icosphere(subdivisions=3)
    v, f = np.array(sphere.vertices), np.asarray(sphere.faces)
    v[0] = -0.9 * v[0]  # the cone ends inside the ball near the far side: still embedded
    assert len(intersecting_face_pairs(v, f)) == 0
    v[0] = -1.1 * sphere.vertices[0]
    assert len(intersecting_face_pairs(v, f)) > 0


# ------------------------------------------------------------------ core

def test_core_inside_accepted_and_refused(tmp_path):
    outer = load_surface(_write(tmp_path / "outer.stl", trimesh.creation.box((2, 2, 2))))
    core = load_surface(_write(tmp_path / "core.stl", trimesh.creation.icosphere(2, 0.5)))
    check_core_inside(outer, core)  # no error
    shifted = trimesh.creation.icosphere(2, 0.5)
    shifted.apply_translation([0.8, 0, 0])
    crossing = load_surface(_write(tmp_path / "crossing.stl", shifted))
    with pytest.raises(OptionError, match=r"crosses or touches the outer surface: [\d,]+ pairs"):
        check_core_inside(outer, crossing)
    shifted.apply_translation([5, 0, 0])
    outside = load_surface(_write(tmp_path / "outside.stl", shifted))
    with pytest.raises(OptionError, match=r"not inside the outer surface: 1 of its 1 pieces"):
        check_core_inside(outer, outside)
    big = load_surface(_write(tmp_path / "big.stl", trimesh.creation.box((4, 4, 4))))
    with pytest.raises(OptionError, match="outer.stl: the core .*big.stl is not inside"):
        check_core_inside(outer, big)


def test_core_touching_outer_face_is_refused(tmp_path):
    outer = load_surface(_write(tmp_path / "outer.stl", trimesh.creation.box((2, 2, 2))))
    inner = trimesh.creation.box((1, 1, 1))
    inner.apply_translation([0, 0, 0.5])  # top face at z = 1, on the outer top face
    core = load_surface(_write(tmp_path / "core.stl", inner))
    with pytest.raises(OptionError, match="crosses or touches"):
        check_core_inside(outer, core)


def test_surface_is_a_frozen_dataclass(meshes):
    surface = load_surface(meshes / "drake_non_convex_mesh.obj")
    assert isinstance(surface, Surface)
    with pytest.raises(AttributeError):
        surface.units = "mm"


# ------------------------------------------------------------------ helpers

def _write(path, mesh):
    mesh.export(path)
    return path


def _write_obj(path, vertices, faces):
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in np.asarray(vertices, dtype=float).tolist()]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in np.asarray(faces)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_zero_area_cap_is_removed_by_an_edge_flip(tmp_path):
    """A vertex m on the diagonal a-b of the top face, joined by the cap (a, b, m):
    closed but with a zero-area face; flipping a-b leaves four good top triangles."""
    box = trimesh.creation.box((1, 1, 1))
    v, f = np.array(box.vertices), np.array(box.faces)
    top = np.flatnonzero(box.face_normals[:, 2] > 0.5)
    t1, t2 = f[top[0]], f[top[1]]
    k = next(i for i in range(3) if t1[(i + 1) % 3] in t2 and t1[i] in t2)
    a, b, c = t1[k], t1[(k + 1) % 3], t1[(k + 2) % 3]
    m = len(v)
    v = np.vstack([v, (v[a] + v[b]) / 2])
    f = np.vstack([np.delete(f, top[0], axis=0), [[a, m, c], [m, b, c], [a, b, m]]])
    surface = load_surface(_write_obj(tmp_path / "cap.obj", v, f))
    assert ("removed 1 zero-area faces (a corner on the opposite edge) by flipping that "
            "edge") in surface.repairs
    assert len(surface.faces) == 14
    assert surface.volume == pytest.approx(1.0) and surface.area == pytest.approx(6.0)
    assert face_min_area(surface) > 0.1
    assert surface_defects(surface.vertices, surface.faces).ok


def face_min_area(surface):
    p = surface.vertices[surface.faces]
    return float(np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1).min() / 2)


@pytest.mark.parametrize("gap, touching", [(1e-9, "1 pair of its separate closed pieces touch"),
                                         (0.0, "it intersects itself"), (1e-6, None)])
def test_separate_pieces_within_tetgens_tolerance_are_refused_as_touching(tmp_path, gap, touching):
    """A 100 mm plate with a 40 mm box set on it, saved as one file of two closed pieces: at a gap
    TetGen takes for contact (below 1e-8 of the size: 1 nm here, or none) TetGen stopped with an
    internal error after minutes (a robot's enclosure: a plate and two housings 4 nm apart); the
    load refuses it at once naming --robust (in contact, as overlapping faces). A micrometre apart
    the pieces are two bodies."""
    plate = trimesh.creation.box(extents=(0.1, 0.1, 0.01))
    plate.apply_translation((0.0, 0.0, -0.005))
    box = trimesh.creation.box(extents=(0.04, 0.04, 0.04))
    box.apply_translation((0.0, 0.0, 0.02 + gap))
    path = tmp_path / "assembly.stl"
    trimesh.util.concatenate([plate, box]).export(path)
    if touching:
        with pytest.raises(InputError, match=touching + ".*--robust"):
            load_surface(path, "m")
    else:
        assert surface_defects(*_loaded(path)).ok


def _loaded(path):
    surface = load_surface(path, "m")
    return surface.vertices, surface.faces
