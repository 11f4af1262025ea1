"""--skin-mesh band: the skin as layers of prisms over the rounded rigid interior, tets outside them
(fieldgen.skin.interior, fieldgen.skin.band; docs/model.md §2.2 and §2.4)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.skin.band import BandError, band_heights, band_skin, prism_tets
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build, make_law
from fieldgen.cli.main import main
from fieldgen.fe.extent import solve_extent
from fieldgen.skin.interior import GRID, rounded_interior
from fieldgen.material.levels import balanced_levels
from fieldgen.meshing.tetmesh import FREE, RIGID, boundary_faces_of, orient_positive, tet_volumes
from fieldgen.validate import validate_asset
from fieldgen.io.vtk_data import distance_to_triangles


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _box(a, b, c):
    box = trimesh.creation.box(extents=(a, b, c))
    return np.asarray(box.vertices, dtype=np.float64), np.asarray(box.faces, dtype=np.int64)


def _box_mesh(n: int = 4):
    """A unit cube of n³ small cubes, each six tets (Kuhn's split), its faces free."""
    from fieldgen.meshing.tetmesh import TetMesh

    grid = np.stack(np.meshgrid(*[np.arange(n + 1)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    index = lambda i, j, k: (i * (n + 1) + j) * (n + 1) + k  # noqa: E731
    paths = [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    tets = []
    for i, j, k in np.ndindex(n, n, n):
        for path in paths:
            corner = np.array([i, j, k])
            chain = [index(*corner)]
            for axis in path:
                corner = corner.copy()
                corner[axis] += 1
                chain.append(index(*corner))
            tets.append(chain)
    points = grid / float(n)
    tets = orient_positive(points, np.asarray(tets, dtype=np.int64))
    faces = boundary_faces_of(tets)
    return TetMesh(points, tets, faces, np.full(len(faces), FREE))


A, B, C, T = 0.04, 0.03, 0.02, 0.004


def test_rounded_interior_of_a_box_is_the_inner_box_with_round_edges():
    """A box's interior under a skin T is the box shrunk by T; rounded by ρ it is the box shrunk
    by T + ρ grown back by ρ, whose volume Steiner's formula gives. Its vertices lie at depth T on
    the faces and deeper on the round edges and corners, at most T + ρ (1 − 1/√3)."""
    v, f = _box(A, B, C)
    interior = rounded_interior(v, f, T)
    rho = interior.rounding
    assert rho == pytest.approx(0.25 * T)
    depth = distance_to_triangles(interior.vertices, v, f)
    assert depth.min() >= T * (1 - 1e-9)
    # (E's own creases come out of the grid chamfered, by up to about a third of its spacing.)
    assert depth.max() <= T + rho * (1 - 1 / math.sqrt(3)) + 0.4 * GRID * T
    assert np.mean(np.abs(depth - T) < 1e-9 * T) > 0.5                 # the flat faces, exactly at T
    a, b, c = (x - 2 * (T + rho) for x in (A, B, C))
    exact = a * b * c + 2 * (a * b + b * c + c * a) * rho + math.pi * (a + b + c) * rho ** 2 + 4 / 3 * math.pi * rho ** 3
    volume = trimesh.Trimesh(interior.vertices, interior.faces).volume
    # The triangles are chords inside the round edges (within HAUSDORFF T of them): a little less.
    assert exact * (1 - 0.05) <= volume <= exact * (1 + 1e-3)
    # Wound out of the interior, normals unit and outward; the same surface every time.
    assert volume > 0 and np.allclose(np.linalg.norm(interior.normals, axis=1), 1.0)
    assert np.all(np.einsum("ij,ij->i", interior.normals, interior.vertices) > 0)   # the box is centred at 0
    again = rounded_interior(v, f, T)
    assert np.array_equal(again.vertices, interior.vertices) and np.array_equal(again.faces, interior.faces)


def test_a_part_thinner_than_its_rounded_skin_has_no_interior():
    from fieldgen.skin.interior import InteriorError

    v, f = _box(A, B, 2.2 * T)          # deepest point 1.1 T: nothing deeper than T + ρ
    with pytest.raises(InteriorError, match="skin throughout"):
        rounded_interior(v, f, T)


def test_band_heights_are_the_laws_levels_and_no_layer_is_thicker_than_the_bound():
    law = make_law(BuildOptions(modulus=1e6, law="hyperbolic", k=0.8).checked())
    levels = balanced_levels(law, 0.01 * law.max_pressure)
    heights = band_heights(levels, T)
    expected = sorted({0.0, 0.6 * T} | {(1 - e) * T for e in levels if 1 - e < 0.6})
    assert np.allclose(heights, expected)
    linear = band_heights(np.zeros(0), T)             # a linear law has no levels: layers of at most 0.2 T
    assert linear[0] == 0 and linear[-1] == pytest.approx(0.6 * T) and np.diff(linear).max() <= 0.2 * T + 1e-15


def test_prisms_sharing_a_quad_split_it_alike_and_fill_their_volume():
    # Two right prisms over the triangles (0,1,2) and (1,3,2) of a unit square, height 1.
    base = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], float)
    points = np.vstack([base, base + [0, 0, 1]])
    bottom = np.array([[0, 1, 2], [1, 3, 2]])
    for order in (np.arange(8), np.array([7, 3, 5, 0, 6, 1, 2, 4])):   # any numbering
        ids = order
        tets = prism_tets(ids[bottom], ids[bottom + 4])
        pts = np.empty_like(points)
        pts[ids] = points
        volume = tet_volumes(pts, tets)
        assert np.all(np.abs(volume) > 0) and np.abs(volume).sum() == pytest.approx(1.0)
        faces = boundary_faces_of(orient_positive(pts, tets))
        assert len(faces) == 2 * 2 + 4 * 2          # two triangles each end, four outer quads: no inner face left


def test_the_band_over_a_box_is_a_valid_mesh_and_its_extent_is_exact_under_the_faces():
    """Under a face, away from the edges, the skin is a slab of thickness T: e = depth / T there
    (P1 is exact for a linear field; the edges' disturbance dies out within a few T)."""
    T = 0.002
    v, f = _box(A, B, C)
    markers = np.full(len(f), FREE)
    interior = rounded_interior(v, f, T)
    law = make_law(BuildOptions(modulus=1e6, law="hyperbolic", k=0.8).checked())
    heights = band_heights(balanced_levels(law, 0.01 * law.max_pressure), T)
    band = band_skin(v, f, markers, interior, heights, outer_edge=0.75 * T)
    mesh = band.mesh
    volume = tet_volumes(mesh.points, mesh.tets)
    assert np.all(volume > 0)
    assert volume.sum() == pytest.approx(A * B * C - trimesh.Trimesh(interior.vertices, interior.faces).volume, rel=1e-9)
    free = mesh.boundary_faces[mesh.boundary_markers == FREE]
    rigid = mesh.boundary_faces[mesh.boundary_markers == RIGID]
    area = lambda faces: 0.5 * np.linalg.norm(np.cross(mesh.points[faces[:, 1]] - mesh.points[faces[:, 0]],
                                                       mesh.points[faces[:, 2]] - mesh.points[faces[:, 0]]), axis=1).sum()
    assert area(free) == pytest.approx(2 * (A * B + B * C + C * A), rel=1e-9)
    assert area(rigid) == pytest.approx(trimesh.Trimesh(interior.vertices, interior.faces).area, rel=1e-9)
    assert band.band_tets == 3 * (len(heights) - 1) * len(rigid)
    extent = solve_extent(mesh).extent
    depth = distance_to_triangles(mesh.points, v, f)
    half = np.array([A, B, C]) / 2
    # Points under the middle of the large faces (z = ±C/2), 4 T from every edge.
    middle = np.all(np.abs(mesh.points[:, :2]) < half[:2] - 4 * T, axis=1) & (np.abs(mesh.points[:, 2]) > half[2] - T)
    assert middle.sum() > 100
    assert np.abs(extent[middle] - depth[middle] / T).max() < 1e-3


def test_aligned_columns_slide_each_layer_to_where_the_solved_extent_takes_its_level():
    """A field falling faster than 1 - s/T along every column ((1 - s/T)²): each inner point moves
    down its column to where the field, linear between the column's points, takes the level its
    height stands for; the interior's and the top's points stay and no tet turns inside out."""
    from fieldgen.skin.band import aligned_columns

    T = 0.004
    v, f = _box(A, B, C)
    interior = rounded_interior(v, f, T)
    law = make_law(BuildOptions(modulus=1e6, law="hyperbolic", k=0.8).checked())
    heights = band_heights(balanced_levels(law, 0.01 * law.max_pressure), T)
    band = band_skin(v, f, np.full(len(f), FREE), interior, heights, outer_edge=0.9 * T)
    columns = band.columns
    along = np.linalg.norm(band.mesh.points[columns] - band.mesh.points[columns[0]], axis=2)    # (k + 1, m)
    extent = np.zeros(band.mesh.n_points)
    extent[columns] = (1.0 - along / T) ** 2
    targets = 1.0 - heights / T
    aligned, moved = aligned_columns(band.mesh, columns, extent, targets)
    assert moved == columns.shape[1]
    new = aligned.points[columns]
    assert np.array_equal(new[[0, -1]], band.mesh.points[columns[[0, -1]]])
    assert np.all(tet_volumes(aligned.points, aligned.tets) > 0)
    # Where each inner point went, the old field (linear between the old points) is its level.
    s = np.linalg.norm(new - aligned.points[columns[0]], axis=2)
    for j in range(1, len(heights) - 1):
        value = np.array([np.interp(s[j, c], along[:, c], extent[columns[:, c]]) for c in range(columns.shape[1])])
        assert np.abs(value - targets[j]).max() < 1e-9
        assert np.all(s[j] < along[j])      # the field falls faster: the layers come down


def test_a_band_that_cannot_be_made_is_a_band_error(monkeypatch):
    import fieldgen.skin.band as band_module

    v, f = _box(A, B, C)
    interior = rounded_interior(v, f, T)
    monkeypatch.setattr(band_module, "LIMITER_ROUNDS", 0)
    with pytest.raises(BandError):
        band_skin(v, f, np.full(len(f), FREE), interior, np.array([0.0, 0.5 * T]), outer_edge=T)


# ------------------------------------------------------------------ builds

def test_ball_band_is_the_spherical_shell(tmp_path):
    """A ball's interior has no crease, so rounding leaves it a ball: e is the shell's field
    (docs/model.md §2.2), and the interior lies at depth T below the faceted surface."""
    b, t = 0.05, 0.006
    a = b - t
    trimesh.creation.icosphere(subdivisions=4, radius=b).export(tmp_path / "ball.stl")
    result = build(tmp_path / "ball.stl", tmp_path / "ball.vtu",
                   BuildOptions(skin=t, modulus=1e5, law="hyperbolic", k=0.8, skin_mesh="band"))
    asset = read_asset(tmp_path / "ball.vtu")
    r = np.linalg.norm(asset.points, axis=1)
    # The interior lies T below the faceted surface, a little inside radius a: compare with the
    # shell of that interior's radius and T more.
    inner = np.median(r[asset.extent == 1.0])
    assert inner == pytest.approx(a, rel=0.02)
    shell = np.clip((1 / r - 1 / (inner + t)) / (1 / inner - 1 / (inner + t)), 0.0, 1.0)
    # Over the volume. The interior's triangles (edge about t, fieldgen.skin.interior.EDGE) are chords
    # of its sphere, up to t² / (8 a) = 1.7% of t inside it, and e near them follows the facets
    # (1.28% measured; the error estimate, which sees the facets as the geometry, is below 1%).
    volume = tet_volumes(asset.points, asset.tets)
    rms = np.sqrt(np.sum(volume * np.mean((asset.extent - shell)[asset.tets] ** 2, axis=1)) / volume.sum())
    assert rms < 0.015 and np.abs(asset.extent - shell).max() < 0.05
    meta = read_metadata(tmp_path / "ball.vtu")
    assert meta["skin"]["mesh"] == "band" and meta["skin"]["rounding"] == pytest.approx(0.25 * t)
    low, high = meta["skin"]["cut_depth"]
    # Rounding the facets' shallow creases, and the grid's chamfer of them, put parts of the
    # interior a little deeper than t, never shallower.
    assert 0.99 <= low and high <= 1.0 + 0.25 * GRID + 0.02
    # L (D 5.2.1) of the shell, within the interior's facets (chords of its sphere, 0.1 mm inside
    # it under 6 mm triangles, which thicken the skin by about 1%) and the surface's creases.
    assert result.characteristic_length == pytest.approx((b**3 - a**3) / (3 * a * b), rel=0.025)
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01
    assert validate_asset(tmp_path / "ball.vtu").ok
    from fieldgen.inspection import format_summary, summarize
    text = format_summary(summarize(asset, tmp_path / "ball.vtu"))
    assert "(rounded, radius 1.5 mm; layer band)" in text


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the relative default layer tolerance (docs/model.md §2.4) gives the "
                   "band 13 levels for K 0.8 instead of 6: 1.71M tets in the asset (its layers aligned again) "
                   "and 1.12% at the sizing's "
                   "budget (docs/design/contact-accuracy.md, 'Where the extra levels come from')")
def test_a_cad_part_under_a_2_mm_skin_meets_the_accuracy_in_few_tets_and_layers_cheaply(tmp_path, meshes):
    """angle_block.STL (inches, 34 x 25 x 34 mm) under a 2 mm skin with K = 0.8, sized by the
    default accuracy: every estimate within 1%, at most 500k tets in the asset, layering adding at
    most as many as it started with (cut out of a whole-part mesh: 2.3% at 1.66M tets, 5.7x)."""
    out = tmp_path / "block.vtu"
    result = run("build", meshes / "angle_block.STL", "--units", "in", "--skin", 2 / 25.4, "--modulus", "1e6",
                 "--k", "0.8", "--dissipation", "1", "--skin-mesh", "band", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01
    assert report["tets"] <= 500_000
    assert report["tets_added_by_layering"] <= report["tets"] - report["tets_added_by_layering"]
    assert report["max_interpolation_error"] <= meta["layer_tolerance"]
    assert meta["skin"]["mesh"] == "band" and not report["warnings"]
    assert validate_asset(out).ok


def _refuse_band(monkeypatch):
    import fieldgen.skin.band as band_module

    def refuse(*args, **kwargs):
        raise BandError("made to fail", fix="none")

    monkeypatch.setattr(band_module, "band_skin", refuse)


def _unexpected_in_interior(monkeypatch):
    import fieldgen.skin.interior as interior_module

    def fail(*args, **kwargs):
        raise ValueError("made to fail")

    monkeypatch.setattr(interior_module, "rounded_interior", fail)


def _small_grid_budget(monkeypatch):
    import fieldgen.skin.interior as interior_module

    monkeypatch.setattr(interior_module, "MAX_GRID_NODES", 1000)


def _band_piece_without_interior(monkeypatch):
    """The band's first refinement refuses it as a body with no rigid face would be refused."""
    import fieldgen.meshing.refine as tetmesh_module
    from fieldgen.errors import InputError

    original, calls = tetmesh_module.refine_zero_tets, []

    def refine(mesh, *args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise InputError("a separate piece of the part has no RIGID face", fix="made to fail")
        return original(mesh, *args, **kwargs)

    monkeypatch.setattr(tetmesh_module, "refine_zero_tets", refine)


@pytest.mark.parametrize("setup,reason", [
    (_refuse_band, "(made to fail)"),
    (_unexpected_in_interior, "(ValueError: made to fail)"),
    (_small_grid_budget, "(the depth grid would have"),
    (_band_piece_without_interior, "(a separate piece of the part has no RIGID face)"),
])
def test_the_band_falls_back_to_the_cut_with_a_warning(tmp_path, monkeypatch, setup, reason):
    setup(monkeypatch)
    trimesh.creation.icosphere(subdivisions=3, radius=0.05).export(tmp_path / "ball.stl")
    result = build(tmp_path / "ball.stl", tmp_path / "ball.vtu", BuildOptions(skin=0.015, modulus=1e5, skin_mesh="band"))
    assert any(f"layer band could not be made {reason}" in w for w in result.warnings), result.warnings
    assert read_metadata(tmp_path / "ball.vtu")["skin"]["mesh"] == "cut"
    assert validate_asset(tmp_path / "ball.vtu").ok


def test_a_depth_grid_a_little_past_its_node_budget_is_made_coarser_not_refused(tmp_path, monkeypatch):
    """The ball's grid at 0.2 T, counted here from its box, under a node budget 1.3^3 times
    smaller: the spacing grows by about 1.3 (within ``MAX_GRID_COARSENING``) and the band is made,
    where the budget alone refused it and the skin was cut instead."""
    import fieldgen.skin.interior as interior_module

    trimesh.creation.icosphere(subdivisions=3, radius=0.05).export(tmp_path / "ball.stl")
    skin = 0.015
    g = interior_module.GRID * skin
    box = np.array([0.1, 0.1, 0.1])                       # the ball's box: 2 r across
    nodes = int(np.prod(np.ceil((box + (4 + interior_module.GRID_SHIFT) * g) / g) + 1))
    monkeypatch.setattr(interior_module, "MAX_GRID_NODES", int(nodes / 1.3 ** 3))
    vertices = trimesh.load(tmp_path / "ball.stl").vertices
    spacing = interior_module._grid_spacing(vertices, g)
    assert 1.2 * g < spacing <= interior_module.MAX_GRID_COARSENING * g
    result = build(tmp_path / "ball.stl", tmp_path / "ball.vtu", BuildOptions(skin=skin, modulus=1e5, skin_mesh="band"))
    assert not any("layer band could not be made" in w for w in result.warnings), result.warnings
    assert read_metadata(tmp_path / "ball.vtu")["skin"]["mesh"] == "band"
    assert validate_asset(tmp_path / "ball.vtu").ok


@pytest.mark.parametrize("extra,needle", [
    (["--edge-length", "0.01"], "--edge-length"),
    (["--bonded", "normal:0,0,-1"], "bonded or insulated"),
])
def test_band_refuses_what_it_cannot_take(tmp_path, extra, needle):
    trimesh.creation.box(extents=(0.1, 0.1, 0.05)).export(tmp_path / "box.stl")
    result = run("build", tmp_path / "box.stl", "--skin", "0.01", "--modulus", "1e5", "--skin-mesh", "band",
                 *extra, "-o", tmp_path / "box.vtu")
    assert result.exit_code == 2 and needle in result.output
    assert not (tmp_path / "box.vtu").exists()


def test_band_needs_a_skin(tmp_path):
    trimesh.creation.box(extents=(0.1, 0.1, 0.05)).export(tmp_path / "box.stl")
    result = run("build", tmp_path / "box.stl", "--modulus", "1e5", "--skin-mesh", "band", "-o", tmp_path / "box.vtu")
    assert result.exit_code == 2 and "without --skin" in result.output


def test_the_band_is_the_default_where_it_applies_and_the_cut_elsewhere():
    base = BuildOptions(skin=0.002, modulus=1e5)
    assert base.checked().skin_meshed_by == "band"
    assert BuildOptions(modulus=1e5).skin_meshed_by is None
    for other in (dict(edge_length=0.001), dict(max_volume=1e-9), dict(bonded=("normal:0,0,-1",)),
                  dict(insulated=("normal:0,0,1",)), dict(robust=True, accuracy=None)):
        options = BuildOptions(**{**base.__dict__, **other})
        assert options.skin_meshed_by == "cut", other
    assert BuildOptions(skin=0.002, modulus=1e5, skin_mesh="cut").skin_meshed_by == "cut"


def test_skin_mesh_without_a_skin_is_refused(tmp_path):
    trimesh.creation.box(extents=(0.1, 0.1, 0.05)).export(tmp_path / "box.stl")
    result = run("build", tmp_path / "box.stl", "--modulus", "1e5", "--skin-mesh", "cut", "-o", tmp_path / "box.vtu")
    assert result.exit_code == 2 and "--skin-mesh cut without --skin" in result.output


def test_a_thin_skin_over_a_large_part_gets_a_coarser_interior_surface():
    """The band's first mesh is bounded: past max_triangles the interior is remeshed coarser."""
    v, f = _box(A, B, C)
    fine = rounded_interior(v, f, T)
    capped = rounded_interior(v, f, T, max_triangles=len(fine.faces) // 3)
    assert fine.coarser == 1.0 and capped.coarser > 1.0
    assert len(capped.faces) <= len(fine.faces) // 3
    depth = distance_to_triangles(capped.vertices, v, f)
    assert depth.min() >= T * (1 - 1e-9)                       # still on the rounded interior


def test_a_band_too_large_to_make_is_refused_before_anything_is_made():
    """plate_holes (203 x 305 x 12.7 mm, about 0.13 m² of surface) under a 2 mm skin: about 1.8M
    prism tets foreseen, so the cut is made instead; a part a few centimetres across passes."""
    from fieldgen.skin.band import MAX_TETS, check_size

    law = make_law(BuildOptions(modulus=1e6, law="hyperbolic", k=0.8).checked())
    heights = band_heights(balanced_levels(law, 0.01 * law.max_pressure), 0.002)
    with pytest.raises(BandError, match=f"more than {MAX_TETS:,}"):
        check_size(0.13, 0.002, heights)
    check_size(6e-3, 0.002, heights)              # angle_block's 6,056 mm²


@pytest.mark.slow
def test_thin_walls_of_the_interior_get_columns_that_face_their_triangles(tmp_path, meshes):
    """idler_riser.STL under a 0.1 in skin: its interior is a few small pieces whose rounded edges
    carry few triangles, where normals averaged over five rings leaned past their triangles and
    every prism there turned inside out (the band was given up). The band is made."""
    out = tmp_path / "riser.vtu"
    result = run("build", meshes / "idler_riser.STL", "--units", "in", "--skin", "0.1", "--modulus", "1e6",
                 "--k", "0.8", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert read_metadata(out)["skin"]["mesh"] == "band"
    assert not any("layer band could not be made" in w for w in report["warnings"])
    assert validate_asset(out).ok


def test_band_assets_are_byte_identical_across_processes_and_thread_counts(tmp_path):
    """The band's own libraries (VTK's threaded distance and contouring, MMGS) give the same asset
    in fresh processes with one thread (VTK's sequential backend) and with two."""
    trimesh.creation.icosphere(subdivisions=4, radius=0.05).export(tmp_path / "ball.stl")
    blobs = []
    for threads, backend in (("1", "Sequential"), ("2", "STDThread")):
        out = tmp_path / f"ball{threads}.vtu"
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, NUMBA_NUM_THREADS=threads,
                   VTK_SMP_MAX_THREADS=threads, VTK_SMP_BACKEND_IN_USE=backend)
        proc = subprocess.run([sys.executable, "-m", "fieldgen.cli.main", "build", str(tmp_path / "ball.stl"),
                               "--skin", "0.006", "--modulus", "1e5", "--k", "0.8", "--skin-mesh", "band",
                               "-o", str(out), "--quiet"], env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        blobs.append(out.read_bytes())
    assert read_metadata(tmp_path / "ball1.vtu")["skin"]["mesh"] == "band"
    assert blobs[0] == blobs[1]


def test_skin_mesh_in_a_spec_is_read_and_a_wrong_one_is_refused(tmp_path):
    trimesh.creation.icosphere(subdivisions=2, radius=0.05).export(tmp_path / "ball.stl")
    for value, code in (("cut", 0), ("bands", 2)):
        spec = tmp_path / f"{value}.toml"
        spec.write_text(f'input = "ball.stl"\nskin = 0.015\nmodulus = 1e5\nskin_mesh = "{value}"\n')
        result = run("build", "--spec", spec, "-o", tmp_path / f"{value}.vtu", "--quiet")
        assert result.exit_code == code, result.output
    assert read_metadata(tmp_path / "cut.vtu")["skin"]["mesh"] == "cut"
    assert "bands.toml: skin_mesh must be one of cut, band, got 'bands'" in result.output
    assert not (tmp_path / "bands.vtu").exists()


def test_a_vertex_in_a_large_tet_beside_many_small_ones_is_found():
    """A large flat tet over 3,000 small ones: the 1,024 centroids nearest a vertex just inside
    the large tet are all the small tets' (below it), so only the complete search finds it;
    the weights are the ones it was made from."""
    from fieldgen.meshing.tetmesh import TetMesh
    from fieldgen.skin.band import PARENT_CANDIDATES, descendants

    big = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [0.0, 0.0, 0.2]])
    rng = np.random.default_rng(3)
    unit = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]) * 1e-3
    offsets = np.column_stack([1.0 + 0.05 * rng.random(3000), 1.0 + 0.05 * rng.random(3000),
                               -0.002 - 0.02 * rng.random(3000)])           # all below z = 0
    small = (offsets[:, None, :] + unit[None]).reshape(-1, 3)
    points = np.vstack([big, small])
    tets = np.arange(len(points)).reshape(-1, 4)
    first = TetMesh(points=points, tets=tets, boundary_faces=np.zeros((0, 3), np.int64),
                    boundary_markers=np.zeros(0, np.int64))
    truth = np.array([0.7, 0.1, 0.1, 0.1])
    vertex = truth @ big                                                  # (1.0, 1.0, 0.02)
    centroids = points[tets].mean(axis=1)
    nearest = np.argsort(np.linalg.norm(centroids - vertex, axis=1))[:PARENT_CANDIDATES[-1]]
    assert 0 not in nearest                                               # the case is the one meant
    mesh = TetMesh(points=np.vstack([points, vertex]), tets=tets, boundary_faces=first.boundary_faces,
                   boundary_markers=first.boundary_markers)
    found = descendants(first, mesh)
    assert found.parent.tolist() == [0]
    assert np.allclose(found.weights[0], truth, atol=1e-12)


def test_the_complete_parent_search_keeps_its_candidate_pairs_bounded(monkeypatch):
    """The complete search takes its (vertex, tet) candidate pairs about PARENT_BATCH at a time
    (a vertex with more is a batch of its own), and gives up, leaving the vertices unfound, on a
    class of tets whose balls would make more than MAX_BALL_PAIRS pairs (a fan of slivers all
    overlapping each other: 4,751 vertices x 10k tets took 81 s and 371 MB, unbatched 1.2 GiB)."""
    import fieldgen.skin.band as band_module
    from fieldgen.meshing.tetmesh import TetMesh

    monkeypatch.setattr(band_module, "PARENT_BATCH", 6)
    groups = list(band_module._pair_batches(np.arange(6), np.array([3, 3, 3, 10, 2, 2])))
    assert [g.tolist() for g in groups] == [[0, 1], [2], [3], [4, 5]]
    # A fan of flat tets over a grid, all their balls holding the apex's edge midpoints.
    n = 12
    g = np.linspace(0.0, 1.0, n + 1)
    grid = np.column_stack([np.repeat(g, n + 1), np.tile(g, n + 1), np.zeros((n + 1) ** 2)])
    cells = np.array([[i * (n + 1) + j, (i + 1) * (n + 1) + j, i * (n + 1) + j + 1, (i + 1) * (n + 1) + j + 1]
                      for i in range(n) for j in range(n)])
    triangles = np.vstack([cells[:, [0, 1, 2]], cells[:, [1, 3, 2]]])
    apex = len(grid)
    points = np.vstack([grid, [[0.5, 0.5, 1.0]]])
    tets = np.column_stack([triangles, np.full(len(triangles), apex)])
    inner = np.flatnonzero((grid[:, 0] > 0) & (grid[:, 0] < 1) & (grid[:, 1] > 0) & (grid[:, 1] < 1))
    added = 0.5 * (grid[inner] + points[apex])
    first = TetMesh(points=points, tets=tets, boundary_faces=np.zeros((0, 3), np.int64),
                    boundary_markers=np.zeros(0, np.int64))
    mesh = TetMesh(points=np.vstack([points, added]), tets=tets, boundary_faces=first.boundary_faces,
                   boundary_markers=first.boundary_markers)
    monkeypatch.setattr(band_module, "PARENT_BATCH", 1 << 20)
    monkeypatch.setattr(band_module, "PARENT_CANDIDATES", (1,))
    found = band_module.descendants(first, mesh)
    assert np.all(found.parent >= 0)
    rebuilt = np.einsum("ij,ijk->ik", found.weights, points[tets[found.parent]])
    assert np.abs(rebuilt - added).max() < 1e-12
    monkeypatch.setattr(band_module, "MAX_BALL_PAIRS", 100)
    given_up = band_module.descendants(first, mesh)
    assert np.any(given_up.parent < 0) and np.all(given_up.weights[given_up.parent < 0] == 0.0)


def test_the_complete_search_takes_the_candidate_least_outside_over_all_classes(monkeypatch):
    """A vertex just outside a small tet (by 5e-7) and inside a large one: the large one, though
    its class is searched after the small one's; and among equal candidates the first."""
    import fieldgen.skin.band as band_module

    big = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0], [0.0, 8.0, 0.0], [0.0, 0.0, 8.0]])
    small = np.array([[1.0, 1.0, 1.0 + 5e-7], [2.0, 1.0, 1.0 + 5e-7], [1.0, 2.0, 1.0 + 5e-7], [1.0, 1.0, 2.0]])
    corners = np.stack([small, big, big])                 # the small class first; two equal big ones
    vertex = np.array([[1.2, 1.2, 1.0]])
    parent, weights = np.full(1, -1), np.zeros((1, 4))
    band_module._search_balls(np.array([0]), vertex, corners, corners.mean(axis=1), parent, weights)
    assert parent.tolist() == [1]
    assert np.allclose(weights[0] @ big, vertex[0], atol=1e-12) and weights.min() >= 0.0


