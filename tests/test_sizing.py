"""Accuracy-driven sizing and the extent's error estimate (fieldgen.sizing, fieldgen.fe.estimate).

The estimate is checked against closed forms (a slab's Poisson extent is a parabola) and, on real
corpus parts, against the true error measured with a much finer mesh: the coarse asset's extent
is evaluated at the fine mesh's vertices (VTK's probe filter) and the difference integrated over
the fine mesh.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
import logging

import numpy as np
import pytest
import trimesh
from click.testing import CliRunner

from fieldgen.io.asset import read_asset, read_metadata
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build, make_law
from fieldgen.cli.main import main
from fieldgen.material.damping import characteristic_length
from fieldgen.errors import OptionError
from fieldgen.fe.extent import solve_extent
from fieldgen.meshing.tetmesh import FREE, INSULATED, RIGID, TetMesh, boundary_faces_of, hat_gradients, tet_volumes
from fieldgen.material.modulus import hyperbolic_law, linear_law
from fieldgen.surface.stage import load_surface
from fieldgen.fe.estimate import estimate_error, two_grid_extent
from fieldgen.fe.refinement import red_refine, refined_gradients
from fieldgen.sizing import accuracy, lengthwise, sheet
from fieldgen.sizing.accuracy import marked_tets
from fieldgen.sizing.mesher import MeshedPass
from fieldgen.sizing.size_field import MIN_SHRINK, next_near_edge
from fieldgen.meshing.refine import bisected, refine_zero_tets
from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize
from reference_extent import fine_extent_rms


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def slab_mesh(edge: float, rigid_side: bool = False) -> TetMesh:
    """A 1 x 1 x 0.2 m slab, free top and bottom, insulated sides: e = z (0.2 - z) / 0.01.
    ``rigid_side``: the +x side RIGID instead (three conditions, for the refinement tests)."""
    box = trimesh.creation.box(extents=(1.0, 1.0, 0.2))
    box.apply_translation((0, 0, 0.1))
    side = np.where(box.face_normals[:, 0] > 0.9, RIGID, INSULATED) if rigid_side else INSULATED
    markers = np.where(np.abs(box.face_normals[:, 2]) > 0.9, FREE, side)
    mesh = tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(edge_length=edge))
    return refine_zero_tets(mesh)[0]


def p1_rms(points, tets, values) -> float:
    """Root-mean-square of a P1 field over a tet mesh (exact P1 mass matrix)."""
    volume = tet_volumes(points, tets)
    f = values[tets]
    integral = np.sum(volume / 20.0 * (np.sum(f * f, axis=1) + np.sum(f, axis=1) ** 2))
    return float(np.sqrt(integral / volume.sum()))


def rms_against(path, closed_form) -> float:
    """The asset's RMS extent error against ``closed_form(points)`` over its volume, both sampled
    on its mesh refined 1:8 (the asset's P1 extent at the edge midpoints is the mean of the ends)."""
    asset = read_asset(path)
    mesh = TetMesh(points=asset.points, tets=asset.tets, boundary_faces=np.zeros((0, 3), np.int64),
                   boundary_markers=np.zeros(0, np.int64))
    fine = red_refine(mesh)
    coarse_on_fine = np.concatenate([asset.extent, 0.5 * asset.extent[fine.edges].sum(axis=1)])
    return p1_rms(fine.mesh.points, fine.mesh.tets, closed_form(fine.mesh.points) - coarse_on_fine)


def test_red_refinement_is_conforming_and_keeps_the_boundary():
    mesh = slab_mesh(0.2)
    fine = red_refine(mesh).mesh
    volumes = tet_volumes(fine.points, fine.tets)
    assert fine.n_tets == 8 * mesh.n_tets and np.all(volumes > 0)
    assert volumes.sum() == pytest.approx(0.2, rel=1e-12)
    faces = boundary_faces_of(fine.tets)            # conforming: only the outer faces are single
    assert len(faces) == 4 * len(mesh.boundary_faces) == len(fine.boundary_faces)
    key = lambda f: set(map(tuple, np.sort(f, axis=1).tolist()))  # noqa: E731
    assert key(faces) == key(fine.boundary_faces)
    assert np.array_equal(fine.points[: mesh.n_points], mesh.points)


def test_refined_gradients_are_the_fine_meshs_own():
    """The red refinement's hat gradients, four children per parent taken from the parent (twice
    its gradients, an eighth of its det), equal those computed child by child from the fine
    vertices, on a distorted mesh (so no child is a coincidence of a regular grid)."""
    mesh = slab_mesh(0.2)
    rng = np.random.default_rng(3)
    inside = np.setdiff1d(np.arange(mesh.n_points), np.unique(mesh.boundary_faces))
    points = mesh.points.copy()
    points[inside] += rng.uniform(-0.01, 0.01, (len(inside), 3))
    mesh = TetMesh(points, mesh.tets, mesh.boundary_faces, mesh.boundary_markers)
    refined = red_refine(mesh)
    grad, det = refined_gradients(refined, hat_gradients(mesh.points, mesh.tets))
    direct_grad, direct_det = hat_gradients(refined.mesh.points, refined.mesh.tets)
    assert grad.shape == direct_grad.shape and det.shape == direct_det.shape
    np.testing.assert_allclose(grad, direct_grad, rtol=0, atol=1e-9 * np.abs(direct_grad).max())
    np.testing.assert_allclose(det, direct_det, rtol=1e-9)
    # A mismatched parent (the children's order matters) is caught by the same comparison.
    shuffled = refined_gradients(refined, hat_gradients(mesh.points, mesh.tets[:, [1, 0, 2, 3]]))[0]
    assert np.abs(shuffled - direct_grad).max() > 1e-3 * np.abs(direct_grad).max()


@pytest.mark.parametrize("edge", [0.1, 0.05])
def test_estimate_matches_the_slab_closed_form(edge):
    """Poisson in a slab: e = z (h - z) / (h^2 / 4). True RMS error of the P1 field against the
    parabola (P1 interpolation of the parabola on the 1:8 refined mesh) vs the estimate."""
    mesh = slab_mesh(edge)
    solution = solve_extent(mesh)
    estimate = estimate_error(mesh, solution.extent, linear_law(1e5))
    fine = red_refine(mesh)
    z = fine.mesh.points[:, 2]
    exact = z * (0.2 - z) / 0.01
    coarse_on_fine = np.concatenate([solution.extent, 0.5 * solution.extent[fine.edges].sum(axis=1)])
    true = p1_rms(fine.mesh.points, fine.mesh.tets, exact - coarse_on_fine)
    assert 0.5 * true <= estimate.extent <= 2.0 * true
    assert estimate.extent == pytest.approx(true, rel=0.35)
    exact_length = 0.2 / 2.0     # V / ∫|∇e|: |e'| integrates to 2 (0 -> 1 -> 0) per unit area
    true_length = abs(characteristic_length(mesh.points, mesh.tets, solution.extent) - exact_length) / exact_length
    assert 0.5 * true_length <= estimate.characteristic_length <= 2.0 * true_length


def test_pressure_estimate_follows_the_law():
    """Linear law: the pressure error is the extent error (both relative to their maximum); a
    stiffening law weighs the error near e = 1 by p0'(e) / p0(1) = 1 / (1 - K e)^2 x (1 - K)."""
    mesh = slab_mesh(0.1)
    solution = solve_extent(mesh)
    linear = estimate_error(mesh, solution.extent, linear_law(2e5))
    stiff = estimate_error(mesh, solution.extent, hyperbolic_law(2e5, 0.8))
    assert linear.pressure == pytest.approx(linear.extent, rel=1e-9)
    assert stiff.pressure > linear.pressure


def probe(asset, points) -> np.ndarray:
    """The asset's P1 extent at ``points`` (VTK's probe filter; points it misses: the nearest vertex)."""
    from scipy.spatial import cKDTree
    from vtkmodules.util.numpy_support import numpy_to_vtk, numpy_to_vtkIdTypeArray, vtk_to_numpy
    from vtkmodules.vtkCommonCore import vtkPoints
    from vtkmodules.vtkCommonDataModel import VTK_TETRA, vtkCellArray, vtkPolyData, vtkUnstructuredGrid
    from vtkmodules.vtkFiltersCore import vtkProbeFilter

    grid = vtkUnstructuredGrid()
    vtk_points = vtkPoints()
    vtk_points.SetData(numpy_to_vtk(np.ascontiguousarray(asset.points), deep=True))
    grid.SetPoints(vtk_points)
    cells = vtkCellArray()
    cells.SetData(numpy_to_vtkIdTypeArray(np.arange(0, 4 * len(asset.tets) + 1, 4, dtype=np.int64), deep=True),
                  numpy_to_vtkIdTypeArray(np.ascontiguousarray(asset.tets.ravel(), dtype=np.int64), deep=True))
    grid.SetCells(VTK_TETRA, cells)
    values = numpy_to_vtk(np.ascontiguousarray(asset.extent), deep=True)
    values.SetName("extent")
    grid.GetPointData().AddArray(values)
    query = vtkPolyData()
    query_points = vtkPoints()
    query_points.SetData(numpy_to_vtk(np.ascontiguousarray(points), deep=True))
    query.SetPoints(query_points)
    probe_filter = vtkProbeFilter()
    probe_filter.SetInputData(query)
    probe_filter.SetSourceData(grid)
    probe_filter.Update()
    out = probe_filter.GetOutput().GetPointData()
    result = vtk_to_numpy(out.GetArray("extent")).astype(np.float64)
    valid = vtk_to_numpy(out.GetArray(probe_filter.GetValidPointMaskArrayName())).astype(bool)
    if not valid.all():
        _, nearest = cKDTree(asset.points).query(points[~valid])
        result[~valid] = asset.extent[nearest]
    return result


def test_bisection_is_conforming_and_carries_the_boundary_conditions():
    """Local refinement of a slab with three conditions: the refined mesh is conforming (every
    interior face shared by two tets), fills the same volume, refines only around the marked tets,
    and each new boundary face has the condition its plane had (top/bottom FREE, sides INSULATED,
    one side RIGID) -- read from the geometry, not from the refinement."""
    mesh = slab_mesh(0.15, rigid_side=True)
    marked = np.flatnonzero(mesh.points[mesh.tets].mean(axis=1)[:, 0] > 0.3)      # next to the RIGID side
    fine = bisected(mesh, marked)
    volumes = tet_volumes(fine.points, fine.tets)
    assert np.all(volumes > 0) and volumes.sum() == pytest.approx(0.2, rel=1e-12)
    assert mesh.n_tets + len(marked) <= fine.n_tets
    # Conforming: the single faces are exactly the boundary, whose area is the box's.
    f = fine.points[fine.boundary_faces]
    assert 0.5 * np.linalg.norm(np.cross(f[:, 1] - f[:, 0], f[:, 2] - f[:, 0]), axis=1).sum() == \
        pytest.approx(2 * 1.0 + 4 * 0.2, rel=1e-12)
    normal = np.cross(f[:, 1] - f[:, 0], f[:, 2] - f[:, 0])
    normal /= np.linalg.norm(normal, axis=1)[:, None]
    expected = np.where(np.abs(normal[:, 2]) > 0.9, FREE, np.where(normal[:, 0] > 0.9, RIGID, INSULATED))
    np.testing.assert_array_equal(fine.boundary_markers, expected)
    # Tets far from the marked ones are untouched.
    far = mesh.points[mesh.tets].max(axis=1)[:, 0] < -0.3
    kept = set(map(tuple, np.sort(fine.tets, axis=1).tolist()))
    assert all(tuple(t) in kept for t in np.sort(mesh.tets[far], axis=1).tolist())


def test_split_edges_is_conforming_splits_every_edge_and_carries_the_boundary_conditions():
    """Edges of a three-condition slab split in every tet around them, several per tet (so in
    rounds): same volume, conforming (the single faces are the box's area), each new boundary
    face with its plane's condition, every requested edge gone and its midpoint a vertex, and
    the tets that hold none of the edges untouched. A pair that is not an edge is refused."""
    from fieldgen.errors import BuildError
    from fieldgen.meshing.refine import split_edges

    mesh = slab_mesh(0.15, rigid_side=True)
    pairs = np.unique(np.sort(mesh.tets[:, [0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3]].reshape(-1, 2), axis=1), axis=0)
    middle = mesh.points[pairs].mean(axis=1)
    chosen = pairs[middle[:, 0] > 0.25]                         # boundary and interior edges, many per tet
    priority = np.abs(mesh.points[chosen[:, 0], 2] - mesh.points[chosen[:, 1], 2])
    fine = split_edges(mesh, chosen, priority)
    volumes = tet_volumes(fine.points, fine.tets)
    assert np.all(volumes > 0) and volumes.sum() == pytest.approx(0.2, rel=1e-12)
    f = fine.points[fine.boundary_faces]
    normal = np.cross(f[:, 1] - f[:, 0], f[:, 2] - f[:, 0])
    assert 0.5 * np.linalg.norm(normal, axis=1).sum() == pytest.approx(2 * 1.0 + 4 * 0.2, rel=1e-12)
    normal /= np.linalg.norm(normal, axis=1)[:, None]
    expected = np.where(np.abs(normal[:, 2]) > 0.9, FREE, np.where(normal[:, 0] > 0.9, RIGID, INSULATED))
    np.testing.assert_array_equal(fine.boundary_markers, expected)
    n = fine.n_points
    fine_pairs = np.sort(fine.tets[:, [0, 1, 0, 2, 0, 3, 1, 2, 1, 3, 2, 3]].reshape(-1, 2), axis=1)
    assert not np.isin(chosen[:, 0] * n + chosen[:, 1], fine_pairs[:, 0] * n + fine_pairs[:, 1]).any()
    assert fine.n_points == mesh.n_points + len(chosen)
    np.testing.assert_allclose(np.sort(fine.points[mesh.n_points:], axis=0),
                               np.sort(mesh.points[chosen].mean(axis=1), axis=0), atol=1e-15)
    untouched = ~np.isin(mesh.tets, np.unique(chosen)).any(axis=1)
    kept = set(map(tuple, np.sort(fine.tets, axis=1).tolist()))
    assert untouched.any() and all(tuple(t) in kept for t in np.sort(mesh.tets[untouched], axis=1).tolist())
    with pytest.raises(BuildError, match="not an edge"):
        split_edges(mesh, np.array([[np.argmin(mesh.points[:, 0]), np.argmax(mesh.points[:, 0])]]))   # 1 m apart


def test_split_edges_splits_the_higher_priority_edge_first():
    """One tet, two edges sharing vertex 0: splitting (0, 1) first at m leaves the edge m-2 (the
    later split of (0, 2) at q happens in the half (0, m, 2, 3) only); splitting (0, 2) first
    leaves q-1 instead."""
    from fieldgen.meshing.refine import split_edges

    points = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    mesh = TetMesh(points=points, tets=np.array([[0, 1, 2, 3]]), boundary_faces=boundary_faces_of(np.array([[0, 1, 2, 3]])),
                   boundary_markers=np.full(4, FREE))
    pairs = np.array([[0, 1], [0, 2]])
    for first in (0, 1):
        priority = np.array([1.0, 0.0]) if first == 0 else np.array([0.0, 1.0])
        fine = split_edges(mesh, pairs, priority)
        assert fine.n_tets == 3 and np.all(tet_volumes(fine.points, fine.tets) > 0)
        mid = {tuple(np.round(p, 12)): i for i, p in enumerate(fine.points)}
        m = mid[(0.5, 0.0, 0.0)]
        q = mid[(0.0, 0.5, 0.0)]
        edges = {tuple(sorted(e)) for t in fine.tets.tolist() for e in ((t[0], t[1]), (t[0], t[2]), (t[0], t[3]),
                                                                         (t[1], t[2]), (t[1], t[3]), (t[2], t[3]))}
        expect = tuple(sorted((m, 2))) if first == 0 else tuple(sorted((q, 1)))
        other = tuple(sorted((q, 1))) if first == 0 else tuple(sorted((m, 2)))
        assert expect in edges and other not in edges, first


def test_marked_edges_take_the_most_gain_per_tet_within_the_room():
    """On the Poisson slab (e bends across it only): the edges are taken in order of surplus² x
    volume around / tets around, every one taken ranks above every one left; the tets around them
    fit the room; and with a room of one tet, the single best edge is still taken."""
    from fieldgen.sizing.accuracy import marked_edges

    mesh = slab_mesh(0.08)
    estimate = estimate_error(mesh, solve_extent(mesh).extent, linear_law(1e5))
    volume = np.abs(tet_volumes(mesh.points, mesh.tets))
    m = len(estimate.edges)
    around = np.bincount(estimate.tet_edges.ravel(), minlength=m)
    patch = np.bincount(estimate.tet_edges.ravel(), weights=np.repeat(volume, 6), minlength=m)
    expected = estimate.edge_surplus ** 2 * patch / around          # recomputed here, not taken from the code
    room = mesh.n_tets // 2
    edges, priority = marked_edges(estimate, volume, room, share=0.99)
    index = {tuple(e): i for i, e in enumerate(estimate.edges.tolist())}
    rows = np.array([index[tuple(e)] for e in edges.tolist()])
    np.testing.assert_allclose(priority, expected[rows], rtol=1e-12)
    left = np.setdiff1d(np.arange(m), rows)
    assert expected[rows].min() >= expected[left].max()
    assert around[rows].sum() <= room < around[rows].sum() + around[left][np.argmax(expected[left])]
    # The room is inclusive: a room equal to the tets around the best j edges takes exactly them.
    order = np.lexsort((np.arange(m), -expected))
    exact = int(around[order[:25]].sum())
    assert len(marked_edges(estimate, volume, exact, share=0.99)[0]) == 25
    # The share binds: the fewest best edges whose gain reaches it.
    gain = estimate.edge_surplus ** 2 * patch
    edges, _ = marked_edges(estimate, volume, 10 * mesh.n_tets, share=0.3)
    taken = gain[order[:len(edges)]].sum()
    assert taken >= 0.3 * gain.sum() > taken - gain[order[len(edges) - 1]]
    # No room at all: still the single best edge (a pass always refines).
    [best], _ = marked_edges(estimate, volume, 0)
    assert index[tuple(best)] == int(np.argmax(expected))


def test_steepest_edge_refinement_beats_bisection_where_the_field_bends_one_way():
    """A Poisson slab (free top and bottom): e = 4 z (0.2 - z) / 0.04 bends across the slab only.
    One pass: splitting the edges holding 80% of the gain leaves a smaller estimated error with
    fewer tets than bisecting the tets that hold 95% of the squared error (measured: 18.2k tets
    and 3.8% against 19.1k and 5.2%), and the edges it splits run across the slab (larger |dz| than the
    mesh's edges, on average)."""
    from fieldgen.sizing.accuracy import marked_edges
    from fieldgen.meshing.refine import split_edges

    mesh = slab_mesh(0.08)
    law = linear_law(1e5)
    estimate = estimate_error(mesh, solve_extent(mesh).extent, law)
    volume = np.abs(tet_volumes(mesh.points, mesh.tets))
    edges, priority = marked_edges(estimate, volume, 10 * mesh.n_tets, share=0.8)
    dz = np.abs(np.diff(mesh.points[edges][..., 2], axis=1))[:, 0]
    all_dz = np.abs(np.diff(mesh.points[estimate.edges][..., 2], axis=1))[:, 0]
    assert dz.mean() > 1.5 * all_dz.mean()
    steep = refine_zero_tets(split_edges(mesh, edges, priority))[0]
    bisect = refine_zero_tets(bisected(mesh, marked_tets(estimate, volume, law, share=0.95)))[0]
    errors = [estimate_error(m, solve_extent(m).extent, law).extent for m in (steep, bisect)]
    assert steep.n_tets < bisect.n_tets and errors[0] < 0.8 * errors[1], (steep.n_tets, bisect.n_tets, errors)


def test_bisection_of_a_bonded_cad_part_keeps_its_bonded_face(meshes, caplog):
    """plate_holes with its bottom bonded, the tets along the bottom bisected: every new boundary
    face whose normal is within the selector's 10 degrees of -z is RIGID, every other one FREE."""
    from fieldgen.surface.selectors import assign_conditions, parse_selector

    surface = load_surface(meshes / "plate_holes.STL", "mm")
    markers = assign_conditions(surface, [parse_selector("normal:0,0,-1", 1e-3)], [])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions())
    low = mesh.points[:, 2].min()
    marked = np.flatnonzero(mesh.points[mesh.tets].min(axis=1)[:, 2] < low + 1e-9)
    with caplog.at_level(logging.DEBUG):
        fine = bisected(mesh, marked)
    # scikit-fem's refinement logs a warning per mesh it copies; it would reach a --quiet terminal.
    assert fine.n_points > 1000 and not [r for r in caplog.records if r.name.startswith("skfem")]
    assert fine.n_tets > mesh.n_tets and len(fine.boundary_faces) > len(mesh.boundary_faces)
    f = fine.points[fine.boundary_faces]
    normal = np.cross(f[:, 1] - f[:, 0], f[:, 2] - f[:, 0])
    normal /= np.linalg.norm(normal, axis=1)[:, None]
    np.testing.assert_array_equal(fine.boundary_markers, np.where(normal[:, 2] < -np.cos(np.radians(10.0)), RIGID, FREE))


