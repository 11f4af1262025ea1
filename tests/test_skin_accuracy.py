"""A cut skin on a mount (a rim: free faces meeting bonded ones) is bisected where its error is
(docs/model.md §2.10, fieldgen/sizing/skin_grading.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.io.asset import read_metadata
from fieldgen.io.vtk_data import distance_to_triangles
from fieldgen.meshing.tetmesh import FREE, RIGID
from fieldgen.sizing.skin_grading import bisected_skin
from fieldgen.skin.cut import cut_skin

ASSETS = Path(__file__).resolve().parents[1] / "assets"


def _bonded_slab(tmp_path, h: float, edge: float):
    """A 1 x 1 x h slab's TetGen mesh, bonded underneath (z = 0), and its free faces."""
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.surface.stage import load_surface

    box = trimesh.creation.box(extents=(1.0, 1.0, h))
    box.apply_translation((0.5, 0.5, h / 2))
    box.export(tmp_path / "slab.stl")
    surface = load_surface(tmp_path / "slab.stl")
    markers = assign_conditions(surface, [parse_selector("normal:0,0,-1")], [])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(edge_length=edge))
    return mesh, (surface.vertices, surface.faces[markers == FREE])


def test_a_bisected_skin_keeps_its_cut_apart_from_its_bonded_faces_and_its_depths(tmp_path):
    """Bisecting a bonded slab's skin near both its cut and its bonded bottom: every RIGID face
    on z = 0 is bonded, every other RIGID face is the cut (at the skin's depth below the top and
    sides), and each new vertex's depth is its distance to the free faces."""
    h, t = 0.4, 0.15
    mesh, free = _bonded_slab(tmp_path, h, t / 2)
    skin = cut_skin(mesh, t)
    corners = skin.mesh.points[skin.mesh.tets]
    near_cut = (np.abs(skin.depth[skin.mesh.tets] - t) < 0.01).any(axis=1)
    marked = np.flatnonzero((corners[:, :, 2].min(axis=1) < 0.05) | near_cut)
    refined, _ = bisected_skin(skin, marked, free)
    out = refined.mesh
    assert out.n_points > skin.mesh.n_points and out.n_tets > skin.mesh.n_tets
    rigid = out.boundary_markers == RIGID
    on_bottom = np.all(out.points[out.boundary_faces][:, :, 2] == 0.0, axis=1)
    assert np.any(rigid & on_bottom) and np.any(rigid & ~on_bottom)
    assert np.array_equal(refined.cut, rigid & ~on_bottom)
    assert refined.rigid_faces == np.sum(rigid & ~on_bottom) > skin.rigid_faces
    assert np.allclose(refined.depth, distance_to_triangles(out.points, *free), atol=1e-12)
    assert refined.volume_fraction == pytest.approx(skin.volume_fraction, rel=1e-9)


@pytest.mark.slow
def test_a_bonded_skin_is_bisected_after_its_first_pass_and_keeps_the_least_error(tmp_path):
    """A skin over a block bonded underneath, sized for 0.5%: after TetGen's first pass the
    sizing bisects (each pass recorded as such), the kept pass has less estimated error than
    the first, and the skin recorded is the kept mesh's (its interior faces are the cut's)."""
    box = trimesh.creation.box(extents=(0.04, 0.03, 0.012))
    box.apply_translation((0.0, 0.0, 0.006))
    box.export(tmp_path / "block.stl")
    out = tmp_path / "block.vtu"
    result = CliRunner().invoke(main, ["build", str(tmp_path / "block.stl"), "--skin", "0.003", "--bonded",
                                       "normal:0,0,-1", "--modulus", "1e5", "--accuracy", "0.005",
                                       "-o", str(out), "--json", "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    meta = read_metadata(out)
    sizing = meta["mesher"]["sizing"]
    passes = sizing["passes"]
    assert passes[0]["meshed_by"] == "size field" and len(passes) >= 2
    assert all(p["meshed_by"] == "bisection" and p["refined_tets"] > 0 for p in passes[1:])
    assert sizing["refinement"] == "bisection"
    worst = [max(p["extent"], p["pressure"], p["characteristic_length"]) for p in passes]
    kept = sizing["kept_pass"] - 1
    assert worst[kept] == min(worst) < worst[0]


@pytest.mark.slow
def test_the_demos_skin_example_builds_within_its_accuracy_without_a_warning(tmp_path):
    """`make demo`'s skin example (a 0.1 in skin over the idler riser, its base bonded) builds
    within the accuracy it asks, 1%, without a warning, within the skin's 500k tets."""
    out = tmp_path / "idler_riser_skin.vtu"
    result = CliRunner().invoke(main, ["build", "--spec", str(ASSETS / "idler_riser_skin.toml"), "-o", str(out),
                                       "--json", "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert not report["warnings"]
    meta = read_metadata(out)
    estimate = meta["error_estimate"]
    assert max(estimate[k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01
    assert meta["mesher"]["sizing"]["passes"][meta["mesher"]["sizing"]["kept_pass"] - 1]["tets"] <= 500_000
