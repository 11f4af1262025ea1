"""fieldgen simulate: velocity-level stepping (M22 IV) against closed forms."""

from __future__ import annotations

import numpy as np
import pytest

from fieldgen.runtime.scene import primitives as prim
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState, box_mass_properties
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody, Schedule
from fieldgen.runtime.scene.load import load_scene
from fieldgen.runtime.dynamics.simulate import simulate

G = 9.81

# --------------------------------------------------------------------------- coin, M22 V-A

R, T, M, MU = 0.01213, 0.00175, 0.00567, 0.2


def coin_scene(eps0: float, speed: float) -> Scene:
    """Rigid 152-segment fan coin on a 1 GPa compliant plane (linear field, 1 cm thick)."""
    plane = prim.compliant_slab([0.6, 0.6, 0.01], 1e9, cells=(2, 2), layers=1, mu_static=MU, name="plane")
    coin = prim.rigid_cylinder(R, T, 152, mu_static=MU, name="coin")
    inertia = np.diag([M * (3 * R * R + T * T) / 12] * 2 + [M * R * R / 2])
    v0 = speed * eps0 / np.hypot(1, eps0)
    w0 = speed / np.hypot(1, eps0) / R
    state = RigidBodyState([0, 0, T / 2 - 1.2e-10], [1, 0, 0, 0], [v0, 0, 0], [0, 0, w0])
    return Scene([SceneBody("plane", plane, "fixed"), SceneBody("coin", coin, "dynamic", MassProperties(M, inertia), state)])


@pytest.mark.slow
@pytest.mark.parametrize("eps0, speed, fraction", [(0.1, 3.0, 1e-3), (1.0, 1.0, 3e-3), (10.0, 1.0, 3e-3)])
def test_coin_ratio_tends_to_0653(eps0, speed, fraction):
    # ε approaches ε* slowly in log(speed) when ε0 is far from it, so the ratio is read when
    # the speed has fallen to ``fraction`` of its start; the start speed is chosen so that this
    # is still a few steps of deceleration (μ g δt = 2 mm/s per step) above rest.
    result = simulate(coin_scene(eps0, speed), 4.0, 1e-3,
                      stop=lambda t, s: np.hypot(*s[1].velocity[:2]) < 1e-4 * speed)
    v = np.linalg.norm(result.velocities[:, 1, :2], axis=1)
    spin = np.abs(result.angular_velocities[:, 1, 2]) * R
    total = np.hypot(v, spin)
    i = int(np.argmax(total < fraction * speed))
    assert i > 0 and total[i] > 0.5 * fraction * speed      # read while moving, not at rest
    assert v[0] / spin[0] == pytest.approx(eps0)
    assert v[i] / spin[i] == pytest.approx(0.653, rel=0.02)
    # it stays flat on the plane (the compliant normal contact holds the weight)
    assert np.all(np.abs(result.positions[:, 1, 2] - T / 2) < 1e-6)


# --------------------------------------------------------------------------- incline

def incline_scene(theta_deg: float, mu: float, modulus: float = 1e6, dissipation: float = 0.0) -> Scene:
    """A rigid 0.1 m box on a compliant slab; the incline is made by tilting gravity."""
    slab = prim.compliant_slab([1.0, 0.4, 0.02], modulus, cells=(10, 4), layers=1, mu_static=mu,
                               dissipation=dissipation, name="slab")
    box = prim.rigid_box([0.1, 0.1, 0.1], mu_static=mu, name="box")
    mass = box_mass_properties(1.0, [0.1, 0.1, 0.1])
    th = np.radians(theta_deg)
    gravity = G * np.array([np.sin(th), 0.0, -np.cos(th)])
    # start at the static sink depth: k_total φ = m g cosθ with k_total = (M0/H)·A
    depth = G * np.cos(th) / (modulus / 0.02 * 0.01)
    state = RigidBodyState([0, 0, 0.05 - depth], [1, 0, 0, 0])
    return Scene([SceneBody("slab", slab, "fixed"), SceneBody("box", box, "dynamic", mass, state)], gravity)


def test_box_below_friction_angle_sticks():
    mu = 0.5
    theta = np.degrees(np.arctan(mu)) - 5.0
    # A stiff, damped slab: the elastic rocking of the box on its foundation (torque of
    # friction about the centre of mass / rotational stiffness) is then ~1e-7 m, so what is
    # left is slip. The bottom-centre point of the box must not move along the slope.
    result = simulate(incline_scene(theta, mu, modulus=1e8, dissipation=10.0), 1.0, 1e-3)
    from fieldgen.runtime.dynamics.rigid_body import quaternion_to_matrix

    bottom = np.array([result.positions[k, 1] + quaternion_to_matrix(result.quaternions[k, 1]) @ [0, 0, -0.05]
                       for k in range(len(result.times))])
    drift = np.abs(bottom[:, 0] - bottom[0, 0]).max()
    assert drift < 1e-6
    assert result.times[-1] == pytest.approx(1.0)


