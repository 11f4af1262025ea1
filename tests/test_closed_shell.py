"""Closed thin shells (a hollow ball, a hollow box): a part whose only cavity is sealed and whose
wall is one thickness is a sheet with no rim (docs/design/sizing.md, "Closed shells"). The box's
inner side has corners where three panels meet, each filled by a cube of layers
(fieldgen/sizing/fold.py, ``corner_cubes``).

The reference is the closed form of the free spherical shell: -lap u = 1 between radii a and b,
u(a) = u(b) = 0, so u(r) = -r^2/6 + A/r + B with A = (a^2 - b^2) / (6 (1/a - 1/b)),
B = a^2/6 - A/a, normalised by its maximum (docs/model.md §2.3). The part's spheres are
polyhedra, and the layered mesh's sides lie within the surface tolerance of them, not on them
(its remeshed side follows MMGS's smooth surface): the extent's discretisation error is measured
on the mesh's own domain, each point's radius mapped between the asset's two boundary surfaces
along its ray from the centre (trimesh's ray casts), and the boundary is checked against the input's spheres apart."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import trimesh

from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.meshing.tetmesh import FREE, boundary_faces_of, tet_volumes
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.sizing import fold, sheet
from fieldgen.surface.topology import compacted
from test_thin_walls import assert_parabola_across

INNER, OUTER = 18.5, 20.0          # mm


def shell_extent(r: np.ndarray, a: float, b: float) -> np.ndarray:
    """The free spherical shell's extent at radius ``r``, normalised by its maximum."""
    A = (a * a - b * b) / (6.0 * (1.0 / a - 1.0 / b))
    B = a * a / 6.0 - A / a
    u = lambda x: -x * x / 6.0 + A / x + B  # noqa: E731
    peak_r = (-3.0 * A) ** (1.0 / 3.0)      # u'(r) = -r/3 - A/r^2 = 0
    return u(r) / u(peak_r)


def radial_distance(directions: np.ndarray, surface: trimesh.Trimesh) -> np.ndarray:
    """How far a ray from the origin along each unit direction runs to ``surface`` (its farthest
    hit: each ray meets one of the shell's two surfaces once)."""
    locations, rays, _ = surface.ray.intersects_location(np.zeros_like(directions), directions, multiple_hits=True)
    out = np.full(len(directions), np.nan)
    np.fmax.at(out, rays, np.linalg.norm(locations, axis=1))
    return out


def hollow_ball(tmp_path):
    outer = trimesh.creation.icosphere(subdivisions=4, radius=OUTER)
    inner = trimesh.creation.icosphere(subdivisions=4, radius=INNER)
    shell = trimesh.util.concatenate([outer, trimesh.Trimesh(inner.vertices, inner.faces[:, ::-1])])
    shell.export(tmp_path / "ball.stl")


def boundary_spheres(asset) -> tuple[trimesh.Trimesh, trimesh.Trimesh]:
    """The asset's outer and inner boundary surfaces, in mm."""
    faces = boundary_faces_of(asset.tets)
    points = asset.points * 1e3
    outer = np.linalg.norm(points[faces].mean(axis=1), axis=1) > 0.5 * (INNER + OUTER)
    return trimesh.Trimesh(points, faces[outer], process=False), trimesh.Trimesh(points, faces[~outer], process=False)


def true_error(asset, samples: int = 4_000, seed: int = 3) -> float:
    """The asset's extent against the closed form, RMS over the volume relative to the maximum:
    the four-point rule on tets drawn at random with probability by volume."""
    outer, inner = boundary_spheres(asset)
    corners = asset.points[asset.tets]
    volume = np.abs(np.einsum("ij,ij->i", np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]),
                              corners[:, 3] - corners[:, 0])) / 6.0
    drawn = np.random.default_rng(seed).choice(len(volume), size=samples, p=volume / volume.sum())
    weights = np.full((4, 4), 0.1381966011250105) + np.eye(4) * (0.5854101966249685 - 0.1381966011250105)
    points = np.einsum("qk,tkd->tqd", weights, corners[drawn]).reshape(-1, 3) * 1e3       # mm
    solved = np.einsum("qk,tk->tq", weights, asset.extent[asset.tets[drawn]]).reshape(-1)
    r = np.linalg.norm(points, axis=1)
    d = points / r[:, None]
    r_in, r_out = radial_distance(d, inner), radial_distance(d, outer)
    assert np.all(np.isfinite(r_in)) and np.all(np.isfinite(r_out))
    mapped = INNER + (OUTER - INNER) * (r - r_in) / (r_out - r_in)
    return float(np.sqrt(np.mean((solved - shell_extent(mapped, INNER, OUTER)) ** 2)))


def test_the_closed_form_solves_the_shell_problem():
    r = np.linspace(INNER, OUTER, 2001)
    e = shell_extent(r, INNER, OUTER)
    h = r[1] - r[0]
    laplacian = np.gradient(np.gradient(e, h), h)[5:-5] + 2.0 / r[5:-5] * np.gradient(e, h)[5:-5]
    assert e[0] == pytest.approx(0.0, abs=1e-12) and e[-1] == pytest.approx(0.0, abs=1e-12)
    assert e.max() == pytest.approx(1.0, abs=1e-6)
    assert np.ptp(laplacian) < 1e-3 * np.abs(laplacian).mean()       # -lap e is one constant


