"""Pieces of a bonded or cored part that no path inside the part joins to a rigid face get a field
of their own (the Poisson extent of a part without rigid faces) and a warning, never a failure
(docs/model.md §2.2)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.fe.extent import solve_extent, tet_pieces, unreached_tets, unreached_warnings
from fieldgen.io.asset import read_asset
from fieldgen.meshing.refine import refine_zero_tets
from fieldgen.meshing.tetmesh import FREE, RIGID, TetMesh, boundary_faces_of, box_grid, zero_tets
from fieldgen.validate import validate_asset


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def grid(lower, upper, cells):
    """Kuhn tets of the box ``lower``..``upper`` with ``cells`` cells along each axis."""
    return box_grid(*(np.linspace(lo, hi, k + 1) for lo, hi, k in zip(lower, upper, cells)))


def joined(*blocks):
    """One mesh of several box grids, coincident vertices merged; boundary faces with z = 0 on
    the first block RIGID (bonded), every other one FREE."""
    points = np.vstack([p for p, _ in blocks])
    offsets = np.cumsum([0] + [len(p) for p, _ in blocks[:-1]])
    tets = np.vstack([t + o for (_, t), o in zip(blocks, offsets)])
    unique, inverse = np.unique(np.round(points, 12), axis=0, return_inverse=True)
    tets = inverse.ravel()[tets]
    faces = boundary_faces_of(tets)
    first = np.zeros(len(unique), dtype=bool)
    first[inverse.ravel()[:len(blocks[0][0])]] = True
    bottom = np.all((np.abs(unique[faces][..., 2]) < 1e-12) & first[faces], axis=1)
    return TetMesh(unique, tets, faces, np.where(bottom, RIGID, FREE))


def alone(mesh: TetMesh, chosen: np.ndarray) -> tuple[TetMesh, np.ndarray]:
    """The ``chosen`` tets as a part of their own (vertices renumbered), and their old numbers."""
    used = np.unique(mesh.tets[chosen])
    new = np.full(mesh.n_points, -1)
    new[used] = np.arange(len(used))
    tets = new[mesh.tets[chosen]]
    faces = boundary_faces_of(tets)
    return TetMesh(mesh.points[used], tets, faces, np.full(len(faces), FREE)), used


def test_a_separate_piece_gets_the_poisson_field_of_the_piece_alone():
    """Two boxes, the first bonded at z = 0: the second, a 10 x 10 x 1 slab, reaches no rigid face.
    Its extent is the Poisson extent of that slab built alone (the same system, to the solver's
    tolerance), and
    across the slab's middle it is the closed form 4 s (1 - s) of an infinite free plate; the
    bonded box keeps its own Laplace field, unchanged by the other piece."""
    bonded = grid((0, 0, 0), (1, 1, 1), (4, 4, 4))
    plate = grid((3, 0, 0), (13, 10, 1), (40, 40, 8))
    mesh, _ = refine_zero_tets(joined(bonded, plate))
    piece = mesh.points[:, 0] > 2
    solution = solve_extent(mesh)
    assert solution.problem == "laplace" and len(solution.unreached) == 1
    found = solution.unreached[0]
    assert found.volume == pytest.approx(100.0)
    assert np.allclose(found.centroid, (8, 5, 0.5)) and np.allclose(found.lower, (3, 0, 0))
    assert np.allclose(found.upper, (13, 10, 1))
    plate_alone, used = alone(mesh, np.all(piece[mesh.tets], axis=1))
    own = solve_extent(plate_alone)
    assert own.problem == "poisson"
    assert np.max(np.abs(solution.extent[used] - own.extent)) < 1e-8
    # Closed form across the middle of a wide free plate: e = 4 s (1 - s), s = z / thickness.
    x, y, z = mesh.points.T
    middle = piece & (np.abs(x - 8) < 1.01) & (np.abs(y - 5) < 1.01)
    assert np.max(np.abs(solution.extent[middle] - 4 * z[middle] * (1 - z[middle]))) < 0.02
    box_alone, used = alone(mesh, ~np.all(piece[mesh.tets], axis=1))
    rigid = np.abs(box_alone.points[box_alone.boundary_faces][..., 2]).max(axis=1) < 1e-12
    box_alone = TetMesh(box_alone.points, box_alone.tets, box_alone.boundary_faces,
                        np.where(rigid, RIGID, FREE))
    assert np.max(np.abs(solution.extent[used] - solve_extent(box_alone).extent)) < 1e-8
    assert 0 < solution.extent[piece].max() == 1.0


def test_a_fin_touching_along_an_edge_is_a_piece_of_its_own():
    """A fin meeting the bonded block along an edge only (as fTetWild can leave a thin feature):
    no split of interior edges or faces can join it to the block, so it is a piece of its own
    (tets join through faces), is refined as a Poisson part, and gets its own field; the shared
    edge is on the free surface (e = 0), so the field is exactly that of the fin alone."""
    bonded = grid((0, 0, 0), (1, 1, 1), (3, 3, 3))
    fin = grid((1, 1, 0), (1.2, 3, 1), (1, 6, 3))          # one cell thick: every vertex on its surface
    mesh = joined(bonded, fin)
    pieces = tet_pieces(mesh.tets, mesh.n_points)
    assert len(np.unique(pieces)) == 2
    unreached = unreached_tets(mesh)
    assert unreached.sum() == len(fin[1])
    refined, found = refine_zero_tets(mesh)
    assert found > 0 and len(zero_tets(refined)) == 0
    solution = solve_extent(refined)
    assert len(solution.unreached) == 1 and solution.unreached[0].volume == pytest.approx(0.4)
    fin_tets = unreached_tets(refined)
    fin_alone, used = alone(refined, fin_tets)
    assert np.max(np.abs(solution.extent[used] - solve_extent(fin_alone).extent)) < 1e-8
    assert not np.any(np.all(solution.extent[refined.tets] == 0, axis=1))


def test_a_part_whose_pieces_all_reach_a_rigid_face_is_solved_as_before():
    """No piece is unreached: one solve, nothing warned, and the same values as a plain Laplace
    solve (the bonded slab's closed form e = 1 - z)."""
    mesh, _ = refine_zero_tets(joined(grid((0, 0, 0), (4, 4, 1), (8, 8, 4))))
    solution = solve_extent(mesh)
    assert solution.unreached == () and unreached_warnings(solution) == []
    assert solution.rounds == 1


def test_the_warning_names_volume_and_place_in_the_inputs_units():
    mesh, _ = refine_zero_tets(joined(grid((0, 0, 0), (1, 1, 1), (2, 2, 2)),
                                      grid((0.003, 0, 0), (0.004, 0.002, 0.001), (2, 2, 2))))
    (warning,) = unreached_warnings(solve_extent(mesh), "mm")
    assert "volume 2 mm^3" in warning and "centred at (3.5, 1, 0.5) mm" in warning
    assert "(3, 0, 0) to (4, 2, 1)" in warning and "bond a face of it" in warning


def two_boxes(path):
    """Two 20 x 20 x 10 mm boxes in one STL (mm), the second centred at (50, 0, 20)."""
    first = trimesh.creation.box(extents=(20.0, 20.0, 10.0))
    second = trimesh.creation.box(extents=(20.0, 20.0, 10.0))
    second.apply_translation((50.0, 0.0, 20.0))
    trimesh.util.concatenate([first, second]).export(path)


def test_two_boxes_one_bonded_build_with_a_warning(tmp_path):
    """The build of two boxes, only the first bonded (its bottom), succeeds: the warning names the second
    box's volume and place in mm, in the JSON report and on stderr, and the second box's extent
    is that of the box built alone as a part without rigid faces."""
    source = tmp_path / "two_boxes.stl"
    two_boxes(source)
    out = tmp_path / "two.vtu"
    result = run("build", source, "--units", "mm", "--modulus", "1e5", "--bonded", "below:z=-4.9",
                 "--edge-length", "1.5", "-o", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (warning,) = [w for w in report["warnings"] if "has no path inside the part" in w]
    assert "volume 4000 mm^3" in warning and "centred at (50, 0, 20) mm" in warning
    assert "(40, -10, 15) to (60, 10, 25)" in warning
    assert warning in result.stderr and "Traceback" not in result.stderr
    assert validate_asset(out).ok
    # The second box built alone, free all round: TetGen meshes it a little differently, so its
    # P1 field is compared where the vertices of the first build lie (two 1.5 mm meshes agree to
    # their discretisation error).
    single = tmp_path / "single.stl"
    trimesh.creation.box(extents=(20.0, 20.0, 10.0)).apply_translation((50.0, 0, 20.0)).export(single)
    result = run("build", single, "--units", "mm", "--modulus", "1e5", "--edge-length", "1.5",
                 "-o", tmp_path / "single.vtu", "--quiet")
    assert result.exit_code == 0, result.output
    both, one = read_asset(out), read_asset(tmp_path / "single.vtu")
    second = both.points[:, 0] > 0.03
    difference = both.extent[second] - p1_value(one, both.points[second])
    assert np.max(np.abs(difference)) < 0.05 and np.mean(np.abs(difference)) < 0.01
    assert both.extent[~second].max() == 1.0 and one.extent.max() == 1.0


def p1_value(asset, points):
    """The asset's P1 extent at ``points`` (each inside or on one of its tets)."""
    corners = asset.points[asset.tets]                                       # (t, 4, 3)
    frame = np.transpose(corners[:, 1:] - corners[:, :1], (0, 2, 1))         # (t, 3, 3)
    inverse = np.linalg.inv(frame)
    out = np.empty(len(points))
    for k, point in enumerate(points):
        local = np.einsum("tij,tj->ti", inverse, point - corners[:, 0])
        weights = np.column_stack([1 - local.sum(axis=1), local])
        best = np.argmax(weights.min(axis=1))
        out[k] = weights[best] @ asset.extent[asset.tets[best]]
    return out


def test_a_fin_beside_a_cored_body_builds_with_a_warning(tmp_path):
    """A cored ball (core: e = 1) with a separate fin beside it: the fin reaches no rigid face."""
    ball = trimesh.creation.icosphere(subdivisions=2, radius=20.0)
    fin = trimesh.creation.box(extents=(4.0, 30.0, 20.0))
    fin.apply_translation((35.0, 0.0, 0.0))
    source, core = tmp_path / "ball_and_fin.stl", tmp_path / "core.stl"
    trimesh.util.concatenate([ball, fin]).export(source)
    trimesh.creation.icosphere(subdivisions=2, radius=8.0).export(core)
    out = tmp_path / "ball.vtu"
    result = run("build", source, "--units", "mm", "--core", core, "--modulus", "1e5", "--edge-length", "3",
                 "-o", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (warning,) = [w for w in report["warnings"] if "has no path inside the part" in w]
    assert re.search(r"volume 2[34]\d\d mm\^3", warning) and "centred at (35, " in warning
    asset = read_asset(out)
    fin_points = asset.points[:, 0] > 0.03
    assert asset.extent[fin_points].max() == 1.0 and asset.extent[~fin_points].max() == 1.0
    assert validate_asset(out).ok


def test_a_piece_of_skin_with_no_interior_beneath_builds_with_a_warning(tmp_path):
    """Under a 3 mm skin, a 20 mm cube keeps a rigid interior (the skin's inner surface, e = 1)
    but a separate 2 mm plate beside it is skin throughout: it has none of that surface, so it
    gets a Poisson field of its own (1 at its mid-plane) and the warning, and the build goes on."""
    cube = trimesh.creation.box(extents=(20.0, 20.0, 20.0))
    plate = trimesh.creation.box(extents=(20.0, 20.0, 2.0))
    plate.apply_translation((40.0, 0.0, 0.0))
    source = tmp_path / "cube_and_plate.stl"
    trimesh.util.concatenate([cube, plate]).export(source)
    out = tmp_path / "skin.vtu"
    result = run("build", source, "--units", "mm", "--skin", "3", "--skin-mesh", "cut", "--edge-length", "2",
                 "--modulus", "1e5", "-o", out, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (warning,) = [w for w in report["warnings"] if "has no path inside the part" in w]
    assert "volume 800 mm^3" in warning and "centred at (40, 0, 0) mm" in warning
    asset = read_asset(out)
    on_plate = asset.points[:, 0] > 0.025
    assert asset.extent[on_plate].max() == 1.0
    assert np.all(np.abs(asset.points[on_plate][asset.extent[on_plate] > 0.999, 2]) < 1e-3)
    assert validate_asset(out).ok


def teapot_under_a_skin():
    """fTetWild's teapot under a 5 mm skin, as the skin cut left it (tests/data/README.md)."""
    from pathlib import Path

    data = np.load(Path(__file__).parent / "data" / "teapot_skin_ftetwild.npz")
    return TetMesh(data["points"], data["tets"].astype(np.int64), data["boundary_faces"].astype(np.int64),
                   data["boundary_markers"].astype(np.int64))


def test_the_skinned_ftetwild_teapot_lifts_and_solves_with_a_scrap_beside_it():
    """The captured mesh of `teapot.stl --units mm --robust --skin 5` (the corpus case
    teapot-robust-skin): every piece of its skin holds some of the interior's surface, so nothing
    is unreached and it refines and solves as before. With a scrap of skin beside it that holds
    none (as some fTetWild runs leave: the refinement then stopped with tets at e = 0), the scrap
    gets its own Poisson field and the rest is unchanged."""
    mesh = teapot_under_a_skin()
    assert not unreached_tets(mesh).any()
    refined, _ = refine_zero_tets(mesh)
    solution = solve_extent(refined)
    assert solution.unreached == () and not np.any(np.all(solution.extent[refined.tets] == 0, axis=1))
    # A 1 x 1 x 0.5 mm scrap of 3 x 3 x 2 cells, 2 mm beyond the teapot's bounding box.
    corner = mesh.points.max(axis=0) + 0.002
    scrap_points, scrap_tets = grid(corner, corner + (0.001, 0.001, 0.0005), (3, 3, 2))
    points = np.vstack([mesh.points, scrap_points])
    tets = np.vstack([mesh.tets, scrap_tets + mesh.n_points])
    scrap_faces = boundary_faces_of(scrap_tets) + mesh.n_points
    both = TetMesh(points, tets, np.vstack([mesh.boundary_faces, scrap_faces]),
                   np.concatenate([mesh.boundary_markers, np.full(len(scrap_faces), FREE)]))
    lifted, _ = refine_zero_tets(both)
    together = solve_extent(lifted)
    assert len(together.unreached) == 1 and together.unreached[0].volume == pytest.approx(5e-10)
    assert not np.any(np.all(together.extent[lifted.tets] == 0, axis=1))
    scrap = np.zeros(lifted.n_points, dtype=bool)
    scrap[lifted.tets[unreached_tets(lifted)]] = True
    assert together.extent[scrap].max() == 1.0
    # The teapot's own vertices keep their field (the scrap is solved apart).
    assert np.max(np.abs(together.extent[:mesh.n_points] - solution.extent[:mesh.n_points])) < 1e-8
