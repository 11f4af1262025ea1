"""The surface tolerance (docs/model.md §2.11): a surface with micron-wide slivers is remeshed
within the tolerance, keeps its face selections, and meshes with far fewer tets; ``0`` keeps the
input; a well-tessellated part is left alone; the flag works end to end and refuses bad values.

The distances are checked independently of the code under test: trimesh's closest-point query on
randomly sampled points (a fixed seed), not the build's own sampler and VTK query.
"""

from __future__ import annotations

import json
import math
import os
import tempfile

import numpy as np
import pytest
import tetgen
import trimesh
from click.testing import CliRunner

from cli.main import main
from fieldgen.io.asset import read_asset
from fieldgen.meshing.tetmesh import FREE, RIGID, boundary_faces_of
from fieldgen.options import BuildOptions
from fieldgen.pipeline import load_part
from fieldgen.progress import Progress
from fieldgen.sizing.size_field import first_size
import fieldgen.surface.remesh as remesh_module
from fieldgen.sizing.accuracy import MAX_TETS, RELAXED_RADIUS_EDGE, first_radius_edge
from fieldgen.surface.remesh import (RETRY_FACTOR, TETS_PER_COST, default_tolerance, needs_remesh, surface_cost, swamped,
                                     tets_per_cost, tolerated_surface)
from fieldgen.surface.stage import load_surface
from layered_mesh_checks import right_prism

MM = 1e-3
SIZE = (20.0, 20.0, 10.0)       # mm


def sliver_box(size=SIZE, step=2.0, width=0.005) -> trimesh.Trimesh:
    """A box (mm) whose faces are grids with a line every ``step`` and another ``width`` (5 µm)
    beside it: strips of triangles 5 µm wide and 2-20 mm long, as a CAD export leaves."""
    axes = []
    for length in size:
        base = np.arange(0.0, length, step)
        axes.append(np.unique(np.concatenate([base, base[1:] + width, [length]])))
    pieces = []
    for normal_axis in range(3):
        u_axis, v_axis = [a for a in range(3) if a != normal_axis]
        u, v = np.meshgrid(axes[u_axis], axes[v_axis], indexing="ij")
        index = np.arange(u.size).reshape(u.shape)
        a, b = index[:-1, :-1].ravel(), index[1:, :-1].ravel()
        c, d = index[1:, 1:].ravel(), index[:-1, 1:].ravel()
        quads = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
        for side in (0.0, size[normal_axis]):
            points = np.zeros((u.size, 3))
            points[:, u_axis], points[:, v_axis], points[:, normal_axis] = u.ravel(), v.ravel(), side
            pieces.append(trimesh.Trimesh(points, quads, process=False))
    mesh = trimesh.util.concatenate(pieces)
    mesh.merge_vertices()
    trimesh.repair.fix_normals(mesh)
    assert mesh.is_watertight and math.isclose(mesh.volume, np.prod(size), rel_tol=1e-12)
    return mesh


def chamfered_cylinder(radius=8.0, height=12.0, chamfer=0.005, sections=96) -> trimesh.Trimesh:
    """A cylinder (mm) with a 5 µm chamfer round its top rim: a ring of triangles 5 µm wide."""
    outline = [[0.0, 0.0], [radius, 0.0], [radius, height - chamfer], [radius - chamfer, height], [0.0, height]]
    mesh = trimesh.creation.revolve(np.array(outline), sections=sections)
    mesh.merge_vertices()
    trimesh.repair.fix_normals(mesh)
    assert mesh.is_watertight
    return mesh


@pytest.fixture(scope="module")
def sliver_stl(tmp_path_factory):
    path = tmp_path_factory.mktemp("slivers") / "sliver_box.stl"
    sliver_box().export(path)
    return path



def two_sided_distance(a: trimesh.Trimesh, b: trimesh.Trimesh, count=40_000) -> float:
    """The Hausdorff distance (m) between two surfaces (m) by trimesh: random points (seeded) on
    each, and its vertices, to the other's closest point. Measured in mm: trimesh's closest point
    on a triangle a few mm across, in metres, was off by 45 µm (its tolerances are absolute)."""
    a, b = (trimesh.Trimesh(np.asarray(m.vertices) / MM, np.asarray(m.faces), process=False) for m in (a, b))
    worst = 0.0
    for one, other, seed in ((a, b, 1), (b, a, 2)):
        points, _ = trimesh.sample.sample_surface(one, count, seed=seed)
        points = np.concatenate([points, one.vertices])
        _, distance, _ = trimesh.proximity.closest_point(other, points)
        worst = max(worst, float(distance.max()))
    return worst * MM


