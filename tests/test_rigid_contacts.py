"""Rigid contacts of the velocity integrator: kinematic bodies in the LCP, contacts on the
actual meshes (vertex–face and edge–edge), rigid cores."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.runtime.scene import primitives as prim
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState, box_mass_properties
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody, Schedule
from fieldgen.runtime.dynamics.simulate import simulate


def test_kinematic_plate_pushes_a_rigid_box_at_its_own_speed():
    """A kinematic plate moving at 0.1 m/s reaches a resting box 5 mm away after 0.05 s and
    pushes it over a rigid floor (μ = 0.5): from then on the box moves at the plate's speed."""
    floor = prim.rigid_box([2, 1, 0.1], mu_static=0.5, name="floor")
    box = prim.rigid_box([0.1, 0.1, 0.1], mu_static=0.5, name="box")
    plate = prim.rigid_box([0.02, 0.4, 0.25], mu_static=0.0, name="plate")
    speed = 0.1
    scene = Scene([
        SceneBody("floor", floor, "fixed", state=RigidBodyState([0, 0, -0.05])),
        SceneBody("box", box, "dynamic", box_mass_properties(1.0, [0.1] * 3), RigidBodyState([0, 0, 0.05])),
        SceneBody("plate", plate, "kinematic", state=RigidBodyState([-0.065, 0, 0.075]),
                  motion=Schedule.constant([speed, 0, 0, 0, 0, 0])),
    ])
    result = simulate(scene, 0.3, 1e-3)
    t = result.times
    vx = result.velocities[:, 1, 0]
    assert np.all(np.abs(vx[t < 0.045]) < 1e-9)                 # at rest before the plate arrives
    pushed = t > 0.06
    assert np.all(np.abs(vx[pushed] - speed) <= 0.01 * speed)
    # the plate never passes into the box: its face stays behind the box's
    gap = (result.positions[:, 1, 0] - 0.05) - (result.positions[:, 2, 0] + 0.01)
    assert gap.min() > -1e-6
    assert np.abs(result.positions[:, 1, 2] - 0.05).max() < 1e-6   # slides, does not lift or tip


# --------------------------------------------------------------------------- meshes, not hulls

def block_with_hole(outer: float, hole: float, height: float, depth: float):
    """Closed, outward-wound surface of a square block (top at z = 0) with a square blind hole
    of side ``hole`` and ``depth`` in the middle of its top: vertices, faces."""
    R, r = outer / 2, hole / 2
    square = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]], dtype=np.float64)
    O, I = square * R, square * r
    V = np.vstack([np.column_stack([O, np.zeros(4)]),            # 0-3 outer top
                   np.column_stack([I, np.zeros(4)]),            # 4-7 inner top
                   np.column_stack([I, np.full(4, -depth)]),     # 8-11 hole bottom
                   np.column_stack([O, np.full(4, -height)])])   # 12-15 outer bottom
    F = []
    for k in range(4):
        m = (k + 1) % 4
        F += [(k, m, 4 + m), (k, 4 + m, 4 + k)]                  # top ring, +z
        F += [(12 + k, 12 + m, m), (12 + k, m, k)]               # outer walls, outward
        F += [(4 + m, 8 + m, 8 + k), (4 + m, 8 + k, 4 + k)]      # hole walls, into the hole
    F += [(8, 9, 10), (8, 10, 11), (12, 14, 13), (12, 15, 14)]   # hole bottom +z, block bottom -z
    return V, np.array(F, np.int64)


def test_block_with_hole_is_a_closed_outward_surface():
    import trimesh

    V, F = block_with_hole(0.06, 0.021, 0.03, 0.02)
    mesh = trimesh.Trimesh(V, F, process=False)
    assert mesh.is_watertight and mesh.is_winding_consistent
    assert mesh.volume == pytest.approx(0.06 ** 2 * 0.03 - 0.021 ** 2 * 0.02)


