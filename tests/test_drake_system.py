"""fieldgen.drake: the authored field inside a Drake MultibodyPlant (docs/model.md §5).

A rigid ball (R 1 cm, 50 g) rests on a 60×60×20 mm pad with a bonded base and insulated sides, so
the pad's extent is exactly e = depth/h and its pressure the law's p0(e): the force of a sphere
pressed δ into it is the closed form F(δ) = ∫ 2πr p0((δ − R + √(R² − r²))/h) dr over the contact
disc, independent of fieldgen's contact code.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.integrate import quad
from scipy.optimize import brentq

pydrake = pytest.importorskip("pydrake")

from pydrake.math import RigidTransform, RollPitchYaw  # noqa: E402
from pydrake.multibody.math import SpatialVelocity  # noqa: E402
from pydrake.multibody.plant import AddMultibodyPlantSceneGraph  # noqa: E402
from pydrake.multibody.tree import SpatialInertia, UnitInertia  # noqa: E402
from pydrake.systems.analysis import Simulator  # noqa: E402
from pydrake.systems.framework import DiagramBuilder  # noqa: E402

from fieldgen.cli.main import main  # noqa: E402
from fieldgen.drake import add_pressure_field_contact  # noqa: E402
from fieldgen.errors import FieldgenError  # noqa: E402
from fieldgen.options import BuildOptions  # noqa: E402
from fieldgen.pipeline import build  # noqa: E402
from fieldgen.runtime.contact.geometries import load_body  # noqa: E402
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody  # noqa: E402
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState  # noqa: E402
from fieldgen.runtime.dynamics.simulate import simulate  # noqa: E402

R, MASS, G = 0.01, 0.05, 9.81
H, M0, K = 0.02, 1e5, 0.8
SIDES = ("normal:1,0,0", "normal:-1,0,0", "normal:0,1,0", "normal:0,-1,0")
PAD_AT = RigidTransform([0.0, 0.0, -H / 2])       # the pad's top face at z = 0
Z0 = 0.0082                                          # start slightly pressed in: a short settle


def pad_options(law: str) -> BuildOptions:
    extra = dict(law="hyperbolic", k=K) if law == "hyperbolic" else {}
    return BuildOptions(bonded=("normal:0,0,-1",), insulated=SIDES, modulus=M0, dissipation=20.0,
                        edge_length=0.006, **extra)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    import trimesh

    folder = tmp_path_factory.mktemp("drake_system")
    trimesh.creation.box([0.06, 0.06, H]).export(folder / "pad.stl")
    trimesh.creation.icosphere(4, radius=R).export(folder / "ball.stl")
    for law in ("linear", "hyperbolic"):
        build(folder / "pad.stl", folder / f"pad_{law}.vtu", pad_options(law))
    return folder


def plant_with_ball(files, pad: str, time_step: float, **options):
    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, time_step)
    ball = plant.AddRigidBody("ball", SpatialInertia(MASS, np.zeros(3), UnitInertia.SolidSphere(R)))
    plant.Finalize()
    bodies = {"ball": str(files / "ball.stl"), "world": (str(files / pad), PAD_AT)}
    system = add_pressure_field_contact(builder, plant, bodies, **options)
    diagram = builder.Build()
    return diagram, plant, ball, system


def rest_height(files, pad: str, time_step: float, duration: float = 0.2) -> float:
    diagram, plant, ball, _ = plant_with_ball(files, pad, time_step)
    simulator = Simulator(diagram)
    if time_step == 0:
        simulator.get_mutable_integrator().set_target_accuracy(1e-6)
    context = plant.GetMyMutableContextFromRoot(simulator.get_mutable_context())
    plant.SetFreeBodyPose(context, ball, RigidTransform([0.0, 0.0, Z0]))
    simulator.AdvanceTo(duration)
    assert abs(plant.EvalBodySpatialVelocityInWorld(context, ball).translational()[2]) < 1e-5
    return float(plant.EvalBodyPoseInWorld(context, ball).translation()[2])


def p0(e: float, law: str) -> float:
    return M0 * e / (1 - K * e) if law == "hyperbolic" else M0 * e


def closed_form_rest_height(law: str) -> float:
    """The centre height where the closed-form force of the sphere equals its weight."""
    def force(delta):
        a = math.sqrt(max(2 * R * delta - delta * delta, 0.0))
        return quad(lambda r: 2 * math.pi * r * p0((delta - R + math.sqrt(R * R - r * r)) / H, law), 0, a)[0]

    return R - brentq(lambda d: force(d) - MASS * G, 1e-6, 0.9 * R, xtol=1e-12)


# --------------------------------------------------------------------------- the wrench itself

def test_wrench_equals_fieldgen_contact(files):
    """The system's output for a posed, moving ball equals `fieldgen contact`'s (A = ball, B = pad)."""
    X_BG = RigidTransform(RollPitchYaw(0.2, -0.1, 0.3), [0.0004, -0.0003, 0.0002])
    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, 0.0)
    ball = plant.AddRigidBody("ball", SpatialInertia(MASS, np.zeros(3), UnitInertia.SolidSphere(R)))
    plant.Finalize()
    system = add_pressure_field_contact(
        builder, plant, {"ball": (str(files / "ball.stl"), X_BG), "world": (str(files / "pad_hyperbolic.vtu"), PAD_AT)},
        friction={"ball": 0.4})
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    plant_context = plant.GetMyMutableContextFromRoot(context)
    X_WB = RigidTransform(RollPitchYaw(0.05, 0.1, -0.2), [0.003, -0.002, 0.0085])
    V_WB = SpatialVelocity(w=[0.3, -0.2, 1.5], v=[0.02, -0.01, -0.05])
    plant.SetFreeBodyPose(plant_context, ball, X_WB)
    plant.SetFreeBodySpatialVelocity(plant_context, ball, V_WB)
    (out,) = system.get_output_port(0).Eval(system.GetMyContextFromRoot(context))
    assert out.body_index == ball.index()

    X_WG = X_WB.multiply(X_BG)
    v_G = V_WB.translational() + np.cross(V_WB.rotational(), X_WG.translation() - X_WB.translation())
    pose = ",".join(repr(float(x)) for x in
                    [*X_WG.translation(), *np.degrees(RollPitchYaw(X_WG.rotation()).vector())])
    velocity = ",".join(repr(float(x)) for x in [*v_G, *V_WB.rotational()])
    pad_pose = ",".join(repr(float(x)) for x in [*PAD_AT.translation(), 0, 0, 0])
    result = CliRunner().invoke(main, ["contact", str(files / "ball.stl"), str(files / "pad_hyperbolic.vtu"),
                                       "--pose-a", pose, "--velocity-a", velocity, "--pose-b", pad_pose,
                                       "--mu-a", "0.4", "--representation", "triangle", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["faces"] > 100
    force_on_ball = np.array(report["force_on_a"])
    torque_about_Bo = np.array(report["torque_on_a"]) - np.cross(X_WB.translation(), force_on_ball)
    # the system applies the wrench at G: move it to the body origin to compare
    p_BoG_W = X_WG.translation() - X_WB.translation()
    torque_system = out.F_Bq_W.rotational() + np.cross(p_BoG_W, out.F_Bq_W.translational())
    np.testing.assert_allclose(out.F_Bq_W.translational(), force_on_ball, rtol=0, atol=1e-12)
    np.testing.assert_allclose(torque_system, torque_about_Bo, rtol=0, atol=1e-12)
    assert np.allclose(out.p_BoBq_B, X_BG.translation(), rtol=0, atol=0)


# --------------------------------------------------------------------------- resting

@pytest.fixture(scope="module")
def simulated_rest_height(files):
    """fieldgen's own `simulate` of the same scene (continuous integrator: the same wrenches)."""
    pad, ball = load_body(files / "pad_linear.vtu"), load_body(files / "ball.stl")
    scene = Scene([SceneBody("pad", pad, "fixed", state=RigidBodyState(PAD_AT.translation())),
                   SceneBody("ball", ball, "dynamic", MassProperties(MASS, np.eye(3) * 0.4 * MASS * R * R),
                             RigidBodyState([0.0, 0.0, Z0]))])
    result = simulate(scene, 0.2, 1e-3, "continuous")
    assert abs(result.velocities[-1, 1, 2]) < 1e-5
    return float(result.positions[-1, 1, 2])