def as_trimesh(surface) -> trimesh.Trimesh:
    return trimesh.Trimesh(np.asarray(surface.vertices), np.asarray(surface.faces), process=False)


def first_mesh_tets(surface) -> int:
    """TetGen's first mesh of the accuracy sizing (its size from the volume) on ``surface``."""
    volume = first_size(abs(surface.volume)) ** 3 / (6.0 * math.sqrt(2.0))
    mesh = tetgen.TetGen(np.asarray(surface.vertices, dtype=float), np.asarray(surface.faces, dtype=np.int32))
    mesh.tetrahedralize(switches="pq1.414/0.0a" + np.format_float_positional(volume, trim="-") + "Q")
    return len(mesh.elem)


# ------------------------------------------------------------------ the surface stage

def test_micron_slivers_are_remeshed_within_the_tolerance_keeping_the_bonded_face(sliver_stl):
    options = BuildOptions(units="mm", modulus=1e5, bonded=("normal:0,0,-1",))
    part = load_part(str(sliver_stl), options, Progress(enabled=False))
    record = part.surface.remesh
    assert record is not None, "the default tolerance applies to a surface of micron slivers"
    tolerance = 1e-3 * math.sqrt(sum(s * s for s in SIZE)) * MM          # 0.1% of the diagonal, m
    assert record.tolerance == pytest.approx(tolerance)
    assert record.triangles_before == len(sliver_box().faces)
    assert record.triangles_after < record.triangles_before / 10
    # Within the tolerance, measured independently.
    source = sliver_box()
    source.apply_scale(MM)
    assert two_sided_distance(source, as_trimesh(part.surface)) <= tolerance
    assert record.hausdorff <= tolerance
    # The bonded bottom stays bonded and nothing else is: the rigid faces are the 20 x 20 mm bottom.
    surface, markers = part.surface, part.markers
    rigid = markers == RIGID
    areas = as_trimesh(surface).area_faces
    assert np.allclose(surface.vertices[surface.faces[rigid]][..., 2], 0.0, atol=1e-12)
    assert areas[rigid].sum() == pytest.approx(SIZE[0] * SIZE[1] * MM**2, rel=1e-9)
    assert (surface.face_normals[rigid] @ [0, 0, -1] > 0.999).all()
    assert (markers[~rigid] == FREE).all() and not (surface.face_normals[~rigid] @ [0, 0, -1] > 0.999).any()


def test_the_remeshed_surface_needs_far_fewer_tets():
    """The first mesh of the accuracy sizing on 5 µm slivers and on the remeshed surface."""
    mesh = sliver_box(size=(10.0, 10.0, 5.0), step=2.5)
    mesh.apply_scale(MM)
    surface = _surface(mesh)
    result = tolerated_surface(surface, np.full(len(mesh.faces), FREE), 2e-5)
    before, after = first_mesh_tets(surface), first_mesh_tets(result.surface)
    assert after * 5 < before, (before, after)


