"""Thin walls: the local thickness, MMG3D's anisotropic adaptation, thin right-prism plates meshed
in layers, and the estimate held against closed forms across a wall (docs/model.md §2.10, "Thin
walls").

A part with no e = 1 face has the normalised Poisson extent (docs/model.md §2.2): across a free
plate of thickness t, far from its edges, e = 1 − (2z/t)²; across a free tube wall of radii
a < b, far from its ends, the axisymmetric solution of −Δu = 1 with u(a) = u(b) = 0,
u(r) = (a² − r²)/4 + A ln(r/a) with A = (b² − a²)/(4 ln(b/a)), divided by its maximum.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import trimesh
from skfem.quadrature import get_quadrature
from skfem.refdom import RefTet

from fieldgen.fe.estimate import estimate_error
from fieldgen.fe.extent import solve_extent
from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.material.modulus import linear_law
from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID, TetMesh, boundary_faces_of, box_grid, tet_volumes
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.sizing.adapt import hessian_metric, predicted_count, remeshed
from fieldgen.sizing.extrusion import LAYERS, layered_plate, prism_section
from fieldgen.sizing.thickness import face_thickness, has_thin_walls, vertex_thickness
from layered_mesh_checks import assert_fills_and_conforms


def plate_extent(z: np.ndarray, t: float) -> np.ndarray:
    """A free plate's extent across its thickness ``t`` (mid-plane at z = 0)."""
    return 1.0 - (2.0 * np.asarray(z) / t) ** 2


def tube_extent(r: np.ndarray, a: float, b: float) -> np.ndarray:
    """A free tube wall's extent at radius ``r`` (radii a < b), normalised to a maximum of 1."""
    coefficient = (b * b - a * a) / (4.0 * math.log(b / a))
    u = lambda x: (a * a - x * x) / 4.0 + coefficient * np.log(x / a)   # noqa: E731
    peak = u(math.sqrt(2.0 * coefficient))          # u'(r) = 0 at r² = 2A
    return u(np.asarray(r)) / peak


def rms_error_where(points, tets, values, exact, inside) -> tuple[float, float]:
    """The RMS of the P1 field ``values`` − ``exact`` (a function of points) over the tets whose
    centroids are ``inside`` (a function of centroids), by scikit-fem's degree-4 quadrature on
    each tet (the error of a P1 field against a quadratic is of degree 4), and their share of
    the volume."""
    keep = inside(points[tets].mean(axis=1))
    volume = np.abs(tet_volumes(points, tets))
    reference, weights = get_quadrature(RefTet, 4)            # (3, q), summing to 1/6
    lam = np.vstack([1.0 - reference.sum(axis=0), reference])   # (4, q) barycentric
    corners = points[tets[keep]]                              # (k, 4, 3)
    at = np.einsum("vq,kvd->kqd", lam, corners)
    p1 = np.einsum("vq,kv->kq", lam, values[tets[keep]])
    d = p1 - exact(at.reshape(-1, 3)).reshape(p1.shape)
    integral = np.sum(volume[keep] * (6.0 * (d * d) @ weights))
    return float(np.sqrt(integral / volume[keep].sum())), float(volume[keep].sum() / volume.sum())


# ------------------------------------------------------------------ closed forms themselves

def test_tube_closed_form_solves_the_poisson_problem():
    a, b = 2.2, 2.5
    r = np.linspace(a, b, 2001)
    e = tube_extent(r, a, b)
    assert abs(e[0]) < 1e-12 and abs(e[-1]) < 1e-12 and abs(e.max() - 1.0) < 1e-6
    # −(1/r)(r e')' is the same constant everywhere (the normalised source)
    h = r[1] - r[0]
    laplacian = np.gradient(r * np.gradient(e, h), h) / r
    assert np.ptp(laplacian[5:-5]) < 1e-3 * abs(laplacian[5:-5].mean())


# ------------------------------------------------------------------ the local thickness

def test_face_thickness_of_a_tube_and_a_plate():
    tube = trimesh.creation.annulus(r_min=2.2, r_max=2.5, height=30.0, sections=48)
    per_face = face_thickness(tube.vertices, tube.faces)
    normals = tube.face_normals
    side = np.abs(normals[:, 2]) < 0.1
    # across the wall: between b − a and the chord of the 48-gon
    assert np.all(per_face[side] > 0.29) and np.all(per_face[side] < 0.31)
    assert np.all(vertex_thickness(tube.vertices, tube.faces, per_face) < 0.31)
    assert has_thin_walls(tube.vertices, tube.faces, per_face, edge=1.0)
    plate = trimesh.creation.box(extents=(60.0, 40.0, 2.0))
    per_face = face_thickness(plate.vertices, plate.faces)
    top_bottom = np.abs(plate.face_normals[:, 2]) > 0.9
    assert np.allclose(per_face[top_bottom], 2.0)
    assert has_thin_walls(plate.vertices, plate.faces, per_face, edge=3.0)
    assert not has_thin_walls(plate.vertices, plate.faces, per_face, edge=2.0)