def _thinned_slab():
    """A Poisson slab after one steepest-edge pass: tets thinned across it (the meshes on which
    the fine solve needs the most iterations)."""
    from fieldgen.sizing.accuracy import marked_edges
    from fieldgen.meshing.refine import split_edges

    mesh = slab_mesh(0.05)
    estimate = estimate_error(mesh, solve_extent(mesh).extent, linear_law(1e5))
    edges, priority = marked_edges(estimate, np.abs(tet_volumes(mesh.points, mesh.tets)), 10 * mesh.n_tets)
    return refine_zero_tets(split_edges(mesh, edges, priority))[0]


@pytest.mark.parametrize("case", ["angle_block", "thinned slab"])
def test_the_estimate_at_the_default_tolerance_equals_the_converged_one(meshes, monkeypatch, case):
    """The fine solve stops at a residual 1e-3 of the right-hand side's (it starts from the
    coarse solution, so only the difference is left to find): the estimates equal those of a
    solve to 1e-8 within 0.2% (e, p0) and 0.3% (L) of their size, on a CAD part's first mesh and
    on thinned tets. (At 1e-2, L moved by 0.6% on angle_block.)"""
    import functools

    from fieldgen.fe import estimate as sizing

    if case == "angle_block":
        surface = load_surface(meshes / "angle_block.STL", "in")
        mesh = refine_zero_tets(tetrahedralize(surface.vertices, surface.faces, np.full(len(surface.faces), FREE),
                                               options=MeshingOptions(edge_length=0.008)))[0]
    else:
        mesh = _thinned_slab()
    extent = solve_extent(mesh).extent
    law = hyperbolic_law(1e5, 0.8)
    default = estimate_error(mesh, extent, law)
    monkeypatch.setattr(sizing, "two_grid_extent", functools.partial(sizing.two_grid_extent, rtol=1e-8))
    tight = estimate_error(mesh, extent, law)
    assert red_refine(mesh).mesh.n_points > sizing.TWO_GRID_LIMIT        # the two-grid path, not the direct one
    for name in ("extent", "pressure"):
        assert getattr(default, name) == pytest.approx(getattr(tight, name), rel=2e-3)
    assert default.characteristic_length == pytest.approx(tight.characteristic_length, rel=3e-3)


