"""A ball dropped on a foam pad, simulated in Drake with fieldgen's authored field.

The pad (60 × 60 × 20 mm) is bonded to the ground on its base and follows a hyperbolic law
p0 = M0 e / (1 − K e) that Drake's own hydroelastic model cannot express; the ball is a rigid
sphere (R 1 cm, 50 g) without friction (a rigid mesh has none unless given; a vertical drop
needs none). The same scene runs twice: in a Drake ``MultibodyPlant`` whose contact
comes from :func:`fieldgen.drake.add_pressure_field_contact`, and in fieldgen's own ``simulate``
(its continuous integrator, which uses the same contact wrenches). The ball's height over time
from both goes to a PNG.

    python examples/drake_ball_on_pad.py [--out FOLDER] [--duration SECONDS] [--png FILE]

Needs the extras ``drake`` (pydrake) and matplotlib.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import trimesh

from fieldgen.drake import add_pressure_field_contact
from fieldgen.options import BuildOptions
from fieldgen.pipeline import build
from fieldgen.runtime.contact.geometries import load_body
from fieldgen.runtime.dynamics.bodies import Scene, SceneBody
from fieldgen.runtime.dynamics.rigid_body import MassProperties, RigidBodyState
from fieldgen.runtime.dynamics.simulate import simulate

RADIUS, MASS = 0.01, 0.05          # m, kg
PAD = (0.06, 0.06, 0.02)           # m; its top face at z = 0
DROP = 0.005                       # m of free fall before contact
STEP = 1e-3                        # s: Drake's discrete step, and fieldgen's output interval


def make_files(folder: Path) -> tuple[Path, Path]:
    """The ball's surface and the pad's asset (bonded base, hyperbolic law, damping)."""
    folder.mkdir(parents=True, exist_ok=True)
    ball, pad_surface, pad = folder / "ball.stl", folder / "pad.stl", folder / "pad.vtu"
    trimesh.creation.icosphere(4, radius=RADIUS).export(ball)
    trimesh.creation.box(PAD).export(pad_surface)
    build(pad_surface, pad, BuildOptions(bonded=("normal:0,0,-1",), law="hyperbolic", modulus=1e5, k=0.8,
                                         dissipation=20.0, edge_length=0.006))
    return ball, pad


def drake_heights(ball: Path, pad: Path, duration: float) -> tuple[np.ndarray, np.ndarray]:
    """The ball's centre height sampled every STEP in a discrete Drake plant."""
    from pydrake.math import RigidTransform
    from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
    from pydrake.multibody.tree import SpatialInertia, UnitInertia
    from pydrake.systems.analysis import Simulator
    from pydrake.systems.framework import DiagramBuilder

    builder = DiagramBuilder()
    plant, _ = AddMultibodyPlantSceneGraph(builder, STEP)
    body = plant.AddRigidBody("ball", SpatialInertia(MASS, np.zeros(3), UnitInertia.SolidSphere(RADIUS)))
    plant.Finalize()
    add_pressure_field_contact(builder, plant, {"ball": str(ball),
                                                "world": (str(pad), RigidTransform([0, 0, -PAD[2] / 2]))})
    simulator = Simulator(builder.Build())
    context = plant.GetMyMutableContextFromRoot(simulator.get_mutable_context())
    plant.SetFreeBodyPose(context, body, RigidTransform([0, 0, RADIUS + DROP]))
    times = np.arange(0.0, duration + STEP / 2, STEP)
    heights = []
    for t in times:
        simulator.AdvanceTo(t)
        heights.append(plant.EvalBodyPoseInWorld(context, body).translation()[2])
    return times, np.array(heights)


def fieldgen_heights(ball: Path, pad: Path, duration: float) -> tuple[np.ndarray, np.ndarray]:
    """The same drop in fieldgen's own simulate (continuous integrator)."""
    pad_body, ball_body = load_body(pad), load_body(ball)
    inertia = np.eye(3) * 0.4 * MASS * RADIUS ** 2
    scene = Scene([SceneBody("pad", pad_body, "fixed", state=RigidBodyState([0, 0, -PAD[2] / 2])),
                   SceneBody("ball", ball_body, "dynamic", MassProperties(MASS, inertia),
                             RigidBodyState([0, 0, RADIUS + DROP]))])
    result = simulate(scene, duration, STEP, "continuous")
    return result.times, result.positions[:, 1, 2]


def plot(png: Path, drake, fieldgen) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4))
    axis.plot(fieldgen[0], 1e3 * fieldgen[1], lw=3, alpha=0.5, label="fieldgen simulate (continuous)")
    axis.plot(drake[0], 1e3 * drake[1], "k--", lw=1, label="Drake MultibodyPlant + fieldgen.drake")
    axis.axhline(1e3 * RADIUS, color="0.6", lw=0.8, label="touching the pad")
    axis.set(xlabel="time (s)", ylabel="ball centre height (mm)",
             title="Ball on a bonded foam pad, hyperbolic law (K = 0.8)")
    axis.legend()
    figure.tight_layout()
    figure.savefig(png, dpi=120)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("drake_ball_on_pad"), help="folder for the files")
    parser.add_argument("--duration", type=float, default=0.4, help="simulated seconds")
    parser.add_argument("--png", type=Path, default=None, help="the plot (default: OUT/drake_ball_on_pad.png)")
    args = parser.parse_args(argv)
    ball, pad = make_files(args.out)
    start = time.perf_counter()
    drake = drake_heights(ball, pad, args.duration)
    drake_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ours = fieldgen_heights(ball, pad, args.duration)
    ours_seconds = time.perf_counter() - start
    png = args.png or args.out / "drake_ball_on_pad.png"
    plot(png, drake, ours)
    summary = {"drake_rest_height": float(drake[1][-1]), "fieldgen_rest_height": float(ours[1][-1]),
               "drake_seconds": drake_seconds, "fieldgen_seconds": ours_seconds, "png": str(png)}
    print("\n".join(f"{key:22}{value}" for key, value in summary.items()))
    return summary


if __name__ == "__main__":
    main()