def _surface(mesh: trimesh.Trimesh):
    """A Surface (m) of ``mesh`` through the reader, as a build loads it."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "part.stl")
        mesh.export(path)
        return load_surface(path, "m")


def test_a_chamfer_5_um_wide_is_remeshed_within_the_tolerance():
    mesh = chamfered_cylinder()
    mesh.apply_scale(MM)
    surface = _surface(mesh)
    tolerance = 2e-5
    result = tolerated_surface(surface, np.full(len(mesh.faces), FREE), tolerance)
    assert result.remesh is not None and not result.warnings
    assert two_sided_distance(mesh, as_trimesh(result.surface)) <= tolerance
    edges = np.linalg.norm(np.diff(result.surface.vertices[result.surface.faces][:, [0, 1, 2, 0]], axis=1), axis=2)
    assert edges.min() > 10e-6, "no edge of the 5 µm chamfer is left"
    assert result.remesh.cost_after < result.remesh.cost_before / 2     # the long side facets stay


def fan(n: int) -> list[tuple[int, int, int]]:
    """The triangles of an ``n``-point outline fanned from its first point."""
    return [(0, k, k + 1) for k in range(1, n - 1)]


def fan_prism(step=0.2, sag=0.01, height=10.0) -> trimesh.Trimesh:
    """A prism (mm) whose top and bottom are fans from one corner to a row of points 0.2 mm apart
    along a shallow arc (10 µm sagitta) nearly in line with the fan's rays: caps 0.2 mm by 10-80 µm
    with no short edge, which no flip improves (the flipped pair is three points of the row), as
    a CAD export leaves on planar faces (the sensor housing's kind)."""
    x = np.arange(5.0, 20.0 + 1e-9, step)
    row = np.column_stack([x, 2.0 + sag * (1.0 - ((x - 12.5) / 7.5) ** 2)])
    outline = np.concatenate([[[0.0, 4.0]], row, [[20.0, 10.0], [0.0, 10.0]]])
    return right_prism(outline, fan(len(outline)), height)


def test_caps_no_flip_improves_are_collapsed_within_the_tolerance_keeping_the_bonded_face():
    """The fan's caps (a corner 10-80 µm from the opposite edge, every edge longer than the
    tolerance) are removed by moving the corner onto an end of that edge (docs/model.md §2.11);
    the result is within the tolerance (measured by trimesh), and the bonded bottom stays bonded."""
    mesh = fan_prism()
    mesh.apply_scale(MM)
    surface = _surface(mesh)
    tolerance = 3e-5
    down = surface.face_normals @ [0, 0, -1] > 0.999
    markers = np.where(down, RIGID, FREE)
    before = surface_cost(surface.vertices, surface.faces, narrower_than=tolerance)
    result = tolerated_surface(surface, markers, tolerance)
    assert result.remesh is not None and not result.warnings, result.warnings
    new = result.surface
    assert surface_cost(new.vertices, new.faces, narrower_than=tolerance) < before / 10
    assert two_sided_distance(mesh, as_trimesh(new)) <= tolerance
    rigid = result.markers == RIGID
    assert (new.face_normals[rigid] @ [0, 0, -1] > 0.999).all()
    assert not (new.face_normals[~rigid] @ [0, 0, -1] > 0.999).any()
    areas = as_trimesh(new).area_faces
    assert areas[rigid].sum() == pytest.approx(as_trimesh(surface).area_faces[down].sum(), rel=1e-3)


def rounded_prism(size=(20.0, 14.0), height=8.0, radius=0.3, segments=24) -> trimesh.Trimesh:
    """A prism (mm) on a rectangle with rounded corners: each 0.3 mm round a strip of 24 facets
    20 µm wide and 8 mm long, and the top and bottom fans from one corner, with 20 µm edges and
    caps towards the far rounds, as a CAD export tessellates a rounded box."""
    width, depth = size
    outline = []
    for cx, cy, start in ((width - radius, radius, -90.0), (width - radius, depth - radius, 0.0),
                          (radius, depth - radius, 90.0), (radius, radius, 180.0)):
        angles = np.radians(start + np.linspace(0.0, 90.0, segments + 1))
        outline += list(zip(cx + radius * np.cos(angles), cy + radius * np.sin(angles)))
    return right_prism(outline, fan(len(outline)), height)


def test_rounds_of_micron_strips_are_remeshed_on_planar_patches_keeping_the_bonded_face(tmp_path):
    """Strips 20 µm wide along 0.3 mm rounds, which no flip or collapse removes, and fans with
    caps on the flat faces: by default the surface is remeshed by MMGS with each planar patch its
    own reference and its borders ridges (docs/model.md §2.11), within the tolerance (measured by
    trimesh), the bonded bottom still the bottom, and TetGen's first mesh several times smaller."""
    mesh = rounded_prism()
    path = tmp_path / "rounded.stl"
    mesh.export(path)
    part = load_part(str(path), BuildOptions(units="mm", modulus=1e5, bonded=("normal:0,0,-1",)),
                     Progress(enabled=False))
    record = part.surface.remesh
    assert record is not None and not part.surface.warnings, part.surface.warnings
    tolerance = 1e-3 * math.sqrt(20.0**2 + 14.0**2 + 8.0**2) * MM
    assert record.tolerance == pytest.approx(tolerance)
    source = mesh.copy()
    source.apply_scale(MM)
    assert two_sided_distance(source, as_trimesh(part.surface)) <= tolerance
    new = part.surface
    assert surface_cost(new.vertices, new.faces, narrower_than=tolerance) < 100
    # The bonded bottom: the same area, facing down, and nothing else bonded.
    rigid = part.markers == RIGID
    loaded = load_surface(path, "mm")
    down = loaded.face_normals @ [0, 0, -1] > 0.999
    assert np.allclose(new.vertices[new.faces[rigid]][..., 2], 0.0, atol=1e-12)
    assert (new.face_normals[rigid] @ [0, 0, -1] > 0.999).all()
    assert not (new.face_normals[~rigid] @ [0, 0, -1] > 0.999).any()
    assert as_trimesh(new).area_faces[rigid].sum() == pytest.approx(as_trimesh(loaded).area_faces[down].sum(), rel=1e-3)
    before, after = first_mesh_tets(loaded), first_mesh_tets(new)
    assert after * 3 < before, (before, after)
    again = load_part(str(path), BuildOptions(units="mm", modulus=1e5, bonded=("normal:0,0,-1",)),
                      Progress(enabled=False))
    assert np.array_equal(again.surface.vertices, new.vertices) and np.array_equal(again.surface.faces, new.faces)
    assert np.array_equal(again.markers, part.markers)


def test_remeshing_is_deterministic(sliver_stl):
    surface = load_surface(sliver_stl, "mm")
    markers = np.full(len(surface.faces), FREE)
    one, two = (tolerated_surface(surface, markers, None) for _ in range(2))
    assert one.remesh is not None
    assert np.array_equal(one.surface.vertices, two.surface.vertices)
    assert np.array_equal(one.surface.faces, two.surface.faces)
    assert one.remesh == two.remesh


def test_zero_keeps_the_input_triangles_exactly(sliver_stl):
    loaded = load_surface(sliver_stl, "mm")
    part = load_part(str(sliver_stl), BuildOptions(units="mm", modulus=1e5, surface_tolerance=0.0),
                     Progress(enabled=False))
    assert part.surface.remesh is None
    assert np.array_equal(part.surface.vertices, loaded.vertices)
    assert np.array_equal(part.surface.faces, loaded.faces)


@pytest.mark.parametrize("name, units", [("fandisk.obj", "m"), ("torus.STL", "mm"), ("angle_block.STL", "mm"),
                                         ("featuretype.STL", "in"), ("idler_riser.STL", "mm")])
def test_a_well_tessellated_part_is_untouched_by_default(meshes, name, units):
    path = meshes / name
    loaded = load_surface(path, units)
    assert not needs_remesh(loaded)
    part = load_part(str(path), BuildOptions(units=units, modulus=1e5), Progress(enabled=False))
    assert part.surface.remesh is None
    assert np.array_equal(part.surface.vertices, loaded.vertices)
    assert np.array_equal(part.surface.faces, loaded.faces)


def test_a_public_cad_part_with_micron_caps_is_remeshed_by_default(meshes):
    """A 47 mm camera mount exported with 0.6 µm edges and caps (tests/data/meshes/SOURCES.md)."""
    path = meshes / "xamla_mount_c920_left.stl"
    part = load_part(str(path), BuildOptions(units="mm", modulus=1e5, bonded=("normal:0,0,-1",)),
                     Progress(enabled=False))
    record = part.surface.remesh
    assert record is not None and record.hausdorff <= record.tolerance
    assert record.cost_after < record.cost_before / 10
    source = trimesh.load(path, force="mesh")
    source.apply_scale(MM)
    assert two_sided_distance(source, as_trimesh(part.surface)) <= record.tolerance
    # The bonded faces are the input's downward faces, over the same area.
    loaded = load_surface(path, "mm")
    down = loaded.face_normals @ [0, 0, -1] > np.cos(np.radians(10))
    rigid = part.markers == RIGID
    assert as_trimesh(part.surface).area_faces[rigid].sum() == pytest.approx(
        as_trimesh(loaded).area_faces[down].sum(), rel=1e-3)


def short_edges_by_trimesh(path) -> float:
    """The share of the mesh's edges shorter than 0.1 % of its diagonal, by trimesh (not our code)."""
    mesh = trimesh.load(path, force="mesh")
    mesh.merge_vertices()
    return float(np.mean(mesh.edges_unique_length < 1e-3 * np.linalg.norm(mesh.extents)))


def test_a_cad_link_with_many_short_edges_is_remeshed_by_default(meshes):
    """A robot arm's forearm link (tests/data/meshes/SOURCES.md): its cost is below the rule's
    (5 first meshes) but 3 % of its edges are shorter than the default tolerance; remeshed within it."""
    path = meshes / "kinova_forearm.STL"
    loaded = load_surface(path, "m")
    assert short_edges_by_trimesh(path) >= 0.02 and not swamped(loaded)
    part = load_part(str(path), BuildOptions(modulus=1e5), Progress(enabled=False))
    record = part.surface.remesh
    assert record is not None and record.hausdorff <= record.tolerance
    source = trimesh.load(path, force="mesh")
    assert two_sided_distance(source, as_trimesh(part.surface)) <= record.tolerance
    assert not part.surface.warnings


def test_a_declined_attempt_for_short_edges_alone_keeps_the_input_silently(meshes):
    """The 2F-140 outer finger: 4.6 % short edges, cost far below the rule's; MMGS's result is not
    closed, so the input is meshed as it is, with no warning (the user asked for nothing)."""
    path = meshes / "robotiq_arg2f_140_outer_finger.stl"
    loaded = load_surface(path, "m")
    assert short_edges_by_trimesh(path) >= 0.02 and not swamped(loaded) and needs_remesh(loaded)
    part = load_part(str(path), BuildOptions(modulus=1e5), Progress(enabled=False))
    assert part.surface.remesh is None
    assert np.array_equal(part.surface.faces, loaded.faces)
    assert not any("surface tolerance" in w for w in part.surface.warnings)


@pytest.mark.slow
def test_the_forearm_link_meets_the_accuracy_by_default(meshes, tmp_path):
    """Before the short-edge rule its input triangles gave 2.04 % at 274k tets (the budget)."""
    out = tmp_path / "forearm.vtu"
    result = CliRunner().invoke(main, ["build", str(meshes / "kinova_forearm.STL"), "--modulus", "1e6",
                                       "--dissipation", "1", "-o", str(out), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["tets"] <= 300_000 and not report["warnings"]
    meta = read_asset(out).metadata
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01


@pytest.mark.slow
def test_the_sensor_housing_is_remeshed_on_its_planar_patches_within_the_tolerance(meshes):
    """The 47 mm sensor housing: over a thousand caps the moves cannot remove (no flip improves
    them and their corners cannot move within a tenth of the tolerance), so MMGS remeshes it with
    each planar patch its own reference (docs/model.md §2.11): within the tolerance, measured by
    trimesh, and with no triangle narrower than the tolerance but a few on the patches' borders."""
    path = meshes / "ADIS16480.STL"
    loaded = load_surface(path, "m")
    result = tolerated_surface(loaded, np.full(len(loaded.faces), FREE), None)
    assert result.remesh is not None and not result.warnings, result.warnings
    tolerance = result.remesh.tolerance
    assert tolerance == pytest.approx(1e-3 * np.linalg.norm(np.ptp(loaded.vertices, axis=0)))
    assert result.remesh.hausdorff <= tolerance
    new = result.surface
    assert surface_cost(new.vertices, new.faces, narrower_than=tolerance) < \
        surface_cost(loaded.vertices, loaded.faces, narrower_than=tolerance) / 20
    assert two_sided_distance(as_trimesh(loaded), as_trimesh(new)) <= tolerance
    assert abs(new.volume - loaded.volume) <= tolerance * loaded.area


# ------------------------------------------------------------------ the command line

def _build(args):
    return CliRunner().invoke(main, ["build", *args], catch_exceptions=False)


def test_the_flag_end_to_end_records_the_remeshing_and_keeps_the_bonded_face(sliver_stl, tmp_path):
    outputs = []
    for name in ("a.vtu", "b.vtu"):
        out = tmp_path / name
        result = _build([str(sliver_stl), "--units", "mm", "--surface-tolerance", "0.02", "--bonded",
                         "normal:0,0,-1", "--modulus", "1e5", "--dissipation", "1", "--edge-length", "3",
                         "-o", str(out), "--quiet"])
        assert result.exit_code == 0, result.output
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1], "same input, same options: byte-identical assets"
    asset = read_asset(tmp_path / "a.vtu")
    record = asset.metadata["surface"]["remesh"]
    assert record["tolerance"] == pytest.approx(2e-5)
    assert record["hausdorff"] <= 2e-5
    assert record["triangles_before"] == len(sliver_box().faces) > record["triangles_after"]
    # The bonded bottom: e = 1 at z = 0 (its rim, shared with the free sides, aside), e = 0 on top.
    x, y, z = asset.points.T / MM
    inner = (x > 1e-6) & (x < SIZE[0] - 1e-6) & (y > 1e-6) & (y < SIZE[1] - 1e-6)
    assert (inner & (np.abs(z) < 1e-9)).sum() > 10
    assert np.allclose(asset.extent[inner & (np.abs(z) < 1e-9)], 1.0)
    assert np.allclose(asset.extent[np.abs(z - SIZE[2]) < 1e-9], 0.0)


def test_the_remeshing_is_told_on_stderr_and_in_the_json_report(sliver_stl, tmp_path):
    """A user sees that the surface was changed: a `remeshed` line on stderr and the asset's
    record as `surface_remesh` in --json."""
    out = tmp_path / "a.vtu"
    result = _build([str(sliver_stl), "--units", "mm", "--surface-tolerance", "0.02", "--modulus", "1e5",
                     "--dissipation", "1", "--edge-length", "3", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["surface_remesh"] == read_asset(out).metadata["surface"]["remesh"]
    before, after = report["surface_remesh"]["triangles_before"], report["surface_remesh"]["triangles_after"]
    assert f"remeshed {sliver_stl} within 0.02 mm: {before:,} -> {after:,} triangles" in result.stderr


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_bad_tolerance_exits_2_naming_the_flag(sliver_stl, tmp_path, value):
    result = CliRunner().invoke(main, ["build", str(sliver_stl), "--units", "mm", "--modulus", "1e5",
                                       "--surface-tolerance", value, "-o", str(tmp_path / "x.vtu")])
    assert result.exit_code == 2, result.output
    assert "--surface-tolerance" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x.vtu").exists()


def test_a_spec_sets_the_tolerance_and_refuses_a_negative_one(sliver_stl, tmp_path):
    spec = tmp_path / "part.toml"
    spec.write_text(f'input = "{sliver_stl}"\nunits = "mm"\nmodulus = 1e5\nsurface_tolerance = -0.01\n')
    result = CliRunner().invoke(main, ["build", "--spec", str(spec), "-o", str(tmp_path / "x.vtu")])
    assert result.exit_code == 2 and "--surface-tolerance" in result.output, result.output
    spec.write_text(f'input = "{sliver_stl}"\nunits = "mm"\nmodulus = 1e5\ndissipation = 1.0\n'
                    'edge_length = 4.0\nsurface_tolerance = 0.025\n')
    result = CliRunner().invoke(main, ["build", "--spec", str(spec), "-o", str(tmp_path / "y.vtu"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert read_asset(tmp_path / "y.vtu").metadata["surface"]["remesh"]["tolerance"] == pytest.approx(2.5e-5)


@pytest.mark.slow
def test_a_cad_part_tetgen_refused_builds_from_the_sliver_moves_alone(meshes, tmp_path):
    """The ft300 coupling (10,100 triangles, edges down to 2.4 µm): TetGen stopped on its input
    with an internal error at every bound, and MMGS's results were 4 × the tolerance off its
    curved faces, so the build failed. Its slivers' moves alone are within the tolerance (their
    narrow triangles within the patches' bar, docs/model.md §2.11): the build ends with an asset,
    its bottom bonded, its surface within the tolerance both ways (measured here with trimesh)."""
    path = meshes / "robotiq_ft300_coupling.STL"
    out = tmp_path / "ft300.vtu"
    result = CliRunner().invoke(main, ["build", str(path), "--bonded", "normal:0,0,-1", "--modulus", "1e6",
                                       "--dissipation", "1", "-o", str(out), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["tets"] <= 300_000
    asset = read_asset(out)
    remesh = asset.metadata["surface"]["remesh"]
    assert remesh["method"] == "slivers" and remesh["triangles_after"] < remesh["triangles_before"]
    original = trimesh.load(path, force="mesh")
    boundary = trimesh.Trimesh(asset.points, boundary_faces_of(asset.tets), process=False)
    bottom = boundary.triangles_center[:, 2] < original.bounds[0, 2] + 1e-9
    for mesh in (original, boundary):    # in mm: trimesh's closest-point tolerances are absolute
        mesh.apply_scale(1000.0)
    for a, b in ((original, boundary), (boundary, original)):
        points = np.concatenate([a.vertices[np.unique(a.faces)], trimesh.sample.sample_surface_even(a, 5000, seed=1)[0]])
        distance = np.abs(trimesh.proximity.closest_point(b, points)[1]) / 1000.0
        assert distance.max() <= remesh["tolerance"] * (1 + 1e-6)
    inner = np.setdiff1d(boundary.faces[bottom], boundary.faces[~bottom])   # (its rim is free: e = 0)
    assert len(inner) > 0 and np.all(asset.extent[inner] == 1.0)            # bonded: e = 1


def _within_both_ways(loaded, result):
    """The remeshed surface and the input within the recorded tolerance of each other, measured
    with trimesh (in mm: its closest-point tolerances are absolute)."""
    before = trimesh.Trimesh(loaded.vertices * 1000.0, loaded.faces, process=False)
    after = trimesh.Trimesh(result.surface.vertices * 1000.0, result.surface.faces, process=False)
    for a, b in ((before, after), (after, before)):
        points = np.concatenate([a.vertices, trimesh.sample.sample_surface_even(a, 5000, seed=1)[0]])
        assert np.abs(trimesh.proximity.closest_point(b, points)[1]).max() / 1000.0 <= result.remesh.tolerance * (1 + 1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name, factor", [("SQNutO8T5P1.stl", 1.0), ("Sqr3H5L3D3P1.stl", RETRY_FACTOR)])
def test_threads_are_remeshed_within_the_default_tolerance_with_needles_held(meshes, monkeypatch, name, factor):
    """A threaded nut and bolt (CAD threads, micron needles): the slivers' moves end 1.1-1.5 x the
    default tolerance away, since each round's needle collapses are bounded against the surface
    of the moment; made again with each needle's collapse held to half the tolerance, they are
    within it (measured here with trimesh) at a quarter of the input's cost: the nut at the
    default tolerance, the bolt at twice it (at the default, its held needles cost too much).
    With the needles not held (the same moves twice) the nut is declined at both."""
    loaded = load_surface(meshes / name, "mm")
    markers = np.full(len(loaded.faces), FREE)
    result = tolerated_surface(loaded, markers, None)
    assert result.remesh is not None and not result.warnings, result.warnings
    assert result.remesh.tolerance == factor * default_tolerance(loaded.vertices)
    assert result.remesh.cost_after < result.remesh.cost_before / 4
    _within_both_ways(loaded, result)
    # TetGen's first mesh of such a surface passes the budget at its default bound (14-24 tets a
    # unit of cost, not 3), so it is made at the looser bound at once rather than after it.
    moved = (result.surface.vertices, result.surface.faces)
    assert first_radius_edge(moved, MAX_TETS, tets_per_cost(result.remesh)) == RELAXED_RADIUS_EDGE
    assert first_radius_edge(moved, MAX_TETS, TETS_PER_COST) is None
    if name.startswith("SQNut"):
        monkeypatch.setattr(remesh_module, "NEEDLE_DEVIATION", math.inf)
        unheld = tolerated_surface(loaded, markers, None)
        assert unheld.remesh is None and "nor within" in unheld.warnings[0]


@pytest.mark.slow
def test_a_threaded_part_declined_at_the_default_tolerance_is_remeshed_at_twice_it(meshes, monkeypatch):
    """The 5 mm threaded bolt with its needles' collapses not held: nothing is usable within the
    default tolerance (MMGS keeps the threads' micron ridges, the moves end 1.1 × it away), so the
    stage is tried once more at twice it, where the moves' result is within it (measured here with
    trimesh, in mm) and costs an eighth of the input. A tolerance given is not loosened: the same
    value given is declined."""
    monkeypatch.setattr(remesh_module, "NEEDLE_DEVIATION", math.inf)
    path = meshes / "Sqr3H5L3D3P1.stl"
    loaded = load_surface(path, "mm")
    markers = np.full(len(loaded.faces), FREE)
    result = tolerated_surface(loaded, markers, None)
    default = default_tolerance(loaded.vertices)
    assert result.remesh is not None and not result.warnings, result.warnings
    assert result.remesh.tolerance == RETRY_FACTOR * default
    assert result.remesh.cost_after < result.remesh.cost_before / 8
    _within_both_ways(loaded, result)
    given = tolerated_surface(loaded, markers, default)
    assert given.remesh is None and given.warnings and "nor within" not in given.warnings[0]


@pytest.mark.parametrize("narrow", [True, False])
def test_mmgs_is_run_again_finer_only_when_its_result_was_not_refused_for_narrow_triangles(monkeypatch, narrow):
    """MMGS's second attempt (half the Hausdorff parameter and ridge angle) and the planar
    patches' second run (a smaller Hausdorff parameter) are made only when the first result was
    not refused for the narrow triangles left in it: finer runs keep more of them, not fewer (a
    gripper finger's second patches run made 201k triangles for 134k, each in 6-9 s)."""
    path = os.path.join(tempfile.mkdtemp(), "box.stl")
    trimesh.creation.box(extents=(0.02, 0.01, 0.005)).export(path)
    surface = load_surface(path, "m")
    made = []

    def mmgs(vertices, faces, refs, hausd, tolerance, ridge=None, ridges=None):
        made.append(("attempt", hausd))
        return vertices + 0.0, faces, refs          # a new array: an MMGS result, not the input

    def patches(vertices, faces, labels, tolerance, fraction):
        made.append(("patches", fraction))
        return vertices + 0.0, faces, labels

    def slivers_left(vertices, faces, tolerance, left_cost=remesh_module.LEFT_COST):
        is_result = vertices is not surface.vertices and len(made) > 0
        return "narrow" if narrow and is_result else ""

    monkeypatch.setattr(remesh_module, "mmgs_remesh", mmgs)
    monkeypatch.setattr(remesh_module, "patch_remesh", patches)
    monkeypatch.setattr(remesh_module, "_slivers_left", slivers_left)
    monkeypatch.setattr(remesh_module, "_first_within", lambda *args: None)
    monkeypatch.setattr(remesh_module, "without_slivers", lambda vertices, faces, labels, *rest: (vertices, faces, labels))
    labels, table = remesh_module.face_labels(np.full(len(surface.faces), FREE), surface.face_groups)
    remesh_module._remeshed(surface, labels, table, 1e-5, False, True, [])
    attempts = [h for kind, h in made if kind == "attempt"]
    fractions = [f for kind, f in made if kind == "patches"]
    assert len(attempts) == (1 if narrow else remesh_module.ATTEMPTS)
    assert tuple(fractions) == (remesh_module.PATCH_HAUSD[:1] if narrow else remesh_module.PATCH_HAUSD)


@pytest.mark.slow
def test_a_finger_with_micron_edges_runs_mmgs_on_its_patches_once(meshes, monkeypatch):
    """The Kortex gripper finger (13,088 triangles, 2 µm edges) at the default tolerance: MMGS's
    first patches run is refused for the narrow triangles it keeps (134k triangles), so no finer
    run is made (it made 201k, refused too, in 6-9 s); the slivers' moves alone are kept, within
    the tolerance (measured here with trimesh) and at under a third of the input's cost."""
    made = []
    patches = remesh_module.patch_remesh

    def counted(*args, **kwargs):
        made.append(args[-1] if len(args) > 4 else kwargs.get("fraction"))
        return patches(*args, **kwargs)

    monkeypatch.setattr(remesh_module, "patch_remesh", counted)
    loaded = load_surface(meshes / "kortex_lite_left_finger_dist.STL", "m")
    result = tolerated_surface(loaded, np.full(len(loaded.faces), FREE), None)
    assert made == [remesh_module.PATCH_HAUSD[0]]
    assert result.remesh is not None and result.remesh.hausd is None and not result.warnings
    assert result.remesh.cost_after < result.remesh.cost_before / 3
    _within_both_ways(loaded, result)
