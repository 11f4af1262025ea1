"""`face_rule="drake"` reproduces Drake's hydroelastic contact surface: force and torque against
pydrake 1.51.1 (run in-process, tests/drake_contact.py) to 1e-6 relative, and the same faces.

Face counts equal Drake's in every case, including the zero-pressure polygons that lie exactly
in a face of the other body's tet, whose survival is decided by rounding (docs/model.md §3.5):
the drake rule repeats Drake's floating-point operations (fieldgen.runtime.contact.drake_arithmetic).
Every face with pressure is also matched by centroid, area and pressure, and every polygon's
vertices are bit for bit Drake's.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.spatial import cKDTree

from drake_contact import DrakeBody, drake_contact, write_obj
from fieldgen.cli.main import main
from fieldgen.io.drake_vtk import vtk_text
from fieldgen.meshing.tetmesh import box_grid
from fieldgen.runtime.contact.geometries import CompliantGeometry, RigidGeometry
from fieldgen.runtime.contact.pose import Pose
from fieldgen.runtime.contact.wrench import contact
from test_runtime_assets import drake_cube_vtk
from test_runtime_meshes import box_surface

PEPPER = "yellow_bell_pepper_no_stem_low.vtk"
E = 1e5


def compare(a_spec: DrakeBody, b_spec: DrakeBody, body_a, body_b, *, same_vertices: bool = False):
    """Ours (face_rule="drake") against Drake; returns (ours surface, ours wrench, Drake result).
    ``same_vertices``: also require every Drake polygon's vertices, bit for bit, in ours."""
    drake = drake_contact(a_spec, b_spec)
    surface, wrench = contact(body_a, a_spec.pose, body_b, b_spec.pose, face_rule="drake")
    assert drake.faces > 50 and np.linalg.norm(drake.force) > 1.0       # a real contact
    scale_f = np.linalg.norm(drake.force)
    assert np.linalg.norm(wrench.force - drake.force) <= 1e-6 * scale_f
    # torque about the world origin; relative to its size plus |F|·(contact size), since a
    # nearly centred contact has a torque much smaller than |F| times any lever arm
    size = np.ptp(surface.centroids, axis=0).max()
    assert np.linalg.norm(wrench.torque - drake.torque) <= 1e-6 * (np.linalg.norm(drake.torque) + scale_f * size)

    assert surface.n_faces == drake.faces
    # faces with pressure: one to one, same area and pressure
    floor = 1e-9 * max(drake.pressures.max(), 1.0)
    ours_p = surface.centroid_pressure > floor
    theirs_p = drake.pressures > floor
    assert ours_p.sum() == theirs_p.sum()
    dist, idx = cKDTree(surface.centroids[ours_p]).query(drake.centroids[theirs_p])
    assert np.all(dist <= 1e-9 * size)
    if not same_vertices:   # (duplicates: a rigid triangle in a face shared by two tets is kept twice)
        assert len(np.unique(idx)) == len(idx)
    assert np.allclose(surface.areas[ours_p][idx], drake.areas[theirs_p], rtol=1e-6, atol=1e-12 * size ** 2)
    assert np.allclose(surface.centroid_pressure[ours_p][idx], drake.pressures[theirs_p], rtol=1e-6)
    if same_vertices:   # every polygon, with or without pressure: the same vertices, bit for bit
        def key(vertices):
            return tuple(sorted(map(tuple, np.asarray(vertices).tolist())))

        ours = Counter(key(surface.vertices[surface.face_vertices[surface.face_offsets[k]:surface.face_offsets[k + 1]]])
                       for k in range(surface.n_faces))
        assert ours == Counter(key(polygon) for polygon in drake.polygons)
    return surface, wrench, drake


def test_two_peppers(meshes):
    """Drake's own pepper mesh against a second copy, rotated and overlapping by half its width
    (deep enough that the rule changes the force by 3.6%)."""
    path = str(meshes / PEPPER)
    XA, XB = np.eye(4), Pose.from_xyz_rpy(0.04, 0.012, 0.006, 20, -15, 40).matrix
    pepper = CompliantGeometry.from_drake_vtk(path, E)
    surface, _, drake = compare(DrakeBody(path, "compliant", XA, E), DrakeBody(path, "compliant", XB, E),
                                pepper, pepper, same_vertices=True)
    # the case that needs Drake's arithmetic: zero-pressure polygons of all-boundary tets
    assert np.sum(drake.pressures == 0.0) > 0


