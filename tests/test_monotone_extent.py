"""The extent solve obeys the discrete maximum principle by construction (no clipping).

Galerkin P1 on TetGen meshes leaves [0, 1] near obtuse tets (measured here against scikit-fem's
independent assembly and solve); the monotone solve upwinds the positive couplings around those
vertices until every value lies in [0, 1], and leaves meshes whose Galerkin solution is in bounds
untouched (slab and shell closed forms).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse.linalg import spsolve

from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.material.damping import characteristic_length
from fieldgen.fe.extent import (assemble, assemble_skfem, dirichlet_values, positive_couplings, solve_extent,
                             upwinded)
from fieldgen.meshing.tetmesh import FREE
from fieldgen.meshing.refine import refine_zero_tets

from test_extent import A, B, exact_shell_extent, shell_level, slab


def galerkin_reference(mesh):
    """Plain Galerkin P1 by scikit-fem's assembly and a direct solve, unclipped (the reference)."""
    from skfem import condense

    problem, dofs, values = dirichlet_values(mesh)
    stiffness, load = assemble_skfem(mesh, problem)
    x = np.zeros(mesh.n_points)
    x[dofs] = values
    matrix, rhs, _, interior = condense(stiffness, load, x=x, D=dofs)
    x[interior] = spsolve(matrix.tocsc(), rhs)
    return x / x.max() if problem == "poisson" else x


def test_full_upwinding_is_an_m_matrix_with_zero_row_sums():
    mesh, _ = refine_zero_tets(slab(0.01, 2e-7))
    stiffness, _ = assemble(mesh, "laplace")
    i, j, k = positive_couplings(stiffness)
    assert len(k) > 0 and np.all(k > 0) and np.all(i < j)   # TetGen's slab has obtuse tets
    operator = upwinded(stiffness, i, j, k).tocoo()
    off = operator.row != operator.col
    assert operator.data[off].max() <= 0.0
    assert np.abs(np.asarray(upwinded(stiffness, i, j, k).sum(axis=1))).max() < 1e-12 * stiffness.diagonal().max()
    # Symmetric, and equal to the Galerkin stiffness on every edge that was not upwinded.
    dense_k = stiffness.toarray()
    dense_u = upwinded(stiffness, i, j, k).toarray()
    assert np.array_equal(dense_u, dense_u.T)
    # Every positive coupling is mirrored to -k_ij: the edge still couples its two vertices.
    assert np.array_equal(dense_u[i, j], -k)
    dense_k[i, j] = dense_k[j, i] = 0.0
    dense_u[i, j] = dense_u[j, i] = 0.0
    np.fill_diagonal(dense_k, 0.0)
    np.fill_diagonal(dense_u, 0.0)
    assert np.array_equal(dense_k, dense_u)


@pytest.mark.parametrize("max_volume", [2e-7, 3e-8])
def test_slab_closed_form_is_untouched(max_volume):
    h = 0.01
    mesh, _ = refine_zero_tets(slab(h, max_volume))
    solution = solve_extent(mesh)
    assert solution.rounds == 1 and solution.upwinded_edges == 0 and solution.max_violation == 0.0
    assert np.max(np.abs(solution.extent - (1 - mesh.points[:, 2] / h))) < 1e-9
    assert characteristic_length(mesh.points, mesh.tets, solution.extent) == pytest.approx(h, rel=1e-9)


def test_spherical_shell_closed_form_in_bounds_and_converging():
    exact_L = (B ** 3 - A ** 3) / (3 * A * B)
    errors = []
    for subdivisions, edge_length in [(2, 0.008), (3, 0.004)]:
        mesh = shell_level(subdivisions, edge_length)
        solution = solve_extent(mesh)
        assert solution.max_violation == 0.0
        assert solution.extent.min() >= 0.0 and solution.extent.max() <= 1.0
        errors.append(abs(characteristic_length(mesh.points, mesh.tets, solution.extent) / exact_L - 1))
        assert np.max(np.abs(solution.extent - exact_shell_extent(mesh.points))) < 0.04
    assert errors[1] < errors[0] and errors[1] < 0.01


def test_galerkin_overshoot_at_a_bonded_rim_is_corrected_without_clipping(meshes):
    # plate_holes with its bottom bonded: Galerkin P1 dips to -0.016 next to the free/bonded rim.
    from fieldgen.surface.selectors import assign_conditions, parse_selector
    from fieldgen.surface.stage import load_surface
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize

    surface = load_surface(meshes / "plate_holes.STL", "mm")
    markers = assign_conditions(surface, [parse_selector("normal:0,0,-1", 1e-3)], [])
    mesh = tetrahedralize(surface.vertices, surface.faces, markers, options=MeshingOptions())
    mesh, _ = refine_zero_tets(mesh)
    reference = galerkin_reference(mesh)
    assert reference.min() < -0.01                      # the violation the solve must remove
    solution = solve_extent(mesh)
    assert solution.problem == "laplace"
    assert solution.max_violation == 0.0 and solution.rounding <= 1e-12
    assert solution.extent.min() >= 0.0 and solution.extent.max() <= 1.0
    assert solution.rounds >= 2 and 0 < solution.upwinded_edges < 0.02 * solution.positive_edges
    # Local: vertices away from the upwinded edges hardly move, and L moves by < 0.1%.
    changed = np.abs(solution.extent - reference) > 1e-3
    assert changed.mean() < 0.01
    L_ref = characteristic_length(mesh.points, mesh.tets, np.clip(reference, 0, 1))
    L = characteristic_length(mesh.points, mesh.tets, solution.extent)
    assert L == pytest.approx(L_ref, rel=1e-3)