def test_two_grid_fine_solve_is_the_galerkin_solution(meshes):
    """The estimate's fine solve (two-grid CG from the coarse solution, to a tight tolerance)
    against scikit-fem's assembly and a direct solve on the same refined mesh; with too few
    iterations to converge it falls back to the monotone solve."""
    from scipy.sparse.linalg import spsolve
    from skfem import condense

    from fieldgen.fe.extent import assemble_skfem, dirichlet_values

    surface = load_surface(meshes / "angle_block.STL", "in")
    mesh = refine_zero_tets(tetrahedralize(surface.vertices, surface.faces, np.full(len(surface.faces), FREE),
                                           options=MeshingOptions(edge_length=0.008)))[0]
    refined = red_refine(mesh)
    assert refined.mesh.n_points > 20_000                  # above the direct-solve limit
    coarse = solve_extent(mesh).extent
    problem, dofs, values = dirichlet_values(refined.mesh)
    stiffness, load = assemble_skfem(refined.mesh, problem)
    x = np.zeros(refined.mesh.n_points)
    x[dofs] = values
    matrix, rhs, _, interior = condense(stiffness, load, x=x, D=dofs)
    x[interior] = spsolve(matrix.tocsc(), rhs)
    reference = x / x.max()
    assert np.abs(two_grid_extent(mesh, refined, coarse, rtol=1e-8) - reference).max() < 1e-6
    fallback = two_grid_extent(mesh, refined, coarse, maxiter=1)
    np.testing.assert_array_equal(fallback, solve_extent(refined.mesh).extent)


def _thin_layers_under_a_tilted_top(thin: float, tilt: float = 0.5) -> TetMesh:
    """A unit square column, e = 1 on the bottom, e = 0 on a top at height 1 + tilt·xy (so e is
    not linear unless tilt = 0), insulated sides; three layers ``thin`` thick on the bottom under
    1/16-wide tets, as in a prism layer along a rigid core."""
    from fieldgen.meshing.tetmesh import box_grid

    zs = np.concatenate([[0.0], thin * np.arange(1, 4), np.linspace(0.1, 1.0, 8)])
    points, tets = box_grid(np.linspace(0, 1, 17), np.linspace(0, 1, 17), zs)
    points[:, 2] *= 1.0 + tilt * points[:, 0] * points[:, 1]
    faces = boundary_faces_of(tets)
    corners = points[faces]
    markers = np.full(len(faces), INSULATED)
    markers[np.all(corners[:, :, 2] == 0.0, axis=1)] = RIGID
    markers[np.all(np.isclose(corners[:, :, 2], 1.0 + tilt * corners[:, :, 0] * corners[:, :, 1]), axis=1)] = FREE
    return TetMesh(points, tets, faces, markers)