def test_two_peppers_away_from_the_origin(meshes):
    """The same pair with A moved and turned: Drake computes in A's frame, composing
    X_AB = X_WA⁻¹·X_WB with its own routine (fused multiply-adds on AVX2 CPUs); the polygons
    still match Drake's bit for bit (with a plain left-to-right composition only 228 of 1331 did)."""
    path = str(meshes / PEPPER)
    XA = Pose.from_xyz_rpy(0.3, -0.2, 0.1, -35, 12, 70).matrix
    XB = XA @ Pose.from_xyz_rpy(0.04, 0.012, 0.006, 20, -15, 40).matrix
    pepper = CompliantGeometry.from_drake_vtk(path, E)
    compare(DrakeBody(path, "compliant", XA, E), DrakeBody(path, "compliant", XB, E), pepper, pepper,
            same_vertices=True)


def test_pepper_on_a_rigid_box(meshes, tmp_path):
    """A compliant mesh pressed onto a tilted rigid box (triangle–tet surfaces), both orders."""
    path = str(meshes / PEPPER)
    box = write_obj(tmp_path / "box.obj", *box_surface([-0.06, -0.05, -0.04], [0.06, 0.05, 0.0]))
    X_box = Pose.from_xyz_rpy(0.004, -0.003, 0.009, 4, -3, 10).matrix
    pepper, rigid = CompliantGeometry.from_drake_vtk(path, E), RigidGeometry.from_mesh(box)
    compare(DrakeBody(path, "compliant", np.eye(4), E), DrakeBody(str(box), "rigid", X_box), pepper, rigid,
            same_vertices=True)
    compare(DrakeBody(str(box), "rigid", X_box), DrakeBody(path, "compliant", np.eye(4), E), rigid, pepper,
            same_vertices=True)


def test_rigid_cube_deep_inside_the_pepper(meshes, tmp_path):
    """A 20 mm rigid cube pushed deep into the pepper: many of its triangles face away from the
    pepper's pressure gradient, which Drake's triangle–tet filter drops (197 faces under `all`,
    79 under `drake`; the force differs by a third)."""
    path = str(meshes / PEPPER)
    cube = write_obj(tmp_path / "cube.obj", *box_surface([-0.01] * 3, [0.01] * 3))
    X_cube = Pose.from_xyz_rpy(0.02, 0.004, 0.02, 10, 20, 30).matrix
    pepper, rigid = CompliantGeometry.from_drake_vtk(path, E), RigidGeometry.from_mesh(cube)
    surface, wrench, drake = compare(DrakeBody(path, "compliant", np.eye(4), E),
                                     DrakeBody(str(cube), "rigid", X_cube), pepper, rigid, same_vertices=True)
    _, every = contact(pepper, np.eye(4), rigid, X_cube)
    assert every.n_faces > 2 * wrench.n_faces
    assert np.linalg.norm(every.force - wrench.force) > 0.2 * np.linalg.norm(wrench.force)


@pytest.mark.parametrize("pose", ["aligned", "shifted", "away"])
def test_rigid_box_aligned_with_a_grid_block(tmp_path, pose):
    """A rigid box whose faces lie in tet faces of a structured block: rigid triangles lying
    exactly in a face shared by two tets, which Drake keeps for both (fieldgen's own arithmetic
    gave 283 faces against Drake's 276 and a force 4.5 % off for "aligned", 310 against 293 and
    14 % for "shifted"); both orders, and with the block moved away from the origin."""
    points, tets = box_grid(*(np.linspace(-h, h, 9) for h in (0.04, 0.03, 0.02)))
    block = tmp_path / "block.vtk"
    block.write_text(vtk_text(points, tets, "block"))
    box = write_obj(tmp_path / "box.obj", *box_surface([-0.03, -0.02, -0.05], [0.03, 0.02, 0.0]))
    X_block = Pose.from_xyz_rpy(0.3, 0.1, 0.05, 10, 20, 30).matrix if pose == "away" else np.eye(4)
    X_box = X_block @ (Pose.from_xyz_rpy(0, 0, -0.015).matrix if pose == "aligned"
                       else Pose.from_xyz_rpy(0.01, 0.0075, -0.01).matrix)
    soft, rigid = CompliantGeometry.from_drake_vtk(block, E), RigidGeometry.from_mesh(box)
    compare(DrakeBody(str(block), "compliant", X_block, E), DrakeBody(str(box), "rigid", X_box), soft, rigid,
            same_vertices=True)
    compare(DrakeBody(str(box), "rigid", X_box), DrakeBody(str(block), "compliant", X_block, E), rigid, soft,
            same_vertices=True)