def test_the_vertices_a_bisection_adds_are_found_in_the_tets_they_lie_in():
    """Every vertex two bisection passes add lies in the tet of the first mesh that
    ``descendants`` names, at its weights: rebuilt from the parent's corners, it is the vertex."""
    from fieldgen.meshing import refine
    from fieldgen.meshing.tetmesh import TetMesh
    from fieldgen.skin.band import descendants

    first = _box_mesh()
    mesh = refine.bisected(first, np.arange(0, first.n_tets, 3))
    mesh = refine.bisected(mesh, np.arange(0, mesh.n_tets, 5))
    assert isinstance(mesh, TetMesh) and mesh.n_points > first.n_points
    found = descendants(first, mesh)
    assert found.n_first == first.n_points and np.all(found.parent >= 0)
    assert found.weights.min() >= -1e-9 and np.allclose(found.weights.sum(axis=1), 1.0)
    corners = first.points[first.tets[found.parent]]                      # (m, 4, 3)
    rebuilt = np.einsum("ij,ijk->ik", found.weights, corners)
    assert np.abs(rebuilt - mesh.points[first.n_points:]).max() < 1e-12


@pytest.mark.slow
def test_the_kept_band_is_aligned_again_and_the_layering_adds_less(tmp_path, monkeypatch):
    """The sizing's last solution lies off the band's layers (they were slid onto an earlier
    one's levels); sliding them again onto its own, with the vertices the refinement added, and
    solving again leaves the estimate as it was and the layering less to add (measured on this
    ball: 307k added without, 262k with)."""
    import fieldgen.sizing.band as band_sizing

    b, t = 0.05, 0.006
    trimesh.creation.icosphere(subdivisions=4, radius=b).export(tmp_path / "ball.stl")
    options = BuildOptions(skin=t, modulus=1e5, law="hyperbolic", k=0.8, skin_mesh="band")
    build(tmp_path / "ball.stl", tmp_path / "realigned.vtu", options)
    monkeypatch.setattr(band_sizing, "REALIGN_ROUNDS", 0)
    build(tmp_path / "ball.stl", tmp_path / "once.vtu", options)
    again, once = read_metadata(tmp_path / "realigned.vtu"), read_metadata(tmp_path / "once.vtu")
    assert again["mesher"]["band"]["columns_realigned"] > 0 and "columns_realigned" not in once["mesher"]["band"]
    assert again["mesh"]["tets_before_layering"] == once["mesh"]["tets_before_layering"]
    assert again["mesh"]["tets_added_by_layering"] < 0.9 * once["mesh"]["tets_added_by_layering"]
    for key in ("extent", "pressure", "characteristic_length"):
        assert again["error_estimate"][key] <= 1.01 * once["error_estimate"][key] + 1e-6
    assert again["max_interpolation_error"] <= again["layer_tolerance"]
    assert validate_asset(tmp_path / "realigned.vtu").ok


