"""TetGen's merging of nearly coplanar facets (docs/design/meshing.md, "Facets TetGen merges").

Without -M, TetGen takes adjacent facets within its coplanarity tolerance as one and triangulates
them anew, so the gently curved strips of a coarse surface (a robot's collision mesh) are
flattened: the mesh is no longer the part. A mesh whose boundary lies farther from the surface
than the surface tolerance is made again with -M. The part: a Franka hand's 200-triangle
collision mesh (tests/data/meshes/SOURCES.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import tetgen
import trimesh

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