def test_pepper_against_a_stiffer_rotated_block(meshes, tmp_path):
    """Two compliant meshes of different moduli, the second rotated about all three axes."""
    path = str(meshes / PEPPER)
    points, tets = box_grid(*(np.linspace(-h, h, 9) for h in (0.04, 0.03, 0.02)))
    block = tmp_path / "block.vtk"
    block.write_text(vtk_text(points, tets, "block"))
    XB = Pose.from_xyz_rpy(0.01, -0.005, 0.085, 25, 10, -30).matrix
    pepper, stiff = CompliantGeometry.from_drake_vtk(path, E), CompliantGeometry.from_drake_vtk(block, 3.5e5)
    surface, wrench, drake = compare(DrakeBody(path, "compliant", np.eye(4), E),
                                     DrakeBody(str(block), "compliant", XB, 3.5e5), pepper, stiff,
                                     same_vertices=True)
    assert wrench.force[2] > 0                            # pushes the block up, out of the pepper


def test_two_cubes(tmp_path):
    """The two-cube case (Drake's 19.208 N): same force and the same 776 faces as Drake."""
    cube = drake_cube_vtk(tmp_path / "cube.vtk")
    XB = Pose.from_xyz_rpy(0.098).matrix
    body = CompliantGeometry.from_drake_vtk(cube, E)
    surface, wrench, drake = compare(DrakeBody(str(cube), "compliant", np.eye(4), E),
                                     DrakeBody(str(cube), "compliant", XB, E), body, body, same_vertices=True)
    assert drake.force[0] == pytest.approx(19.208, rel=1e-9)


@pytest.mark.parametrize("rotated", [False, True])
def test_two_tetgen_cubes(tmp_path, rotated):
    """Two TetGen cubes (0.1 m, 10 mm overlap). Translated along x only, their side walls are
    coplanar: both fields are E·(distance to the same plane)/max d there, so whole polygons lie
    exactly in tet faces and rounding decides which survive (fieldgen's own arithmetic gave 26
    faces more than Drake and a force 8e-3 off on this mesh). Rotated and three times stiffer,
    B has no coplanar walls."""
    import tetgen

    from fieldgen.meshing.tetmesh import orient_positive

    vertices, faces = box_surface([-0.05] * 3, [0.05] * 3)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        points, tets = tetgen.TetGen(vertices, faces.astype(np.int32)).tetrahedralize(switches="pq1.414a3e-6Q")[:2]
    finally:
        os.chdir(cwd)
    points = np.asarray(points, float)
    tets = orient_positive(points, np.asarray(tets, np.int64))
    cube = tmp_path / "cube.vtk"
    cube.write_text(vtk_text(points, tets, "cube"))
    XB = Pose.from_xyz_rpy(0.09, 0.003, -0.002, 3, 5, 7).matrix if rotated else Pose.from_xyz_rpy(0.09).matrix
    E_B = 3 * E if rotated else E
    a, b = CompliantGeometry.from_drake_vtk(cube, E), CompliantGeometry.from_drake_vtk(cube, E_B)
    compare(DrakeBody(str(cube), "compliant", np.eye(4), E), DrakeBody(str(cube), "compliant", XB, E_B), a, b,
            same_vertices=True)


def test_contact_cli_reports_the_rule_and_the_other_count(meshes):
    """`fieldgen contact --face-rule drake --json`: face_rule, faces, faces_other_rule (and
    force_other_rule); the other rule's figures are what `--face-rule all` reports, and vice
    versa, and Drake's force is the one reported under the drake rule."""
    path = str(meshes / PEPPER)
    args = ["contact", path, path, "--modulus-a", "1e5", "--modulus-b", "1e5",
            "--pose-b", "0.04,0.012,0.006,20,-15,40", "--json"]
    runner = CliRunner()
    drake = json.loads(runner.invoke(main, args + ["--face-rule", "drake"]).stdout)
    every = json.loads(runner.invoke(main, args).stdout)
    assert drake["face_rule"] == "drake" and every["face_rule"] == "all"
    assert drake["faces_other_rule"] == every["faces"] and every["faces_other_rule"] == drake["faces"]
    assert drake["force_other_rule"] == every["force"] and every["force_other_rule"] == drake["force"]
    # here the choice matters: the 5π/8 filter drops faces that carry force
    assert abs(drake["force"][0] - every["force"][0]) > 0.01 * abs(every["force"][0])
    body = CompliantGeometry.from_drake_vtk(path, E)
    reference = drake_contact(DrakeBody(path, "compliant", np.eye(4), E),
                              DrakeBody(path, "compliant", Pose.from_xyz_rpy(0.04, 0.012, 0.006, 20, -15, 40).matrix, E))
    assert np.linalg.norm(np.array(drake["force"]) - reference.force) <= 1e-6 * np.linalg.norm(reference.force)
    assert body.n_tets == 2519