def test_box_above_friction_angle_slides_with_closed_form_acceleration():
    mu = 0.3
    theta = np.degrees(np.arctan(mu)) + 10.0
    duration = 0.4
    result = simulate(incline_scene(theta, mu), duration, 1e-3)
    th = np.radians(theta)
    expected = G * (np.sin(th) - mu * np.cos(th))
    t, v = result.times, result.velocities[:, 1, 0]
    late = t > 0.1                    # after the first steps, fit the slope of v(t)
    slope = np.polyfit(t[late], v[late], 1)[0]
    assert slope == pytest.approx(expected, rel=0.02)


# --------------------------------------------------------------------------- scene plumbing

def test_schedule_is_piecewise_constant():
    s = Schedule.from_rows([[0.0, 1, 0, 0, 0, 0, 0], [0.5, 0, 2, 0, 0, 0, 0]])
    assert s(-1.0).tolist() == [0] * 6
    assert s(0.2)[0] == 1 and s(0.5)[1] == 2 and s(9.0)[1] == 2


def test_toml_scene_free_fall_matches_closed_form(tmp_path):
    path = tmp_path / "fall.toml"
    path.write_text("""
gravity = [0, 0, -9.81]
[[body]]
name = "cube"
geometry = {shape = "box", size = [0.1, 0.1, 0.1]}
density = 1000
position = [0, 0, 1]
velocity = [1, 0, 0]
""")
    scene, _ = load_scene(path)
    assert scene.bodies[0].mass.mass == pytest.approx(1.0)
    assert np.allclose(np.diag(scene.bodies[0].mass.inertia), 1.0 * 0.02 / 12)
    result = simulate(scene, 0.1, 1e-3)
    # semi-implicit Euler: z_n = z0 − g dt² n(n+1)/2
    n = result.steps
    assert result.positions[-1, 0, 2] == pytest.approx(1 - G * 1e-6 * n * (n + 1) / 2, rel=1e-12)
    assert result.positions[-1, 0, 0] == pytest.approx(0.1, rel=1e-12)


def test_bad_scene_names_the_file(tmp_path):
    from fieldgen.errors import InputError

    path = tmp_path / "bad.toml"
    path.write_text('[[body]]\nname = "x"\ngeometry = {shape = "box", size = [1, 1, 1]}\n')
    with pytest.raises(InputError, match="neither mass nor density"):
        load_scene(path)


# --------------------------------------------------------------------------- continuous

def ball_scene(dissipation: float, height: float = 0.005) -> Scene:
    """Compliant ball (R 2 cm, E 1e5 Pa, field E(1 − r/R)) dropped on a fixed rigid plate."""
    ball = prim.compliant_ball(0.02, 1e5, subdivisions=1, dissipation=dissipation, name="ball")
    plate = prim.rigid_box([0.2, 0.2, 0.02], name="plate")
    m = 1000 * 4 / 3 * np.pi * 0.02 ** 3
    mass = MassProperties(m, np.eye(3) * 0.4 * m * 0.02 ** 2)
    state = RigidBodyState([0, 0, 0.02 + height], [1, 0, 0, 0])
    return Scene([SceneBody("plate", plate, "fixed", state=RigidBodyState([0, 0, -0.01])),
                  SceneBody("ball", ball, "dynamic", mass, state)])


def flight_energies(scene, result):
    """Total energy at the recorded times when the ball touches nothing (elastic energy 0)."""
    m = scene.bodies[1].mass.mass
    z = result.positions[:, 1, 2]
    free = z > 0.02 + 1e-6
    v = result.velocities[:, 1]
    energy = 0.5 * m * (v ** 2).sum(axis=1) + m * G * z
    return result.times[free], energy[free], v[free, 2]


@pytest.mark.slow
def test_undamped_frictionless_ball_conserves_energy_over_ten_bounces():
    scene = ball_scene(0.0)
    rtol = 1e-7
    result = simulate(scene, 1.05, 2e-3, "continuous", rtol=rtol, atol=1e-10)
    t, energy, vz = flight_energies(scene, result)
    bounces = int(np.sum((vz[1:] > 0) & (vz[:-1] < 0)))
    assert bounces >= 10
    assert np.abs(energy - energy[0]).max() <= 1e3 * rtol * energy[0]


