"""`fieldgen contact` and contact-surface export: JSON keys and directions on built assets, the
written surface read back by VTK, closed-form tractions, error exits."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldgen.cli.main import main
from fieldgen.options import options_from_spec
from fieldgen.pipeline import build
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.export import centroid_tractions, write_contact_surface
from fieldgen.runtime.contact.pose import Pose, SpatialVelocity
from fieldgen.runtime.contact.wrench import contact
from test_runtime_meshes import box_grid, box_surface

ASSETS = Path(__file__).resolve().parents[1] / "assets"
KEYS = {"force", "torque", "area", "faces", "query_seconds", "force_on_a", "centroid", "max_pressure", "warnings"}


def run(*args):
    return CliRunner().invoke(main, ["contact", *map(str, args)])


@pytest.fixture(scope="module")
def foam_ball(tmp_path_factory) -> Path:
    """assets/foam_ball.toml built (coarser) in a temporary folder."""
    from fieldgen.options import BuildOptions

    options, source, _ = options_from_spec(ASSETS / "foam_ball.toml")
    options = BuildOptions(**{**options.__dict__, "edge_length": 0.008})
    out = tmp_path_factory.mktemp("ball") / "foam_ball.vtu"
    build(source, out, options)
    return out


def test_asset_against_rigid_mesh_json_and_surface_file(foam_ball, plate, tmp_path):
    """The ball asset (A) sinks into a rigid plate (B) below it: the force on B points down (B is
    pushed out of A), torque is r×F about the origin, and -o writes a .vtp VTK reads back."""
    from fieldgen.runtime.contact.geometries import load_body

    ball = load_body(foam_ball)
    bottom = float(ball.points[:, 2].min())
    out = tmp_path / "surface.vtp"
    result = run(foam_ball, plate, "--pose-b", f"0.01,0,{bottom + 0.004},0,0,0", "--repeat", 3, "-o", out, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert KEYS <= set(data)
    assert data["faces"] > 0 and data["area"] > 0 and data["query_seconds"] > 0
    force = np.array(data["force"])
    assert force[2] < 0 and np.hypot(*force[:2]) < 1e-6 * abs(force[2])
    assert np.allclose(data["force_on_a"], -force)
    centroid = np.array(data["centroid"])
    assert np.allclose(data["torque"], np.cross(centroid, force) + np.array(data["torque_about_centroid"]),
                       atol=1e-12)
    import vtk
    from vtk.util.numpy_support import vtk_to_numpy

    reader = vtk.vtkXMLPolyDataReader()
    reader.SetFileName(str(out))
    reader.Update()
    poly = reader.GetOutput()
    assert poly.GetNumberOfCells() == data["faces"]
    cells = poly.GetCellData()
    area = vtk_to_numpy(cells.GetArray("area"))
    normal = vtk_to_numpy(cells.GetArray("normal"))
    traction = vtk_to_numpy(cells.GetArray("traction"))
    pressure = vtk_to_numpy(poly.GetPointData().GetArray("pressure"))
    assert np.sum(area) == pytest.approx(data["area"], rel=1e-12)
    assert pressure.max() == pytest.approx(data["max_pressure"], rel=1e-12)
    # at rest the traction is p0·n, and Σ A·t is the (exact, polygon) force
    assert np.allclose(np.sum(area[:, None] * traction, axis=0), force, rtol=1e-9, atol=1e-12)
    assert np.allclose(np.linalg.norm(normal, axis=1), 1.0)
    # the human summary names the same numbers
    text = run(foam_ball, plate, "--pose-b", f"0.01,0,{bottom + 0.004},0,0,0")
    assert text.exit_code == 0 and f"faces           {data['faces']}" in text.stdout and "force on B" in text.stdout


def test_vtu_export_and_tractions_with_velocity(tmp_path):
    """.vtu export holds the same arrays; with a sliding, approaching B the centroid traction is
    p0(1 − χ v_n)n − μ p v_t/|v_t| (D 5.2.2, 5.2.3) for the pair's χ and μ."""
    import vtk
    from vtk.util.numpy_support import vtk_to_numpy

    H = 0.02
    points, tets = box_grid(np.linspace(-0.05, 0.05, 5), np.linspace(-0.05, 0.05, 5), np.linspace(-H, 0, 3))
    slab = CompliantGeometry.from_arrays(points, tets, -1e5 * points[:, 2] / H, dissipation=2.0, mu_static=0.4)
    box = RigidGeometry(*box_surface([-0.02, -0.02, 0], [0.02, 0.02, 0.04]), mu_static=0.4, mu_dynamic=0.4)
    X_WB = Pose.from_xyz_rpy(z=-0.003)
    V_WB = SpatialVelocity(linear=[0.3, 0.0, -0.1])   # sliding +x, approaching
    surface, wrench = contact(slab, np.eye(4), box, X_WB, V_WB=V_WB)
    path = write_contact_surface(tmp_path / "s.vtu", surface, slab, box, V_WB=V_WB)
    reader = vtk.vtkXMLUnstructuredGridReader()
    reader.SetFileName(path)
    reader.Update()
    grid = reader.GetOutput()
    assert grid.GetNumberOfCells() == surface.n_faces
    traction = vtk_to_numpy(grid.GetCellData().GetArray("traction"))
    bottom = np.abs(surface.normals[:, 2] - 1) < 1e-12
    assert bottom.sum() > 4 and wrench.dissipated_power < 0
    p = surface.centroid_pressure[bottom] * (1 + 2.0 * 0.1)
    expected = np.column_stack([-0.4 * p, np.zeros_like(p), p])
    assert np.allclose(traction[bottom], expected, rtol=1e-12)
    assert np.allclose(centroid_tractions(surface, V_WB=V_WB, dissipation=2.0, friction=0.4), traction)
    with pytest.raises(Exception, match="SURFACE.vtp"):
        write_contact_surface(tmp_path / "s.stl", surface)