@pytest.mark.slow
@pytest.mark.parametrize("time_step", [1e-3, 0.0], ids=["discrete", "continuous"])
def test_ball_rests_where_fieldgen_simulate_puts_it(files, simulated_rest_height, time_step):
    height = rest_height(files, "pad_linear.vtu", time_step)
    assert abs(height - simulated_rest_height) < 1e-6


@pytest.mark.slow
def test_hyperbolic_and_linear_pads_rest_as_their_laws_say(files):
    """The stiffer hyperbolic law holds the ball higher, where its closed form says: each pad's
    rest height is within 1% of the sphere's depth of its own law's, and nearer it than the other's
    (about 46 µm apart; the icosphere's facets and the mesh leave some 8 µm)."""
    heights = {law: rest_height(files, f"pad_{law}.vtu", 1e-3) for law in ("linear", "hyperbolic")}
    expected = {law: closed_form_rest_height(law) for law in heights}
    assert heights["hyperbolic"] > heights["linear"]
    for law, other in (("linear", "hyperbolic"), ("hyperbolic", "linear")):
        error = abs(heights[law] - expected[law])
        assert error < 0.01 * (R - expected[law]), (law, heights, expected)
        assert error < abs(heights[law] - expected[other]), (law, heights, expected)


# --------------------------------------------------------------------------- use

