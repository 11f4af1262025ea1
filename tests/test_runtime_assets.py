"""Runtime contact on real assets built by fieldgen.pipeline (the contact runtime on assets):
elastic foundation on a built slab, Drake's two-cube force through the CLI, pass-through on the
paddle's core. Hand-made-mesh tests of the same laws are in test_runtime_contact.py."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.options import BuildOptions, options_from_spec
from fieldgen.pipeline import build
from fieldgen.runtime.contact.geometries import RigidGeometry, load_body
from fieldgen.runtime.contact.surface import PassThroughWarning
from fieldgen.runtime.contact.pose import Pose
from fieldgen.runtime.contact.wrench import contact
from test_runtime_meshes import box_grid, box_surface

ASSETS = Path(__file__).resolve().parents[1] / "assets"
# Binary fractions: exact in the float32 of an STL file, so the built slab has exactly these sizes.
W, H = 0.125, 0.03125
M0 = 1e5
FOOT = (0.0625, 0.046875)   # the rigid box's footprint (m)


def write_stl(path: Path, vertices, faces) -> Path:
    import trimesh

    trimesh.Trimesh(vertices, faces, process=False).export(path)
    return path


@pytest.fixture(scope="module")
def slab_asset(tmp_path_factory) -> Path:
    """Slab [-W/2, W/2]² × [-H, 0]: bonded bottom (e = 1), insulated sides, linear law M0, so the
    extent is exactly 1 + z/H and the pressure M0·(-z)/H (P1-exact)."""
    folder = tmp_path_factory.mktemp("slab")
    surface = write_stl(folder / "slab.stl", *box_surface([-W / 2, -W / 2, -H], [W / 2, W / 2, 0.0]))
    options = BuildOptions(bonded=("normal:0,0,-1",),
                           insulated=("normal:1,0,0", "normal:-1,0,0", "normal:0,1,0", "normal:0,-1,0"),
                           law="linear", modulus=M0, edge_length=0.015, mu_static=0.5, mu_dynamic=0.5)
    build(surface, folder / "slab.vtu", options)
    return folder / "slab.vtu"


@pytest.fixture(scope="module")
def rigid_box(tmp_path_factory) -> Path:
    """Closed box mesh, footprint FOOT, bottom face at z = 0, off-centre on the slab."""
    folder = tmp_path_factory.mktemp("box")
    lo = [-0.03125, -0.015625, 0.0]   # binary fractions, exact in float32
    return write_stl(folder / "box.stl", *box_surface(lo, [lo[0] + FOOT[0], lo[1] + FOOT[1], 0.05]))


def test_built_slab_is_the_elastic_foundation(slab_asset):
    body = load_body(slab_asset)
    assert body.points[:, 2].min() == -H and body.points[:, 2].max() == 0.0
    assert np.allclose(body.pressure, -M0 * body.points[:, 2] / H, rtol=1e-9, atol=1e-9 * M0)
    assert body.characteristic_length == pytest.approx(H, rel=1e-9)
    assert len(body.core_faces) > 0 and np.all(body.points[body.core_faces, 2] == -H)


@pytest.mark.parametrize("representation", ["polygon", "triangle"])
@pytest.mark.parametrize("depth", [0.001, 0.0043, 0.011])
def test_elastic_foundation_on_a_built_slab(slab_asset, rigid_box, representation, depth):
    """A rigid box pressed d into the slab asset: F = M0·A·d/H (D 4.5, elastic foundation), exact
    for a bonded slab with insulated sides, in both representations; the side walls' pressures
    cancel, so the force is along +z and acts on B (the box), pushing it out of A."""
    slab, box = load_body(slab_asset), load_body(rigid_box)
    surface, wrench = contact(slab, np.eye(4), box, Pose.from_xyz_rpy(z=-depth), representation=representation)
    expected = M0 * FOOT[0] * FOOT[1] * depth / H
    assert wrench.force[2] == pytest.approx(expected, rel=1e-9)
    assert np.all(np.abs(wrench.force[:2]) <= 1e-9 * expected)
    # centre of pressure under the middle of the footprint
    assert np.allclose(wrench.torque_about_centroid, 0.0, atol=1e-9 * expected * W)
    bottom = np.abs(surface.normals[:, 2] - 1.0) < 1e-12
    assert np.sum(surface.areas[bottom]) == pytest.approx(FOOT[0] * FOOT[1], rel=1e-12)


def drake_cube_vtk(path: Path) -> Path:
    """A 0.1 m cube on a grid whose outer cells are 2 mm (the mesh of test_runtime_contact's
    two-cube test), written as Drake's legacy .vtk (tets only, positive volumes)."""
    from fieldgen.io.drake_vtk import vtk_text

    half = np.array([0.0, 0.002, 0.01, 0.02, 0.03, 0.04, 0.05])
    c = np.concatenate([half - 0.05, (0.05 - half[::-1])[1:]])
    points, tets = box_grid(c, c, c)
    path.write_text(vtk_text(points, tets, "cube"))
    return path


def test_two_drake_cubes_through_the_cli(tmp_path):
    """Two 0.1 m cubes, Drake's field with E = 1e5 Pa, overlapping 2 mm, loaded from .vtk files by
    `fieldgen contact --modulus-a/-b`: Drake's 19.208 N (pydrake 1.51.1), peak 2000 Pa (E·1 mm/50 mm),
    pushing B along +x; both representations."""
    cube = drake_cube_vtk(tmp_path / "cube.vtk")
    for representation in ("polygon", "triangle"):
        result = CliRunner().invoke(main, ["contact", str(cube), str(cube), "--modulus-a", "1e5", "--modulus-b",
                                           "1e5", "--pose-b", "0.098,0,0,0,0,0", "--representation",
                                           representation, "--json"])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        assert data["force"][0] == pytest.approx(19.208, rel=1e-9)
        assert data["max_pressure"] == pytest.approx(2000.0, rel=1e-12)
        assert data["kind_a"] == data["kind_b"] == "CompliantBody"


@pytest.mark.slow
def test_pass_through_on_the_paddle_core(tmp_path):
    """A rigid box pushed into the built paddle until it reaches the metal core warns (D 5.1.2) but
    still returns the surface; a shallow touch does not warn."""
    options, source, _ = options_from_spec(ASSETS / "paddle.toml")
    options = BuildOptions(**{**options.__dict__, "edge_length": 0.006})
    asset = tmp_path / "paddle.vtu"
    build(source, asset, options)
    paddle = load_body(asset)
    core = paddle.points[np.unique(paddle.core_faces)]
    # a box whose top reaches a depth: start at the paddle's lowest point and rise along +z
    lo, hi = paddle.points.min(axis=0), paddle.points.max(axis=0)
    centre = 0.5 * (lo + hi)
    size = np.array([0.2 * (hi[0] - lo[0]), 0.2 * (hi[1] - lo[1]), hi[2] - lo[2]])
    box = RigidGeometry(*box_surface(-size / 2, size / 2), name="box")

    def touch(top):
        X = Pose.from_xyz_rpy(centre[0], centre[1], top - size[2] / 2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            surface, wrench = contact(paddle, np.eye(4), box, X)
        return surface, wrench, [w for w in caught if issubclass(w.category, PassThroughWarning)]

    surface, wrench, caught = touch(lo[2] + 0.1 * (core[:, 2].min() - lo[2]))
    assert surface.n_faces > 0 and not caught
    surface, wrench, caught = touch(centre[2])
    assert surface.n_faces > 0 and caught
    assert "rigid core" in str(caught[0].message)