# ------------------------------------------------------------------ the estimate stays honest

def _middle_estimate(estimate, points, tets, inside) -> float:
    """The estimate's RMS of e − e_h over the tets whose centroids are ``inside``."""
    keep = inside(points[tets].mean(axis=1))
    volume = np.abs(tet_volumes(points, tets))[keep]
    return float(np.sqrt((estimate.tet_rms_extent[keep] ** 2 * volume).sum() / volume.sum()))


def test_estimate_matches_the_closed_form_across_a_free_plate():
    """A free 40 x 40 x 1 plate, six layers of tets across: far from its edges the estimated
    error of e is at least the true one (e = 1 − (2z/t)², RMS 4/(√30 n²) for n layers), and
    at most 1.5 times it."""
    t, n = 1.0, 6
    points, tets = box_grid(np.linspace(-20, 20, 41), np.linspace(-20, 20, 41), np.linspace(-t / 2, t / 2, n + 1))
    faces = boundary_faces_of(tets)
    mesh = TetMesh(points, tets, faces, np.full(len(faces), FREE))
    solution = solve_extent(mesh)
    estimate = estimate_error(mesh, solution.extent, linear_law(1e5))
    middle = lambda c: (np.abs(c[:, 0]) < 10) & (np.abs(c[:, 1]) < 10)   # noqa: E731
    true, share = rms_error_where(points, tets, solution.extent, lambda x: plate_extent(x[:, 2], t), middle)
    assert share > 0.2
    assert true == pytest.approx(4.0 / (math.sqrt(30.0) * n * n), rel=0.05)
    # the estimate is not below the truth, and not far above it (measured: 1.26 x)
    assert true <= _middle_estimate(estimate, points, tets, middle) <= 1.5 * true


# ------------------------------------------------------------------ MMG3D's adaptation

def _small_slab():
    """A 10 x 10 x 1 slab: top FREE, bottom RIGID, sides INSULATED (TetGen, edge 2)."""
    box = trimesh.creation.box(extents=(10.0, 10.0, 1.0))
    normals = box.face_normals
    markers = np.where(normals[:, 2] > 0.9, FREE, np.where(normals[:, 2] < -0.9, RIGID, INSULATED))
    return tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(edge_length=2.0))


def test_mmg_adapts_thin_across_keeps_every_condition_and_is_deterministic():
    mesh = _small_slab()
    # edges of 0.1 across (z), 1 along: the wall's metric
    metric = np.tile([1.0, 0.0, 0.0, 1.0, 0.0, 100.0], (mesh.n_points, 1))
    first = remeshed(mesh, metric, hausdorff=0.01)
    second = remeshed(mesh, metric, hausdorff=0.01)
    assert np.array_equal(first.points, second.points) and np.array_equal(first.tets, second.tets)
    assert np.array_equal(first.boundary_markers, second.boundary_markers)
    assert np.all(tet_volumes(first.points, first.tets) > 0)
    assert len(np.unique(np.round(first.points[:, 2], 6))) >= 8      # layers across
    assert predicted_count(mesh, metric) == pytest.approx(first.n_tets, rel=0.5)
    for condition, side in ((FREE, 0.5), (RIGID, -0.5)):
        faces = first.boundary_faces[first.boundary_markers == condition]
        assert len(faces) and np.allclose(first.points[faces][..., 2], side)
    sides = first.boundary_faces[first.boundary_markers == INSULATED]
    assert len(sides) and np.all(np.abs(first.points[sides][..., :2]).max(axis=2) > 4.999)
    total = np.abs(tet_volumes(first.points, first.tets)).sum()
    assert total == pytest.approx(100.0, rel=1e-9)


def test_hessian_metric_of_a_parabola_is_thin_across():
    """e = 1 − (2z/t)² has ∂²e/∂z² = −8/t²: edges across of √(8 ε t² / 8) = t √ε, the longest
    edge along."""
    t, error = 1.0, 1e-3
    points, tets = box_grid(np.linspace(0, 10, 11), np.linspace(0, 10, 11), np.linspace(-t / 2, t / 2, 9))
    faces = boundary_faces_of(tets)
    mesh = TetMesh(points, tets, faces, np.full(len(faces), FREE))
    metric = hessian_metric(mesh, plate_extent(points[:, 2], t), error, hmin=1e-3, hmax=2.0)
    inner = (np.abs(points[:, 2]) < 0.3) & (points[:, 0] > 1) & (points[:, 0] < 9) & (points[:, 1] > 1) & (points[:, 1] < 9)
    across = 1.0 / np.sqrt(metric[inner, 5])
    assert np.allclose(across, t * math.sqrt(error), rtol=1e-6)
    assert np.allclose(metric[inner][:, [0, 3]], 1.0 / 4.0)