@pytest.mark.parametrize("thin", [1e-2, 1e-4])
def test_the_fine_solve_finds_the_difference_next_to_thin_tets_on_a_rigid_face(thin):
    """Next to an e = 1 face the right-hand side holds the couplings to it, which grow as the tets
    there thin: stopped at 1e-3 of it, the fine solve stopped at once from the coarse solution
    (the difference the estimate measures came out 55% wrong at 1e-2 thick, zero at 1e-4).
    Stopped at 1e-3 of the starting residual, it is within 1% of the direct solve's."""
    from fieldgen.fe.estimate import TWO_GRID_LIMIT, _prolongation

    mesh = _thin_layers_under_a_tilted_top(thin)
    refined = red_refine(mesh)
    assert refined.mesh.n_points > TWO_GRID_LIMIT                 # the two-grid path
    coarse = solve_extent(mesh).extent
    start = _prolongation(mesh.n_points, refined.edges) @ coarse
    fine = solve_extent(refined.mesh).extent
    difference = fine - start
    assert np.abs(difference).max() > 1e-2                          # there is a difference to find
    found = two_grid_extent(mesh, refined, coarse)
    assert np.linalg.norm(found - fine) < 0.01 * np.linalg.norm(difference)


def test_the_fine_solve_keeps_a_start_that_already_solves_it():
    """With a flat top e = 1 - z is linear: given it exactly, the start's residual on the fine
    mesh is rounding and the fine solve keeps the start as it is (asked to cut rounding by 1e-3,
    CG would chase noise). The solved coarse field is that one to its solver's tolerance."""
    from fieldgen.fe.estimate import _prolongation

    mesh = _thin_layers_under_a_tilted_top(1e-2, tilt=0.0)
    refined = red_refine(mesh)
    exact = 1.0 - mesh.points[:, 2]
    np.testing.assert_allclose(solve_extent(mesh).extent, exact, atol=1e-9)
    start = _prolongation(mesh.n_points, refined.edges) @ exact
    np.testing.assert_array_equal(two_grid_extent(mesh, refined, exact), start)


def test_doerfler_marking_takes_the_fewest_tets_holding_the_share():
    class Estimate:
        tet_rms_extent = np.array([0.1, 0.4, 0.2, 0.3, 0.0])
        tet_rms_pressure = np.zeros(5)

    law = linear_law(1e5)
    volume = np.ones(5)
    # Squared errors 0.01, 0.16, 0.04, 0.09, 0 (sum 0.30): 80% is 0.24, held by tets 1 and 3 (0.25).
    np.testing.assert_array_equal(marked_tets(Estimate, volume, law, share=0.8), [1, 3])
    np.testing.assert_array_equal(marked_tets(Estimate, volume, law, share=0.9), [1, 2, 3])
    np.testing.assert_array_equal(marked_tets(Estimate, volume, law, share=0.9, limit=1), [1])


# Real parts (corpus), units, extra options: one Poisson (all faces free), one Laplace (bonded).
REAL_PARTS = [
    ("unit_sphere.STL", "m", {}),
    ("fandisk.obj", "m", {"bonded": ("below:z=-0.7",)}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,units,extra", REAL_PARTS, ids=[p[0] for p in REAL_PARTS])
def test_error_estimate_within_factor_two_of_a_much_finer_solution(meshes, tmp_path, monkeypatch, name, units,
                                                                     extra):
    """The estimate in the asset's metadata against the error measured with a mesh whose edges
    are 4 x shorter everywhere (the asset's solve mesh refined 1:8 twice, 64 x the tets; the
    sized mesh is locally refined, so a uniform finer TetGen mesh would not be finer everywhere):
    extent, pressure (hyperbolic law) and L."""
    import fieldgen.material.layering

    solved = {}
    original_layer = fieldgen.material.layering.layer

    def spy_layer(mesh, extent, *args, **kwargs):
        solved["mesh"] = mesh
        return original_layer(mesh, extent, *args, **kwargs)

    monkeypatch.setattr(fieldgen.material.layering, "layer", spy_layer)
    options = BuildOptions(units=units, modulus=1e5, law="hyperbolic", k=0.5, accuracy=0.03, **extra)
    out = tmp_path / "coarse.vtu"
    build(meshes / name, out, options)
    meta = read_metadata(out)
    estimate = meta["error_estimate"]
    coarse = read_asset(out)
    # The reference: the same mesh refined 1:8 twice, P1 extent solved from scratch on it.
    fine = red_refine(red_refine(solved["mesh"]).mesh).mesh
    fine = refine_zero_tets(fine)[0]
    reference = solve_extent(fine).extent
    assert fine.n_tets >= 64 * meta["mesh"]["tets_before_layering"]
    on_fine = probe(coarse, fine.points)
    law = make_law(options)
    true_extent = p1_rms(fine.points, fine.tets, on_fine - reference)
    true_pressure = p1_rms(fine.points, fine.tets, law.pressure(np.clip(on_fine, 0, 1)) - law.pressure(reference)) \
        / law.max_pressure
    fine_length = characteristic_length(fine.points, fine.tets, reference)
    true_length = abs(meta["characteristic_length"] - fine_length) / fine_length
    for what, est, true in (("extent", estimate["extent"], true_extent),
                            ("pressure", estimate["pressure"], true_pressure)):
        assert 0.5 * true <= est <= 2.0 * true, (what, est, true)
    # L's error can be far below the field's (errors of either sign cancel in the integral);
    # where it is, "within a factor 2" is asked only above the reference's own resolution.
    assert estimate["characteristic_length"] <= max(2.0 * true_length, 0.2 * estimate["extent"])
    assert estimate["characteristic_length"] >= 0.5 * true_length - 0.2 * estimate["extent"]


def test_accuracy_option_is_checked_and_recorded(meshes, tmp_path):
    out = tmp_path / "sphere.vtu"
    assert run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--accuracy", "0", "-o", out).exit_code == 2
    assert run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--accuracy", "2", "-o", out).exit_code == 2
    result = run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--accuracy", "0.05", "-o", out,
                 "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    assert meta["error_estimate"]["accuracy"] == 0.05
    assert meta["error_estimate"]["extent"] == report["error_estimate"]["extent"]
    passes = meta["mesher"]["sizing"]["passes"]
    assert passes[meta["mesher"]["sizing"]["kept_pass"] - 1]["extent"] == meta["error_estimate"]["extent"]
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.05
    # and met in truth: a free ball's extent is 1 − r²/R² (Poisson, normalised; docs/model.md §2.2)
    assert rms_against(out, lambda x: 1 - np.sum(x ** 2, axis=1)) <= 0.05            # 0.63% measured
    assert meta["mesher"]["sizing"]["stopped"] == "accuracy met"
    assert not any("accuracy asked" in w for w in report["warnings"])
    # A size given by hand: no sizing, no estimate.
    result = run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--edge-length", "0.3", "-o", out,
                 "--json", "--quiet")
    assert result.exit_code == 0 and "error_estimate" not in read_metadata(out)


def test_estimate_of_a_given_size_matches_the_slab_closed_form(tmp_path):
    """--estimate on a mesh sized by --edge-length: the free slab's extent is the parabola
    e = z (h - z) / (h^2 / 4) (insulated sides), and the recorded estimate is within a factor 2
    of the asset's true RMS error against it; no accuracy was asked, so none is recorded."""
    box = trimesh.creation.box(extents=(1.0, 1.0, 0.2))
    box.apply_translation((0, 0, 0.1))
    surface = tmp_path / "slab.stl"
    box.export(surface)
    out = tmp_path / "slab.vtu"
    sides = [a for n in ("1,0,0", "-1,0,0", "0,1,0", "0,-1,0") for a in ("--insulated", f"normal:{n}")]
    result = run("build", surface, *sides, "--modulus", "1e5", "--edge-length", "0.07", "--estimate",
                 "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    assert meta["error_estimate"] == report["error_estimate"] and "accuracy" not in meta["error_estimate"]
    assert "sizing" not in meta["mesher"] and not any("accuracy asked" in w for w in report["warnings"])
    asset = read_asset(out)
    mesh = TetMesh(points=asset.points, tets=asset.tets, boundary_faces=np.zeros((0, 3), np.int64),
                   boundary_markers=np.zeros(0, np.int64))
    fine = red_refine(mesh)
    z = fine.mesh.points[:, 2]
    coarse_on_fine = np.concatenate([asset.extent, 0.5 * asset.extent[fine.edges].sum(axis=1)])
    true = p1_rms(fine.mesh.points, fine.mesh.tets, z * (0.2 - z) / 0.01 - coarse_on_fine)
    assert true > 1e-3                                       # a mesh coarse enough to have an error
    assert 0.5 * true <= meta["error_estimate"]["extent"] <= 2.0 * true
    shown = run("inspect", out)                              # no accuracy asked: none shown
    assert shown.exit_code == 0 and f"estimated error e {100 * meta['error_estimate']['extent']:.2f}%" in shown.stdout
    assert "(asked" not in shown.stdout


def test_estimate_with_a_given_size_warns_above_the_accuracy_asked(meshes, tmp_path):
    """--accuracy beside a size is refused unless --estimate asks for the estimate it is compared
    with; then an estimate above it is a warning naming the size as the reason."""
    out = tmp_path / "sphere.vtu"
    refused = run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--edge-length", "0.3",
                  "--accuracy", "0.01", "-o", out)
    assert refused.exit_code == 2 and "--estimate" in refused.stderr and not out.exists()
    result = run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--edge-length", "0.3",
                 "--accuracy", "0.001", "--estimate", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    worst = max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length"))
    assert meta["error_estimate"]["accuracy"] == 0.001 and worst > 0.001
    [warning] = [w for w in report["warnings"] if "accuracy asked" in w]
    assert f"{100 * worst:.2f}%" in warning and "size given" in warning and "--edge-length" in warning
    assert warning in result.stderr and warning in meta["warnings"]
    spec = tmp_path / "sphere.toml"
    spec.write_text('estimate = "yes"\nmodulus = 1e5\n')
    bad = run("build", meshes / "unit_sphere.STL", "--spec", spec, "-o", out)
    assert bad.exit_code == 2 and "'estimate' must be true or false" in bad.stderr


def test_an_estimate_above_the_accuracy_is_a_warning_that_says_why(meshes, tmp_path, monkeypatch):
    """The sizing may stop above the asked accuracy (its pass limit, its tet budget): the build
    still succeeds, but says so in its warnings and records why in the metadata."""
    import fieldgen.sizing.accuracy as sizing

    monkeypatch.setattr(sizing, "ADAPTIVE_PASSES", 0)      # the first, uniform mesh only
    out = tmp_path / "sphere.vtu"
    result = run("build", meshes / "unit_sphere.STL", "--modulus", "1e5", "--accuracy", "0.001", "-o", out,
                 "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    worst = max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length"))
    assert worst > 0.001
    assert meta["mesher"]["sizing"]["stopped"] == "pass limit"
    [warning] = [w for w in report["warnings"] if "accuracy asked" in w]
    assert f"{100 * worst:.2f}%" in warning and "last pass" in warning and "--edge-length" in warning