def test_collisions_between_handled_bodies_are_filtered(files):
    from pydrake.geometry import Sphere
    from pydrake.multibody.plant import CoulombFriction

    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, 1e-3)
    ball = plant.AddRigidBody("ball", SpatialInertia(MASS, np.zeros(3), UnitInertia.SolidSphere(R)))
    plant.RegisterCollisionGeometry(ball, RigidTransform(), Sphere(R), "ball", CoulombFriction(0.5, 0.5))
    plant.RegisterCollisionGeometry(plant.world_body(), RigidTransform([0, 0, -0.5]), Sphere(0.5), "ground",
                                    CoulombFriction(0.5, 0.5))
    plant.Finalize()
    add_pressure_field_contact(builder, plant, {"ball": str(files / "ball.stl"),
                                                "world": (str(files / "pad_linear.vtu"), PAD_AT)})
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    inspector = scene_graph.model_inspector()
    ids = inspector.GetAllGeometryIds()
    assert len(ids) == 2 and inspector.CollisionFiltered(ids[0], ids[1])


def test_unknown_body_unfinalized_plant_and_missing_file_are_clear(files):
    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, 1e-3)
    plant.AddRigidBody("ball", SpatialInertia(MASS, np.zeros(3), UnitInertia.SolidSphere(R)))
    with pytest.raises(FieldgenError, match="Finalize"):
        add_pressure_field_contact(builder, plant, {"ball": str(files / "ball.stl")})
    plant.Finalize()
    with pytest.raises(FieldgenError, match="no single body named 'bal'"):
        add_pressure_field_contact(builder, plant, {"bal": str(files / "ball.stl"),
                                                    "world": str(files / "pad_linear.vtu")})
    with pytest.raises(FieldgenError, match="file not found") as info:
        add_pressure_field_contact(builder, plant, {"ball": str(files / "nope.stl"),
                                                    "world": str(files / "pad_linear.vtu")})
    assert "nope.stl" in str(info.value)


def test_rigid_core_pass_through_is_warned_once(files, tmp_path):
    """A ball pushed into a skinned pad's rigid core: the contact warning `fieldgen contact` gives."""
    build(files / "pad.stl", tmp_path / "skin.vtu",
          BuildOptions(skin=0.004, skin_mesh="cut", modulus=M0, dissipation=20.0, edge_length=0.006))
    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, 1e-3)
    ball = plant.AddRigidBody("ball", SpatialInertia(MASS, np.zeros(3), UnitInertia.SolidSphere(R)))
    plant.Finalize()
    system = add_pressure_field_contact(builder, plant, {"ball": str(files / "ball.stl"),
                                                         "world": (str(tmp_path / "skin.vtu"), PAD_AT)})
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    plant.SetFreeBodyPose(plant.GetMyMutableContextFromRoot(context), ball, RigidTransform([0, 0, R - 0.006]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        system.get_output_port(0).Eval(system.GetMyContextFromRoot(context))
        context.SetTime(0.5)
        system.get_output_port(0).Eval(system.GetMyContextFromRoot(context))
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1 and "core" in messages[0], messages
    (entry,) = system.contact_warnings()
    assert entry["kind"] == "pass_through" and entry["pair"] == ["ball", "world"]


@pytest.mark.slow
def test_the_worked_example_runs(tmp_path):
    """examples/drake_ball_on_pad.py, shortened: both simulations run and the plot is written."""
    import importlib.util
    from pathlib import Path

    pytest.importorskip("matplotlib")
    path = Path(__file__).resolve().parents[1] / "examples" / "drake_ball_on_pad.py"
    spec = importlib.util.spec_from_file_location("drake_ball_on_pad", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    summary = example.main(["--out", str(tmp_path), "--duration", "0.05"])
    assert (tmp_path / "drake_ball_on_pad.png").stat().st_size > 10_000
    # mid-rebound at 0.05 s: Drake's 1 ms explicit step lags the error-controlled run by ~0.1 mm
    assert abs(summary["drake_rest_height"] - summary["fieldgen_rest_height"]) < 5e-4