def _penetration(peg_pose, peg_half, block_V, hole, depth, outer, height):
    """Deepest penetration between the peg (a box) and the block: peg vertices inside the block's
    material and block vertices inside the peg, m (0 when apart)."""
    R, p = peg_pose[:3, :3], peg_pose[:3, 3]
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]) * peg_half
    world = corners @ R.T + p
    worst = 0.0
    for x, y, z in world:
        inside_block = abs(x) < outer / 2 and abs(y) < outer / 2 and -height < z < 0
        in_hole = abs(x) < hole / 2 and abs(y) < hole / 2 and z > -depth
        if inside_block and not in_hole:
            into = min(hole / 2 - abs(x) if abs(x) < hole / 2 else np.inf,
                       hole / 2 - abs(y) if abs(y) < hole / 2 else np.inf)
            worst = max(worst, min(abs(x) - hole / 2 if abs(x) > hole / 2 and abs(y) < hole / 2 else np.inf,
                                   abs(y) - hole / 2 if abs(y) > hole / 2 and abs(x) < hole / 2 else np.inf,
                                   -depth - z if abs(x) < hole / 2 and abs(y) < hole / 2 else np.inf,
                                   -z, into if np.isfinite(into) else np.inf))
    local = (block_V - p) @ R
    depth_in = np.min(peg_half - np.abs(local), axis=1)
    return max(worst, float(depth_in.max(initial=0.0)))


def test_square_peg_drops_into_a_hole_with_half_a_millimetre_clearance():
    """A 20 mm square peg 40 mm long, yawed 1° and 0.2 mm off centre, falls 5 mm into a 21 mm
    blind hole 20 mm deep. On convex hulls it would rest on the block's top (the hull covers the
    hole); on the meshes it enters and rests on the hole's bottom, never deeper in any wall or
    the bottom than 1e-5 m."""
    from fieldgen.runtime.contact.geometries import RigidGeometry
    from fieldgen.runtime.contact.pose import rotation_from_rpy

    outer, hole, height, depth = 0.06, 0.021, 0.03, 0.02
    V, F = block_with_hole(outer, hole, height, depth)
    block = RigidGeometry(V, F, mu_static=0.3, mu_dynamic=0.3, name="block")
    peg = prim.rigid_box([0.02, 0.02, 0.04], mu_static=0.3, name="peg")
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(rotation_from_rpy(0, 0, 1.0)).as_quat()
    start = RigidBodyState([0.0002, -0.0002, 0.005 + 0.02], [w, x, y, z])
    scene = Scene([SceneBody("block", block, "fixed"),
                   SceneBody("peg", peg, "dynamic", box_mass_properties(0.12, [0.02, 0.02, 0.04]), start)])
    result = simulate(scene, 0.25, 1e-3)
    from fieldgen.runtime.dynamics.rigid_body import quaternion_to_matrix

    worst = 0.0
    for k in range(len(result.times)):
        X = np.eye(4)
        X[:3, :3] = quaternion_to_matrix(result.quaternions[k, 1])
        X[:3, 3] = result.positions[k, 1]
        worst = max(worst, _penetration(X, np.array([0.01, 0.01, 0.02]), V, hole, depth, outer, height))
    assert worst < 1e-5
    bottom = result.positions[-1, 1, 2] - 0.02
    assert bottom == pytest.approx(-depth, abs=1e-5)            # rests on the hole's bottom
    assert np.abs(result.velocities[-1, 1]).max() < 1e-6


def test_box_dropped_edge_first_on_a_box_edge_comes_to_rest_on_a_face():
    """A 50 mm cube, its bottom edge along y (rolled 40° about y), falls 2 mm across the top
    edge (along x) of a fixed 100 mm cube: edge on edge first (no vertex of either is near a face
    of the other there), then it tips onto the lower cube's top face and rests on a face."""
    from scipy.spatial.transform import Rotation

    from fieldgen.runtime.contact.pose import rotation_from_rpy
    from fieldgen.runtime.dynamics.rigid_body import quaternion_to_matrix

    lower = prim.rigid_box([0.1, 0.1, 0.1], mu_static=0.5, name="lower")
    upper = prim.rigid_box([0.05, 0.05, 0.05], mu_static=0.5, name="upper")
    R = rotation_from_rpy(0, 40.0, 0)
    x, y, z, w = Rotation.from_matrix(R).as_quat()
    corners = np.array([[a, b, c] for a in (-1, 1) for b in (-1, 1) for c in (-1, 1)]) * 0.025 @ R.T
    start = RigidBodyState([0.0, 0.04, 0.002 - corners[:, 2].min()], [w, x, y, z])
    scene = Scene([SceneBody("lower", lower, "fixed", state=RigidBodyState([0, 0, -0.05])),
                   SceneBody("upper", upper, "dynamic", box_mass_properties(0.1, [0.05] * 3), start)])
    result = simulate(scene, 0.5, 1e-3)
    Rf = quaternion_to_matrix(result.quaternions[-1, 1])
    assert np.abs(Rf.T @ [0, 0, 1]).max() == pytest.approx(1.0, abs=1e-6)      # a face down
    assert result.positions[-1, 1, 2] == pytest.approx(0.025, abs=1e-6)        # on the top face
    assert np.abs(result.velocities[-1, 1]).max() < 1e-6
    # the first contact was edge on edge: the upper cube's lowest point was over the rim then
    z_low = result.positions[:, 1, 2] - 0.025 * np.array(
        [np.abs(quaternion_to_matrix(q)).sum(axis=1)[2] for q in result.quaternions[:, 1]])
    first = int(np.argmax(z_low < 1e-6))
    assert first > 0 and abs(z_low[first]) < 1e-6