def test_realigning_a_refined_band_equals_refining_the_realigned_band():
    """Moving the columns of a bisected mesh, the added vertices with them, gives the mesh that
    bisecting the moved unrefined mesh the same way gives: the added vertices stay the
    midpoints they were made as, so the layers bisection put them on."""
    from fieldgen.meshing import refine
    from fieldgen.meshing.tetmesh import TetMesh
    from fieldgen.skin.band import aligned_columns, descendants, realigned

    n = 4
    base = _box_mesh(n)
    # Columns along z, the extent falling along them but not at the heights' levels.
    column = lambda i, j: [(i * (n + 1) + j) * (n + 1) + k for k in range(n + 1)]  # noqa: E731
    columns = np.array([column(i, j) for i in range(n + 1) for j in range(n + 1)]).T
    targets = 1.0 - np.arange(n + 1) / n
    first, second = np.arange(0, base.n_tets, 3), None
    mesh = refine.bisected(base, first)
    second = np.arange(0, mesh.n_tets, 5)
    mesh = refine.bisected(mesh, second)
    x, z = mesh.points[:, 0], mesh.points[:, 2]
    extent = 1.0 - z + 0.05 * np.sin(3.0 * x) * z * (1.0 - z)
    moved_mesh, moved = realigned(mesh, columns, extent, targets, base, descendants(base, mesh))
    assert moved > 0
    slid, _ = aligned_columns(base, columns, extent[:base.n_points], targets)
    again = refine.bisected(refine.bisected(TetMesh(slid.points, base.tets, base.boundary_faces,
                                                    base.boundary_markers), first), second)
    assert np.array_equal(again.tets, moved_mesh.tets)
    assert np.abs(again.points - moved_mesh.points).max() < 1e-12
    assert np.abs(moved_mesh.points - mesh.points).max() > 1e-3         # it did move