# ------------------------------------------------------------------ thin right-prism plates in layers

def _disc_plate():
    """A 30 mm disc 1 mm thick (64 sides): a right prism along z, bottom RIGID, the rest FREE."""
    disc = trimesh.creation.cylinder(radius=15.0, height=1.0, sections=64)
    markers = np.where(disc.face_normals[:, 2] < -0.9, RIGID, FREE)
    return disc, markers


def test_prism_section_finds_right_prisms_only():
    disc, _ = _disc_plate()
    points, triangles, outline, levels, basis = prism_section(disc.vertices, disc.faces, (0.0, 0.0, 1.0))
    assert levels == pytest.approx((-0.5, 0.5)) and len(outline) == 64
    assert abs(basis @ np.array([0.0, 0.0, 1.0])).max() < 1e-12
    slanted = disc.vertices.copy()
    slanted[slanted[:, 2] > 0, 0] *= 1.01                      # top face wider: not a right prism
    assert prism_section(slanted, disc.faces, (0.0, 0.0, 1.0)) is None
    lifted = disc.vertices.copy()
    lifted[0, 2] += 0.01                                         # a vertex off both planes
    assert prism_section(lifted, disc.faces, (0.0, 0.0, 1.0)) is None
    assert prism_section(disc.vertices, disc.faces, (1.0, 0.0, 0.0)) is None


def test_layered_plate_fills_the_prism_in_layers_conforming_and_keeps_conditions():
    disc, markers = _disc_plate()
    mesh = layered_plate(disc.vertices, disc.faces, markers, (0.0, 0.0, 1.0))
    again = layered_plate(disc.vertices, disc.faces, markers, (0.0, 0.0, 1.0))
    assert np.array_equal(mesh.points, again.points) and np.array_equal(mesh.tets, again.tets)
    corners = assert_fills_and_conforms(mesh, abs(disc.volume), disc.area)
    assert len(np.unique(np.round(mesh.points[:, 2], 9))) == LAYERS + 1
    z = corners[..., 2].mean(axis=1)
    assert np.all(mesh.boundary_markers[np.isclose(z, -0.5)] == RIGID)
    assert np.all(mesh.boundary_markers[~np.isclose(z, -0.5)] == FREE)
    # the outline is split finely (OUTLINE_EDGE thicknesses): many vertices within 0.05 mm of it
    rim = np.hypot(mesh.points[:, 0], mesh.points[:, 1]) > 15.0 * math.cos(math.pi / 64) - 0.05
    assert rim.sum() > 4 * 64 * (LAYERS + 1)


def test_a_prism_with_a_hole_is_layered_around_it():
    """MMG2D meshes everything the outline's loops bound, holes included: the triangles in the
    hole are dropped (a parity test), so the mesh fills the ring and nothing more."""
    ring = trimesh.creation.annulus(r_min=10.0, r_max=15.0, height=1.0, sections=64)
    mesh = layered_plate(ring.vertices, ring.faces, np.full(len(ring.faces), FREE), (0.0, 0.0, 1.0))
    assert tet_volumes(mesh.points, mesh.tets).sum() == pytest.approx(abs(ring.volume), rel=1e-9)
    assert np.hypot(mesh.points[:, 0], mesh.points[:, 1]).min() > 10.0 * math.cos(math.pi / 64) - 1e-9
    assert len(np.unique(mesh.tets)) == mesh.n_points          # no point left in the hole


def test_a_layered_plate_over_the_budget_is_made_coarser():
    disc, markers = _disc_plate()
    fine = layered_plate(disc.vertices, disc.faces, markers, (0.0, 0.0, 1.0))
    coarse = layered_plate(disc.vertices, disc.faces, markers, (0.0, 0.0, 1.0), max_tets=fine.n_tets)
    assert coarse.n_tets <= 0.7 * fine.n_tets      # aimed at BUDGET_SHARE (0.6) of it
    assert tet_volumes(coarse.points, coarse.tets).sum() == pytest.approx(abs(disc.volume), rel=1e-9)


# ------------------------------------------------------------------ default builds

def _built(tmp_path, surface, name):
    path = tmp_path / f"{name}.stl"
    surface.export(path)
    out = tmp_path / f"{name}.vtu"
    result = build(path, out, BuildOptions(units="mm", modulus=1e5, dissipation=1.0))
    return result, read_asset(out), read_metadata(out)


def _worst(metadata) -> float:
    estimate = metadata["error_estimate"]
    return max(estimate["extent"], estimate["pressure"], estimate["characteristic_length"])