def test_empty_contact_is_not_an_error(foam_ball, plate):
    result = run(foam_ball, plate, "--pose-b", "0,0,-1,0,0,0", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["faces"] == 0 and data["force"] == [0.0, 0.0, 0.0] and data["area"] == 0.0
    assert "no contact" in run(foam_ball, plate, "--pose-b", "0,0,-1,0,0,0").stdout


def test_bad_inputs_exit_with_messages(meshes, foam_ball, plate, tmp_path):
    bad = run(meshes / "drake_one_negative_tetrahedron.vtk", plate, "--modulus-a", "1e5")
    assert bad.exit_code == 1 and "negative volume" in bad.stderr
    nomod = run(meshes / "yellow_bell_pepper_no_stem_low.vtk", plate)
    assert nomod.exit_code == 2 and "--modulus-a" in nomod.stderr
    soup = run(foam_ball, meshes / "soup.stl")
    assert soup.exit_code == 1 and "not closed" in soup.stderr and "soup.stl" in soup.stderr
    garbage = tmp_path / "garbage.vtu"
    garbage.write_text("not an asset")
    assert run(garbage, plate).exit_code == 1
    assert run(foam_ball, plate, "--pose-b", "1,2,3").exit_code == 2
    assert run(foam_ball, plate, "--velocity-a", "1,2,3,4,5,x").exit_code == 2
    assert run(foam_ball, plate, "-o", tmp_path / "s.stl").exit_code == 2
    both = run(plate, plate)
    assert both.exit_code == 2 and "compliant" in both.stderr


def test_pose_and_velocity_parsing():
    from fieldgen.cli.contact import parse_pose, parse_velocity

    pose = parse_pose(None, None, "1,2,3,90,0,0")
    assert np.allclose(pose.translation, [1, 2, 3]) and np.allclose(pose.rotation @ [0, 1, 0], [0, 0, 1])
    velocity = parse_velocity(None, None, "1,2,3,4,5,6")     # vx,vy,vz,wx,wy,wz
    assert np.array_equal(velocity.linear, [1, 2, 3]) and np.array_equal(velocity.angular, [4, 5, 6])
    assert np.array_equal(velocity.vector, [1, 2, 3, 4, 5, 6])
    assert np.array_equal(parse_velocity(None, None, None).vector, np.zeros(6))


def test_cli_velocity_is_linear_first(foam_ball, plate):
    """--velocity-b vx,vy,vz,wx,wy,wz: the plate moving up (+z) into the ball presses harder,
    p = p0 (1 + χ v) on its flat face (D 5.2.2); the same numbers read as [ω; v] would be a spin
    about z that leaves the normal force unchanged."""
    from fieldgen.runtime.contact.geometries import load_body

    pose = f"0,0,{float(load_body(foam_ball).points[:, 2].min()) + 0.004},0,0,0"
    push = json.loads(run(foam_ball, plate, "--pose-b", pose, "--velocity-b", "0,0,0.1,0,0,0", "--json").stdout)
    rest = json.loads(run(foam_ball, plate, "--pose-b", pose, "--json").stdout)
    spin = json.loads(run(foam_ball, plate, "--pose-b", pose, "--velocity-b", "0,0,0,0,0,0.1", "--json").stdout)
    assert rest["faces"] > 0 and push["dissipation"] > 0
    assert push["force"][2] == pytest.approx(rest["force"][2] * (1 + 0.1 * push["dissipation"]), rel=1e-9)
    assert spin["force"][2] == pytest.approx(rest["force"][2], rel=1e-12)


def test_paraview_script_for_one_query(foam_ball, plate, tmp_path):
    """--paraview writes the script (run in ParaView by tests/test_paraview.py) and the bodies at
    their poses beside it; without -o it is a usage error."""
    import vtk

    from fieldgen.runtime.contact.geometries import load_body

    ball = load_body(foam_ball)
    bottom = float(ball.points[:, 2].min())
    script, surface = tmp_path / "view.py", tmp_path / "surface.vtp"
    result = run(foam_ball, plate, "--pose-b", f"0.01,0,{bottom + 0.004},0,0,0", "-o", surface,
                 "--paraview", script, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    bodies = tmp_path / "view_bodies.vtp"
    assert data["paraview"] == str(script) and data["paraview_bodies"] == str(bodies)
    text = script.read_text()
    compile(text, "view.py", "exec")
    assert repr(str(surface.resolve())) in text and repr(str(bodies.resolve())) in text
    reader = vtk.vtkXMLPolyDataReader()
    reader.SetFileName(str(bodies))
    reader.Update()
    low = reader.GetOutput().GetBounds()
    # the plate (z from -0.02 to 0 in its frame, float32 in STL) moved up by bottom + 0.004; the ball unmoved
    assert low[4] == pytest.approx(bottom + 0.004 - 0.02, abs=1e-7)
    assert low[5] == pytest.approx(float(ball.points[:, 2].max()), abs=1e-12)
    usage = run(foam_ball, plate, "--paraview", script)
    assert usage.exit_code == 2 and "-o SURFACE.vtp" in usage.output


def test_friction_against_a_rigid_mesh_needs_its_coefficient(foam_ball, plate):
    """A rigid mesh has no friction coefficient of its own (0), and the pair's is the harmonic
    mean (docs/model.md §4.3), so without --mu-b a sliding plate feels no friction, which the
    command says; with --mu-b the pair's μ is 2 μ_A μ_B / (μ_A + μ_B) and a fast slide is full
    Coulomb sliding: tangential force = μ × normal force, against the slip."""
    from fieldgen.io.asset import read_metadata
    from fieldgen.runtime.contact.geometries import load_body

    mu_ball = float(read_metadata(foam_ball)["friction"]["dynamic"])
    assert mu_ball > 0
    pose = f"0,0,{float(load_body(foam_ball).points[:, 2].min()) + 0.004},0,0,0"
    slide = ["--pose-b", pose, "--velocity-b", "0.1,0,0,0,0,0", "--json"]
    none = run(foam_ball, plate, *slide)
    assert none.exit_code == 0, none.output
    data = json.loads(none.stdout)
    assert data["friction"] == 0 and data["force"][0] == 0
    assert "friction coefficient 0" in none.stderr and "--mu-b" in none.stderr
    still = run(foam_ball, plate, "--pose-b", pose, "--json")          # at rest: friction does not matter
    assert still.exit_code == 0 and "friction coefficient 0" not in still.stderr
    given = run(foam_ball, plate, *slide, "--mu-b", "0.5")
    data = json.loads(given.stdout)
    mu = 2 * mu_ball * 0.5 / (mu_ball + 0.5)
    assert data["friction"] == pytest.approx(mu, rel=1e-12)
    assert data["force"][0] == pytest.approx(mu * data["force"][2], rel=1e-3)     # both < 0 on B
    assert "friction coefficient 0" not in given.stderr
    # --mu-a replaces the asset's own; --mu-b 0 on both sides is no friction, without the warning
    both = run(foam_ball, plate, *slide, "--mu-a", "0.5", "--mu-b", "0.5")
    assert json.loads(both.stdout)["friction"] == pytest.approx(0.5, rel=1e-12)
    for flags, words in ((["--mu-b", "-1"], "not a friction coefficient"),
                         (["--modulus-b", "1e5"], "--modulus-b sets the modulus of a legacy .vtk"),
                         (["--modulus-a", "1e5"], "carries its own pressure field")):
        refused = run(foam_ball, plate, *flags)
        assert refused.exit_code == 2 and words in refused.output, refused.output
