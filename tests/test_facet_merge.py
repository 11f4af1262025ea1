"""TetGen's merging of nearly coplanar facets (docs/design/meshing.md, "Facets TetGen merges").

Without -M, TetGen takes adjacent facets within its coplanarity tolerance as one and triangulates
them anew, so the gently curved strips of a coarse surface (a robot's collision mesh) are
flattened: the mesh is no longer the part. A mesh whose boundary lies farther from the surface
than the surface tolerance is made again with -M. The part: a Franka hand's 200-triangle
collision mesh (tests/data/meshes/SOURCES.md).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tetgen
import trimesh
from click.testing import CliRunner

import fieldgen.meshing.tetgen as tetgen_module
from fieldgen.cli.main import main
from fieldgen.errors import BuildError
from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.meshing.tetgen import moved_off, tetrahedralize
from fieldgen.meshing.tetmesh import FREE, TetMesh, boundary_faces_of, orient_positive, tet_volumes
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from triangle_distance import distances_to_each


@pytest.fixture(scope="module")
def hand(meshes) -> trimesh.Trimesh:
    return trimesh.load(meshes / "franka_hand_col.stl")


def farthest(points: np.ndarray, surface: trimesh.Trimesh) -> float:
    """The largest distance of ``points`` from ``surface``'s triangles (exact, brute force)."""
    return float(distances_to_each(points, surface.vertices, surface.faces).min(axis=1).max())


def test_tetgen_alone_flattens_the_hand_and_the_check_sees_it(hand):
    """TetGen itself (not through fieldgen) at the default quality bound: 0.24 % of the volume
    lost, the boundary past the default tolerance (0.1 % of the diagonal); the check says so,
    and of the mesh made with -M that it does not."""
    def mesh_of(switches):
        points, tets = tetgen.TetGen(hand.vertices, hand.faces).tetrahedralize(switches=switches)[:2]
        points, tets = np.asarray(points), orient_positive(np.asarray(points), np.asarray(tets, dtype=np.int64))
        faces = boundary_faces_of(tets)
        return TetMesh(points, tets, faces, np.full(len(faces), FREE))
    merged, unmerged = mesh_of("pq1.414/10Q"), mesh_of("pq1.414/10MQ")
    assert abs(np.abs(tet_volumes(merged.points, merged.tets)).sum() / hand.volume - 1) > 1e-3
    assert moved_off(merged, hand.vertices, hand.faces, None)
    assert not moved_off(unmerged, hand.vertices, hand.faces, None)


def test_fieldgen_keeps_the_hand_whole(hand):
    mesh = tetrahedralize(hand.vertices, hand.faces, np.full(len(hand.faces), FREE))
    assert abs(np.abs(tet_volumes(mesh.points, mesh.tets)).sum() / hand.volume - 1) < 1e-9
    assert farthest(mesh.points[np.unique(mesh.boundary_faces)], hand) < 1e-12


def test_a_coarse_collision_mesh_keeps_its_shape_in_a_default_build(tmp_path, meshes, hand):
    """Built by default. Before: the asset held 0.24 % less volume than the surface, its boundary
    0.49 mm from it against the 0.23 mm tolerance. Now its boundary is the surface, to rounding."""
    build(meshes / "franka_hand_col.stl", tmp_path / "hand.vtu", BuildOptions(modulus=1e6, dissipation=1.0))
    asset = read_asset(tmp_path / "hand.vtu")
    assert abs(np.abs(tet_volumes(asset.points, asset.tets)).sum() / hand.volume - 1) < 1e-9
    assert farthest(asset.points[np.unique(boundary_faces_of(asset.tets))], hand) < 1e-9
    assert read_metadata(tmp_path / "hand.vtu")["error_estimate"]["extent"] <= 0.01


def test_the_asset_records_the_switch_the_mesh_was_made_with(tmp_path, meshes):
    """The hand's mesh is made again with -M; the asset's switches say so, and a part TetGen does
    not move keeps its switches as they were."""
    for name, made_again in (("franka_hand_col.stl", True), ("unit_sphere.STL", False)):
        build(meshes / name, tmp_path / "part.vtu", BuildOptions(modulus=1e6, dissipation=1.0))
        switches = read_metadata(tmp_path / "part.vtu")["mesher"]["switches"]
        assert switches.endswith("MQ") == made_again, switches


def _no_room_for_the_unmerged_mesh(monkeypatch):
    monkeypatch.setattr(tetgen_module, "UNMERGED_GROWTH", 0.0)
    monkeypatch.setattr(tetgen_module, "UNMERGED_TETS", 0)


def _tetgen_fails_without_the_merge(monkeypatch):
    original = tetgen_module._meshed

    def meshed(plc, given, switches, *args):
        if "M" in switches:
            raise BuildError("TetGen stopped (made to fail)")
        return original(plc, given, switches, *args)
    monkeypatch.setattr(tetgen_module, "_meshed", meshed)


@pytest.mark.parametrize("setup,because", [(_no_room_for_the_unmerged_mesh, "without the merge TetGen made"),
                                           (_tetgen_fails_without_the_merge, "made to fail")])
def test_a_merged_mesh_kept_is_warned_about_and_recorded(tmp_path, meshes, hand, monkeypatch, setup, because):
    """When the mesh made again with -M is too large or TetGen fails on it, the flattened mesh is
    kept: the build says so, with how far the boundary moved (measured here independently: the
    largest distance between the centroids of one surface and the other, a lower bound)."""
    setup(monkeypatch)
    out = tmp_path / "hand.vtu"
    result = CliRunner().invoke(main, ["build", str(meshes / "franka_hand_col.stl"), "-o", str(out), "--modulus",
                                       "1e6", "--dissipation", "1", "--units", "m", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    merged = read_metadata(out)["mesher"]["facets_merged"]
    assert because in merged["kept_because"]
    asset = read_asset(out)
    boundary = boundary_faces_of(asset.tets)
    centroids = asset.points[boundary].mean(axis=1)
    seen = max(farthest(centroids, hand),
               float(distances_to_each(hand.triangles_center, asset.points, boundary).min(axis=1).max()))
    tolerance = 1e-3 * float(np.linalg.norm(np.ptp(hand.vertices, axis=0)))
    assert merged["boundary_off"] > tolerance and seen > tolerance     # the hand really was flattened
    warning = [w for w in json.loads(result.stdout)["warnings"] if "merged nearly coplanar facets" in w]
    assert len(warning) == 1 and because in warning[0] and f"{merged['boundary_off']:.3g} m" in warning[0]


def test_the_layer_band_holds_its_tetgen_run_to_the_given_surface_tolerance(tmp_path, monkeypatch):
    """The band's TetGen run outside the layers (a core: the band's top) gets the tolerance the
    user gave, as the part's own TetGen run does."""
    original, seen = tetgen_module.tetrahedralize, []

    def spy(*args, **kwargs):
        seen.append((kwargs.get("core_vertices") is not None, kwargs["options"].surface_tolerance))
        return original(*args, **kwargs)
    monkeypatch.setattr(tetgen_module, "tetrahedralize", spy)
    trimesh.creation.icosphere(subdivisions=3, radius=20.0).export(tmp_path / "ball.stl")
    build(tmp_path / "ball.stl", tmp_path / "ball.vtu",
          BuildOptions(units="mm", skin=4.0, modulus=1e6, dissipation=1.0, surface_tolerance=0.05))
    assert read_metadata(tmp_path / "ball.vtu")["skin"]["mesh"] == "band"
    band_runs = [tolerance for core, tolerance in seen if core]
    assert band_runs and all(t == pytest.approx(0.05e-3) for t in band_runs), seen