def test_the_accuracy_warning_gives_every_reason():
    """The tet budget, the pass limit and a mesh sized for the law before a fit are each named;
    a budget stop on a mesh sized for another law names both; within the accuracy, no warning."""
    from fieldgen.fe.estimate import ErrorEstimate
    from fieldgen.sizing.warning import accuracy_warning

    estimate = ErrorEstimate(extent=0.02, pressure=0.03, characteristic_length=0.001,
                             tet_rms_extent=np.zeros(1), tet_rms_pressure=np.zeros(1))
    law = linear_law(1e5).to_metadata()
    assert accuracy_warning(estimate, 0.05, {"stopped": "tet budget"}, 10) == []
    [budget] = accuracy_warning(estimate, 0.01, {"stopped": "tet budget"}, 10)
    assert "3.00%" in budget and "tet budget" in budget and "before the fit" not in budget
    assert "ended past it" not in budget
    [past] = accuracy_warning(estimate, 0.01, {"stopped": "tet budget"}, 400_000)
    assert "(about 280,000 tets to solve on; its last refinement ended past it)" in past
    [last] = accuracy_warning(estimate, 0.01, {"stopped": "pass limit"}, 10)
    assert "last pass" in last
    [fitted] = accuracy_warning(estimate, 0.01, {"stopped": "accuracy met", "law": law}, 10)
    assert "before the fit" in fitted and "tet budget" not in fitted
    [both] = accuracy_warning(estimate, 0.01, {"stopped": "tet budget", "law": law}, 10)
    assert "before the fit" in both and "tet budget" in both


def test_an_error_just_above_the_accuracy_is_not_printed_as_within_it():
    """1.0004% over an asked 1% reads "1.0004%", not "1.00%" (a pass that looked met and was not);
    below or well above, two decimals."""
    from fieldgen.fe.estimate import ErrorEstimate, error_percent
    from fieldgen.sizing.warning import accuracy_warning

    assert error_percent(0.010004, 0.01) == "1.0004%"
    assert error_percent(0.0099, 0.01) == "0.99%" and error_percent(0.0125, 0.01) == "1.25%"
    assert error_percent(0.01, 0.01) == "1.00%"
    estimate = ErrorEstimate(extent=0.010004, pressure=0.010004, characteristic_length=0.005,
                             tet_rms_extent=np.zeros(1), tet_rms_pressure=np.zeros(1))
    [warning] = accuracy_warning(estimate, 0.01, {"stopped": "tet budget"}, 10)
    assert warning.startswith("estimated discretisation error 1.0004% (e 1.0004%, p 1.0004%, L 0.50%, on 10 tets)")


def sphere_mesher(meshes):
    """A mesher for the sizing loops: TetGen on unit_sphere.STL at a uniform edge, no skin."""
    surface = load_surface(str(meshes / "unit_sphere.STL"), "m")
    markers = np.full(len(surface.faces), FREE)

    def make_mesh(edge, background=None, cut=True, stretch=None, radius_edge=None):
        mesh = refine_zero_tets(tetrahedralize(surface.vertices, surface.faces, markers,
                                               options=MeshingOptions(edge_length=edge)))[0]
        return MeshedPass(mesh=mesh, whole=mesh, skin=None, split=0)

    return SimpleNamespace(mesh=make_mesh)


def test_a_rim_is_found_where_bonded_faces_meet_free_ones(meshes):
    """fandisk with its base bonded (the corpus's rim case, refined by bisection) has vertices on
    both a FREE and a RIGID face; all free, it has none; nor has a slab whose bonded faces meet
    only insulated sides."""
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.sizing.accuracy import has_rim

    surface = load_surface(str(meshes / "fandisk.obj"), "m")
    options = MeshingOptions(edge_length=0.3)
    bonded = assign_conditions(surface, [parse_selector("below:z=-0.7", 1.0)], [])
    assert (bonded == RIGID).any()
    assert has_rim(tetrahedralize(surface.vertices, surface.faces, bonded, options=options))
    free = np.full(len(surface.faces), FREE)
    assert not has_rim(tetrahedralize(surface.vertices, surface.faces, free, options=options))
    box = trimesh.creation.box(extents=(1.0, 1.0, 0.2))
    markers = np.where(box.face_normals[:, 2] < -0.9, RIGID, INSULATED)
    assert not has_rim(tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(edge_length=0.2)))


def test_the_local_sizing_stops_at_its_tet_budget(meshes):
    """With room for less than 1% more tets, the loop stops and says it was the budget."""
    from fieldgen.sizing.accuracy import mesh_by_accuracy

    make_mesh = sphere_mesher(meshes)
    sized = mesh_by_accuracy(make_mesh, linear_law(1e5), 1e-4, 4.19, max_tets=1000)
    assert sized.stopped == "tet budget" and sized.passes == 1
    assert sized.report()["stopped"] == "tet budget"


def test_the_sizing_keeps_the_pass_of_least_error(meshes, monkeypatch):
    """A pass that comes out worse than an earlier one (here: the second pass's estimate made 10x
    larger) is not the result: the loop returns the better pass's mesh, solution and estimate,
    and says which pass it kept; the history still records every pass."""
    from fieldgen.sizing import accuracy as sizing

    make_mesh = sphere_mesher(meshes)
    calls = []
    real = sizing.estimate_error

    def worse_second(mesh, extent, law):
        estimate = real(mesh, extent, law)
        calls.append(mesh)
        if len(calls) == 2:
            estimate.extent *= 10.0
            estimate.pressure *= 10.0
        return estimate

    monkeypatch.setattr(sizing, "estimate_error", worse_second)
    sized = sizing.mesh_by_accuracy(make_mesh, linear_law(1e5), 1e-4, 4.19, max_tets=12_000)
    assert sized.passes >= 2 and len(calls) == sized.passes
    assert sized.stopped == "tet budget"
    errors = [max(p["extent"], p["pressure"], p["characteristic_length"]) for p in sized.history]
    kept = int(np.argmin(errors))
    assert kept != 1 and kept < sized.passes - 1          # an earlier pass than the last
    assert sized.kept == kept and sized.report()["kept_pass"] == kept + 1
    assert sized.mesh is calls[kept] and sized.estimate.extent == sized.history[kept]["extent"]
    assert sized.solution.extent.shape == (calls[kept].n_points,)