@pytest.mark.slow
def test_a_hollow_ball_meets_the_accuracy_by_default(tmp_path):
    """A 40 mm ball with a 1.5 mm wall, free, no size flag. Before: its curved side's remeshing
    within 0.01 t made 547k layered tets, past the budget, and TetGen's passes stopped at 279k
    tets and 12.97 %. Now the remeshing is held to half the surface tolerance instead."""
    hollow_ball(tmp_path)
    build(tmp_path / "ball.stl", tmp_path / "ball.vtu", BuildOptions(units="mm", modulus=1e6, dissipation=1.0))
    meta = read_metadata(tmp_path / "ball.vtu")
    estimate = max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length"))
    assert meta["mesher"]["mesher"].startswith("layered sheet")
    assert estimate <= 0.01
    assert meta["mesh"]["n_tets"] <= 300_000
    asset = read_asset(tmp_path / "ball.vtu")
    radii = np.linalg.norm(asset.points, axis=1) * 1e3
    tolerance = 1e-3 * np.sqrt(3.0) * 2.0 * OUTER          # the default: 0.1 % of the diagonal
    assert radii.min() >= INNER - tolerance and radii.max() <= OUTER + tolerance
    truth = true_error(asset)
    assert truth <= 2.0 * estimate, (truth, estimate)      # the estimate honest within a factor 2


OUTSIDE, INSIDE = np.array([40.0, 30.0, 20.0]), np.array([37.0, 27.0, 17.0])     # mm; walls 1.5 mm


def hollow_box() -> trimesh.Trimesh:
    outer, inner = trimesh.creation.box(extents=OUTSIDE), trimesh.creation.box(extents=INSIDE)
    return trimesh.util.concatenate([outer, trimesh.Trimesh(inner.vertices, inner.faces[:, ::-1])])


def test_a_box_seen_from_inside_splits_at_its_corners_with_one_order_along_every_crease():
    """The cavity's side: six panels, twelve creases, eight corners of three panels each; every
    corner vertex taken once a panel; along every crease both panels' points in one order."""
    box = hollow_box()
    vertices, faces = np.asarray(box.vertices) * 1e-3, np.asarray(box.faces)
    _, side = sheet.sheet_sides(vertices, faces)
    inner = compacted(vertices, faces[side == 0])
    assert np.allclose(np.abs(inner[0]) * 1e3, INSIDE / 2)        # side 0 is the cavity's
    points, triangles, creases = fold.split_at_creases(*inner)
    assert len(points) == 24 and len(creases.corners) == 8 and len(creases.edges) == 12
    assert np.allclose(points[creases.inner], points[creases.copy])      # a node's two points: one vertex
    for a, b in creases.edges:
        assert (creases.inner[a] < creases.inner[b]) == (creases.copy[a] < creases.copy[b])
    for ab, ac, bc in creases.corners:      # A, B, C: each pair's node at one corner vertex
        assert creases.inner[ab] == creases.inner[ac] and creases.copy[ab] == creases.inner[bc]
        assert creases.copy[ac] == creases.copy[bc]
    assert len(np.unique(creases.panel[triangles])) == 6


def test_a_hollow_box_is_layered_conforming_and_fills_its_wall(tmp_path):
    """The columns from the cavity's side with wedges along the creases and cubes at the corners:
    the tets fill the wall's volume exactly (the boxes' volumes apart), every inner face is shared
    by two tets, and the boundary is the input's twelve-rectangle surface."""
    box = hollow_box()
    vertices, faces = np.asarray(box.vertices) * 1e-3, np.asarray(box.faces)
    made = sheet.layered_sheet(vertices, faces, np.full(len(faces), FREE), 280_000)
    assert made is not None
    mesh, record = made
    volumes = tet_volumes(mesh.points, mesh.tets)
    assert np.all(volumes > 0)
    assert volumes.sum() == pytest.approx((np.prod(OUTSIDE) - np.prod(INSIDE)) * 1e-9, rel=1e-9)
    faces_of = np.sort(mesh.tets[:, [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]].reshape(-1, 3), axis=1)
    _, uses = np.unique(faces_of, axis=0, return_counts=True)
    assert set(uses) == {1, 2}
    boundary = mesh.points[mesh.boundary_faces] * 1e3
    on_a_face = np.isclose(np.abs(boundary), OUTSIDE / 2).all(axis=1) | np.isclose(np.abs(boundary), INSIDE / 2).all(axis=1)
    assert np.all(on_a_face.any(axis=1))          # each corner of each boundary face on a box's plane
    assert record["thickness"] == pytest.approx(1.5e-3, rel=1e-9)


@pytest.mark.slow
def test_a_hollow_box_meets_the_accuracy_by_default(tmp_path):
    """A 40 x 30 x 20 mm box with 1.5 mm walls, free, sealed, no size flag. Before: no sheet (its
    cavity's corners lie in three panels), TetGen's passes stopped at 278k tets and 2.43 %. Across
    the top wall, away from its edges, the parabola of a free sheet within twice the estimate."""
    hollow_box().export(tmp_path / "box.stl")
    build(tmp_path / "box.stl", tmp_path / "box.vtu", BuildOptions(units="mm", modulus=1e6, dissipation=1.0))
    meta = read_metadata(tmp_path / "box.vtu")
    assert meta["mesher"]["mesher"].startswith("layered sheet")
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01
    assert meta["mesh"]["n_tets"] <= 300_000
    asset = read_asset(tmp_path / "box.vtu")
    shifted = SimpleNamespace(points=asset.points - np.array([0.0, 0.0, INSIDE[2] / 2 * 1e-3]), tets=asset.tets,
                              extent=asset.extent)
    top = lambda c: (np.abs(c[:, 0]) < 12.0) & (np.abs(c[:, 1]) < 8.0) & (c[:, 2] > 0.0)  # noqa: E731
    assert_parabola_across(shifted, meta, 2, 1.5, top, (1.0, 1.5), 0.05)
