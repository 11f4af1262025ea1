"""Cost of one evaluation of fieldgen.drake's system next to Drake's own hydroelastic contact on
the same pair.

Run:  .venv/bin/python benchmarks/drake_system.py [--repeat N] [--edge-length M]

The pair: a rigid ball (icosphere, R 1 cm, 5120 triangles) pressed 2 mm into a 60×60×20 mm pad
with a bonded base (linear law, M0 1e5 Pa), built by ``fieldgen build --drake-vtk``, so Drake
gets the same tet mesh (its own field p = E·d/max d: on this pad the two fields differ, the
cost is what is compared). Three timings, medians over N evaluations, each after moving the ball
by 1e-9 m so no cache answers:

- ``fieldgen system``: the output port of :func:`fieldgen.drake.add_pressure_field_contact`'s
  system (plant poses and velocities in, the contact wrench out, Python);
- ``drake contact results``: a continuous plant with Drake's hydroelastic contact on the same
  pair, ``get_contact_results_output_port().Eval`` (the query plus Drake's wrench);
- ``drake surfaces``: ``QueryObject.ComputeContactSurfaces`` alone (polygon representation).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import trimesh

RADIUS, MODULUS, DEPTH = 0.01, 1e5, 0.002
PAD = (0.06, 0.06, 0.02)


def make_files(folder: Path, edge_length: float) -> dict:
    from fieldgen.options import BuildOptions
    from fieldgen.pipeline import build

    ball = trimesh.creation.icosphere(4, radius=RADIUS)
    ball.export(folder / "ball.stl")
    ball.export(folder / "ball.obj")
    trimesh.creation.box(PAD).export(folder / "pad.stl")
    build(folder / "pad.stl", folder / "pad.vtu",
                   BuildOptions(bonded=("normal:0,0,-1",), modulus=MODULUS, dissipation=1.0,
                                edge_length=edge_length, drake_vtk=str(folder / "pad.vtk")))
    return {"ball_stl": folder / "ball.stl", "ball_obj": folder / "ball.obj", "pad_vtu": folder / "pad.vtu",
            "pad_vtk": folder / "pad.vtk"}


def plant_and_ball(time_step: float):
    from pydrake.multibody.plant import AddMultibodyPlantSceneGraph
    from pydrake.multibody.tree import SpatialInertia, UnitInertia
    from pydrake.systems.framework import DiagramBuilder

    builder = DiagramBuilder()
    plant, scene_graph = AddMultibodyPlantSceneGraph(builder, time_step)
    ball = plant.AddRigidBody("ball", SpatialInertia(0.05, np.zeros(3), UnitInertia.SolidSphere(RADIUS)))
    return builder, plant, scene_graph, ball


def ball_mover(plant, plant_context, ball):
    """A function of the repeat k that poses the ball at the benchmark's depth, 1 nm higher on odd
    k (so no cache can return the last result); the ball is posed for k = 0 before returning."""
    from pydrake.math import RigidTransform

    def move(k):
        plant.SetFreeBodyPose(plant_context, ball, RigidTransform([0, 0, RADIUS - DEPTH + 1e-9 * (k % 2)]))

    move(0)
    return move


def timed(evaluate, move, repeat: int) -> float:
    evaluate()                                   # warm-up (numba kernels, Drake's BVHs)
    times = []
    for k in range(repeat):
        move(k)
        start = time.perf_counter()
        evaluate()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def fieldgen_seconds(files: dict, repeat: int) -> float:
    from pydrake.math import RigidTransform

    from fieldgen.drake import add_pressure_field_contact

    builder, plant, _, ball = plant_and_ball(1e-3)
    plant.Finalize()
    system = add_pressure_field_contact(builder, plant, {
        "ball": str(files["ball_stl"]), "world": (str(files["pad_vtu"]), RigidTransform([0, 0, -PAD[2] / 2]))})
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    plant_context = plant.GetMyMutableContextFromRoot(context)
    system_context = system.GetMyContextFromRoot(context)
    move = ball_mover(plant, plant_context, ball)
    return timed(lambda: system.get_output_port(0).Eval(system_context), move, repeat)


def drake_seconds(files: dict, repeat: int) -> tuple[float, float]:
    from pydrake.geometry import (AddCompliantHydroelasticProperties, AddContactMaterial,
                                  AddRigidHydroelasticProperties, HydroelasticContactRepresentation, Mesh,
                                  ProximityProperties)
    from pydrake.math import RigidTransform
    from pydrake.multibody.plant import CoulombFriction

    builder, plant, scene_graph, ball = plant_and_ball(0.0)   # a discrete plant reports no contact results before a step
    rigid = ProximityProperties()
    AddRigidHydroelasticProperties(RADIUS / 4, rigid)
    AddContactMaterial(friction=CoulombFriction(0.5, 0.5), properties=rigid)
    plant.RegisterCollisionGeometry(ball, RigidTransform(), Mesh(str(files["ball_obj"])), "ball", rigid)
    compliant = ProximityProperties()
    AddCompliantHydroelasticProperties(RADIUS / 4, MODULUS, compliant)
    AddContactMaterial(friction=CoulombFriction(0.5, 0.5), properties=compliant)
    plant.RegisterCollisionGeometry(plant.world_body(), RigidTransform([0, 0, -PAD[2] / 2]),
                                    Mesh(str(files["pad_vtk"])), "pad", compliant)
    plant.Finalize()
    diagram = builder.Build()
    context = diagram.CreateDefaultContext()
    plant_context = plant.GetMyMutableContextFromRoot(context)
    graph_context = scene_graph.GetMyContextFromRoot(context)
    move = ball_mover(plant, plant_context, ball)
    results = timed(lambda: plant.get_contact_results_output_port().Eval(plant_context), move, repeat)
    query = scene_graph.get_query_output_port()
    surfaces = timed(lambda: query.Eval(graph_context).ComputeContactSurfaces(
        HydroelasticContactRepresentation.kPolygon), move, repeat)
    assert plant.get_contact_results_output_port().Eval(plant_context).num_hydroelastic_contacts() == 1
    return results, surfaces


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--edge-length", type=float, default=0.004)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        files = make_files(Path(scratch), args.edge_length)
        from fieldgen.io.asset import read_metadata

        tets = read_metadata(files["pad_vtu"])["mesh"]["n_tets"]
        ours = fieldgen_seconds(files, args.repeat)
        results, surfaces = drake_seconds(files, args.repeat)
    load = os.getloadavg()[0]
    print(f"pad edge length {args.edge_length} m ({tets} tets); medians over {args.repeat}; load average {load:.2f}")
    print(f"{'fieldgen system':<26}{1e3 * ours:8.3f} ms")
    print(f"{'drake contact results':<26}{1e3 * results:8.3f} ms")
    print(f"{'drake surfaces':<26}{1e3 * surfaces:8.3f} ms")
    print(f"ratio fieldgen / drake contact results: {ours / results:.2f}")


if __name__ == "__main__":
    main()