# Candidate parts a few centimetres across (inch CAD files): default-sized builds.
CANDIDATES = [("angle_block.STL", "in"), ("idler_riser.STL", "in"), ("featuretype.STL", "in")]


@pytest.mark.slow
@pytest.mark.parametrize("name,units", CANDIDATES, ids=[c[0] for c in CANDIDATES])
def test_default_sized_build_meets_the_accuracy_within_the_tet_limit(meshes, tmp_path, name, units):
    """Thin walls (idler_riser) and re-entrant edges (angle_block, featuretype): the steepest-edge
    sizing reaches the default 1% (estimate checked against finer solutions above) within
    300k tets; bisection in every direction stopped at 1.69% on idler_riser at the budget."""
    out = tmp_path / "part.vtu"
    result = run("build", meshes / name, "--units", units, "--modulus", "1e6", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    assert report["tets"] <= 300_000
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01
    # and met in truth: the extent solved again by scikit-fem on the asset's mesh refined 1:8
    # (tests/reference_extent.py), the difference x 4/3 for P1's h² convergence: 0.51/0.73/0.73%
    # measured on angle_block/idler_riser/featuretype (estimates 0.62/0.88/0.95%); 1 min, 3-4 GB each
    asset = read_asset(out)
    assert 4 / 3 * fine_extent_rms(asset.points, asset.tets, asset.extent, (), 1) <= 0.01
    sizing = meta["mesher"]["sizing"]
    assert sizing["stopped"] == "accuracy met" and sizing["refinement"] == "steepest edge"
    assert len(sizing["passes"]) >= 2 and all(p["split_edges"] > 0 for p in sizing["passes"][1:])


def test_accuracy_sized_build_is_byte_identical_across_thread_counts(meshes, tmp_path):
    """The sizing passes (TetGen, seeded AMG solves, the seeded background jitter) do not depend
    on the thread count: same bytes."""
    import os
    import subprocess
    import sys

    outs = []
    for threads in ("1", "2"):
        out = tmp_path / f"t{threads}.vtu"
        env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads)
        proc = subprocess.run([sys.executable, "-m", "fieldgen.cli.main", "build", str(meshes / "unit_sphere.STL"),
                               "--modulus", "1e5", "--accuracy", "0.05", "-o", str(out), "--quiet"],
                              env=env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]


def test_skin_sizing_asks_for_the_edge_its_error_model_predicts_and_stops_at_the_budget():
    near, goal = 1e-3, 0.007
    # error ∝ h^1.5 (assumed before two passes): 2.8% -> 0.7% needs the edge / 4^(2/3).
    assert next_near_edge(near, 0.028, None, goal, 10_000, 280_000) == pytest.approx(near / 4 ** (2 / 3))
    # With a previous pass the rate is measured: halving the edge quartered the error -> rate 2.
    assert next_near_edge(near, 0.028, (2e-3, 0.112), goal, 10_000, 280_000) == pytest.approx(near / 2)
    # The budget: 35k tets may grow 8x to 280k, so the edge may halve, no more.
    assert next_near_edge(near, 0.5, None, goal, 35_000, 280_000) == pytest.approx(near / 2)
    # Near the budget the possible shrink is small: stop rather than remesh for it.
    assert next_near_edge(near, 0.03, None, goal, int(280_000 * 0.93 ** 3), 280_000) is None
    assert next_near_edge(near, 0.03, None, goal, int(280_000 * 0.89 ** 3), 280_000) < MIN_SHRINK * near


def test_a_size_field_that_crashes_tetgen_is_tried_again_slightly_scaled():
    """TetGen fails on some size fields and not on others 5-10% away (measured on angle_block
    and idler_riser); the sizing tries SIZE_FIELD_RETRIES in turn, then a uniform edge, says
    which meshed and at what near edge, and when all fail raises one error naming each try.
    Other errors are not retried."""
    from fieldgen.errors import BuildError, MesherCrash
    from fieldgen.sizing.size_field import SIZE_FIELD_RETRIES, mesh_with_size_field

    points = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]])
    sizes = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    asked = []

    def failing(times, error=MesherCrash):
        def make_mesh(edge, background=None):
            asked.append(edge if background is None else float((background[2][:len(sizes)] / sizes).mean()))
            if len(asked) <= times:
                raise error(f"crash {len(asked)}")
            return "mesh"
        return SimpleNamespace(mesh=make_mesh)

    def attempt(times, uniform=0.3, error=MesherCrash):
        asked.clear()
        return mesh_with_size_field(failing(times, error), points, sizes, near=0.2, uniform_edge=uniform)

    assert attempt(0) == ("mesh", "size field", 0.2)
    made, how, edge = attempt(2)
    assert (made, how) == ("mesh", f"size field x {SIZE_FIELD_RETRIES[1]:g}")
    assert edge == pytest.approx(0.2 * SIZE_FIELD_RETRIES[1])
    np.testing.assert_allclose(asked, (1.0,) + SIZE_FIELD_RETRIES[:2])
    # Every scale fails: a uniform edge of the length given.
    assert attempt(1 + len(SIZE_FIELD_RETRIES)) == ("mesh", "uniform edge", 0.3)
    assert asked[-1] == 0.3 and len(asked) == 2 + len(SIZE_FIELD_RETRIES)
    # No uniform edge allowed, or it fails too: one error naming every try.
    for uniform, tries in ((None, 1 + len(SIZE_FIELD_RETRIES)), (0.3, 2 + len(SIZE_FIELD_RETRIES))):
        with pytest.raises(MesherCrash) as raised:
            attempt(99, uniform)
        assert len(asked) == tries and all(f"crash {k}" in str(raised.value) for k in range(1, tries + 1))
    with pytest.raises(BuildError, match="crash 1"):
        attempt(1, error=BuildError)
    assert len(asked) == 1
    # Each retry is said, with the failure and the next try (the failed stage alone says "stopped").
    import io

    from fieldgen.progress import Progress

    said = io.StringIO()
    asked.clear()
    mesh_with_size_field(failing(1 + len(SIZE_FIELD_RETRIES)), points, sizes, near=0.2, uniform_edge=0.3,
                         progress=Progress(stream=said))
    lines = said.getvalue().splitlines()
    assert len(lines) == 1 + len(SIZE_FIELD_RETRIES)
    assert lines[0] == f"TetGen failed on the size field (crash 1); retrying with the sizes x {SIZE_FIELD_RETRIES[0]:g}"
    assert lines[-1].endswith("(crash 4); retrying with a uniform edge of 0.3 m")


def test_the_skin_sizing_meshes_a_failed_pass_with_a_uniform_edge_and_records_it(meshes, monkeypatch):
    """A unit sphere under a 0.3 skin, two passes, the second pass's size fields all failing (as
    TetGen's did on angle_block): that pass is meshed with a uniform edge, its record says so and
    gives that edge, and the switches recorded are those of the mesh the asset keeps."""
    import fieldgen.sizing.accuracy as sizing
    import fieldgen.meshing.tetgen as tetmesh
    from fieldgen.pipeline import mesh_part
    from fieldgen.errors import MesherCrash

    monkeypatch.setitem(sizing.mesh_by_accuracy.__kwdefaults__, "max_tets", 60_000)
    monkeypatch.setitem(sizing.mesh_by_accuracy.__kwdefaults__, "max_passes", 2)
    original = tetmesh.tetrahedralize
    calls = {"fields": 0, "uniform": []}

    def fake(*args, background=None, options=None, **kwargs):
        if background is not None:
            calls["fields"] += 1
            if calls["fields"] >= 2:             # the first pass meshes; every later field fails
                raise MesherCrash("simulated crash")
        elif options is not None and options.edge_length is not None:
            calls["uniform"].append(options.edge_length)
        return original(*args, background=background, options=options, **kwargs)

    monkeypatch.setattr(tetmesh, "tetrahedralize", fake)
    options = BuildOptions(modulus=1e6, law="hyperbolic", k=0.8, skin=0.3, accuracy=0.001, skin_mesh="cut").checked()
    part = mesh_part(meshes / "unit_sphere.STL", options, law=make_law(options))
    passes = part.mesher["sizing"]["passes"]
    assert [p["meshed_by"] for p in passes] == ["size field", "uniform edge"]
    assert passes[1]["edge_length"] == calls["uniform"][-1] <= 0.5 * 0.3
    kept = passes[part.mesher["sizing"]["kept_pass"] - 1]
    assert ("m" not in part.mesher["switches"]) == (kept["meshed_by"] == "uniform edge")
    # Kept the first pass (as when the second comes out worse): its switches, not the last made.
    monkeypatch.setattr(sizing, "better_pass", lambda best, candidate: candidate if best is None else best)
    calls["fields"] = 0
    part = mesh_part(meshes / "unit_sphere.STL", options, law=make_law(options))
    assert part.mesher["sizing"]["kept_pass"] == 1 and part.mesher["switches"].endswith("mQ")