def _pose(rpy_deg, position):
    from fieldgen.runtime.contact.pose import rotation_from_rpy

    X = np.eye(4)
    X[:3, :3] = rotation_from_rpy(*rpy_deg)
    X[:3, 3] = position
    return X


@pytest.mark.parametrize("gap", [1e-4, 0.0, -1e-5])
def test_crossing_edges_give_one_edge_edge_contact(gap):
    """Two cubes edge to edge, crossed (A's top edge along x, B's bottom edge along y), ``gap``
    apart: one contact, at the crossing, normal +z, φ0 = gap; no vertex of either is near a
    face of the other (vertex-only detection finds nothing here)."""
    from fieldgen.runtime.dynamics.rigid_contact import mesh_contacts

    a = prim.rigid_box([0.1, 0.1, 0.1], name="a")
    b = prim.rigid_box([0.1, 0.1, 0.1], name="b")
    h = 0.05 * np.sqrt(2)
    X_A = _pose((45, 0, 0), [0, 0, -h])             # top edge along x at z = 0
    X_B = _pose((0, 45, 0), [0.0, 0, h + gap])      # bottom edge along y at z = gap
    p, n, phi = mesh_contacts(a, X_A, b, X_B, margin=1e-3)
    assert len(phi) == 1
    assert np.allclose(n[0], [0, 0, 1], atol=1e-9) and phi[0] == pytest.approx(gap, abs=1e-12)
    assert np.allclose(p[0], [0, 0, gap / 2], atol=1e-12)
    p, n, phi = mesh_contacts(b, X_B, a, X_A, margin=1e-3)     # swapped: normal from B into A
    assert len(phi) == 1 and np.allclose(n[0], [0, 0, -1], atol=1e-9)


def test_convex_declared_body_uses_its_hull(tmp_path):
    """`convex = true` replaces a rigid mesh by its convex hull: a block with a hole then holds
    a peg on its top (the hull's top face covers the hole)."""
    import trimesh

    from fieldgen.runtime.scene.load import load_scene

    V, F = block_with_hole(0.06, 0.021, 0.03, 0.02)
    trimesh.Trimesh(V, F, process=False).export(tmp_path / "block.stl")
    text = """
[[body]]
name = "block"
kind = "fixed"
geometry = {{mesh = "block.stl"}}
{convex}

[[body]]
name = "peg"
geometry = {{shape = "box", size = [0.02, 0.02, 0.04]}}
mass = 0.12
position = [0, 0, 0.021]
"""
    ends = []
    for convex in ("", "convex = true"):
        (tmp_path / "s.toml").write_text(text.format(convex=convex))
        scene, _ = load_scene(tmp_path / "s.toml")
        ends.append(simulate(scene, 0.12, 1e-3).positions[-1, 1, 2])
    assert ends[0] < 0.0 + 1e-9                   # the mesh: into the hole
    assert ends[1] == pytest.approx(0.02, abs=1e-6)   # the hull: on the top


# --------------------------------------------------------------------------- rigid cores

def test_ball_pressed_through_a_bonded_foam_layer_stops_at_its_rigid_backing():
    """A 7 mm foam layer (linear law, M0 = 5e5 Pa) bonded to a rigid backing: its bottom faces
    have e = 1, the rigid core of the model (D 5.1.2). A rigid ball (R = 10 mm) is pushed into it
    with 1000 N, more than the foam can hold: its pressure never exceeds M0 over at most the
    ball's section πR² (157 N). The ball goes through the foam to the backing, which then acts
    as rigid geometry: the ball's centre never comes closer to it than R − 1e-4 m, and the steps
    where the core carries load are marked."""
    R, press, H = 0.01, 1000.0, 0.007
    assert press > 5e5 * np.pi * R * R
    slab = prim.compliant_slab([0.1, 0.1, H], 5e5, cells=(4, 4), layers=1, dissipation=5.0, mu_static=0.5,
                               name="foam")
    assert len(slab.core_faces) > 0 and np.allclose(slab.points[slab.core_faces][..., 2], -H)
    ball = prim.rigid_sphere(R, 3, mu_static=0.5, name="ball")
    m = 0.2
    scene = Scene([SceneBody("foam", slab, "fixed"),
                   SceneBody("ball", ball, "dynamic", MassProperties(m, np.eye(3) * 0.4 * m * R * R),
                             RigidBodyState([0, 0, R + 1e-4]), wrench=Schedule.constant([0, 0, -press, 0, 0, 0]))])
    result = simulate(scene, 0.03, 1e-3, record_every=1)
    z = result.positions[:, 1, 2]
    assert z.min() >= -H + R - 1e-4                        # never closer to the backing than R − 1e-4
    assert z[-1] <= -H + R + 1e-4                          # got through the foam and rests on it
    assert result.core_contact.any() and result.core_contact_steps.sum() > 5
    assert not result.core_contact[0]
    assert np.abs(result.velocities[-1, 1]).max() < 1e-3