def test_a_realigned_pass_replaces_the_kept_one_only_within_the_accuracy_it_met(monkeypatch):
    """The kept pass aligned again is kept if its estimate meets the accuracy where the pass
    met it, else if within REALIGN_SLACK of the pass's: never a pass that met the accuracy
    replaced by one that does not (the asset would say both)."""
    import fieldgen.sizing.band as band_sizing
    from fieldgen.progress import Progress
    from fieldgen.sizing.accuracy import SizingPass

    class Mesher:          # the band: each round moves three columns
        skin = type("Skin", (), {"outer_edge": 1.0})()

        def realign(self, base, mesh, extent, found):
            return "moved mesh", 3, "found"

    solution = type("Solution", (), {"extent": None})()
    monkeypatch.setattr(band_sizing.extent_solve, "solve_extent", lambda mesh: solution)
    monkeypatch.setattr(band_sizing, "estimate_error", lambda mesh, extent, law: "estimate")
    monkeypatch.setattr(band_sizing, "pass_record", lambda *args, **kwargs: {})
    monkeypatch.setattr(band_sizing, "report_pass", lambda *args, **kwargs: None)
    accuracy = 0.01
    for before, after, kept in ((0.0099, 0.01005, False), (0.00995, 0.01004, False), (0.0099, 0.0098, True),
                                (0.0099, 0.0100, True),
                                (0.02, 0.0201, True), (0.02, 0.0203, False)):
        monkeypatch.setattr(band_sizing, "worst_error", lambda estimate, worst=after: worst)
        best = SizingPass(4, before, "kept mesh", None, 0, solution, "its estimate", {})
        history = [{}] * 5
        result, moved = band_sizing._realigned(best, Mesher(), "base", None, accuracy, Progress(enabled=False),
                                               history)
        assert (result.mesh == "moved mesh") is kept and (moved == 3) is kept, (before, after)
        if kept:
            assert result.index == 5 and history[5]["from_pass"] == 5 and result.worst == after