def test_unknown_face_rule_is_a_usage_error(meshes):
    path = str(meshes / PEPPER)
    result = CliRunner().invoke(main, ["contact", path, path, "--modulus-a", "1e5", "--modulus-b", "1e5",
                                       "--face-rule", "none"])
    assert result.exit_code == 2
    assert "--face-rule" in result.output
    with pytest.raises(ValueError, match="face_rule"):
        contact(CompliantGeometry.from_drake_vtk(path, E), np.eye(4), CompliantGeometry.from_drake_vtk(path, E),
                np.eye(4), face_rule="none")


PEPPER_SCENE = """
[simulate]
duration = 0.002
dt = 1e-3
{rule}

[[body]]
name = "floor"
kind = "fixed"
geometry = {{vtk = "{pepper}", modulus = 1e5}}

[[body]]
name = "upper"
geometry = {{vtk = "{pepper}", modulus = 1e5}}
mass = 0.1
position = [0.04, 0.012, 0.006]
rpy = [20, -15, 40]
"""


def test_scene_face_rule_reaches_the_contact_query(meshes, tmp_path):
    """`face_rule` in a scene's [simulate] table sets the rule of every contact surface the
    simulator computes (here two overlapping peppers, the pose where the rules differ)."""
    from fieldgen.runtime.contact.surface import compute_contact_surface
    from fieldgen.runtime.scene.load import load_scene
    from fieldgen.runtime.dynamics.point_contacts import scene_contacts

    path = meshes / PEPPER
    counts = {}
    for rule in ("all", "drake"):
        scene_file = tmp_path / f"{rule}.toml"
        scene_file.write_text(PEPPER_SCENE.format(rule=f'face_rule = "{rule}"', pepper=path.as_posix()))
        scene, _ = load_scene(scene_file)
        assert scene.face_rule == rule
        states = [b.state for b in scene.bodies]
        surfaces = scene_contacts(scene, states, keep_surfaces=True).surfaces
        assert len(surfaces) == 1
        (_, _, surface), = surfaces
        poses = [b.pose(s) for b, s in zip(scene.bodies, states)]
        direct = compute_contact_surface(scene.bodies[0].geometry, poses[0], scene.bodies[1].geometry, poses[1],
                                         face_rule=rule)
        assert surface.n_faces == direct.n_faces
        counts[rule] = surface.n_faces
    assert counts["all"] != counts["drake"]
    scene_file = tmp_path / "default.toml"
    scene_file.write_text(PEPPER_SCENE.format(rule="", pepper=path.as_posix()))
    assert load_scene(scene_file)[0].face_rule == "all"


def test_scene_with_an_unknown_face_rule_is_a_usage_error(meshes, tmp_path):
    scene_file = tmp_path / "bad.toml"
    scene_file.write_text(PEPPER_SCENE.format(rule='face_rule = "some"', pepper=(meshes / PEPPER).as_posix()))
    result = CliRunner().invoke(main, ["simulate", str(scene_file), "--quiet"])
    assert result.exit_code == 2
    assert "bad.toml" in result.stderr and "face_rule" in result.stderr and '"drake"' in result.stderr


def test_simulate_cli_reports_the_face_rule(meshes, tmp_path):
    scene_file = tmp_path / "scene.toml"
    scene_file.write_text(PEPPER_SCENE.format(rule='face_rule = "drake"', pepper=(meshes / PEPPER).as_posix()))
    result = CliRunner().invoke(main, ["simulate", str(scene_file), "--quiet", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["face_rule"] == "drake"
    result = CliRunner().invoke(main, ["simulate", str(scene_file), "--quiet", "--json", "--face-rule", "all"])
    assert json.loads(result.stdout)["face_rule"] == "all"