def test_when_every_mesh_the_skin_sizing_tries_fails_the_error_names_the_file_and_each_try(
        meshes, tmp_path, monkeypatch):
    """TetGen failing on every size field and on the uniform edge too: the build exits 1 with one
    message that names the input file, each attempt and the fix, and writes nothing."""
    import fieldgen.meshing.tetgen as tetmesh
    from fieldgen.errors import MesherCrash
    from fieldgen.sizing.size_field import SIZE_FIELD_RETRIES

    original = tetmesh.tetrahedralize
    calls = []

    def fake(*args, **kwargs):
        calls.append(kwargs.get("background") is not None)
        if len(calls) > 1:                           # the coarse first mesh meshes, nothing after
            raise MesherCrash("simulated crash")
        return original(*args, **kwargs)

    monkeypatch.setattr(tetmesh, "tetrahedralize", fake)
    out = tmp_path / "ball.vtu"
    result = CliRunner().invoke(main, ["build", str(meshes / "unit_sphere.STL"), "--skin", "0.3", "--skin-mesh", "cut",
                                       "--modulus", "1e6", "-o", str(out), "--quiet"])
    assert result.exit_code == 1
    message = result.stderr
    assert str(meshes / "unit_sphere.STL") in message and "--edge-length" in message
    assert all(f"sizes x {f:g}: simulated crash" in message for f in (1.0,) + SIZE_FIELD_RETRIES)
    assert "uniform edge" in message and calls[1:] == [True] * (1 + len(SIZE_FIELD_RETRIES)) + [False]
    assert list(tmp_path.iterdir()) == []


def test_tetgen_output_with_a_flat_tet_is_a_mesher_failure(monkeypatch):
    """A tet whose four vertices lie in a plane to rounding carries no field (its gradient is
    undefined) and cannot be split: one TetGen mesh under a size field had one (volume 2e-18 of
    its longest edge cubed). flat_tets finds it and only it, and TetGen output with one is a
    MesherCrash (which the skin's sizing retries)."""
    import fieldgen.meshing.tetgen as tetmesh
    from fieldgen.errors import MesherCrash
    from fieldgen.meshing.tetgen import FLAT_TET, flat_tets

    points = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1e-19], [0.3, 0.3, 1e-9]])
    tets = np.array([[0, 1, 2, 3], [0, 1, 2, 4], [0, 1, 2, 5]])
    volumes = tet_volumes(points, tets)
    assert volumes[1] < FLAT_TET * 2 ** 1.5 < volumes[2]      # the longest edges are sqrt(2)
    np.testing.assert_array_equal(flat_tets(points, tets), [1])
    # TetGen's output with a flat tet (four corners of one side of a box) beside a good one; the
    # check comes before the boundary's, so this need not be a whole mesh of the box.
    box = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    nodes = np.array(box.vertices)
    assert np.all(nodes[:4, 0] == nodes[0, 0])            # four corners on one side: coplanar
    elements = np.array([[0, 1, 2, 4], [0, 1, 2, 3]])
    monkeypatch.setattr(tetmesh, "_run_tetgen", lambda *a, **k: (nodes, elements, np.zeros((0, 3), int),
                                                                  np.zeros(0, int)))
    markers = np.full(len(box.faces), FREE)
    with pytest.raises(MesherCrash, match="flat tet"):
        tetmesh.tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(edge_length=0.5))


def test_the_skins_first_mesh_is_predicted_within_the_budget(meshes):
    """The first pass's edge grows until the predicted mesh fits the budget; the prediction
    (SIZE_FIELD_TETS x Σ V/s³ over the coarse mesh) is checked against TetGen's own count on a
    real part: a 1 mm skin under angle_block at its default first edge (half the skin) would be
    about 400k tets."""
    from fieldgen.sizing.size_field import (depth_graded_sizes, first_near_edge, first_size, mesh_with_size_field,
                                 predicted_tets)
    from fieldgen.skin.cut import free_surface_depth

    surface = load_surface(meshes / "angle_block.STL", "in")
    markers = np.full(len(surface.faces), FREE)
    skin = 1e-3
    first = first_size(abs(surface.volume))
    coarse = tetrahedralize(surface.vertices, surface.faces, markers,
                            options=MeshingOptions(edge_length=min(first, 4 * skin)))
    depth = free_surface_depth(coarse, free_surface=(surface.vertices, surface.faces))

    def sizes(near):
        return np.minimum(depth_graded_sizes(depth, skin, near=near), max(first, near))

    # Within the budget: unchanged. Above it: larger, and then predicted within it.
    assert first_near_edge(coarse, sizes, 0.5 * skin, 10_000_000) == 0.5 * skin
    near = first_near_edge(coarse, sizes, 0.5 * skin, 150_000)
    assert near > 0.5 * skin and predicted_tets(coarse, sizes(near)) <= 150_000
    # The prediction against TetGen: within [0.6, 1.05] x (the constant is the largest ratio
    # measured). TetGen may crash on this very field: the sizing's retry is used, and the
    # prediction made for the field that was meshed.
    used = {}

    def make_mesh(edge, background=None):
        used["sizes"] = background[2][:coarse.n_points]
        return tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions(),
                              background=background)

    mesh, how, _ = mesh_with_size_field(SimpleNamespace(mesh=make_mesh), coarse.points, sizes(near), near=near, uniform_edge=None)
    assert how.startswith("size field")
    predicted = predicted_tets(coarse, used["sizes"])
    assert 0.6 * predicted <= mesh.n_tets <= 1.05 * predicted