# Every corpus part that builds, with the flags of tests/test_build.py or typical ones; bonded
# variants give the Laplace problem, where the Galerkin overshoot at the free/bonded rim is largest.
CORPUS = [
    ("featuretype.STL", "in", {}),
    ("featuretype.STL", "in", {"bonded": ("normal:0,0,-1",)}),
    ("featuretype.STEP", "in", {}),
    ("plate_holes.STL", "mm", {"bonded": ("normal:0,0,-1",)}),
    ("fandisk.obj", "m", {"bonded": ("below:z=-0.7",)}),
    ("angle_block.STL", "in", {}),
    ("idler_riser.STL", "in", {}),
    ("idler_riser.STL", "in", {"bonded": ("normal:0,0,-1",)}),
    ("unit_sphere.STL", "m", {}),
    ("torus.STL", "m", {"bonded": ("normal:0,0,-1",)}),
    ("plate_8in_col.obj", "m", {}),
    ("box.STL", "in", {"robust": True, "edge_length": 0.9}),
    ("pr2_l_finger_tip.obj", "m", {"robust": True, "edge_length": 0.0075}),
]


@pytest.mark.slow
@pytest.mark.parametrize("name,units,flags", CORPUS,
                         ids=[f"{c[0]}-{'laplace' if c[2].get('bonded') else 'poisson'}" for c in CORPUS])
def test_corpus_builds_obey_the_maximum_principle(meshes, tmp_path, monkeypatch, name, units, flags):
    import fieldgen.fe.extent
    import fieldgen.material.layering

    solves, layered = [], {}
    original_solve, original_layer = fieldgen.fe.extent.solve_extent, fieldgen.material.layering.layer

    def spy_solve(mesh, **kwargs):
        solution = original_solve(mesh, **kwargs)
        solves.append((mesh, solution))
        return solution

    def spy_layer(mesh, extent, *args, **kwargs):
        layered["extent"] = extent
        return original_layer(mesh, extent, *args, **kwargs)

    monkeypatch.setattr(fieldgen.fe.extent, "solve_extent", spy_solve)
    monkeypatch.setattr(fieldgen.material.layering, "layer", spy_layer)
    result = build(meshes / name, tmp_path / "part.vtu",
                   BuildOptions(units=units, modulus=1e5, **flags))
    from fieldgen.io.asset import read_metadata

    meta = read_metadata(tmp_path / "part.vtu")["extent_solution"]
    assert meta["max_violation"] == 0.0 and meta["rounding"] <= 1e-12
    assert not any("maximum principle" in w for w in result.warnings)
    # The solve whose extent the asset carries (a sized build also solves trial and refined meshes).
    [(mesh, solution)] = [(m, s) for m, s in solves if s.extent is layered["extent"]]
    e = solution.extent
    assert e.min() >= 0.0 and e.max() <= 1.0
    # Nothing clipped: every vertex at e = 0 off the free surface is zero (to rounding) in the
    # independent Galerkin solution too, not a negative value cut off.
    free = np.zeros(mesh.n_points, dtype=bool)
    free[mesh.vertices_with(FREE)] = True
    reference = galerkin_reference(mesh)
    zero = (e == 0.0) & ~free
    assert np.all(np.abs(reference[zero]) <= 1e-9)
    # No tet has e = 0 at all four vertices: with a source every vertex off the free surface is
    # positive; without one, the refinement leaves no vertex cut off from the rigid faces and the
    # upwinded operator keeps every edge coupled.
    assert not np.any(np.all(e[mesh.tets] == 0.0, axis=1))
    assert not np.any(zero)
    # Galerkin solutions inside the bounds are returned as they are; otherwise only a few edges change.
    if reference.min() >= 0.0 and reference.max() <= 1.0:
        assert solution.rounds == 1 and solution.upwinded_edges == 0
    else:
        assert solution.upwinded_edges < 0.2 * solution.positive_edges


def test_a_value_below_the_solvers_precision_is_kept_positive():
    """A long thin bar bonded at one end, free elsewhere: e falls as exp(-pi x / w) along it, to
    far below the solver's absolute precision (1e-16), where it came
    out as 0 or a rounding negative and left tets at e = 0 at all four vertices (seen in a skin's
    thin handle). Every vertex off the free surface is joined to the bonded face, so the exact
    solution is positive there: such values are the smallest positive double, and the rest of
    the field is the plain solve's."""
    import trimesh

    from fieldgen.meshing.tetmesh import RIGID
    from fieldgen.meshing.tetgen import MeshingOptions, tetrahedralize

    bar = trimesh.creation.box(extents=(0.08, 0.001, 0.001))
    bar.apply_translation((0.04, 0.0, 0.0))
    markers = np.where(bar.face_normals[:, 0] < -0.9, RIGID, FREE)
    mesh, _ = refine_zero_tets(tetrahedralize(bar.vertices, bar.faces, markers,
                                              options=MeshingOptions(edge_length=0.0004)))
    solution = solve_extent(mesh)
    e = solution.extent
    free = np.zeros(mesh.n_points, dtype=bool)
    free[mesh.vertices_with(FREE)] = True
    assert np.all(e[~free] > 0.0) and np.all(e[free] == 0.0)
    assert not (e[mesh.tets] == 0.0).all(axis=1).any()
    floored = e == np.finfo(np.float64).tiny
    assert floored.any()                                       # the case arises: values underflowed
    assert mesh.points[floored, 0].min() > 0.008               # only far from the bonded end
    near = (~free) & (mesh.points[:, 0] < 0.002)
    assert np.all(e[near] > 1e-6)