def built_layered(tmp_path, surface, name, mesher: str):
    """``surface`` (mm) built by default: the asset and its metadata, after asserting that the
    ``mesher`` record (its start) made it without a warning, within 1 % estimated and within the
    budget."""
    result, asset, metadata = _built(tmp_path, surface, name)
    assert metadata["mesher"]["mesher"].startswith(mesher) and not metadata["warnings"]
    assert _worst(metadata) <= 0.01
    assert result.tets <= 300_000
    return asset, metadata


def assert_parabola_across(asset, metadata, axis: int, wall: float, inside, scales: tuple[float, float],
                           min_share: float) -> None:
    """Across a free wall whose faces lie at ``axis`` = 0 and ``wall`` (mm), over the tets whose
    centroids are ``inside`` (a function of points in mm), the parabola ``1 − (2 (x − wall/2) /
    wall)²`` within twice the estimated error of e. The asset's extent is scaled onto the parabola
    by least squares first (the normalisation's maximum may lie elsewhere: at a corner), the factor
    strictly within ``scales``, and the tets hold more than ``min_share`` of the volume."""
    points = asset.points * 1e3
    exact = lambda x: plate_extent(x[:, axis] - wall / 2, wall)                     # noqa: E731
    keep = inside(points)
    scale = float(asset.extent[keep] @ exact(points[keep]) / (asset.extent[keep] @ asset.extent[keep]))
    true, share = rms_error_where(points, asset.tets, scale * asset.extent, exact, inside)
    assert scales[0] < scale < scales[1] and share > min_share
    assert true <= 2.0 * metadata["error_estimate"]["extent"]


# A free tube is meshed in layers along its length and a thin plate that is a right prism in
# layers across (docs/design/sizing.md, "Thin walls"); both meet the accuracy by default.


@pytest.mark.slow
def test_a_thin_tube_meets_the_accuracy_by_default(tmp_path):
    """A free tube 5 mm across, 0.3 mm wall, 20 mm long: by default within 1% estimated and
    within the budget, and the true error against the closed form across the wall (far from
    the ends) no more than twice the estimate."""
    a, b, length = 2.2, 2.5, 20.0
    tube = trimesh.creation.annulus(r_min=a, r_max=b, height=length, sections=96)
    result, asset, metadata = _built(tmp_path, tube, "tube")
    assert result.tets <= 300_000
    points = asset.points * 1e3
    exact = lambda x: tube_extent(np.hypot(x[:, 0], x[:, 1]), a, b)   # noqa: E731
    true, share = rms_error_where(points, asset.tets, asset.extent, exact,
                                  lambda c: np.abs(c[:, 2]) < 0.25 * length)
    assert share > 0.3
    assert true <= 2.0 * metadata["error_estimate"]["extent"]
    assert _worst(metadata) <= 0.01


@pytest.mark.slow
def test_a_thin_plate_meets_the_accuracy_by_default(tmp_path):
    """A free 40 x 40 x 1 mm plate: by default within 1% estimated and within the budget, and
    the true error against 1 − (2z/t)² far from its edges no more than twice the estimate."""
    t = 1.0
    plate = trimesh.creation.box(extents=(40.0, 40.0, t))
    result, asset, metadata = _built(tmp_path, plate, "plate")
    assert result.tets <= 300_000
    points = asset.points * 1e3
    true, _ = rms_error_where(points, asset.tets, asset.extent, lambda x: plate_extent(x[:, 2], t),
                              lambda c: (np.abs(c[:, 0]) < 10) & (np.abs(c[:, 1]) < 10))
    assert true <= 2.0 * metadata["error_estimate"]["extent"]
    assert _worst(metadata) <= 0.01


def test_a_plate_thick_against_the_first_edge_is_layered_and_meets_the_accuracy(tmp_path):
    """A free washer 80 mm across with a 20 mm hole, 4 mm thick: its walls are thicker than the
    uniform first edge (3.4 mm), so it was left to TetGen's passes, which stopped at the budget at
    1.47 % (279k tets); fewer than six edges of a uniform mesh of the whole budget cross it, so it
    is now meshed in layers: within 1 % estimated, and against 1 − (2z/t)² (the wall's faces at
    z = 0 and t) over the ring 3t from both rims, within twice the estimate."""
    t = 4.0
    washer = trimesh.creation.annulus(r_min=10.0, r_max=40.0, height=t, sections=128)
    washer.apply_translation((0.0, 0.0, t / 2))
    asset, metadata = built_layered(tmp_path, washer, "washer", "layered plate")
    assert asset.tets.shape[0] <= 150_000
    ring = lambda x: np.abs(np.hypot(x[:, 0], x[:, 1]) - 25.0) < 3.0   # noqa: E731
    assert_parabola_across(asset, metadata, 2, t, ring, (0.9, 1.1), 0.1)