@pytest.mark.slow
def test_damping_never_adds_energy_and_rebound_falls_with_chi():
    rebound = []
    for chi in (0.0, 0.5, 2.0):
        scene = ball_scene(chi)
        result = simulate(scene, 0.09, 2e-3, "continuous", rtol=1e-7, atol=1e-10)
        t, energy, vz = flight_energies(scene, result)
        assert np.all(np.diff(energy) <= 1e-6 * energy[0])
        rebound.append(vz.max())
    assert rebound[0] > rebound[1] > rebound[2] > 0


# --------------------------------------------------------------------------- gripper example

@pytest.mark.slow
def test_gripper_example_lifts_the_box_without_slip(tmp_path):
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "assets" / "scenes" / "gripper.toml"
    scene, settings = load_scene(path, cache_dir=tmp_path)      # builds the foam pad asset
    assert type(scene.body("left_finger").geometry).__name__ == "CompliantGeometry"
    result = simulate(scene, settings["duration"], settings["dt"], record_every=10)
    box = result.body_names.index("box")
    finger = result.body_names.index("left_finger")
    lift = result.positions[-1, finger, 2] - result.positions[0, finger, 2]
    assert lift == pytest.approx(0.02, rel=1e-9)
    # the box rose with the fingers: its height relative to the finger changed by < 0.1 mm
    rel = result.positions[:, box, 2] - result.positions[:, finger, 2]
    lifting = result.times >= 0.35
    assert np.ptp(rel[lifting]) < 1e-4
    assert result.positions[-1, box, 2] - result.positions[0, box, 2] > 0.0199


# --------------------------------------------------------------------------- command line

def test_cli_writes_trajectories_pvd_and_json(tmp_path):
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from fieldgen.cli.main import main

    scene = Path(__file__).resolve().parent.parent / "assets" / "scenes" / "resting_box.toml"
    out = tmp_path / "out"
    run = CliRunner().invoke(main, ["simulate", str(scene), "--duration", "0.01", "--dt", "1e-3",
                                    "-o", str(out), "--json", "--quiet"])
    assert run.exit_code == 0, run.output
    summary = json.loads(run.output)
    assert summary["steps"] == 10 and summary["wall_seconds"] > 0 and summary["realtime_factor"] > 0
    assert set(summary["final_states"]) == {"slab", "box"}
    rows = (out / "trajectories.csv").read_text().splitlines()
    assert rows[0].startswith("time,body,x,y,z,qw")
    assert len(rows) == 1 + 2 * 11                      # 11 recorded times × 2 bodies
    pvd = (out / "contact_surfaces.pvd").read_text()
    assert pvd.count("<DataSet") == 11 and (out / "bodies.pvd").is_file()
    # the ParaView script (run in ParaView by tests/test_paraview.py) names both series
    script = (out / "view.py").read_text()
    compile(script, "view.py", "exec")
    assert summary["outputs"]["paraview"] == str(out / "view.py")
    assert repr(str(out / "contact_surfaces.pvd")) in script and repr(str(out / "bodies.pvd")) in script
    import vtk

    reader = vtk.vtkXMLPolyDataReader()
    reader.SetFileName(str(out / "frames" / "contact_000010.vtp"))
    reader.Update()
    poly = reader.GetOutput()
    assert poly.GetNumberOfCells() > 0 and poly.GetPointData().GetArray("pressure") is not None
    bad = CliRunner().invoke(main, ["simulate", str(tmp_path / "missing.toml")])
    assert bad.exit_code == 2 and "scene file not found" in bad.output      # as a missing spec or manifest


# --------------------------------------------------------------------------- rigid-rigid

def test_rigid_box_landing_on_rigid_floor_never_tunnels():
    """Two rigid geometries: vertex point contacts into the Stewart-Trinkle LCP (Lemke)."""
    floor = prim.rigid_box([1, 1, 0.1], mu_static=0.5, name="floor")
    box = prim.rigid_box([0.1, 0.1, 0.1], mu_static=0.5, name="box")
    scene = Scene([SceneBody("floor", floor, "fixed", state=RigidBodyState([0, 0, -0.05])),
                   SceneBody("box", box, "dynamic", box_mass_properties(1.0, [0.1] * 3),
                             RigidBodyState([0, 0, 0.1], [1, 0, 0, 0], [0.5, 0, -1.0]))])
    result = simulate(scene, 0.2, 1e-3)
    z = result.positions[:, 1, 2]
    assert z.min() > 0.05 - 1e-9                  # never below the floor's top (z = 0) + half height
    assert z[-1] == pytest.approx(0.05, abs=1e-9)
    # plastic landing: the normal impulse m·1.04 m/s times μ = 0.5 exceeds m·0.5 m/s, so the
    # horizontal motion stops at impact and the box then rests
    assert np.abs(result.velocities[-1, 1]).max() < 1e-9
    assert np.ptp(result.positions[-50:, 1, 0]) < 1e-12