@pytest.mark.slow
def test_accuracy_sized_skin_build_meets_the_accuracy_and_records_its_passes(meshes, tmp_path):
    """A 0.15 m skin over a unit sphere with a stiffening law: the depth-graded sizing reaches 1%
    (measured 0.66% in two passes), each pass's near-surface edge is the previous one shrunk by at
    least MIN_SHRINK, and the layered asset keeps the law within the tolerance."""
    out = tmp_path / "skin.vtu"
    result = run("build", meshes / "unit_sphere.STL", "--modulus", "1e6", "--law", "hyperbolic", "--k", "0.8",
                 "--skin", "0.15", "--skin-mesh", "cut", "-o", out, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    meta = read_metadata(out)
    assert max(meta["error_estimate"][k] for k in ("extent", "pressure", "characteristic_length")) <= 0.01
    # against the shell's closed form (a = 0.85, b = 1; docs/model.md §2.2): 1.64% measured, so
    # within 2%, not 1% (the estimate says 0.65%): the closed form is the round sphere's, the part
    # is a 1280-triangle one (sagitta 1.2 mm; the skin's interior follows its facets), and how much
    # of the gap the facets make is not separated here
    shell = lambda x: np.clip((1 / np.linalg.norm(x, axis=1) - 1) / (1 / 0.85 - 1), 0.0, 1.0)
    assert rms_against(out, shell) <= 0.02
    passes = meta["mesher"]["sizing"]["passes"]
    assert passes[0]["edge_length"] == pytest.approx(0.075)          # skin / 2
    assert all(b["edge_length"] <= MIN_SHRINK * a["edge_length"] for a, b in zip(passes, passes[1:]))
    assert passes[meta["mesher"]["sizing"]["kept_pass"] - 1]["extent"] == meta["error_estimate"]["extent"]
    assert report["tets_added_by_layering"] > 0
    assert meta["max_interpolation_error"] <= 0.01 * make_law(BuildOptions(modulus=1e6, law="hyperbolic", k=0.8)).max_pressure


def test_same_shape_is_equality_up_to_a_factor():
    from fieldgen.material.modulus import same_shape
    from fieldgen.material.modulus import table_law_from_points

    assert same_shape(linear_law(1.0), linear_law(3e5))
    assert same_shape(hyperbolic_law(1e5, 0.6), hyperbolic_law(7e6, 0.6))
    assert not same_shape(hyperbolic_law(1e5, 0.6), hyperbolic_law(1e5, 0.7))
    assert not same_shape(linear_law(1e5), hyperbolic_law(1e5, 0.1))
    e, p = np.array([0.0, 0.3, 0.6, 1.0]), np.array([0.0, 1.0, 3.0, 8.0])
    assert same_shape(table_law_from_points(e, p), table_law_from_points(e, 50.0 * p))
    assert not same_shape(table_law_from_points(e, p), table_law_from_points(e, p + np.array([0, 0, 0.1, 0])))


def test_a_mesh_reused_for_another_law_gets_that_laws_pressure_estimate(meshes, tmp_path):
    """``build(meshed=...)`` (what calibrate does once the law is fitted) builds on the given mesh
    and measures the pressure error for its own law, not the one the mesh was sized for."""
    from fieldgen.pipeline import mesh_part

    sized_for = BuildOptions(modulus=1e5, law="linear")
    meshed = mesh_part(meshes / "unit_sphere.STL", sized_for, law=make_law(sized_for))
    assert meshed.estimate is not None
    options = BuildOptions(modulus=1e5, law="hyperbolic", k=0.8)
    build(meshes / "unit_sphere.STL", tmp_path / "a.vtu", options, meshed=meshed)
    meta = read_metadata(tmp_path / "a.vtu")
    assert meta["mesh"]["tets_before_layering"] == meshed.mesh.n_tets
    expected = estimate_error(meshed.mesh, meshed.solution.extent, make_law(options))
    assert meta["error_estimate"]["pressure"] == expected.pressure
    assert meta["error_estimate"]["pressure"] != meshed.estimate.pressure
    assert meta["error_estimate"]["extent"] == meshed.estimate.extent
    # The sizing passes keep the pressure errors of the law the mesh was sized for, and say so.
    assert meta["mesher"]["sizing"]["law"] == make_law(sized_for).to_metadata()
    sizing_report = meta["mesher"]["sizing"]
    assert sizing_report["passes"][sizing_report["kept_pass"] - 1]["pressure"] == meshed.estimate.pressure
    assert meta["law"] == make_law(options).to_metadata()


# ---------------------------------------------------------------------------------------------
# Plate-like parts: a first mesh thin across the plate (docs/model.md §2.10)

def test_plate_axis_finds_plates_only():
    from fieldgen.sizing.plate import PLATE_RATIO, plate_axis

    slab = trimesh.creation.box(extents=(0.2, 0.15, 0.01))
    assert plate_axis(slab.vertices, slab.faces).tolist() == [0.0, 0.0, 1.0]
    tilted = slab.copy()
    tilted.apply_transform(trimesh.transformations.rotation_matrix(np.radians(30), [1, 0, 0]))
    axis = plate_axis(tilted.vertices, tilted.faces)
    assert abs(axis @ [0, -np.sin(np.radians(30)), np.cos(np.radians(30))]) == pytest.approx(1, abs=1e-6)
    assert axis[np.argmax(np.abs(axis))] > 0
    bar = trimesh.creation.box(extents=(0.2, 0.2 / (PLATE_RATIO - 0.5), 0.01))   # not wide enough
    assert plate_axis(bar.vertices, bar.faces) is None
    cube = trimesh.creation.box(extents=(0.1, 0.1, 0.1))
    assert plate_axis(cube.vertices, cube.faces) is None
    # A U-channel 200 x 300 x 20 mm with 2 mm walls (three touching boxes: only its area and
    # volume matter here): wide and flat, but its upright walls are thin across x, not z.
    parts = []
    for extents, centre in (((0.2, 0.3, 0.002), (0, 0, 0.001)), ((0.002, 0.3, 0.018), (-0.099, 0, 0.011)),
                            ((0.002, 0.3, 0.018), (0.099, 0, 0.011))):
        box = trimesh.creation.box(extents=extents)
        box.apply_translation(centre)
        parts.append(box)
    channel = trimesh.util.concatenate(parts)
    assert plate_axis(channel.vertices, channel.faces) is None


def test_a_stretched_tetgen_mesh_is_the_same_part_with_thin_tets():
    box = trimesh.creation.box(extents=(0.2, 0.2, 0.02))
    markers = np.full(len(box.faces), FREE)
    markers[box.face_normals[:, 2] < -0.9] = RIGID
    options = MeshingOptions(edge_length=0.01, stretch_axis=(0.0, 0.0, 1.0), stretch=3.0)
    mesh = tetrahedralize(box.vertices, box.faces, markers, options=options)
    assert tet_volumes(mesh.points, mesh.tets).sum() == pytest.approx(0.2 * 0.2 * 0.02, rel=1e-9)
    assert np.allclose(mesh.points.min(axis=0), [-0.1, -0.1, -0.01]) and np.allclose(mesh.points.max(axis=0), [0.1, 0.1, 0.01])
    bottom = mesh.points[mesh.vertices_with(RIGID)]
    assert np.allclose(bottom[:, 2], -0.01)                     # the bonded face is where it was

    def along_over_across(mesh):
        edges = mesh.points[mesh.tets[:, [0, 0, 0, 1, 1, 2]]] - mesh.points[mesh.tets[:, [1, 2, 3, 2, 3, 3]]]
        return np.linalg.norm(edges[..., :2], axis=-1).mean() / np.abs(edges[..., 2]).mean()

    plain = tetrahedralize(box.vertices, box.faces, markers, options=MeshingOptions(edge_length=0.005))
    assert 2.0 < along_over_across(mesh) / along_over_across(plain) < 4.0     # about the stretch, 3
    with pytest.raises(OptionError, match="size field"):
        tetrahedralize(box.vertices, box.faces, markers, options=options,
                       background=(box.vertices, np.array([[0, 1, 2, 3]]), np.ones(8)))


@pytest.mark.slow
def test_a_plate_sized_by_accuracy_against_the_slab_closed_form(tmp_path, monkeypatch):
    """A free slab 0.2 x 0.2 x 0.01 m (Poisson): away from its sides e is the parabola
    4 z (H - z) / H². Sized by accuracy, the plate's first mesh is thin across it, and at the tet
    budget its field is several times closer to the parabola than an isotropic start's."""
    import fieldgen.sizing.plate as sizing

    height = 0.01
    path = tmp_path / "slab.stl"
    trimesh.creation.box(extents=(0.2, 0.2, height)).export(path)
    # Its walls thin only against the budget's edges: by default a right prism like this is
    # layered (test_thin_walls.py); the stretch is what a plate the layers refuse gets.
    monkeypatch.setattr(accuracy, "LAYER_BUDGET_EDGES", 0.0)
    errors = {}
    for label, ratio in (("stretched", sizing.PLATE_RATIO), ("isotropic", float("inf"))):
        monkeypatch.setattr(sizing, "PLATE_RATIO", ratio)
        # not a plate, the slab would be a thin right prism along x, layered: TetGen's start here
        monkeypatch.setattr(lengthwise, "THIN_RATIO", lengthwise.THIN_RATIO if label == "stretched" else float("inf"))
        # nor a sheet, layered across (its thickness by area: the 0.01 m of its faces, not 0.2 m)
        monkeypatch.setattr(sheet, "THIN_RATIO", sheet.THIN_RATIO if label == "stretched" else float("inf"))
        out = tmp_path / f"{label}.vtu"
        build(path, out, BuildOptions(modulus=1e5, accuracy=0.02))
        asset = read_asset(out)
        inner = (np.abs(asset.points[:, :2]) < 0.05).all(axis=1)
        z = asset.points[inner, 2] + height / 2
        errors[label] = float(np.sqrt(np.mean((asset.extent[inner] - 4 * z * (height - z) / height**2) ** 2)))
        sizing_report = read_metadata(out)["mesher"]["sizing"]
        if label == "stretched":
            assert sizing_report["stretch"] == {"axis": [0.0, 0.0, 1.0], "factor": sizing.PLATE_STRETCH}
            estimate = read_metadata(out)["error_estimate"]["extent"]
            assert 0.5 < errors[label] / estimate < 2.0          # the estimate holds on thin tets too
        else:
            assert "stretch" not in sizing_report
    assert errors["stretched"] < 0.03
    assert errors["isotropic"] > 2 * errors["stretched"]


# The corpus's closed parts (tests/data/meshes, in their own units) and the bundled examples:
# only the two plates are plate-like, both with z as the thin axis.
CORPUS_PLATES = [("plate_holes.STL", "mm", [0.0, 0.0, 1.0]), ("plate_8in_col.obj", "m", [0.0, 0.0, 1.0]),
                 ("angle_block.STL", "in", None), ("idler_riser.STL", "in", None), ("featuretype.STL", "in", None),
                 ("fandisk.obj", "m", None), ("torus.STL", "m", None), ("unit_sphere.STL", "m", None),
                 ("../../../assets/foam_pad.stl", "mm", None), ("../../../assets/foam_ball.obj", "m", None),
                 ("../../../assets/paddle.ply", "m", None)]


@pytest.mark.parametrize("name, units, axis", CORPUS_PLATES, ids=[Path(c[0]).name for c in CORPUS_PLATES])
def test_plate_axis_on_the_corpus(meshes, name, units, axis):
    from fieldgen.sizing.plate import plate_axis

    surface = load_surface(meshes / name, units)
    found = plate_axis(surface.vertices, surface.faces)
    assert (found is None) if axis is None else (found.tolist() == axis)