def test_ball_pressed_into_the_paddle_stops_at_its_metal_core(tmp_path):
    """The bundled paddle (assets/paddle.toml: foam moulded round paddle_core.off, the core carved
    out, e = 1 on it), built here a little coarser (edge 6 mm, the same core). A rigid ball
    (R = 10 mm) is pressed onto the middle of its top with 1000 N, more than the foam can hold:
    the hyperbolic law's pressure never exceeds M0/(1 − K) (at e = 1), and the net upward force
    of a pressure on the ball is at most that times its section πR² (314 N). Run through
    `fieldgen simulate`, the ball goes through the 7 mm of foam to the core, which acts as rigid
    geometry: the ball's centre never comes closer to the core's surface than R − 1e-4 m (the
    distance measured on paddle_core.off itself with trimesh, not on the asset), the ball comes
    to rest on it (friction μ = 0.5 holds it on the top of the core, whose pole is a vertex its
    bottom vertex meets point to point), and trajectories.csv marks the steps where the core
    carried load."""
    import csv
    import json
    from pathlib import Path

    import trimesh
    from click.testing import CliRunner

    from fieldgen.options import BuildOptions, options_from_spec
    from fieldgen.pipeline import build
    from fieldgen.cli.main import main

    assets = Path(__file__).resolve().parents[1] / "assets"
    options, source, _ = options_from_spec(assets / "paddle.toml")
    options = BuildOptions(**{**options.__dict__, "edge_length": 0.006})
    build(source, tmp_path / "paddle.vtu", options)
    R, press, m = 0.01, 1000.0, 0.2
    J = 0.4 * m * R * R
    p_max = options.modulus / (1.0 - options.k)
    assert options.law == "hyperbolic" and press > p_max * np.pi * R * R
    core = trimesh.load(assets / "paddle_core.off")
    assert core.is_watertight
    top = float(trimesh.load(assets / "paddle.ply").bounds[1, 2])
    (tmp_path / "scene.toml").write_text(f"""
gravity = [0, 0, -9.81]
[simulate]
duration = 0.02
dt = 1e-3

[[body]]
name = "paddle"
kind = "fixed"
geometry = {{asset = "paddle.vtu"}}

[[body]]
name = "ball"
geometry = {{shape = "sphere", radius = {R}, subdivisions = 3}}
mu_static = 0.5
mass = {m}
inertia = [{J}, {J}, {J}]
position = [0, 0, {top + R + 1e-4}]
wrench = [0, 0, {-press}, 0, 0, 0]
""")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", str(tmp_path / "scene.toml"), "--record-every", "1",
                                       "-o", str(out), "--json", "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rows = [r for r in csv.DictReader(open(out / "trajectories.csv")) if r["body"] == "ball"]
    centre = np.array([[float(r[k]) for k in ("x", "y", "z")] for r in rows])
    speed = np.array([np.linalg.norm([float(r[k]) for k in ("vx", "vy", "vz")]) for r in rows])
    marked = np.array([int(r["core_contact"]) for r in rows])
    _, distance, _ = trimesh.proximity.closest_point(core, centre)
    assert not core.contains(centre).any()
    assert distance.min() >= R - 1e-4                      # never closer to the core than R − 1e-4
    assert distance[-1] <= R + 1e-4                        # through the foam, resting on the core
    assert speed[-1] < 1e-3 and np.abs(centre[-1] - centre[-5]).max() < 1e-6
    # a record is marked when the core carried load in a step from it to the next (the last
    # record, the final state, has none after it); the first step is still in the foam
    assert marked[0] == 0 and marked[-5:-1].all() and marked.sum() > 5
    assert report["core_contact_steps"] == marked[:-1].sum()
